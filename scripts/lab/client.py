#!/usr/bin/env python3
"""usage:
  client.py http URL --count N [--timeout S] [--interval S] [--max-time S] [--stop FILE]
  client.py udp HOST:PORT --count N [--timeout S] [--interval S] [--max-time S] [--stop FILE]
  client.py connect HOST:PORT [--timeout S]
  client.py ping HOST [--count N] [--timeout S]
  client.py hold HOST:PORT --conns N --go FILE [--timeout S] [--max-time S]
  client.py keepalive HOST:PORT --conns N --max-time S [--stop FILE] [--mark FILE] [--until-after-mark N]
                      [--interval S] [--timeout S] [--slow S] [--tcp-keepalive S]

Lab traffic generator; runs inside the client network namespace.
Addresses may be IPv4 or IPv6: HOST:PORT is a.b.c.d:P or [IPV6]:P, URLs are
http://[IPV6]:P/ for IPv6, and ping takes either family (ICMPv6 echo for IPv6).

http:    N sequential GETs, each on a new TCP connection. Prints one JSON line
         {"ok":N,"failed":N,"by_pod":{"pod1":N,...},"errors":{"ConnectionRefusedError":N,...},
          "elapsed_s":X}. by_pod counts response bodies (first line, e.g. "pod1").
         --stop FILE: stop early once FILE exists (the requests left are not
         counted; a background load loop for the length of a test step).
udp:     N datagrams, each from a new socket (new source port, so a new flow),
         waiting for one reply each; same JSON, by_pod from the replies.
connect: one TCP connect; prints exactly one of: connected, refused, timeout, error: ...
ping:    N ICMP echo requests (raw socket, needs root); prints one JSON line
         {"sent":N,"received":N}.
hold:    opens N TCP connections (handshake only), prints "open N" and waits until
         FILE exists, then sends one GET on each and prints one JSON line
         {"ok":N,"reset":N,"failed":N,"by_pod":{...},"errors":{...}}: "reset" counts
         connections that got a RST (ConnectionResetError / BrokenPipeError).
keepalive: opens N TCP connections (prints "open N"), then sends GET /keepalive
         (the lab pods keep the connection open for it) on each in turn, again
         and again, until --max-time or FILE exists; a connection that fails once
         is closed and not reopened. Prints one JSON line {"conns":N,"requests":N,
         "ok":N,"failed":N,"broken_conns":N,"conns_one_pod":N,"max_latency_s":X,
         "ok_after_mark":N,"by_pod":{...},"errors":{...},
         "per_conn":[{"ok":N,"ok_after_mark":N,"pods":[...],"error":E},...]};
         "ok_after_mark" counts answers to requests sent once the --mark FILE existed.
         --until-after-mark N: also stop once the mark exists and every connection
         has N answers after it or has failed. For the timeline of a failure:
         "mark_s" (when the mark was first seen, s since the start, or null) and
         per connection "error_s" (when it failed, s since the start) and
         "idle_s" (how long before the failure its last answer came, or since
         it opened), both null while it has not failed. Per connection also
         "max_lat_s" (its slowest request, answered or not) and "slow": up to
         8 [sent_s, latency_s, answered] of its requests that took over
         --slow S (default 0.5; sent_s: s since the start), and "t0_unix" (the
         start as Unix time, to place them beside other clocks).
         --tcp-keepalive S: TCP keepalive probes on each connection after S s
         without a packet from the peer, every S s (a client that waits for an
         answer sends nothing else once its request is acknowledged).

Everything is bounded: --count <= 100000 and --max-time (default 120 s) caps the
whole run; requests not attempted before the limit count as failed with error
"TotalTimeLimit". Exit status: 0 when the result was printed, 2 on usage errors.
"""
import argparse
import json
import socket
import sys
import time
import urllib.parse

MAX_COUNT = 100000


def err_name(e):
    if isinstance(e, socket.timeout):  # alias of TimeoutError on 3.10+
        return "TimeoutError"
    return type(e).__name__


class BadResponse(Exception):
    pass


