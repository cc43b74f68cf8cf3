#!/usr/bin/env python3
"""usage: reorder_relay.py --link IF_A:IF_B [--link ...] [--every N] [--hold-ms MS]
                        [--max-seconds S] [--stats FILE] [--pidfile FILE]

A layer-2 relay that reorders frames, for the namespace lab (docs/lab.md).
This host's kernel has no netem qdisc, so reordering on a link is made here:
each --link joins two interfaces of the namespace it runs in (e.g. a pod's veth
taken out of the lab bridge and a new veth back into it) with AF_PACKET
sockets and forwards every frame both ways. In each direction every Nth frame
(--every, default 7) is held back until the next frame of that direction has
passed, then sent: it arrives after its successor, reordered, never lost. A
held frame with no successor within --hold-ms (default 20) is sent anyway
(counted as "flushed", not reordered), so nothing gets stuck at the end of a
transfer.

Bounded: it exits by itself after --max-seconds (default 300), or on
SIGTERM/SIGINT; held frames are sent first. On exit it writes one JSON object
with per-link, per-direction counters to --stats (and stdout):
  {"every": N, "links": {"A:B": {"A>B": {"frames", "reordered", "flushed",
   "send_errors"}, "B>A": {...}}}, "runtime_s": X, "reason": "signal"|"timeout"}
--pidfile is written once every socket is bound (the relay is forwarding).
Python standard library only; Linux only; needs CAP_NET_RAW.
"""
import argparse
import json
import os
import select
import signal
import socket
import sys
import time

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
SOL_PACKET = getattr(socket, "SOL_PACKET", 263)
PACKET_IGNORE_OUTGOING = 23  # Linux >= 4.20; frames we send are skipped by pkttype anyway


class Direction:
    def __init__(self, name, out_sock):
        self.name = name
        self.out = out_sock
        self.n = 0
        self.held = None
        self.held_at = 0.0
        self.stats = {"frames": 0, "reordered": 0, "flushed": 0, "send_errors": 0}

    def send(self, frame):
        try:
            self.out.send(frame)
        except OSError:  # ENOBUFS and the like: a lost frame, counted
            self.stats["send_errors"] += 1

    def frame(self, frame, every, now):
        self.n += 1
        self.stats["frames"] += 1
        if self.held is not None:
            self.send(frame)
            self.send(self.held)
            self.held = None
            self.stats["reordered"] += 1
        elif self.n % every == 0:
            self.held, self.held_at = frame, now
        else:
            self.send(frame)

    def flush(self, now, hold_s):
        if self.held is not None and now - self.held_at >= hold_s:
            self.send(self.held)
            self.held = None
            self.stats["flushed"] += 1


def open_if(name):
    # Protocol 0 until bound: no frame of another interface slips in.
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    try:
        s.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
    except OSError:
        pass
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.bind((name, ETH_P_ALL))  # CPython applies htons itself
    return s


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--link", action="append", required=True, help="IF_A:IF_B (repeatable)")
    ap.add_argument("--every", type=int, default=7)
    ap.add_argument("--hold-ms", type=float, default=20.0)
    ap.add_argument("--max-seconds", type=float, default=300.0)
    ap.add_argument("--stats")
    ap.add_argument("--pidfile")
    a = ap.parse_args()
    if a.every < 2:
        ap.error("--every must be >= 2")
    if not 0 < a.max_seconds <= 3600:
        ap.error("--max-seconds must be in (0, 3600]")
    hold_s = a.hold_ms / 1000.0

    by_fd = {}    # fd -> (socket, Direction of the frames it receives)
    dirs = []
    links = {}
    try:
        for spec in a.link:
            ia, sep, ib = spec.partition(":")
            if not sep or not ia or not ib or ia == ib:
                ap.error(f"--link {spec!r}: want IF_A:IF_B")
            sa, sb = open_if(ia), open_if(ib)
            ab, ba = Direction(f"{ia}>{ib}", sb), Direction(f"{ib}>{ia}", sa)
            by_fd[sa.fileno()] = (sa, ab)
            by_fd[sb.fileno()] = (sb, ba)
            dirs += [ab, ba]
            links[spec] = (ab, ba)
    except OSError as e:
        print(f"reorder_relay: {e}", file=sys.stderr)
        return 1

    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append("signal"))
    signal.signal(signal.SIGINT, lambda *_: stop.append("signal"))
    if a.pidfile:
        tmp = a.pidfile + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{os.getpid()}\n")
        os.replace(tmp, a.pidfile)

    t0 = time.monotonic()
    deadline = t0 + a.max_seconds
    reason = "timeout"
    poll = select.poll()
    for fd in by_fd:
        poll.register(fd, select.POLLIN)
    while True:
        if stop:
            reason = "signal"
            break
        now = time.monotonic()
        if now >= deadline:
            break
        wait = min(deadline - now, 0.2)
        for d in dirs:
            if d.held is not None:
                wait = min(wait, max(0.0, d.held_at + hold_s - now))
        try:
            ready = poll.poll(wait * 1000.0)
        except InterruptedError:
            continue
        now = time.monotonic()
        for fd, _ in ready:
            s, d = by_fd[fd]
            for _ in range(64):  # a burst per wake-up, then the other sockets
                try:
                    frame, addr = s.recvfrom(65536, socket.MSG_DONTWAIT)
                except (BlockingIOError, InterruptedError):
                    break
                if addr[2] == PACKET_OUTGOING:
                    continue
                d.frame(frame, a.every, now)
        for d in dirs:
            d.flush(now, hold_s)
    for d in dirs:
        d.flush(float("inf"), 0.0)
    out = {"every": a.every, "hold_ms": a.hold_ms, "reason": reason,
           "runtime_s": round(time.monotonic() - t0, 3),
           "links": {spec: {ab.name: ab.stats, ba.name: ba.stats} for spec, (ab, ba) in links.items()}}
    text = json.dumps(out)
    print(text, flush=True)
    if a.stats:
        tmp = a.stats + ".tmp"
        with open(tmp, "w") as f:
            f.write(text + "\n")
        os.replace(tmp, a.stats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
