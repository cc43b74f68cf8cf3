#!/usr/bin/env python3
"""A test Kubernetes API server (python3 standard library + ssl) for vipd's tests.

Speaks the parts of the real protocol that a service proxy and kubectl use, over
real HTTPS (certificates from tests/kube/gen_certs.sh):

  GET /api/v1/services, /apis/discovery.k8s.io/v1/endpointslices
      (also /api/v1/namespaces/NS/services, .../namespaces/NS/endpointslices)
      list: labelSelector, limit + continue (token expires on compaction -> 410)
      watch=true: resourceVersion, allowWatchBookmarks, timeoutSeconds; a chunked
      stream of {"type":..., "object":...} lines; BOOKMARK every --bookmark-s;
      a resourceVersion older than the last compaction -> ERROR event 410 Expired
  GET /api, /apis, /api/v1, /apis/discovery.k8s.io/v1, /version (discovery for kubectl)
  Auth: "Authorization: Bearer TOKEN" or a client certificate signed by --client-ca;
      anything else gets 401.

A plain-HTTP control API on 127.0.0.1:--ctl-port drives it (JSON bodies):
  POST /apply   an object, or {"items": [...]}      -> ADDED / MODIFIED events
  POST /delete  {"resource": "services"|"endpointslices", "namespace": ..., "name": ...}
  POST /compact forget the event history (older resourceVersions -> 410; an open
                watch that had not sent a forgotten event gets ERROR 410 too)
  POST /drop    cut every open watch connection (no final chunk)
  POST /garbage every open watch sends a malformed event, then ends (mid-stream garbage)
  POST /fault   {"garbage": N, "garbage_lists": N, "slow_ms": MS, "fail": N}: the next
                N watches send garbage JSON; the next N lists answer 200 with a body that
                is not JSON; lists are delayed by MS per page; the next N list/watch
                requests get HTTP 500;
                {"later_pages_current_rv": N or {"RESOURCE": N}}: in the next N lists
                (of any resource, or of that one), the pages after the first report the
                current resourceVersion instead of the first page's (an API server that
                does not pin the list's snapshot);
                {"apply_after_first_page": OBJECT or [OBJECTS]}: each object is applied
                right after the first page of the next list of its resource is sent
                (a change between the pages of a list)
  POST /bulk    {"services": N, "endpoints": E}: N services with E endpoints each
  GET  /stats   counters and the last requests' paths
State (objects and resourceVersion) is saved to --state on every change and
loaded at start, so a restart keeps it: watches from the current resourceVersion
resume, older ones get 410 (the history is gone).
"""
import argparse, base64, json, os, socket, ssl, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse, parse_qs

RES = {
    "services": {"kind": "Service", "apiVersion": "v1", "list": "ServiceList",
                 "prefix": "/api/v1"},
    "endpointslices": {"kind": "EndpointSlice", "apiVersion": "discovery.k8s.io/v1",
                       "list": "EndpointSliceList", "prefix": "/apis/discovery.k8s.io/v1"},
}