def recv_all(sock, limit=65536):
    chunks = []
    total = 0
    while total < limit:
        b = sock.recv(4096)
        if not b:
            break
        chunks.append(b)
        total += len(b)
    return b"".join(chunks)


def http_once(host, port, path, hosthdr, timeout):
    """Returns the pod name (first body line). Raises on any failure."""
    s = socket.create_connection((host, port), timeout=timeout)
    try:
        s.settimeout(timeout)
        req = ("GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: vipd-lab-client\r\n"
               "Connection: close\r\n\r\n" % (path, hosthdr)).encode()
        s.sendall(req)
        data = recv_all(s)
    finally:
        s.close()
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        raise BadResponse("no header end")
    status = head.split(b"\r\n", 1)[0].split()
    if len(status) < 2 or not status[0].startswith(b"HTTP/"):
        raise BadResponse("bad status line")
    if status[1] != b"200":
        raise BadResponse("HTTP " + status[1].decode(errors="replace"))
    line = body.split(b"\n", 1)[0].strip().decode(errors="replace")
    if not line:
        raise BadResponse("empty body")
    return line[:64]


def family_of(host):
    """AF_INET6 for an IPv6 literal, else AF_INET."""
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def udp_once(host, port, timeout):
    s = socket.socket(family_of(host), socket.SOCK_DGRAM)
    try:
        s.settimeout(timeout)
        s.connect((host, port))  # connected: ICMP errors surface as exceptions
        s.send(b"ping\n")
        data = s.recv(2048)
    finally:
        s.close()
    line = data.split(b"\n", 1)[0].strip().decode(errors="replace")
    if not line:
        raise BadResponse("empty reply")
    return line[:64]


