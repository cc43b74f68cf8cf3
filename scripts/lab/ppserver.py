#!/usr/bin/env python3
"""PROXY protocol lab helpers (tests/integration/proxyproto_test.sh). Standard library only.

  ppserver.py http --listen IP:PORT
      (every IP:PORT here may also be [IPv6]:PORT)
      HTTP backend behind nginx / HAProxy: GET /big?n=N answers blob(N);
      POST /up answers the sha256 (hex) of the request body.
  ppserver.py raw --listen IP:PORT [--listen ...] --pidfile F
      Server-first echo: on each connection sends "HELLO\\r\\n" at once, then reads
      until the client half-closes and sends back every byte it received
      (the PROXY header the backend saw included), then closes.
  ppserver.py raw-client VIP:PORT --bytes N --expect v1|v2|none
      Connects, waits for the greeting before sending anything, sends blob(N),
      half-closes, reads the echo. Prints one JSON line: ok (the echo is exactly
      one expected header followed by the N bytes), what was seen, and why not.
  ppserver.py blob N       writes blob(N) to stdout (deterministic bytes)
"""
import argparse
import hashlib
import http.server
import json
import os
import random
import socket
import socketserver
import struct
import sys
import threading
import urllib.parse

V2_SIG = b"\r\n\r\n\x00\r\nQUIT\n"


def blob(n):
    return random.Random(20261203).randbytes(n)


def addr(s):
    host, _, port = s.rpartition(":")
    return host.strip("[]"), int(port)


def family(host):
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def header(version, src, sport, dst, dport):
    six = family(src) == socket.AF_INET6
    if version == "v1":
        return ("PROXY TCP%d %s %s %d %d\r\n" % (6 if six else 4, src, dst, sport, dport)).encode()
    if version == "v2":
        if six:
            return (V2_SIG + bytes([0x21, 0x21]) + struct.pack("!H", 36) +
                    socket.inet_pton(socket.AF_INET6, src) + socket.inet_pton(socket.AF_INET6, dst) +
                    struct.pack("!HH", sport, dport))
        return (V2_SIG + bytes([0x21, 0x11]) + struct.pack("!H", 12) + socket.inet_aton(src) +
                socket.inet_aton(dst) + struct.pack("!HH", sport, dport))
    return b""


class Http(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_GET(self):
        q = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
        body = blob(int(q.get("n", ["0"])[0]))
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Type", "application/octet-stream")
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        h = hashlib.sha256()
        while n > 0:
            chunk = self.rfile.read(min(n, 65536))
            if not chunk:
                break
            h.update(chunk)
            n -= len(chunk)
        body = (h.hexdigest() + "\n").encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class ThreadingHttp(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class ThreadingHttp6(ThreadingHttp):
    address_family = socket.AF_INET6


def serve_raw_conn(c):
    try:
        c.settimeout(60)
        c.sendall(b"HELLO\r\n")
        got = bytearray()
        while True:
            d = c.recv(65536)
            if not d:
                break
            got += d
        c.sendall(bytes(got))
        c.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    finally:
        c.close()


def serve_raw(listens, pidfile):
    socks = []
    for a in listens:
        host, port = addr(a)
        s = socket.socket(family(host))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, port))
        s.listen(64)
        socks.append(s)

    def accept_loop(s):
        while True:
            c, _ = s.accept()
            threading.Thread(target=serve_raw_conn, args=(c,), daemon=True).start()

    for s in socks[1:]:
        threading.Thread(target=accept_loop, args=(s,), daemon=True).start()
    if pidfile:
        with open(pidfile, "w") as f:
            f.write("%d\n" % os.getpid())
    accept_loop(socks[0])


def raw_client(target, nbytes, expect, timeout):
    vip, vport = addr(target)
    payload = blob(nbytes)
    r = {"ok": False, "bytes": nbytes, "expect": expect}
    s = socket.socket(family(vip))
    s.settimeout(timeout)
    try:
        s.connect((vip, vport))
        src, sport = s.getsockname()[:2]
        greeting = b""
        while not greeting.endswith(b"\r\n") and len(greeting) < 64:
            d = s.recv(64 - len(greeting))
            if not d:
                break
            greeting += d
        if greeting != b"HELLO\r\n":
            r["why"] = "greeting %r" % greeting
            return r
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
        got = bytearray()
        while True:
            d = s.recv(65536)
            if not d:
                break
            got += d
    except OSError as e:
        r["why"] = "%s: %s" % (type(e).__name__, e)
        return r
    finally:
        s.close()
    want = header(expect, src, sport, vip, vport) + payload
    r["got_len"] = len(got)
    r["want_len"] = len(want)
    r["first"] = bytes(got[:64]).decode("ascii", "backslashreplace")
    r["v1_headers"] = got.count(b"PROXY TCP")
    r["v2_headers"] = got.count(V2_SIG)
    if bytes(got) == want:
        r["ok"] = True
    elif not got.startswith(header(expect, src, sport, vip, vport)):
        r["why"] = "the stream does not start with the expected %s header" % expect
    else:
        r["why"] = "the bytes after the header differ from what the client sent"
    return r


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    h = sub.add_parser("http")
    h.add_argument("--listen", required=True)
    h.add_argument("--pidfile")
    rw = sub.add_parser("raw")
    rw.add_argument("--listen", action="append", required=True)
    rw.add_argument("--pidfile")
    rc = sub.add_parser("raw-client")
    rc.add_argument("target")
    rc.add_argument("--bytes", type=int, default=0)
    rc.add_argument("--expect", choices=["v1", "v2", "none"], required=True)
    rc.add_argument("--timeout", type=float, default=30)
    b = sub.add_parser("blob")
    b.add_argument("n", type=int)
    a = ap.parse_args()
    if a.cmd == "http":
        host, port = addr(a.listen)
        srv = (ThreadingHttp6 if family(host) == socket.AF_INET6 else ThreadingHttp)((host, port), Http)
        if a.pidfile:
            with open(a.pidfile, "w") as f:
                f.write("%d\n" % os.getpid())
        srv.serve_forever()
    elif a.cmd == "raw":
        serve_raw(a.listen, a.pidfile)
    elif a.cmd == "raw-client":
        print(json.dumps(raw_client(a.target, a.bytes, a.expect, a.timeout)))
    else:
        sys.stdout.buffer.write(blob(a.n))


if __name__ == "__main__":
    main()
