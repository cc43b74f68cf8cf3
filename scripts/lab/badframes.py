#!/usr/bin/env python3
"""usage: badframes.py IFACE DST_MAC SRC_IP VIP PORT

Sends a fixed set of malformed or unsupported Ethernet frames (one of each) out of
IFACE with a raw AF_PACKET socket, addressed to DST_MAC (the dataplane port). Runs
inside a lab namespace only (the caller uses `ip netns exec`). Prints one line per
frame: "<drop reason the dataplane should count> <length>"; a reason ending in "?"
may legitimately not be counted (see the comment on fragments). Standard library only.
"""
import socket
import struct
import sys


def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def ipv4(src, dst, proto, payload, ttl=64, frag=0, ihl=5, bad_csum=False, total=None):
    opts = b"\x01" * ((ihl - 5) * 4)
    tot = total if total is not None else 20 + len(opts) + len(payload)
    h = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, 0, tot, 1, frag, ttl, proto, 0,
                    socket.inet_aton(src), socket.inet_aton(dst)) + opts
    c = csum(h)
    if bad_csum:
        c ^= 0x5A5A
    return h[:10] + struct.pack("!H", c) + h[12:] + payload


def tcp_syn(sport, dport, doff=5):
    return struct.pack("!HHIIBBHHH", sport, dport, 1, 0, doff << 4, 0x02, 65535, 0, 0)


def main():
    if len(sys.argv) != 6:
        print(__doc__, file=sys.stderr)
        return 2
    iface, mac, src, vip, port = sys.argv[1:6]
    port = int(port)
    dst = bytes.fromhex(mac.replace(":", ""))
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((iface, 0))
    me = s.getsockname()[4][:6]
    eth = lambda et: dst + me + struct.pack("!H", et)
    frames = [
        ("bad_ip_checksum", eth(0x0800) + ipv4(src, vip, 6, tcp_syn(40001, port), bad_csum=True)),
        # The af_packet PMD joins a PACKET_FANOUT group with the DEFRAG flag, so the
        # kernel holds lone fragments for reassembly and the dataplane may never
        # see them: "?" marks a reason that is not required.
        ("ip_fragment?", eth(0x0800) + ipv4(src, vip, 6, tcp_syn(40002, port), frag=0x2000)),
        ("ip_fragment?", eth(0x0800) + ipv4(src, vip, 6, tcp_syn(40003, port)[:8], frag=0x0010)),
        ("bad_ip_header", eth(0x0800) + ipv4(src, vip, 6, tcp_syn(40004, port), total=400)),
        ("bad_l4_header", eth(0x0800) + ipv4(src, vip, 6, tcp_syn(40005, port, doff=3))),
        ("bad_l4_header", eth(0x0800) + ipv4(src, vip, 6, tcp_syn(40006, port)[:12])),
        ("bad_ip_header", eth(0x0800) + b"\x45\x00"),  # total length 0
        ("unsupported_ethertype", eth(0x88B5) + b"\0" * 46),  # IEEE local experimental
        ("ipv6_bad_header", eth(0x86DD) + b"\x60" + b"\0" * 39),  # payload length 0
        ("ttl_exceeded", eth(0x0800) + ipv4(src, vip, 6, tcp_syn(40007, port), ttl=1)),
        ("unsupported_protocol", eth(0x0800) + ipv4(src, vip, 47, b"\0" * 8)),
        ("vip_port_not_served", eth(0x0800) + ipv4(src, vip, 6, tcp_syn(40008, port + 1))),
        ("no_connection", eth(0x0800) + ipv4(src, vip, 6, struct.pack(
            "!HHIIBBHHH", 40009, port, 1, 1, 5 << 4, 0x10, 65535, 0, 0))),
    ]
    for reason, f in frames:
        if len(f) < 60:
            f += b"\0" * (60 - len(f))
        s.send(f)
        print(reason, len(f))
    return 0


if __name__ == "__main__":
    sys.exit(main())