class Store:
    def __init__(self, state_file):
        self.cv = threading.Condition()
        self.rv = 1
        self.objs = {r: {} for r in RES}
        self.history = []       # (rv, resource, type, obj)
        self.compacted = 1      # watches from rv < compacted get 410
        self.drop_gen = 0
        self.garbage_gen = 0
        self.faults = {"garbage": 0, "garbage_lists": 0, "slow_ms": 0, "fail": 0,
                       "later_pages_current_rv": 0, "apply_after_first_page": []}
        self.missed = {r: 0 for r in RES}  # newest event forgotten by compact(), per resource
        self.stats = {"lists": 0, "watches": 0, "gone": 0, "active_watches": 0,
                      "unauthorized": 0, "garbage_sent": 0, "requests": []}
        self.state_file = state_file
        if state_file and os.path.exists(state_file):
            with open(state_file) as f:
                st = json.load(f)
            self.rv = st["rv"]
            self.objs = st["objs"]
            self.compacted = self.rv

    def save(self):
        if not self.state_file:
            return
        tmp = self.state_file + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"rv": self.rv, "objs": self.objs}, f)
        os.replace(tmp, self.state_file)

    @staticmethod
    def resource_of(obj):
        for r, d in RES.items():
            if obj.get("kind") == d["kind"]:
                return r
        raise ValueError("unsupported kind %r" % obj.get("kind"))

    @staticmethod
    def key(obj):
        md = obj.get("metadata", {})
        return "%s/%s" % (md.get("namespace") or "default", md["name"])

    def apply(self, objs):
        with self.cv:
            for obj in objs:
                r = self.resource_of(obj)
                obj = json.loads(json.dumps(obj))
                md = obj.setdefault("metadata", {})
                md.setdefault("namespace", "default")
                k = self.key(obj)
                old = self.objs[r].get(k)
                md.setdefault("uid", (old or {}).get("metadata", {}).get("uid") or
                              "uid-%d-%s" % (self.rv + 1, k.replace("/", "-")))
                md.setdefault("creationTimestamp", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
                self.rv += 1
                md["resourceVersion"] = str(self.rv)
                self.objs[r][k] = obj
                self.history.append((self.rv, r, "MODIFIED" if old else "ADDED", obj))
            self.save()
            self.cv.notify_all()

    def delete(self, r, ns, name):
        with self.cv:
            obj = self.objs[r].pop("%s/%s" % (ns or "default", name), None)
            if obj is None:
                return False
            self.rv += 1
            obj = json.loads(json.dumps(obj))
            obj["metadata"]["resourceVersion"] = str(self.rv)
            self.history.append((self.rv, r, "DELETED", obj))
            self.save()
            self.cv.notify_all()
            return True

    def compact(self):
        with self.cv:
            for rv, r, _, _ in self.history:
                self.missed[r] = max(self.missed[r], rv)
            self.history = []
            self.compacted = self.rv
            self.cv.notify_all()


def match_selector(labels, sel):
    for term in filter(None, (t.strip() for t in (sel or "").split(","))):
        if term.startswith("!"):
            if term[1:] in labels:
                return False
        elif "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k) == v:
                return False
        elif "=" in term:
            k, v = term.replace("==", "=").split("=", 1)
            if labels.get(k) != v:
                return False
        elif term not in labels:
            return False
    return True


def status(code, reason, message):
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


DISCOVERY = {
    "/api": {"kind": "APIVersions", "versions": ["v1"],
             "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]},
    "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
        {"name": "discovery.k8s.io", "versions": [{"groupVersion": "discovery.k8s.io/v1", "version": "v1"}],
         "preferredVersion": {"groupVersion": "discovery.k8s.io/v1", "version": "v1"}}]},
    "/api/v1": {"kind": "APIResourceList", "groupVersion": "v1", "resources": [
        {"name": "services", "singularName": "service", "namespaced": True, "kind": "Service",
         "verbs": ["get", "list", "watch"], "shortNames": ["svc"]}]},
    "/apis/discovery.k8s.io/v1": {"kind": "APIResourceList", "apiVersion": "v1",
                                   "groupVersion": "discovery.k8s.io/v1", "resources": [
        {"name": "endpointslices", "singularName": "endpointslice", "namespaced": True,
         "kind": "EndpointSlice", "verbs": ["get", "list", "watch"]}]},
    "/version": {"major": "1", "minor": "29", "gitVersion": "v1.29.0-vipd-test", "platform": "linux/amd64"},
}


GARBAGE_EVENT = b'{"type":"MODIFIED","object":{"kind":"Service", garbage ]]]\n'


