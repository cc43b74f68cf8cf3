#!/usr/bin/env python3
"""usage: podserver.py --name NAME [--http-port 8080] [--udp-port 9053] [--ipv6] [--pidfile FILE]

A lab "pod": runs inside a pod network namespace (scripts/lab.sh starts it).
- HTTP/1.1 on TCP --http-port: every GET gets 200 with body "NAME\\n"; the
  connection is closed after the response (Connection: close), except for
  GET /keepalive, which keeps it open for the next request (client.py keepalive).
- UDP echo on --udp-port: every datagram is answered with "NAME\\n".
- A connection idle for 10 s (waiting for the next request) is closed; the
  environment variable LAB_POD_IDLE_TIMEOUT_S (seconds, > 0) changes that for
  the pods a test starts (scripts/lab.sh passes its environment on).
- LAB_POD_DELAY_MS (milliseconds, >= 0, default 0): every HTTP response waits
  that long first (a slow but alive pod: the kernel still answers the SYN at
  once, only the answer to the request comes late).
- --ipv6: the same HTTP and UDP servers also on IPv6 (separate IPv6-only
  sockets on [::], so IPv4 peers still appear as plain IPv4 addresses).
Standard library only; one thread per TCP connection, so many short
connections are fine. The pid file is written after both sockets are bound,
so its existence means "ready". SIGTERM/SIGINT stop the server cleanly.
"""
import argparse
import http.server
import os
import signal
import socket
import socketserver
import sys
import threading
import time


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "podserver/1"
    timeout = 10.0  # seconds a client may idle before we drop it (main() may change it)
    delay = 0.0  # seconds before each response (main() may change it)

    def do_GET(self):  # noqa: N802 (stdlib naming)
        if self.delay > 0:
            time.sleep(self.delay)
        body = (self.server.pod_name + "\n").encode()
        # /bytes/N: N bytes (at most 4 MiB) for transfers larger than one packet.
        if self.path.startswith("/bytes/") and self.path[7:].isdigit():
            body = b"x" * min(int(self.path[7:]), 4 << 20)
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        keep = self.path == "/keepalive"
        self.send_header("Connection", "keep-alive" if keep else "close")
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = not keep

    def log_message(self, fmt, *args):  # keep the lab quiet
        pass


class HTTPServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256
    block_on_close = False


class HTTPServer6(HTTPServer):
    address_family = socket.AF_INET6

    def server_bind(self):
        self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        super().server_bind()


def udp_socket(family, host, port):
    s = socket.socket(family, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if family == socket.AF_INET6:
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    s.bind((host, port))
    s.settimeout(0.5)
    return s


def udp_echo(sock, name, stop):
    reply = (name + "\n").encode()
    while not stop.is_set():
        try:
            _data, peer = sock.recvfrom(2048)
        except socket.timeout:
            continue
        except OSError:
            if stop.is_set():
                return
            continue
        try:
            sock.sendto(reply, peer)
        except OSError:
            pass


def main():
    ap = argparse.ArgumentParser(description="lab pod server (HTTP + UDP echo)")
    ap.add_argument("--name", required=True)
    ap.add_argument("--http-port", type=int, default=8080)
    ap.add_argument("--udp-port", type=int, default=9053)
    ap.add_argument("--ipv6", action="store_true", help="also serve on IPv6 ([::], IPv6 only)")
    ap.add_argument("--pidfile")
    args = ap.parse_args()
    idle = os.environ.get("LAB_POD_IDLE_TIMEOUT_S")
    if idle:
        try:
            Handler.timeout = float(idle)
        except ValueError:
            ap.error("LAB_POD_IDLE_TIMEOUT_S must be a number of seconds, got %r" % idle)
        if not Handler.timeout > 0:
            ap.error("LAB_POD_IDLE_TIMEOUT_S must be above 0, got %r" % idle)
    delay = os.environ.get("LAB_POD_DELAY_MS")
    if delay:
        try:
            Handler.delay = float(delay) / 1000.0
        except ValueError:
            ap.error("LAB_POD_DELAY_MS must be a number of milliseconds, got %r" % delay)
        if not Handler.delay >= 0:
            ap.error("LAB_POD_DELAY_MS must be 0 or more, got %r" % delay)

    httpd = HTTPServer(("0.0.0.0", args.http_port), Handler)
    httpd.pod_name = args.name
    udps = [udp_socket(socket.AF_INET, "0.0.0.0", args.udp_port)]
    httpd6 = None
    if args.ipv6:
        httpd6 = HTTPServer6(("::", args.http_port), Handler)
        httpd6.pod_name = args.name
        udps.append(udp_socket(socket.AF_INET6, "::", args.udp_port))

    stop = threading.Event()
    for udp in udps:
        threading.Thread(target=udp_echo, args=(udp, args.name, stop), daemon=True).start()
    if httpd6 is not None:
        threading.Thread(target=httpd6.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True).start()

    def on_signal(_sig, _frame):
        stop.set()
        # shutdown() blocks until serve_forever returns, so call it elsewhere.
        threading.Thread(target=httpd.shutdown, daemon=True).start()
        if httpd6 is not None:
            threading.Thread(target=httpd6.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    if args.pidfile:
        tmp = args.pidfile + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % os.getpid())
        os.replace(tmp, args.pidfile)

    try:
        httpd.serve_forever(poll_interval=0.2)
    finally:
        stop.set()
        httpd.server_close()
        if httpd6 is not None:
            httpd6.server_close()
        for udp in udps:
            udp.close()
        if args.pidfile:
            try:
                with open(args.pidfile) as f:
                    if f.read().strip() == str(os.getpid()):
                        os.unlink(args.pidfile)
            except OSError:
                pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
