#!/usr/bin/env python3
"""Slow HTTP clients against vipd's local listeners, for the integration tests.

  slowclients.py probe --tcp HOST:PORT ... --unix PATH ... --count N
                       --healthz URL --metrics URL -- VIPCTL_ARGV...
      Keeps N connections open to each listener (half send nothing, half send a
      request header one byte a second and never finish it; a connection the
      server closes is opened again), and meanwhile times a GET of the healthz
      URL, a GET of the metrics URL and one run of VIPCTL_ARGV, twice: after
      0.5 s and after 2.5 s (past vipd's 2 s header deadline, so the clients
      have been cut and have reconnected). Prints one JSON object.
"""
import argparse
import json
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

HEADER = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 40  # never ends


def connect(target):
    kind, addr = target
    s = socket.socket(socket.AF_UNIX if kind == "unix" else socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(2)
    s.connect(addr)
    s.setblocking(False)
    return s


def parse_targets(a):
    out = []
    for t in a.tcp or []:
        host, port = t.rsplit(":", 1)
        out.append(("tcp", (host, int(port))))
    for p in a.unix or []:
        out.append(("unix", p))
    return out


def alive(s):
    try:
        return s.recv(4096, socket.MSG_PEEK) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


class Pool:
    """N connections per target; trickling ones send a byte a second."""

    def __init__(self, targets, count):
        self.conns = []  # [target, socket or None, trickle?, offset]
        self.reconnects = 0
        self.failed_connects = 0
        for t in targets:
            for i in range(count):
                self.conns.append([t, self.open(t), i % 2 == 1, 0])
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def open(self, t):
        try:
            return connect(t)
        except OSError:
            self.failed_connects += 1
            return None

    def run(self):
        while not self.stop.wait(1.0):
            for c in self.conns:
                if c[1] is None or not alive(c[1]):
                    if c[1] is not None:
                        c[1].close()
                    c[1] = self.open(c[0])
                    c[3] = 0
                    self.reconnects += 1
                    continue
                if c[2]:
                    try:
                        c[1].send(HEADER[c[3] % len(HEADER):c[3] % len(HEADER) + 1])
                        c[3] += 1
                    except OSError:
                        pass

    def open_now(self):
        return sum(1 for c in self.conns if c[1] is not None)

    def close(self):
        self.stop.set()
        self.thread.join()
        for c in self.conns:
            if c[1] is not None:
                c[1].close()


def timed_get(url):
    t = time.monotonic()
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            code, n = r.status, len(r.read())
    except urllib.error.HTTPError as e:
        code, n = e.code, len(e.read())
    except Exception as e:  # noqa: BLE001 - reported, not raised
        code, n = 0, str(e)
    return {"code": code, "bytes": n, "s": round(time.monotonic() - t, 3)}


def timed_cmd(argv):
    t = time.monotonic()
    try:
        p = subprocess.run(argv, capture_output=True, timeout=10)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        rc = -1
    return {"rc": rc, "s": round(time.monotonic() - t, 3)}


def probe(a, vipctl):
    pool = Pool(parse_targets(a), a.count)
    rounds = []
    start = time.monotonic()
    for at in (0.5, 2.5):
        time.sleep(max(0.0, start + at - time.monotonic()))
        rounds.append({"open": pool.open_now(), "healthz": timed_get(a.healthz),
                       "metrics": timed_get(a.metrics), "vipctl": timed_cmd(vipctl)})
    pool.close()
    print(json.dumps({"rounds": rounds, "reconnects": pool.reconnects,
                      "failed_connects": pool.failed_connects}))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["probe"])
    p.add_argument("--tcp", action="append")
    p.add_argument("--unix", action="append")
    p.add_argument("--count", type=int, default=100)
    p.add_argument("--healthz")
    p.add_argument("--metrics")
    argv = sys.argv[1:]
    rest = []
    if "--" in argv:
        i = argv.index("--")
        argv, rest = argv[:i], argv[i + 1:]
    a = p.parse_args(argv)
    probe(a, rest)


if __name__ == "__main__":
    main()
