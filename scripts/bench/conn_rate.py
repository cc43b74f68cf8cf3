#!/usr/bin/env python3
"""usage: conn_rate.py --targets IP:PORT[,IP:PORT...] [--seconds S] [--max-count N]
                     [--procs P] [--timeout T]

Benchmark 3b's load (scripts/bench/kernel_modes.sh): new TCP connections per
second through a service proxy. Runs inside the lab's client namespace. Each of
P processes opens TCP connections one after another, round robin over the
targets; a connection counts when connect() returns (the three-way handshake
went through the proxy and back), and is then closed with a RST (SO_LINGER 0:
no TIME_WAIT piles up on the client). Stops after S seconds or N connections
per process, whichever comes first (both bounded: S <= 120, N <= 1000000).
Prints one JSON line: {"ok":N,"failed":N,"elapsed_s":X,"conn_per_s":X,
"connect_p50_ms":X,"connect_p99_ms":X,"errors":{...}}.
"""
import argparse
import json
import multiprocessing as mp
import socket
import struct
import sys
import time


def worker(targets, seconds, max_count, timeout, q):
    ok = failed = 0
    errors = {}
    lat = []
    linger = struct.pack("ii", 1, 0)
    t_end = time.monotonic() + seconds
    i = 0
    while i < max_count and time.monotonic() < t_end:
        host, port = targets[i % len(targets)]
        i += 1
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(timeout)
        t0 = time.perf_counter()
        try:
            s.connect((host, port))
            lat.append(time.perf_counter() - t0)
            ok += 1
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
        except OSError as e:
            failed += 1
            errors[type(e).__name__] = errors.get(type(e).__name__, 0) + 1
        finally:
            s.close()
    q.put((ok, failed, errors, lat))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--targets", required=True)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--max-count", type=int, default=100000)
    ap.add_argument("--procs", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=2.0)
    a = ap.parse_args()
    if not (0 < a.seconds <= 120 and 0 < a.max_count <= 1000000 and 1 <= a.procs <= 16):
        print("conn_rate.py: --seconds 0..120, --max-count 1..1000000, --procs 1..16", file=sys.stderr)
        sys.exit(2)
    targets = []
    for t in a.targets.split(","):
        h, p = t.rsplit(":", 1)
        targets.append((h, int(p)))
    q = mp.Queue()
    t0 = time.monotonic()
    procs = [mp.Process(target=worker, args=(targets[k:] + targets[:k], a.seconds, a.max_count, a.timeout, q))
             for k in range(a.procs)]
    for p in procs:
        p.start()
    res = [q.get() for _ in procs]
    for p in procs:
        p.join()
    elapsed = time.monotonic() - t0
    ok = sum(r[0] for r in res)
    failed = sum(r[1] for r in res)
    errors = {}
    for r in res:
        for k, v in r[2].items():
            errors[k] = errors.get(k, 0) + v
    lat = sorted(x for r in res for x in r[3])

    def pct(p):
        return round(lat[min(len(lat) - 1, int(p / 100 * len(lat)))] * 1e3, 3) if lat else None
    print(json.dumps({"ok": ok, "failed": failed, "elapsed_s": round(elapsed, 3),
                      "conn_per_s": round(ok / elapsed, 1) if elapsed > 0 else 0,
                      "connect_p50_ms": pct(50), "connect_p99_ms": pct(99), "errors": errors,
                      "procs": a.procs, "targets": len(targets)}))


if __name__ == "__main__":
    main()