def make_handler(store, args):
    class Api(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *a):
            if args.verbose:
                sys.stderr.write("apiserver: " + (fmt % a) + "\n")

        def send_json(self, code, doc):
            body = json.dumps(doc).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def authorized(self):
            if self.headers.get("Authorization", "") == "Bearer " + args.token:
                return True
            try:
                if self.connection.getpeercert():
                    return True
            except Exception:
                pass
            return False

        def do_GET(self):
            u = urlparse(self.path)
            q = {k: v[-1] for k, v in parse_qs(u.query, keep_blank_values=True).items()}
            with store.cv:
                store.stats["requests"] = (store.stats["requests"] + [self.path])[-50:]
            if not self.authorized():
                with store.cv:
                    store.stats["unauthorized"] += 1
                return self.send_json(401, status(401, "Unauthorized", "Unauthorized"))
            path = u.path.rstrip("/") or "/"
            if path in DISCOVERY:
                return self.send_json(200, DISCOVERY[path])
            parts = path.strip("/").split("/")
            ns = None
            # /api/v1[/namespaces/NS]/services, /apis/discovery.k8s.io/v1[/namespaces/NS]/endpointslices
            res = parts[-1]
            if len(parts) >= 3 and parts[-3] == "namespaces":
                ns = parts[-2]
                prefix = "/" + "/".join(parts[:-3])
            else:
                prefix = "/" + "/".join(parts[:-1])
            if res not in RES or RES[res]["prefix"] != prefix:
                return self.send_json(404, status(404, "NotFound", "the server could not find the requested resource"))
            with store.cv:
                fail = store.faults["fail"] > 0
                if fail:
                    store.faults["fail"] -= 1
            if fail:
                return self.send_json(500, status(500, "InternalError", "injected failure"))
            if q.get("watch") in ("true", "1"):
                return self.watch(res, ns, q)
            return self.list(res, ns, q)

        def list(self, res, ns, q):
            with store.cv:
                store.stats["lists"] += 1
                slow = store.faults["slow_ms"]
                garbage = store.faults["garbage_lists"] > 0
                if garbage:
                    store.faults["garbage_lists"] -= 1
                    store.stats["garbage_sent"] += 1
            if slow:
                time.sleep(slow / 1000.0)
            if garbage:  # 200 OK, but the body is cut off in the middle of an item
                body = b'{"kind":"List","metadata":{"resourceVersion":"1"},"items":[{"metadata":{"name":'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            limit = int(q.get("limit") or 0)
            start = ""
            after_page = []
            with store.cv:
                list_rv = store.rv
                if not q.get("continue"):
                    todo = store.faults["apply_after_first_page"] or []
                    todo = todo if isinstance(todo, list) else [todo]
                    after_page = [o for o in todo if Store.resource_of(o) == res]
                    store.faults["apply_after_first_page"] = [o for o in todo if Store.resource_of(o) != res]
                if q.get("continue"):
                    try:
                        tok = json.loads(base64.b64decode(q["continue"]))
                        start, list_rv = tok["start"], tok["rv"]
                    except Exception:
                        return self.send_json(400, status(400, "BadRequest", "invalid continue token"))
                    if list_rv < store.compacted:
                        return self.send_json(410, status(410, "Expired",
                                              "The provided continue parameter is too old"))
                keys = sorted(k for k, o in store.objs[res].items()
                              if (ns is None or k.split("/")[0] == ns) and k > start and
                              match_selector(o["metadata"].get("labels") or {}, q.get("labelSelector")))
                more = limit and len(keys) > limit
                keys = keys[:limit] if limit else keys
                items = [store.objs[res][k] for k in keys]
                page_rv = list_rv
                lp = store.faults["later_pages_current_rv"]
                left = lp.get(res, 0) if isinstance(lp, dict) else lp
                if q.get("continue") and left > 0:
                    page_rv = store.rv
                    if not more:
                        if isinstance(lp, dict):
                            lp[res] = left - 1
                        else:
                            store.faults["later_pages_current_rv"] = left - 1
                body = {"kind": RES[res]["list"], "apiVersion": RES[res]["apiVersion"],
                        "metadata": {"resourceVersion": str(page_rv)}, "items": []}
                if more:
                    body["metadata"]["continue"] = base64.b64encode(
                        json.dumps({"start": keys[-1], "rv": list_rv}).encode()).decode()
                    body["metadata"]["remainingItemCount"] = 0
                # Items in a list carry no kind/apiVersion (as in the real API).
                for o in items:
                    body["items"].append({k: v for k, v in o.items() if k not in ("kind", "apiVersion")})
            self.send_json(200, body)
            if after_page:
                store.apply(after_page)

        def chunk(self, data):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        def watch(self, res, ns, q):
            try:
                from_rv = int(q.get("resourceVersion") or 0)
            except ValueError:
                return self.send_json(400, status(400, "BadRequest", "invalid resourceVersion"))
            timeout = min(int(q.get("timeoutSeconds") or 1800), args.max_watch_s)
            bookmarks = q.get("allowWatchBookmarks") == "true"
            sel = q.get("labelSelector")
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            deadline = time.monotonic() + timeout
            next_bm = time.monotonic() + args.bookmark_s
            with store.cv:
                store.stats["watches"] += 1
                store.stats["active_watches"] += 1
                drop_gen = store.drop_gen
                garbage_gen = store.garbage_gen
                garbage = store.faults["garbage"] > 0
                if garbage:
                    store.faults["garbage"] -= 1
                    store.stats["garbage_sent"] += 1
                if from_rv == 0:
                    from_rv = store.rv
                gone = from_rv < store.compacted
            try:
                if gone:
                    with store.cv:
                        store.stats["gone"] += 1
                    ev = {"type": "ERROR", "object": status(410, "Expired",
                          "too old resource version: %d (%d)" % (from_rv, store.compacted))}
                    self.chunk(json.dumps(ev).encode() + b"\n")
                    self.chunk(b"")
                    return
                if garbage:
                    self.chunk(GARBAGE_EVENT)
                    self.chunk(b"")
                    return
                sent = from_rv
                while True:
                    with store.cv:
                        while True:
                            if store.drop_gen != drop_gen:
                                raise ConnectionAbortedError("dropped")
                            if store.missed[res] > sent:
                                pending = "gone"
                                break
                            if store.garbage_gen != garbage_gen:
                                store.stats["garbage_sent"] += 1
                                pending = None
                                break
                            pending = [h for h in store.history if h[0] > sent and h[1] == res]
                            now = time.monotonic()
                            if pending or now >= deadline or (bookmarks and now >= next_bm):
                                break
                            store.cv.wait(min(deadline, next_bm if bookmarks else deadline) - now)
                        top = store.rv
                    if pending == "gone":  # compacted before this watch sent it
                        with store.cv:
                            store.stats["gone"] += 1
                        ev = {"type": "ERROR", "object": status(410, "Expired",
                              "too old resource version: %d (%d)" % (sent, store.compacted))}
                        self.chunk(json.dumps(ev).encode() + b"\n")
                        self.chunk(b"")
                        return
                    if pending is None:  # POST /garbage: a broken event mid-stream
                        self.chunk(GARBAGE_EVENT)
                        self.chunk(b"")
                        return
                    for rv, _, typ, obj in pending:
                        sent = rv
                        if ns is not None and obj["metadata"].get("namespace") != ns:
                            continue
                        if not match_selector(obj["metadata"].get("labels") or {}, sel):
                            continue
                        self.chunk(json.dumps({"type": typ, "object": obj}).encode() + b"\n")
                    if time.monotonic() >= deadline:
                        self.chunk(b"")
                        return
                    if bookmarks and time.monotonic() >= next_bm:
                        sent = max(sent, top)
                        bm = {"type": "BOOKMARK", "object": {
                            "kind": RES[res]["kind"], "apiVersion": RES[res]["apiVersion"],
                            "metadata": {"resourceVersion": str(sent),
                                         "annotations": {"k8s.io/initial-events-end": "false"}}}}
                        self.chunk(json.dumps(bm).encode() + b"\n")
                        next_bm = time.monotonic() + args.bookmark_s
            except (ConnectionAbortedError, BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except Exception:
                    pass
            finally:
                with store.cv:
                    store.stats["active_watches"] -= 1

    return Api


def make_ctl(store):
    class Ctl(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def reply(self, code, doc):
            body = json.dumps(doc).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path == "/stats":
                with store.cv:
                    return self.reply(200, dict(store.stats, rv=store.rv, compacted=store.compacted,
                                                objects={r: len(o) for r, o in store.objs.items()}))
            self.reply(404, {})

        def do_POST(self):
            n = int(self.headers.get("Content-Length") or 0)
            try:
                doc = json.loads(self.rfile.read(n) or b"{}")
                if self.path == "/apply":
                    store.apply(doc["items"] if "items" in doc else [doc])
                elif self.path == "/delete":
                    if not store.delete(doc["resource"], doc.get("namespace"), doc["name"]):
                        return self.reply(404, {"error": "not found"})
                elif self.path == "/compact":
                    store.compact()
                elif self.path == "/drop":
                    with store.cv:
                        store.drop_gen += 1
                        store.cv.notify_all()
                elif self.path == "/garbage":
                    with store.cv:
                        store.garbage_gen += 1
                        store.cv.notify_all()
                elif self.path == "/fault":
                    with store.cv:
                        store.faults.update(doc)
                elif self.path == "/bulk":
                    bulk(store, int(doc.get("services", 0)), int(doc.get("endpoints", 1)))
                else:
                    return self.reply(404, {})
            except Exception as e:  # noqa: BLE001 - report to the test
                return self.reply(400, {"error": repr(e)})
            with store.cv:
                self.reply(200, {"rv": store.rv})
    return Ctl


def bulk(store, n, eps):
    objs = []
    for i in range(n):
        name = "bulk-%05d" % i
        ip = "10.%d.%d.%d" % (100 + i // 65536, (i // 256) % 256, i % 256)
        objs.append({"apiVersion": "v1", "kind": "Service",
                     "metadata": {"name": name, "namespace": "bulk"},
                     "spec": {"type": "ClusterIP", "clusterIP": ip, "clusterIPs": [ip],
                              "ports": [{"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080}]}})
        objs.append({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                     "metadata": {"name": name + "-abcde", "namespace": "bulk",
                                  "labels": {"kubernetes.io/service-name": name}},
                     "addressType": "IPv4",
                     "endpoints": [{"addresses": ["10.250.%d.%d" % ((i * eps + j) // 250 % 250, (i * eps + j) % 250 + 1)],
                                    "conditions": {"ready": True}, "nodeName": "node-a"} for j in range(eps)],
                     "ports": [{"name": "http", "protocol": "TCP", "port": 8080}]})
    store.apply(objs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--ctl-port", type=int, required=True)
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--client-ca", required=True)
    ap.add_argument("--token", default="test-token")
    ap.add_argument("--state")
    ap.add_argument("--bookmark-s", type=float, default=5)
    ap.add_argument("--max-watch-s", type=int, default=1800)
    ap.add_argument("--load", help="JSON/List file of objects to start with")
    ap.add_argument("--fault", help='faults in force from the start, as for POST /fault ({"fail": N})')
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    store = Store(args.state)
    if args.fault:
        store.faults.update(json.loads(args.fault))
    if args.load:
        with open(args.load) as f:
            doc = json.load(f)
        store.apply(doc["items"] if "items" in doc else [doc])
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.cert, args.key)
    ctx.load_verify_locations(args.client_ca)
    ctx.verify_mode = ssl.CERT_OPTIONAL
    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer.allow_reuse_address = True
    api = ThreadingHTTPServer((args.host, args.port), make_handler(store, args))
    api.socket = ctx.wrap_socket(api.socket, server_side=True, do_handshake_on_connect=True)
    ctl = ThreadingHTTPServer(("127.0.0.1", args.ctl_port), make_ctl(store))
    threading.Thread(target=ctl.serve_forever, daemon=True).start()
    sys.stderr.write("apiserver: https://%s:%d (control http://127.0.0.1:%d), rv %d\n" %
                     (args.host, args.port, args.ctl_port, store.rv))
    sys.stderr.flush()
    try:
        api.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
