#!/usr/bin/env python3
"""usage: tap_exec.py --tap NETNS:IFNAME:QUEUES [--tap ...] [--first-fd N] -- COMMAND...

Opens tap devices that live in other network namespaces and runs COMMAND (qemu)
with the queue file descriptors inherited, so one qemu process can attach to taps
in several namespaces (scripts/kernel-vm.sh). For each --tap, in order, it enters
NETNS (/run/netns/NETNS), opens /dev/net/tun QUEUES times with
IFF_TAP|IFF_NO_PI|IFF_VNET_HDR (|IFF_MULTI_QUEUE when QUEUES > 1) and the name
IFNAME. An existing persistent tap (ip tuntap add ... multi_queue vnet_hdr) is
attached to; a missing one is created by the kernel and disappears with the last
descriptor. Then it returns to its own network namespace and execs COMMAND.
Descriptors are numbered from --first-fd (default 10) in order: tap 1 queue 0,
tap 1 queue 1, ..., tap 2 queue 0, ... Python standard library only; root only.
"""
import ctypes
import fcntl
import os
import struct
import sys

CLONE_NEWNET = 0x40000000
TUNSETIFF = 0x400454CA
IFF_TAP = 0x0002
IFF_NO_PI = 0x1000
IFF_VNET_HDR = 0x4000
IFF_MULTI_QUEUE = 0x0100


def die(msg):
    sys.stderr.write("tap_exec: error: %s\n" % msg)
    sys.exit(1)


def setns(fd):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        die("setns: %s" % os.strerror(err))


def main(argv):
    taps, first_fd, i = [], 10, 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            i += 1
            break
        if a == "--tap" and i + 1 < len(argv):
            parts = argv[i + 1].split(":")
            if len(parts) != 3 or not parts[2].isdigit() or not 1 <= int(parts[2]) <= 16:
                die("--tap wants NETNS:IFNAME:QUEUES (1..16 queues), got '%s'" % argv[i + 1])
            if not 1 <= len(parts[1]) <= 15:
                die("interface name '%s' must be 1..15 characters" % parts[1])
            taps.append((parts[0], parts[1], int(parts[2])))
            i += 2
        elif a == "--first-fd" and i + 1 < len(argv) and argv[i + 1].isdigit():
            first_fd = int(argv[i + 1])
            i += 2
        else:
            die("unexpected argument '%s' (see the usage line at the top of this file)" % a)
    cmd = argv[i:]
    if not taps or not cmd:
        die("usage: tap_exec.py --tap NETNS:IFNAME:QUEUES [--tap ...] -- COMMAND...")

    own = os.open("/proc/self/ns/net", os.O_RDONLY)
    fds = []
    for ns, ifname, queues in taps:
        try:
            nsfd = os.open("/run/netns/" + ns, os.O_RDONLY)
        except OSError as e:
            die("network namespace '%s': %s" % (ns, e.strerror))
        setns(nsfd)
        os.close(nsfd)
        flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR | (IFF_MULTI_QUEUE if queues > 1 else 0)
        for q in range(queues):
            fd = os.open("/dev/net/tun", os.O_RDWR)
            ifr = struct.pack("16sH22x", ifname.encode(), flags)
            try:
                fcntl.ioctl(fd, TUNSETIFF, ifr)
            except OSError as e:
                die("tap '%s' in namespace '%s', queue %d: TUNSETIFF: %s (a persistent tap must "
                    "have been created with 'multi_queue' when QUEUES > 1)" % (ifname, ns, q, e.strerror))
            fds.append(fd)
        setns(own)
    os.close(own)
    # Move the descriptors to first_fd.. in order (above anything open now).
    top = max(max(fds), first_fd + len(fds)) + 1
    moved = [os.dup2(fd, top + k) for k, fd in enumerate(fds)]
    for fd in fds:
        os.close(fd)
    for k, fd in enumerate(moved):
        os.dup2(fd, first_fd + k)
        os.set_inheritable(first_fd + k, True)
    for fd in moved:
        os.close(fd)
    try:
        os.execvp(cmd[0], cmd)
    except OSError as e:
        die("cannot run %s: %s" % (cmd[0], e.strerror))


if __name__ == "__main__":
    main(sys.argv[1:])