def ping(args):
    import os
    import struct
    v6 = family_of(args.host) == socket.AF_INET6
    if v6:
        # ICMPv6 (the kernel fills in the checksum of raw ICMPv6 sockets; no IP header on receive)
        s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
        want_addr = socket.inet_pton(socket.AF_INET6, args.host)
    else:
        s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    s.settimeout(args.timeout)
    ident = os.getpid() & 0xFFFF
    got = 0
    for seq in range(args.count):
        payload = b"vipd-lab-ping"
        if v6:
            s.sendto(struct.pack("!BBHHH", 128, 0, 0, ident, seq) + payload, (args.host, 0))
            end = time.monotonic() + args.timeout
            while time.monotonic() < end:
                try:
                    data, addr = s.recvfrom(2048)
                except socket.timeout:
                    break
                if len(data) < 8:
                    continue
                t, _, _, rid, rseq = struct.unpack("!BBHHH", data[:8])
                if t == 129 and rid == ident and rseq == seq and socket.inet_pton(socket.AF_INET6, addr[0]) == want_addr:
                    got += 1
                    break
            continue
        hdr = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
        b = hdr + payload
        if len(b) % 2:
            b += b"\0"
        c = sum(struct.unpack("!%dH" % (len(b) // 2), b))
        while c >> 16:
            c = (c & 0xFFFF) + (c >> 16)
        pkt = struct.pack("!BBHHH", 8, 0, (~c) & 0xFFFF, ident, seq) + payload
        s.sendto(pkt, (args.host, 0))
        end = time.monotonic() + args.timeout
        while time.monotonic() < end:
            try:
                data, addr = s.recvfrom(2048)
            except socket.timeout:
                break
            ihl = (data[0] & 0x0F) * 4
            t, _, _, rid, rseq = struct.unpack("!BBHHH", data[ihl:ihl + 8])
            if t == 0 and rid == ident and rseq == seq and addr[0] == args.host:
                got += 1
                break
    print(json.dumps({"sent": args.count, "received": got}), flush=True)
    return 0


def hold(args):
    import os
    host, port = args.target
    deadline = time.monotonic() + args.max_time
    conns = []
    for _ in range(args.conns):
        conns.append(socket.create_connection((host, port), timeout=args.timeout))
    print("open %d" % len(conns), flush=True)
    while not os.path.exists(args.go):
        if time.monotonic() >= deadline:
            print(json.dumps({"ok": 0, "reset": 0, "failed": len(conns), "by_pod": {},
                              "errors": {"TotalTimeLimit": len(conns)}}), flush=True)
            return 0
        time.sleep(0.01)
    res = {"ok": 0, "reset": 0, "failed": 0, "by_pod": {}, "errors": {}}
    for s in conns:
        try:
            s.settimeout(args.timeout)
            s.sendall(b"GET / HTTP/1.1\r\nHost: vip\r\nConnection: close\r\n\r\n")
            data = recv_all(s)
            if not data:
                raise BadResponse("closed without a response")
            body = data.split(b"\r\n\r\n", 1)[-1]
            pod = body.split(b"\n", 1)[0].strip().decode(errors="replace")[:64]
            res["ok"] += 1
            res["by_pod"][pod] = res["by_pod"].get(pod, 0) + 1
        except (ConnectionResetError, BrokenPipeError):
            res["reset"] += 1
        except (OSError, BadResponse) as e:
            res["failed"] += 1
            n = err_name(e)
            res["errors"][n] = res["errors"].get(n, 0) + 1
        finally:
            s.close()
    res["by_pod"] = dict(sorted(res["by_pod"].items()))
    print(json.dumps(res), flush=True)
    return 0


def read_response(sock, buf):
    """One HTTP response with Content-Length from sock; returns (body, rest)."""
    while b"\r\n\r\n" not in buf:
        b = sock.recv(4096)
        if not b:
            raise BadResponse("closed without a response" if not buf else "closed in the header")
        buf += b
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = lines[0].split()
    if len(status) < 2 or status[1] != b"200":
        raise BadResponse("bad status line")
    length = 0
    for l in lines[1:]:
        k, _, v = l.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v.strip())
    while len(rest) < length:
        b = sock.recv(4096)
        if not b:
            raise BadResponse("closed in the body")
        rest += b
    return rest[:length], rest[length:]


def keepalive(args):
    import os
    host, port = args.target
    start = time.monotonic()
    t0_unix = time.time()
    deadline = start + args.max_time
    conns = []
    for _ in range(args.conns):
        s = socket.create_connection((host, port), timeout=args.timeout)
        s.settimeout(args.timeout)
        if args.tcp_keepalive:
            # Probes after that many seconds without a packet from the peer, while
            # nothing of ours is unacknowledged (the request acknowledged, its answer
            # awaited): the only packets this side sends then.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, args.tcp_keepalive)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, args.tcp_keepalive)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 30)
        conns.append({"sock": s, "buf": b"", "ok": 0, "after": 0, "pods": [], "error": None,
                      "last": time.monotonic(), "error_s": None, "idle_s": None,
                      "max_lat": 0.0, "slow": []})
    print("open %d" % len(conns), flush=True)
    req = b"GET /keepalive HTTP/1.1\r\nHost: vip\r\nConnection: keep-alive\r\n\r\n"
    res = {"conns": len(conns), "requests": 0, "ok": 0, "failed": 0, "by_pod": {}, "errors": {}}
    max_lat = 0.0
    mark_t = None
    while time.monotonic() < deadline and not (args.stop and os.path.exists(args.stop)):
        live = [c for c in conns if c["error"] is None]
        if not live:
            break
        marked = bool(args.mark) and os.path.exists(args.mark)
        if marked and mark_t is None:
            mark_t = time.monotonic()
        if marked and args.until_after_mark and all(c["after"] >= args.until_after_mark for c in live):
            break
        for c in live:
            t0 = time.monotonic()
            res["requests"] += 1
            try:
                c["sock"].sendall(req)
                body, c["buf"] = read_response(c["sock"], c["buf"])
                pod = body.split(b"\n", 1)[0].strip().decode(errors="replace")[:64]
                res["ok"] += 1
                c["ok"] += 1
                c["after"] += 1 if marked else 0
                c["last"] = time.monotonic()
                res["by_pod"][pod] = res["by_pod"].get(pod, 0) + 1
                if pod not in c["pods"]:
                    c["pods"].append(pod)
            except (OSError, BadResponse, ValueError) as e:
                res["failed"] += 1
                c["error"] = err_name(e)
                now = time.monotonic()
                c["error_s"] = round(now - start, 3)
                c["idle_s"] = round(now - c["last"], 3)
                res["errors"][c["error"]] = res["errors"].get(c["error"], 0) + 1
                c["sock"].close()
            lat = time.monotonic() - t0
            max_lat = max(max_lat, lat)
            c["max_lat"] = max(c["max_lat"], lat)
            if lat > args.slow and len(c["slow"]) < 8:
                c["slow"].append([round(t0 - start, 3), round(lat, 3), c["error"] is None])
        if args.interval > 0:
            time.sleep(args.interval)
    for c in conns:
        if c["error"] is None:
            c["sock"].close()
    res["broken_conns"] = sum(1 for c in conns if c["error"] is not None)
    res["conns_one_pod"] = sum(1 for c in conns if len(c["pods"]) == 1)
    res["max_latency_s"] = round(max_lat, 3)
    res["ok_after_mark"] = sum(c["after"] for c in conns)
    res["by_pod"] = dict(sorted(res["by_pod"].items()))
    res["mark_s"] = None if mark_t is None else round(mark_t - start, 3)
    res["per_conn"] = [{"ok": c["ok"], "ok_after_mark": c["after"], "pods": c["pods"], "error": c["error"],
                        "error_s": c["error_s"], "idle_s": c["idle_s"],
                        "max_lat_s": round(c["max_lat"], 3), "slow": c["slow"]}
                       for c in conns]
    res["elapsed_s"] = round(time.monotonic() - start, 3)
    res["t0_unix"] = round(t0_unix, 3)
    print(json.dumps(res), flush=True)
    return 0


def run_loop(args, once):
    res = {"ok": 0, "failed": 0, "by_pod": {}, "errors": {}}
    start = time.monotonic()
    deadline = start + args.max_time
    import os
    for i in range(args.count):
        if args.stop and os.path.exists(args.stop):
            break
        if time.monotonic() >= deadline:
            left = args.count - i
            res["failed"] += left
            res["errors"]["TotalTimeLimit"] = res["errors"].get("TotalTimeLimit", 0) + left
            break
        try:
            pod = once()
            res["ok"] += 1
            res["by_pod"][pod] = res["by_pod"].get(pod, 0) + 1
        except (OSError, BadResponse) as e:
            res["failed"] += 1
            n = err_name(e)
            res["errors"][n] = res["errors"].get(n, 0) + 1
        if args.interval > 0 and i + 1 < args.count:
            time.sleep(args.interval)
    res["by_pod"] = dict(sorted(res["by_pod"].items()))
    res["elapsed_s"] = round(time.monotonic() - start, 3)
    print(json.dumps(res), flush=True)
    return 0


def host_port(text, default_port=None):
    if text.startswith("["):  # [IPV6]:PORT or [IPV6]
        close = text.find("]")
        if close < 0 or (close + 1 < len(text) and text[close + 1] != ":"):
            raise argparse.ArgumentTypeError("expected [IPV6]:PORT, got %r" % text)
        host, rest = text[1:close], text[close + 1:]
        if not host or ":" not in host:
            raise argparse.ArgumentTypeError("bad IPv6 address in %r" % text)
        if not rest:
            if default_port is None:
                raise argparse.ArgumentTypeError("expected [IPV6]:PORT, got %r" % text)
            return host, default_port
        try:
            p = int(rest[1:])
        except ValueError:
            raise argparse.ArgumentTypeError("bad port in %r" % text)
        if not (0 < p < 65536):
            raise argparse.ArgumentTypeError("bad port in %r" % text)
        return host, p
    host, sep, port = text.rpartition(":")
    if ":" in host:
        raise argparse.ArgumentTypeError("IPv6 addresses need brackets: [IPV6]:PORT, got %r" % text)
    if not sep:
        if default_port is None:
            raise argparse.ArgumentTypeError("expected HOST:PORT, got %r" % text)
        return text, default_port
    try:
        p = int(port)
    except ValueError:
        raise argparse.ArgumentTypeError("bad port in %r" % text)
    if not (0 < p < 65536) or not host:
        raise argparse.ArgumentTypeError("bad HOST:PORT %r" % text)
    return host, p


def count_arg(text):
    n = int(text)
    if n < 1 or n > MAX_COUNT:
        raise argparse.ArgumentTypeError("count must be 1..%d" % MAX_COUNT)
    return n


def pos_float(text):
    v = float(text)
    if v < 0 or v > 3600:
        raise argparse.ArgumentTypeError("must be 0..3600")
    return v


def main():
    ap = argparse.ArgumentParser(description="lab client (see module doc)")
    sub = ap.add_subparsers(dest="cmd", required=True)

    h = sub.add_parser("http", help="N sequential HTTP GETs, new connection each")
    h.add_argument("url")
    u = sub.add_parser("udp", help="N UDP request/replies, new source port each")
    u.add_argument("target", type=host_port)
    for p in (h, u):
        p.add_argument("--count", type=count_arg, required=True)
        p.add_argument("--timeout", type=pos_float, default=2.0, help="per request, s")
        p.add_argument("--interval", type=pos_float, default=0.0, help="pause between requests, s")
        p.add_argument("--max-time", type=pos_float, default=120.0, help="whole run limit, s")
        p.add_argument("--stop", help="stop early (not counted as failed) once this file exists")
    c = sub.add_parser("connect", help="one TCP connect attempt")
    c.add_argument("target", type=host_port)
    c.add_argument("--timeout", type=pos_float, default=2.0)
    o = sub.add_parser("hold", help="N idle connections, one GET each once FILE exists")
    o.add_argument("target", type=host_port)
    o.add_argument("--conns", type=count_arg, required=True)
    o.add_argument("--go", required=True, help="start sending once this file exists")
    o.add_argument("--timeout", type=pos_float, default=2.0)
    o.add_argument("--max-time", type=pos_float, default=60.0)
    k = sub.add_parser("keepalive", help="N keep-alive connections, GETs on each in turn")
    k.add_argument("target", type=host_port)
    k.add_argument("--conns", type=count_arg, required=True)
    k.add_argument("--stop", help="stop once this file exists")
    k.add_argument("--mark", help="count answers to requests sent once this file exists")
    k.add_argument("--until-after-mark", type=count_arg, default=0,
                   help="stop once every live connection has this many answers after the mark")
    k.add_argument("--interval", type=pos_float, default=0.1, help="pause after each round, s")
    k.add_argument("--timeout", type=pos_float, default=10.0, help="per request, s")
    k.add_argument("--tcp-keepalive", type=count_arg, default=0, metavar="S",
                   help="TCP keepalive probes every S s of silence from the peer (default off)")
    k.add_argument("--slow", type=pos_float, default=0.5,
                   help="list requests slower than this per connection (s)")
    k.add_argument("--max-time", type=pos_float, default=60.0)
    g = sub.add_parser("ping", help="ICMP echo requests")
    g.add_argument("host")
    g.add_argument("--count", type=count_arg, default=3)
    g.add_argument("--timeout", type=pos_float, default=1.0)
    args = ap.parse_args()

    if args.cmd == "ping":
        return ping(args)
    if args.cmd == "hold":
        return hold(args)
    if args.cmd == "keepalive":
        return keepalive(args)

    if args.cmd == "http":
        url = urllib.parse.urlsplit(args.url)
        if url.scheme != "http" or not url.hostname:
            ap.error("only http://HOST[:PORT]/PATH URLs are supported")
        port = url.port or 80
        path = url.path or "/"
        if url.query:
            path += "?" + url.query
        hosthdr = url.netloc
        return run_loop(args, lambda: http_once(url.hostname, port, path, hosthdr, args.timeout))

    if args.cmd == "udp":
        host, port = args.target
        return run_loop(args, lambda: udp_once(host, port, args.timeout))

    host, port = args.target
    try:
        s = socket.create_connection((host, port), timeout=args.timeout)
        s.close()
        print("connected")
    except ConnectionRefusedError:
        print("refused")
    except socket.timeout:
        print("timeout")
    except OSError as e:
        print("error: %s" % e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
