#!/usr/bin/env python3
"""usage: tests/fuzz/make_seeds.py

Writes the generated part of the seed corpora (standard library only):
  corpus/fuzz_packet/*.bin   frame sequences for fuzz_packet (format in fuzz_packet.cc)
  corpus/fuzz_watch/*.json   watch streams for fuzz_watch (first byte: the chunking seed)
The hand-written seeds (manifests, config files) live next to them. Rerun
after changing the topology in fuzz_packet.cc; the output is deterministic.
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))

# ---- fuzz_packet --------------------------------------------------------------
# Topology of fuzz_packet.cc.
PORT_MAC = [bytes([2, 0, 0, 0, 0xa0, 0]), bytes([2, 0, 0, 0, 0xa1, 0])]
CLIENT_MAC = bytes([2, 0xc1, 0, 0, 0, 0x10])
B1_MAC = bytes([2, 0xb0, 0, 0, 0, 0x11])
BCAST = b"\xff" * 6


def ip(s):
    a, b, c, d = (int(x) for x in s.split("."))
    return (a << 24) | (b << 16) | (c << 8) | d


PORT0, PORT1 = ip("10.0.0.1"), ip("10.1.0.1")
LOCAL = ip("10.1.0.100")
CLIENT = ip("10.0.0.10")
FAR_CLIENT = ip("192.0.2.77")  # routed via the (unresolved) gateway
VIP, VIP_EMPTY, VIP_MH, VIP_PERSIST = ip("10.96.0.100"), ip("10.96.0.101"), ip("10.96.0.102"), ip("10.96.0.103")
B1, B3 = ip("10.1.0.11"), ip("10.1.0.13")
FIN, SYN, RST, PSH, ACK = 1, 2, 4, 8, 16


def flow_owner(client, n=2):
    h = (client * 0x9E3779B1) & 0xFFFFFFFF
    h ^= h >> 16
    return (((h * 0x85EBCA6B) & 0xFFFFFFFF) >> 16) % n


def eth(dst, src, et):
    return dst + src + struct.pack("!H", et)


def csum(data):
    """The RFC 1071 sum of data (not yet complemented)."""
    data += b"\0" * (len(data) % 2)
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def with_udp_checksum(pseudo, l4):
    """A whole UDP datagram with its checksum over the pseudo header and itself
    (0 goes out as 0xffff). IPv6 drops a zero one before the checksum test
    (RFC 8200 8.1), the harness's fix-up included, so the generator writes it.
    Left as it is: shorter than a UDP header, or a checksum already there."""
    if len(l4) < 8 or l4[6:8] != b"\0\0":
        return l4
    return l4[:6] + struct.pack("!H", (~csum(pseudo + l4) & 0xFFFF) or 0xFFFF) + l4[8:]


def ipv4(src, dst, proto, payload, ttl=64, ident=0x1234, frag=0x4000, opts=b""):
    ihl = 20 + len(opts)
    h = struct.pack("!BBHHHBBHII", 0x40 | (ihl // 4), 0, ihl + len(payload), ident, frag, ttl, proto, 0, src, dst)
    if proto == 17 and not frag & 0x3FFF:  # a whole datagram: also as quoted in an ICMP error
        payload = with_udp_checksum(struct.pack("!IIBBH", src, dst, 0, 17, len(payload)), payload)
    return h + opts + payload  # the other checksums: fixed by the harness (meta bits 2, 3)


def tcp(sport, dport, flags, seq=1000, ack=0, data=b""):
    return struct.pack("!HHIIBBHHH", sport, dport, seq, ack, 5 << 4, flags, 64240, 0, 0) + data


def tcp_opts(sport, dport, flags, seq, ack, opts, data=b""):
    doff = (20 + len(opts)) // 4
    return struct.pack("!HHIIBBHHH", sport, dport, seq, ack, doff << 4, flags, 64240, 0, 0) + opts + data


def udp(sport, dport, data=b""):
    return struct.pack("!HHHH", sport, dport, 8 + len(data), 0) + data  # checksum: ipv4() / ipv6() write it


def icmp_echo(ident=0x4242, seq=1):
    return struct.pack("!BBHHH", 8, 0, 0, ident, seq) + b"ping"


def arp(op, sha, spa, tpa, dst=BCAST):
    return eth(dst, sha, 0x0806) + struct.pack("!HHBBH", 1, 0x0800, 6, 4, op) + sha + struct.pack("!I", spa) + \
        b"\0" * 6 + struct.pack("!I", tpa)


PORT0_V6 = bytes.fromhex("fd000010000000000000000000000001")  # fd00:10::1 (fuzz_packet.cc)
CLIENT_V6 = bytes.fromhex("fd000010000000000000000000000010")
VIP_V6 = bytes.fromhex("fd000010009600000000000000000100")


def l4_of6(nh, payload):
    """(protocol, offset) of the L4 header behind an extension chain; protocol
    None when the chain is cut or the packet is a fragment of a larger one."""
    off = 0
    for _ in range(9):
        if nh not in (0, 43, 44, 60):
            return nh, off
        if off + 8 > len(payload):
            return None, off
        if nh == 44 and struct.unpack("!H", payload[off + 2:off + 4])[0] & 0xFFF9:
            return None, off  # not offset 0 with M clear: not the whole datagram
        nh, off = payload[off], off + (8 if nh == 44 else (payload[off + 1] + 1) * 8)
    return None, off


def ipv6(src, dst, nh, payload, hop=64, plen=None, udp_sum=True):
    """udp_sum: UDP gets its checksum (see with_udp_checksum); False keeps a zero one."""
    if udp_sum and plen is None:
        proto, off = l4_of6(nh, payload)
        if proto == 17:
            l4 = payload[off:]
            payload = payload[:off] + with_udp_checksum(src + dst + struct.pack("!I3xB", len(l4), 17), l4)
    plen = len(payload) if plen is None else plen
    return struct.pack("!IHBB", 0x60000000, plen, nh, hop) + src + dst + payload  # TCP, ICMPv6: the harness


def ext(nh, hdr_len=0, seg_left=0):
    return struct.pack("!BBBB", nh, hdr_len, 0, seg_left) + b"\0" * (4 + 8 * hdr_len)


def frag(nh, offset, more):
    return struct.pack("!BBHI", nh, 0, (offset & 0xFFF8) | (1 if more else 0), 0x1234)


def sol_node(a):
    return bytes.fromhex("ff0200000000000000000001ff") + a[13:]


def ns(target, src=CLIENT_V6, sll=CLIENT_MAC, hop=255):
    m = struct.pack("!BBHI", 135, 0, 0, 0) + target + (b"\x01\x01" + sll if sll else b"")
    dst = sol_node(target)
    return eth(b"\x33\x33" + dst[12:], CLIENT_MAC, 0x86DD) + ipv6(src, dst, 58, m, hop=hop)


def v6_from_client(dst, nh, payload, **kw):
    return eth(PORT_MAC[0], CLIENT_MAC, 0x86DD) + ipv6(CLIENT_V6, dst, nh, payload, **kw)


def rec(frame, port=0, worker=0, fix=True, end=False, advance=0):
    meta = port | (worker << 1) | ((0x0C) if fix else 0) | (0x10 if end else 0) | (advance << 5)
    return struct.pack("!BH", meta, len(frame)) + frame


def from_client(src, dst, l4, proto=6, **kw):
    return eth(PORT_MAC[0], CLIENT_MAC, 0x0800) + ipv4(src, dst, proto, l4, **kw)


def from_backend(src, dst, l4, proto=6, **kw):
    return eth(PORT_MAC[1], B1_MAC, 0x0800) + ipv4(src, dst, proto, l4, **kw)


def packet_seeds():
    seeds = {}
    w = flow_owner(CLIENT)
    lport = 65504 + w  # first port popped from the owning worker's fnat pool (fuzz_packet.cc)
    # fnat: a whole TCP connection through the rr service (first pick: B1).
    seeds["fnat_tcp_conn"] = b"\0" + b"".join([
        rec(from_client(CLIENT, VIP, tcp(40000, 8080, SYN)), end=True),
        rec(from_backend(B1, LOCAL, tcp(80, lport, SYN | ACK, 5000, 1001)), port=1, worker=lport % 2, end=True),
        rec(from_client(CLIENT, VIP, tcp(40000, 8080, ACK, 1001, 5001)), worker=1 - w),
        rec(from_client(CLIENT, VIP, tcp(40000, 8080, PSH | ACK, 1001, 5001, b"GET / HTTP/1.0\r\n\r\n")), end=True),
        rec(from_backend(B1, LOCAL, tcp(80, lport, FIN | ACK, 5001, 1019)), port=1, end=True, advance=2),
        rec(from_client(CLIENT, VIP, tcp(40000, 8080, FIN | ACK, 1019, 5002)), end=True),
        rec(from_client(CLIENT, VIP, tcp(40000, 8080, SYN, 7000)), end=True),  # port reuse
    ])
    # PROXY protocol v1 service (8443): the handshake's ACK carries the header,
    # a server-first banner, a retransmitted first segment, the backend's ack
    # and SACK past the header, FIN. ISN near 2^32 (the shifts wrap).
    isn = 0xFFFFFFF0
    hlen = len(b"PROXY TCP4 10.0.0.10 10.96.0.100 40010 8443\r\n")
    sack = struct.pack("!BBBBII", 1, 1, 5, 10, (isn + 1 + hlen + 20) & 0xFFFFFFFF, (isn + 1 + hlen + 30) & 0xFFFFFFFF)
    c = lambda flags, seq, data=b"": from_client(CLIENT, VIP, tcp(40010, 8443, flags, seq & 0xFFFFFFFF, 5001, data))
    seeds["fnat_proxy_conn"] = b"\0" + b"".join([
        rec(from_client(CLIENT, VIP, tcp(40010, 8443, SYN, isn)), end=True),
        rec(from_backend(B1, LOCAL, tcp_opts(80, lport, SYN | ACK, 5000, isn + 1, b"\x02\x04\x05\xb4")), port=1,
            worker=lport % 2, end=True),
        rec(c(ACK, isn + 1), end=True),
        rec(from_backend(B1, LOCAL, tcp(80, lport, PSH | ACK, 5001, isn + 1, b"220 hi")), port=1, end=True),
        rec(c(PSH | ACK, isn + 1, b"GET / HTTP/1.0\r\n\r\n")),
        rec(c(PSH | ACK, isn + 1, b"GET / HTTP/1.0\r\n\r\n"), end=True),
        rec(from_backend(B1, LOCAL, tcp(80, lport, ACK, 5007, (isn + 1 + hlen + 18) & 0xFFFFFFFF)), port=1, end=True),
        rec(from_backend(B1, LOCAL, tcp_opts(80, lport, ACK, 5007, (isn + 1 + hlen + 18) & 0xFFFFFFFF, sack)),
            port=1, end=True),
        rec(c(PSH | ACK, isn + 19, b"more")),
        rec(c(FIN | ACK, isn + 23), end=True),
    ])
    seeds["fnat_udp"] = b"\0" + b"".join([
        rec(from_client(CLIENT, VIP, udp(5000, 5353, b"query"), proto=17)),
        rec(from_client(CLIENT, VIP, udp(5001, 5353, b"query"), proto=17, ttl=1)),
        rec(from_client(FAR_CLIENT, VIP, udp(5002, 5353, b"q"), proto=17), end=True),
        rec(from_backend(B1, LOCAL, udp(53, lport, b"answer"), proto=17), port=1, worker=lport % 2, end=True),
    ])
    seeds["fnat_no_endpoints"] = b"\0" + b"".join([
        rec(from_client(CLIENT, VIP_EMPTY, tcp(40001, 80, SYN))),
        rec(from_client(CLIENT, VIP_EMPTY, udp(40002, 53, b"x"), proto=17)),
        rec(from_client(CLIENT, VIP_EMPTY, tcp(40003, 81, SYN))),
        rec(from_client(CLIENT, VIP_EMPTY, tcp(40004, 82, SYN))),  # VIP, port not served
        rec(from_client(CLIENT, VIP, tcp(40005, 8080, ACK, 1, 1))),  # no connection
    ])
    seeds["arp_icmp"] = b"\0" + b"".join([
        rec(arp(1, CLIENT_MAC, CLIENT, VIP)),
        rec(arp(1, CLIENT_MAC, CLIENT, PORT0)),
        rec(arp(1, B1_MAC, B1, LOCAL), port=1),
        rec(arp(2, bytes([2, 0xb0, 0, 0, 0, 0x13]), B3, PORT1, dst=PORT_MAC[1]), port=1),
        rec(arp(1, CLIENT_MAC, CLIENT, ip("10.0.0.99"))),
        rec(from_client(CLIENT, PORT0, icmp_echo(), proto=1)),
        rec(from_client(CLIENT, VIP, icmp_echo(7), proto=1)),
        rec(from_backend(B1, LOCAL, icmp_echo(8), proto=1), port=1),
    ])
    # Maglev picks up mid-flow TCP; B3 has no ARP entry: parked, then
    # neigh_unresolved unless the ARP reply arrives.
    seeds["mh_pickup_unresolved"] = b"\0" + b"".join([
        rec(from_client(CLIENT, VIP_MH, tcp(p, 80, ACK, 1, 1)), end=(p % 4 == 0)) for p in range(41000, 41012)
    ] + [rec(arp(2, bytes([2, 0xb0, 0, 0, 0, 0x13]), B3, PORT1, dst=PORT_MAC[1]), port=1, end=True)])
    seeds["persistence"] = b"\0" + b"".join([
        rec(from_client(CLIENT, VIP_PERSIST, tcp(42000 + i, 443, SYN)), end=True, advance=i % 4) for i in range(6)
    ] + [rec(from_client(CLIENT, VIP_PERSIST, udp(42100, 53, b"q"), proto=17), end=True)])
    echo6 = struct.pack("!BBHHH", 128, 0, 0, 0x4242, 1) + b"ping6"
    seeds["ipv6"] = b"\0" + b"".join([
        rec(ns(PORT0_V6)),                                    # answered: NA
        rec(ns(PORT0_V6, src=b"\0" * 16, sll=None)),          # DAD: NA to all-nodes
        rec(ns(PORT0_V6, hop=64)),                            # ndp_invalid
        rec(ns(VIP_V6)),                                      # ndp_ignored
        rec(ns(PORT0_V6), port=1),                            # port without IPv6
        rec(v6_from_client(PORT0_V6, 58, echo6)),             # echo reply
        rec(v6_from_client(PORT0_V6, 0, ext(60, 1) + ext(58) + echo6)),  # echo behind a chain
        rec(v6_from_client(VIP_V6, 6, tcp(44000, 80, SYN))),  # ipv6_no_service
        rec(v6_from_client(VIP_V6, 0, ext(60) + ext(43, 1) + ext(44) + frag(6, 0, False) + tcp(44001, 80, SYN))),
        rec(v6_from_client(VIP_V6, 44, frag(17, 8, False) + udp(1, 53, b"x"))),   # ipv6_fragment
        rec(v6_from_client(VIP_V6, 44, frag(17, 0, True) + udp(1, 53, b"x"))),    # first fragment
        rec(v6_from_client(VIP_V6, 60, b"".join(ext(60) for _ in range(9)))),     # chain too long
        rec(v6_from_client(VIP_V6, 60, ext(0) + udp(1, 53))),                     # hop-by-hop second
        rec(v6_from_client(VIP_V6, 43, ext(17, 2, 1) + udp(1, 53))),              # routing, segments left
        rec(v6_from_client(VIP_V6, 60, struct.pack("!BB", 17, 200) + b"\0" * 6)),  # ext beyond payload
        rec(v6_from_client(VIP_V6, 17, udp(1, 53), plen=400), end=True),          # payload beyond frame
    ])
    # More IPv6 shapes (the hostile lab test sends the same, scripts/lab/hostile.py).
    ns_msg = lambda target, opts: struct.pack("!BBHI", 135, 0, 0, 0) + target + opts
    mc_all = bytes.fromhex("ff020000000000000000000000000001")
    rt = lambda nh, type_, segs, hdr_len=0: struct.pack("!BBBB", nh, hdr_len, type_, segs) + b"\0" * (4 + 8 * hdr_len)
    v6 = lambda dst, nh, payload, **kw: rec(v6_from_client(dst, nh, payload, **kw))
    seeds["ipv6_hostile"] = b"\0" + b"".join([
        v6(VIP_V6, 6, tcp(44100, 80, SYN)[:12]),                                  # 12 bytes of TCP
        v6(VIP_V6, 6, tcp(44101, 80, SYN), plen=12),                              # payload length cuts TCP
        v6(VIP_V6, 6, tcp(44102, 80, SYN) + b"\0" * 20, plen=20),                 # padding after the payload
        v6(VIP_V6, 17, udp(44103, 53)[:6]),                                       # 6 bytes of UDP
        rec(v6_from_client(VIP_V6, 17, udp(44104, 53, b"x"), udp_sum=False), fix=False),  # UDP checksum 0
        v6(VIP_V6, 58, b"\x80\x00"),                                              # 2 bytes of ICMPv6
        rec(eth(PORT_MAC[0], CLIENT_MAC, 0x86DD) + b"\x40" + ipv6(CLIENT_V6, VIP_V6, 59, b"\0" * 8)[1:]),  # version 4
        v6(VIP_V6, 0, ext(60) + ext(43, 1) + rt(60, 0, 0) + ext(17) + udp(44105, 53, b"x")),  # hbh, do, rt0, do
        v6(VIP_V6, 60, b"".join(ext(60) for _ in range(7)) + ext(17) + udp(44106, 53, b"x")),  # 8: the most taken
        v6(VIP_V6, 43, rt(17, 4, 0) + udp(44107, 53, b"x")),                      # SRH, segments left 0
        v6(VIP_V6, 43, rt(17, 2, 1, 2) + udp(44108, 53, b"x")),                   # type 2, segments left 1
        v6(VIP_V6, 60, ext(60) + ext(60)),                                        # chain past the end
        v6(VIP_V6, 60, ext(60) + b"\x3c\x00\0\0"),                                # 4 bytes of a header
        v6(VIP_V6, 44, frag(17, 16, True) + b"\0" * 16),                          # middle fragment
        v6(VIP_V6, 60, ext(44) + frag(6, 0, True) + tcp(44109, 80, SYN)),         # fragment behind options
        v6(VIP_V6, 44, frag(17, 0, False) + udp(44110, 53, b"x")),                # atomic fragment
        v6(PORT0_V6, 0, ext(60) + ext(44) + frag(58, 0, False) + echo6),          # echo behind an atomic fragment
        rec(v6_from_client(PORT0_V6, 58, echo6), fix=False),                      # echo, bad checksum
        v6(VIP_V6, 58, echo6),                                                    # echo to no VIP
        v6(PORT0_V6, 58, struct.pack("!BBHI", 1, 4, 0, 0) + b"\0" * 40),          # ICMPv6 error to the port
        v6(PORT0_V6, 6, tcp(44111, 22, SYN)),                                     # TCP to the port
        v6(PORT0_V6, 58, ns_msg(PORT0_V6, b"\x01\x01" + CLIENT_MAC), hop=255),    # NS unicast: NA
        v6(sol_node(mc_all), 58, ns_msg(mc_all, b"\x01\x01" + CLIENT_MAC), hop=255),  # multicast target
        v6(sol_node(PORT0_V6), 58, ns_msg(PORT0_V6, b"\x01\x00" + CLIENT_MAC), hop=255),  # option length 0
        v6(sol_node(PORT0_V6), 58, ns_msg(PORT0_V6, b"\x01\x02" + CLIENT_MAC), hop=255),  # option past the end
        v6(sol_node(PORT0_V6), 58, ns_msg(PORT0_V6, b"\x01"), hop=255),           # 1 byte of an option
        v6(sol_node(PORT0_V6), 58, ns_msg(PORT0_V6, b"")[:20], hop=255),          # 20-byte NS
        rec(ns(PORT0_V6), fix=False),                                             # NS, bad checksum
        rec(ns(PORT0_V6, src=b"\0" * 16)),                                        # DAD with a link-layer option
        v6(sol_node(PORT0_V6), 58, struct.pack("!BBHI", 133, 0, 0, 0), hop=255),  # RS
        v6(mc_all, 58, struct.pack("!BBHI", 136, 0, 0, 0x20000000) + PORT0_V6 + b"\x02\x01" + CLIENT_MAC,
           hop=255),                                                              # unsolicited NA
        rec(v6_from_client(PORT0_V6, 58, echo6), port=1, worker=1),               # port 1: no IPv6 address
        rec(v6_from_client(PORT0_V6, 58, echo6), worker=1, end=True),             # echo via worker 1
    ])
    seeds["hostile"] = b"\0" + b"".join([
        rec(from_client(CLIENT, VIP, tcp(43000, 8080, SYN), frag=0x2000)),  # first fragment
        rec(from_client(CLIENT, VIP, tcp(43001, 8080, SYN), frag=0x0010)),  # later fragment
        rec(from_client(CLIENT, VIP, tcp(43002, 8080, SYN), opts=b"\x01\x01\x01\x00")),  # IP options
        rec(from_client(CLIENT, VIP, tcp(43003, 8080, SYN)), fix=False),  # bad checksums
        rec(from_client(CLIENT, VIP, tcp(43004, 8080, SYN), ttl=1)),
        rec(eth(PORT_MAC[0], CLIENT_MAC, 0x86DD) + b"\x60" + b"\0" * 39),  # IPv6
        rec(from_client(CLIENT, VIP, tcp(43005, 8080, SYN))[:40]),  # truncated
        rec(eth(BCAST, CLIENT_MAC, 0x0800) + ipv4(CLIENT, VIP, 6, tcp(43006, 8080, SYN))),
        rec(from_client(CLIENT, VIP, b"\0" * 4, proto=47)),  # GRE
        rec(from_backend(ip("10.1.0.99"), LOCAL, tcp(80, 2000, ACK)), port=1),  # spoofed reply
        rec(b"\x01\x02\x03"),
    ])
    # Backend 10.1.0.12 removed after the first burst (first byte bit 1): its
    # connection gets a RST on the next client packet, its replies dest_expired.
    local2, lport2 = ip("10.1.0.101"), 65520 + w
    seeds["fnat_dest_removed"] = b"\x02" + b"".join([
        rec(from_client(CLIENT, VIP, tcp(46000, 8080, SYN))),
        rec(from_client(CLIENT, VIP, tcp(46001, 8080, SYN)), end=True),
        rec(from_client(CLIENT, VIP, tcp(46001, 8080, ACK, 1001, 5001))),
        rec(eth(PORT_MAC[1], B1_MAC, 0x0800) + ipv4(ip("10.1.0.12"), local2, 6, tcp(80, lport2, ACK, 5001, 1001)),
            port=1, worker=lport2 % 2),
        rec(from_client(CLIENT, VIP, tcp(46000, 8080, ACK, 1001, 5001)), end=True, advance=4),
        rec(from_client(CLIENT, VIP, tcp(46001, 8080, SYN, 9000)), end=True),
    ])
    # nat: replies come back addressed to the client.
    seeds["nat_tcp_conn"] = b"\x01" + b"".join([
        rec(from_client(CLIENT, VIP, tcp(40000, 8080, SYN)), end=True),
        rec(from_backend(B1, CLIENT, tcp(80, 40000, SYN | ACK, 5000, 1001)), port=1, worker=1, end=True),
        rec(from_client(CLIENT, VIP, tcp(40000, 8080, ACK, 1001, 5001)), end=True, advance=4),
        rec(from_client(CLIENT, VIP, tcp(40000, 8080, ACK, 1001, 5001)), end=True, advance=7),
        rec(from_client(CLIENT, VIP, tcp(40000, 8080, ACK, 1001, 5001)), end=True),
    ])
    # IPv6 forwarding (fuzz_packet.cc: VIP fd00:10:96::100, backends on port 1).
    vip6, empty6 = bytes.fromhex("fd000010009600000000000000000100"), bytes.fromhex("fd000010009600000000000000000101")
    local6 = bytes.fromhex("fd000244000000000000000000ff0001")
    b16, b26 = bytes.fromhex("fd000244000000000000000000010015"), bytes.fromhex("fd000244000000000000000000020088")
    b36 = bytes.fromhex("fd000244000000000000000000030012")
    b3_mac = bytes([2, 0xb0, 0, 0, 0, 0x13])
    v6b = lambda src, dst, nh, payload, mac=B1_MAC: eth(PORT_MAC[1], mac, 0x86DD) + ipv6(src, dst, nh, payload)
    na = lambda target, mac: struct.pack("!BBHI", 136, 0, 0, 0x60000000) + target + bytes([2, 1]) + mac
    v6_flow = lambda first, to, ports: first + b"".join([
        rec(v6_from_client(vip6, 6, tcp(47000, 8080, SYN)), end=True),
        rec(v6_from_client(vip6, 6, tcp(47001, 8080, SYN)), end=True),
    ] + [rec(v6b(b, to, 6, tcp(80, pt, SYN | ACK, 5000, 1001)), port=1, worker=pt % 2, end=True)
         for b in (b16, b26) for pt in ports] + [
        rec(v6_from_client(vip6, 6, tcp(47000, 8080, ACK, 1001, 5001)), end=True, advance=4),
        rec(v6_from_client(vip6, 17, udp(47100, 5353, b"q")), end=True),
        rec(v6b(b16, to, 17, udp(53, ports[0], b"a")), port=1, worker=ports[0] % 2, end=True),
        rec(v6_from_client(empty6, 6, tcp(47200, 80, SYN))),                        # REJECT
        rec(v6_from_client(empty6, 17, udp(47201, 53, b"q"))),                      # REJECT
        rec(v6_from_client(vip6, 6, tcp(47300, 81, SYN)), end=True),                # parked, NS
        rec(eth(PORT_MAC[1], b3_mac, 0x86DD) + ipv6(b36, bytes.fromhex("fd000244000000000000000000000001"), 58,
                                                      na(b36, b3_mac), hop=255), port=1, end=True),
        rec(v6_from_client(vip6, 6, tcp(47400, 443, SYN)), end=True),               # persistence (sh)
        rec(v6_from_client(vip6, 6, tcp(47401, 443, SYN)), end=True, advance=6),
    ])
    seeds["ipv6_fnat_conn"] = v6_flow(b"\0", local6, (65520, 65521))
    seeds["ipv6_nat_conn"] = v6_flow(b"\x01", CLIENT_V6, (47000, 47001))
    seeds["ipv6_dest_removed"] = v6_flow(b"\x02", local6, (65520, 65521))
    # nat: more SYNs than the 32-entry connection table holds.
    seeds["nat_table_full"] = b"\x01" + b"".join(
        rec(from_client(CLIENT, VIP, tcp(44000 + i, 8080, SYN)), end=(i % 16 == 15)) for i in range(40))
    # fnat: the small second local address pool runs out.
    seeds["fnat_many_udp"] = b"\0" + b"".join(
        rec(from_client(CLIENT, VIP, udp(45000 + i, 5353, b"q"), proto=17), end=(i % 20 == 19)) for i in range(60))
    # ICMP errors quoting a NATed flow (dataplane/fastpath/icmp_error.h), both
    # directions, each to the worker that does not own the flow (redirected).
    for name, first, to in (("fnat_icmp_errors", b"\0", LOCAL), ("nat_icmp_errors", b"\x01", CLIENT)):
        sport = lport if to == LOCAL else 5000
        sent = quoted(ipv4(to, B1, 17, udp(sport, 53, b"query"), ttl=63))        # what vipd sent to B1
        reply = quoted(ipv4(VIP, CLIENT, 17, udp(5353, 5000, b"answer"), ttl=63))  # what vipd sent back
        seeds[name] = first + b"".join([
            rec(from_client(CLIENT, VIP, udp(5000, 5353, b"query"), proto=17), end=True),
            rec(from_backend(B1, to, udp(53, sport, b"answer"), proto=17), port=1, worker=sport % 2, end=True),
            rec(from_backend(ip("10.1.0.254"), to, icmp_error(3, 4, sent, 1200), proto=1), port=1,
                worker=1 - sport % 2, end=True),
            rec(from_backend(B1, to, icmp_error(11, 0, sent[:28]), proto=1), port=1, worker=sport % 2, end=True),
            rec(from_client(CLIENT, VIP, icmp_error(3, 3, reply), proto=1), worker=1 - w, end=True),
            rec(from_client(CLIENT, VIP, icmp_error(3, 3, sent), proto=1), worker=w, end=True),  # wrong side
            rec(from_client(CLIENT, VIP, tcp(40010, 8080, SYN)), end=True),
            rec(from_backend(B1, to, icmp_error(3, 4, quoted(ipv4(to, B1, 6, tcp(sport + 2, 80, SYN), ttl=63)), 1000),
                             proto=1), port=1, end=True),
        ])
    # ICMPv6 errors quoting an IPv6 flow (worker6.cc), both directions: packet
    # too big (to the worker that does not own the flow: redirected), time
    # exceeded with a short quote, parameter problem, port unreachable from
    # the client; then the wrong side and a flow vipd does not have.
    pod_router6, router_mac = bytes.fromhex("fd0002440000000000000000000000fe"), bytes([2, 0xee, 0, 0, 0, 0xfe])
    for name, first, to, sport in (("ipv6_fnat_icmp_errors", b"\0", local6, 65520),
                                   ("ipv6_nat_icmp_errors", b"\x01", CLIENT_V6, 47000)):
        sent = ipv6(to, b16, 17, udp(sport, 53, b"query"), hop=63)             # what vipd sent to b16
        reply = ipv6(vip6, CLIENT_V6, 17, udp(5353, 47000, b"answer"), hop=63)  # what vipd sent back
        e6 = lambda type_, code, quote, param=0: struct.pack("!BBHI", type_, code, 0, param) + quote
        seeds[name] = first + b"".join([
            rec(v6_from_client(vip6, 17, udp(47000, 5353, b"query")), end=True),
            rec(v6b(b16, to, 17, udp(53, sport, b"answer")), port=1, worker=sport % 2, end=True),
            rec(v6b(pod_router6, to, 58, e6(2, 0, sent, 1280), mac=router_mac), port=1, worker=1 - sport % 2,
                end=True),
            rec(v6b(b16, to, 58, e6(3, 0, sent[:48])), port=1, worker=sport % 2, end=True),
            rec(v6b(b16, to, 58, e6(4, 0, sent, 6)), port=1, end=True),
            rec(v6_from_client(vip6, 58, e6(1, 4, reply)), end=True),
            rec(v6_from_client(vip6, 58, e6(1, 4, sent)), end=True),  # wrong side
            rec(v6b(b16, to, 58, e6(2, 0, ipv6(to, b16, 6, tcp(sport + 2, 80, SYN), hop=63), 1280)), port=1,
                end=True),  # no such flow
        ])
    return seeds


def quoted(packet):
    """An IPv4 packet as an ICMP error quotes it: with its header checksum."""
    ihl = (packet[0] & 0x0F) * 4
    h = bytearray(packet[:ihl])
    h[10:12] = struct.pack("!H", ~csum(bytes(h)) & 0xFFFF)
    return bytes(h) + packet[ihl:]


def icmp_error(type_, code, quote, mtu=0):
    return struct.pack("!BBHHH", type_, code, 0, 0, mtu) + quote  # checksum: fixed by the harness


# ---- fuzz_watch --------------------------------------------------------------
def svc(name, ip_, port, rv, proto="TCP"):
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": "default", "resourceVersion": str(rv)},
            "spec": {"type": "ClusterIP", "clusterIP": ip_, "clusterIPs": [ip_],
                     "ports": [{"name": "http", "protocol": proto, "port": port, "targetPort": 8080}]}}


def slice_(name, svcname, addrs, port, rv):
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
            "metadata": {"name": name, "namespace": "default", "resourceVersion": str(rv),
                         "labels": {"kubernetes.io/service-name": svcname}},
            "endpoints": [{"addresses": [a], "conditions": {"ready": True}, "nodeName": "node-a"} for a in addrs],
            "ports": [{"name": "http", "protocol": "TCP", "port": port}]}


def watch_seeds():
    ev = lambda t, o: json.dumps({"type": t, "object": o})
    return {
        "services": "\n".join([ev("ADDED", svc("web", "10.96.0.10", 80, 101)),
                               ev("MODIFIED", svc("web", "10.96.0.10", 81, 102)),
                               ev("DELETED", svc("web", "10.96.0.10", 81, 103))]) + "\n",
        "slices": "\n".join([ev("ADDED", slice_("web-abc", "web", ["10.244.1.5", "10.244.2.7"], 8080, 201)),
                             ev("BOOKMARK", {"kind": "EndpointSlice", "metadata": {"resourceVersion": "250"}})]) + "\n",
        "error_410": ev("ERROR", {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 410,
                                  "reason": "Expired", "message": "too old resource version: 1 (5)"}) + "\n",
        "escapes": json.dumps({"type": "ADDED", "object": svc("we\"b{}", "10.96.0.11", 443, 7)},
                              ensure_ascii=True) + "  \r\n\t" + ev("MODIFIED", svc("x", "None", 1, 8)),
        "numbers": '{"type":"ADDED","object":{"kind":"Service","metadata":{"name":"n","resourceVersion":"1"},'
                   '"spec":{"clusterIP":"10.96.0.12","ports":[{"port":1.5e3,"protocol":"UDP"},{"port":-1},'
                   '{"port":18446744073709551615},{"port":null},{"port":true}]}}}\n',
    }


def main():
    pk = os.path.join(HERE, "corpus", "fuzz_packet")
    wk = os.path.join(HERE, "corpus", "fuzz_watch")
    os.makedirs(pk, exist_ok=True)
    os.makedirs(wk, exist_ok=True)
    for name, data in packet_seeds().items():
        with open(os.path.join(pk, name + ".bin"), "wb") as f:
            f.write(data)
    for i, (name, text) in enumerate(watch_seeds().items()):
        # First byte: fuzz_watch's chunking seed; the stream follows.
        with open(os.path.join(wk, name + ".json"), "wb") as f:
            f.write(bytes([7 + 13 * i]) + text.encode())
    print("wrote", len(os.listdir(pk)), "packet seeds,", len(os.listdir(wk)), "watch seeds")


if __name__ == "__main__":
    main()
