#!/usr/bin/env python3
"""usage:
  flowprobe.py ports HOST:PORT --src IP[,IP...] --first P --count N [--timeout S]
  flowprobe.py load HOST:PORT --stop FILE [--timeout S] [--interval S] [--max-time S]

Lab traffic for the multi-gateway test (tests/integration/gateway_ecmp.sh); runs in
the client namespace, IPv4 only, standard library only.

ports: N GETs, flow i (0 .. N-1) on a new TCP connection from SRC[i % len(SRC)]
       port FIRST+i (a fixed source, so the flow is known in advance, e.g. to ask
       each gateway with `vipctl explain` which backend it would pick). Prints one
       JSON line {"ok":N,"failed":N,"pods":{"IP:P":"pod1",...},"errors":{...}}.
load:  GETs on new connections one after the other (pause --interval) until FILE
       exists or --max-time; a request that takes longer than --timeout fails.
       Prints one JSON line {"ok":N,"failed":N,"fail_times":[unix s,...],
       "errors":{...},"max_ok_latency_s":X}: the start time of each failed request,
       so the caller can tell when requests failed (e.g. after a gateway died).
Bounded: --count <= 10000, --max-time <= 600 s.
"""
import argparse
import json
import os
import socket
import sys
import time


def get(host, port, timeout, src=None):
    """One GET / on a new connection; returns the pod name (first body line)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.settimeout(timeout)
        if src is not None:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(src)
        s.connect((host, port))
        s.sendall(b"GET / HTTP/1.0\r\nHost: lab\r\n\r\n")
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
            if len(data) > 65536:
                break
        _, _, body = data.partition(b"\r\n\r\n")
        name = body.split(b"\n", 1)[0].strip().decode(errors="replace")
        if not name:
            raise ValueError("empty body")
        return name
    finally:
        s.close()


def err_name(e):
    return "TimeoutError" if isinstance(e, socket.timeout) else type(e).__name__


def main():
    ap = argparse.ArgumentParser(description="multi-gateway lab probe")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("ports")
    p.add_argument("target")
    p.add_argument("--src", required=True)
    p.add_argument("--first", type=int, required=True)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--timeout", type=float, default=3.0)
    p = sub.add_parser("load")
    p.add_argument("target")
    p.add_argument("--stop", required=True)
    p.add_argument("--timeout", type=float, default=0.5)
    p.add_argument("--interval", type=float, default=0.01)
    p.add_argument("--max-time", type=float, default=120.0)
    a = ap.parse_args()
    host, _, port = a.target.rpartition(":")
    port = int(port)
    errors = {}
    if a.cmd == "ports":
        if not 1 <= a.count <= 10000 or not 1024 <= a.first <= 65535 - a.count:
            print("flowprobe: bad --first/--count", file=sys.stderr)
            return 2
        pods, ok, srcs = {}, 0, a.src.split(",")
        for i in range(a.count):
            src = (srcs[i % len(srcs)], a.first + i)
            try:
                pods["%s:%d" % src] = get(host, port, a.timeout, src)
                ok += 1
            except (OSError, ValueError) as e:
                errors[err_name(e)] = errors.get(err_name(e), 0) + 1
        print(json.dumps({"ok": ok, "failed": a.count - ok, "pods": pods, "errors": errors}))
        return 0
    max_time = min(a.max_time, 600.0)
    t_end = time.monotonic() + max_time
    ok, fail_times, max_lat = 0, [], 0.0
    while time.monotonic() < t_end and not os.path.exists(a.stop):
        t0, w0 = time.monotonic(), time.time()
        try:
            get(host, port, a.timeout)
            ok += 1
            max_lat = max(max_lat, time.monotonic() - t0)
        except (OSError, ValueError) as e:
            fail_times.append(round(w0, 3))
            errors[err_name(e)] = errors.get(err_name(e), 0) + 1
        time.sleep(a.interval)
    print(json.dumps({"ok": ok, "failed": len(fail_times), "fail_times": fail_times,
                      "errors": errors, "max_ok_latency_s": round(max_lat, 3)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
