#!/usr/bin/env python3
"""usage:
  hostile.py client IFACE VIPD_MAC SRC VIP [--other-ip IP] [--local-addr IP]
  hostile.py pod IFACE VIPD_MAC POD_IP REPLY_TO
  hostile.py icmp-client VIP:PORT --go FILE [--max-time S]
  hostile.py icmp-pod-fragneeded POD_IP QSRC:QPORT PORT [--mtu N]
  hostile.py icmp-pod-late-reply IFACE POD_IP QSRC:QPORT PORT [--timeout S]
  hostile.py synflood IFACE VIPD_MAC NET VIP:PORT --count N [--first A] [--last B]
             [--pps N] [--max-time S]

Hostile traffic for tests/integration/hostile_test.sh, built with scapy (Debian:
python3-scapy). Runs inside ONE lab network namespace (the caller uses `ip netns
exec`); every frame goes out of IFACE there, addressed to vipd's port (VIPD_MAC).
Everything is bounded: each set is sent once; synflood stops at --count frames or
--max-time seconds (count <= 200000, pps <= 50000).

client: malformed and odd frames from the client side (SRC, towards VIP, whose
  services are TCP 8080 and UDP 9053). Prints one JSON object:
  {"sent": {KEY: N, ...}, "answered": {PROBE: true|false, ...},
   "time_exceeded_seen": N, "bad_echo_reply_seen": N}
  KEY is the drop reason vipd must count for those frames, or one of
   @lb_reasm        lone IP fragments: held by the lb namespace's kernel (the
                    af_packet PMD's fanout DEFRAG), or counted as ip_fragment
   @pod_tcp_csum / @pod_udp_csum   forwarded unchanged (bad TCP/UDP checksum):
                    dropped by the pod's kernel (InCsumErrors)
   @client_icmp_csum  echo request with a bad ICMP checksum: vipd answers, the
                    checksum stays bad, the client's kernel drops the reply
   @answered        must be answered through vipd (IP options, TTL 2, a
                    fragmented datagram): see "answered"
  Source ports 61000-61999 (outside Linux's ephemeral range, so no frame can hit a
  flow of the legitimate traffic running at the same time).
pod: spoofed replies and errors from a pod (POD_IP) to REPLY_TO (fnat: a local
  address; nat: the client), ports 62000-62999; same JSON ("sent" only).
icmp-client: opens a connected UDP socket to VIP:PORT, sends "ping", prints
  {"cport": N, "reply": "podN"} and waits for FILE; then prints the ICMP errors it
  saw (parsed, every checksum checked) and the socket's path MTU (IP_MTU), closes
  the socket and prints "closed".
icmp-pod-fragneeded: sends ICMP "fragmentation needed" (type 3 code 4, --mtu) from
  POD_IP to QSRC quoting QSRC:QPORT -> POD_IP:PORT "ping\\n" (the datagram as the
  pod received it).
icmp-pod-late-reply: sends a UDP datagram POD_IP:PORT -> QSRC:QPORT and prints the
  ICMP errors that come back to POD_IP within --timeout (JSON list).
synflood: --count TCP SYNs to VIP:PORT from NET.A .. NET.B (NET: first three
  octets, e.g. 10.0.0) with distinct source ports; prints {"sent": N, "elapsed_s": X}.
"""
import argparse
import json
import os
import socket
import struct
import sys
import time

from scapy.layers.inet import ICMP, IP, TCP, UDP, IPOption_NOP, IPOption_EOL, fragment
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import ARP, Ether
from scapy.packet import Raw
from scapy.sendrecv import AsyncSniffer

IP_MTU = 14  # <linux/in.h>


def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def l2sock(iface):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((iface, 0))
    return s, s.getsockname()[4][:6]


def sniffer(iface, lfilter, bpf):
    """Captures what lfilter accepts. bpf (a pcap filter, applied in the kernel)
    keeps the lab's other traffic out of the socket: the Python sniffer, on a
    loaded machine, cannot keep up with the legitimate traffic running beside
    the checks, and its socket buffer would overflow and lose the very answers
    a check waits for (seen: answers the client's kernel got, missing here)."""
    sn = AsyncSniffer(iface=iface, store=True, lfilter=lfilter, filter=bpf)
    sn.start()
    for _ in range(50):  # until its socket is open
        if getattr(sn, "running", False) and getattr(sn, "stop_cb", None):
            break
        time.sleep(0.02)
    time.sleep(0.3)
    return sn


def ipv4_bytes(pkt):
    """Bytes of an IP packet built by scapy (checksums filled in)."""
    return bytes(pkt)


def set16(b, off, v):
    b[off:off + 2] = struct.pack("!H", v)


def fix_ip(b, ihl=None):
    """Recomputes the IPv4 header checksum of bytes b (IP at offset 0)."""
    ihl = ihl or (b[0] & 0x0F) * 4
    set16(b, 10, 0)
    set16(b, 10, csum(bytes(b[:ihl])))
    return b


class Sender:
    def __init__(self, iface, mac):
        self.sock, self.me = l2sock(iface)
        self.dst = bytes.fromhex(mac.replace(":", ""))
        self.sent = {}

    def eth(self, ethertype, payload, dst=None):
        return (dst or self.dst) + self.me + struct.pack("!H", ethertype) + payload

    def send(self, key, frame, n=1):
        for _ in range(n):
            self.sock.send(frame)
        self.sent[key] = self.sent.get(key, 0) + n

    def ip(self, key, ip_bytes, n=1, dst=None):
        self.send(key, self.eth(0x0800, bytes(ip_bytes), dst), n)


def tcp(src, dst, sport, dport, flags="S", **ipkw):
    return IP(src=src, dst=dst, **ipkw) / TCP(sport=sport, dport=dport, flags=flags, seq=1000, window=1024)


# IPv6 (lab ranges): vipd's dpdk mode parses IPv6, answers NDP and echo for
# the port's IPv6 address and forwards none yet (docs/architecture.md "IPv6");
# every hostile frame here must be counted, the valid probes answered.
V6_CLIENT = socket.inet_pton(socket.AF_INET6, "fd00:10::10")
V6_VIP = socket.inet_pton(socket.AF_INET6, "fd00:10:96::100")


def ipv6_bytes(src, dst, nh, payload, hop=64, plen=None):
    plen = len(payload) if plen is None else plen
    return struct.pack("!IHBB", 0x60000000, plen, nh, hop) + src + dst + payload


def ipv6_l4(src, dst, nh, l4, csum_off, ext=b"", first_nh=None, hop=64):
    """An IPv6 packet with a correct TCP/UDP/ICMPv6 checksum behind `ext`."""
    pseudo = src + dst + struct.pack("!IxxxB", len(l4), nh)
    l4 = bytearray(l4)
    set16(l4, csum_off, csum(pseudo + bytes(l4)))
    return ipv6_bytes(src, dst, nh if first_nh is None else first_nh, ext + bytes(l4), hop=hop)


def ext6(nh, hdr_len=0, seg_left=0):
    return struct.pack("!BBBB", nh, hdr_len, 0, seg_left) + b"\0" * (4 + 8 * hdr_len)


def ipv6_set(s, port_ip6):
    """IPv6 hostile frames (each key: the drop reason vipd must count), and
    valid NDP/echo probes for vipd's port address `port_ip6`, sent uncounted;
    returns {probe: (kind, match)} for answered6()."""
    syn6 = struct.pack("!HHIIBBHHH", 61990, 8080, 1000, 0, 0x50, 0x02, 1024, 0, 0)
    udp6 = struct.pack("!HHHH", 61991, 9053, 9, 0) + b"x"
    six = lambda key, b: s.send(key, s.eth(0x86DD, b))
    C, V = V6_CLIENT, V6_VIP
    # -- fixed header: version, payload length (0, beyond the frame, shorter than the L4 header)
    six("ipv6_bad_header", b"\x60" + b"\0" * 39)                                # payload length 0
    six("ipv6_bad_header", ipv6_bytes(C, V, 6, syn6, plen=400))                 # beyond the frame
    b = bytearray(ipv6_l4(C, V, 6, syn6, 16)); b[0] = 0x40                       # version 4 in IPv6
    six("ipv6_bad_header", bytes(b))
    six("bad_l4_header", ipv6_bytes(C, V, 6, syn6, plen=12))                     # cuts TCP to 12 bytes
    six("ipv6_no_service", ipv6_l4(C, V, 6, syn6, 16) + b"\0" * 20)               # shorter than the frame: padding
    # -- truncated / bad TCP, UDP, ICMPv6 headers
    six("bad_l4_header", ipv6_bytes(C, V, 6, syn6[:12]))                         # 12 bytes of TCP
    b = bytearray(syn6); b[12] = 0xF0; six("bad_l4_header", ipv6_bytes(C, V, 6, bytes(b)))  # data offset 15
    six("bad_l4_header", ipv6_bytes(C, V, 17, udp6[:6]))                         # 6 bytes of UDP
    b = bytearray(udp6); set16(b, 4, 200); six("bad_l4_header", ipv6_bytes(C, V, 17, bytes(b)))  # UDP length
    six("bad_l4_header", ipv6_bytes(C, V, 17, udp6))                             # UDP checksum 0 (RFC 8200 8.1)
    six("bad_l4_header", ipv6_bytes(C, V, 58, b"\x80\x00"))                      # 2 bytes of ICMPv6
    # -- extension header chains
    six("ipv6_no_service", ipv6_l4(C, V, 6, syn6, 16))                          # IPv6 VIPs: not yet
    six("ipv6_no_service", ipv6_l4(C, V, 17, udp6, 6, ext6(17, 1), first_nh=60))
    chain = ext6(60) + ext6(43, 1) + struct.pack("!BBBB", 60, 0, 0, 0) + b"\0" * 4 + ext6(17)  # hbh, do, rt0, do
    six("ipv6_no_service", ipv6_l4(C, V, 17, udp6, 6, chain, first_nh=0))
    six("ipv6_no_service", ipv6_l4(C, V, 17, udp6, 6, b"".join(ext6(60) for _ in range(7)) + ext6(17),
                                   first_nh=60))                                 # 8 headers: the most taken
    rt4 = struct.pack("!BBBB", 17, 0, 4, 0) + b"\0" * 4                           # SRH, segments left 0
    six("ipv6_no_service", ipv6_l4(C, V, 17, udp6, 6, rt4, first_nh=43))
    six("ipv6_ext_chain_too_long", ipv6_bytes(C, V, 60, b"".join(ext6(60) for _ in range(9))))
    six("ipv6_ext_chain_too_long", ipv6_bytes(C, V, 0, ext6(60) + b"".join(ext6(60) for _ in range(8)) + udp6))
    six("ipv6_bad_ext_header", ipv6_bytes(C, V, 43, ext6(17, 2, 1) + udp6))        # routing, segs left
    six("ipv6_bad_ext_header", ipv6_bytes(C, V, 43, struct.pack("!BBBB", 17, 2, 2, 1) + b"\0" * 20 + udp6))  # type 2
    six("ipv6_bad_ext_header", ipv6_bytes(C, V, 60, ext6(0) + udp6))              # hop-by-hop second
    six("ipv6_bad_ext_header", ipv6_bytes(C, V, 60, b"\x11\xc8" + b"\0" * 6))      # length > payload
    six("ipv6_bad_ext_header", ipv6_bytes(C, V, 60, ext6(60) + ext6(60)))         # chain runs past the end
    six("ipv6_bad_ext_header", ipv6_bytes(C, V, 60, ext6(60) + b"\x3c\x00\0\0"))  # 4 bytes of a header
    # -- fragments: only atomic ones (RFC 6946) are taken
    frag = lambda nh, off, more: struct.pack("!BBHI", nh, 0, off | more, 0x4711)
    six("ipv6_fragment", ipv6_bytes(C, V, 44, frag(17, 8, 0) + b"\0" * 16))     # not the first
    six("ipv6_fragment", ipv6_bytes(C, V, 44, frag(17, 0, 1) + udp6))           # first, more to come
    six("ipv6_fragment", ipv6_bytes(C, V, 44, frag(17, 16, 1) + b"\0" * 16))    # middle
    six("ipv6_fragment", ipv6_bytes(C, V, 60, ext6(44) + frag(6, 0, 1) + syn6))  # behind dest options
    six("ipv6_no_service", ipv6_l4(C, V, 17, udp6, 6, frag(17, 0, 0), first_nh=44))  # atomic
    # -- Neighbor Solicitations
    ns = lambda target, opts=None: struct.pack("!BBHI", 135, 0, 0, 0) + target + (
        b"\x01\x01" + s.me if opts is None else opts)
    group = lambda a: bytes.fromhex("ff0200000000000000000001ff") + a[13:]
    P = port_ip6
    # To vipd's MAC (a group MAC may not reach the af_packet socket).
    six("ndp_invalid", ipv6_l4(C, group(V), 58, ns(V), 2, hop=64))
    six("ndp_invalid", ipv6_l4(C, group(P), 58, ns(P), 2, hop=64))               # hop limit 64
    six("ndp_invalid", ipv6_l4(C, group(P), 58, ns(P), 2, hop=1))
    mc = bytes.fromhex("ff020000000000000000000000000001")
    six("ndp_invalid", ipv6_l4(C, group(mc), 58, ns(mc), 2, hop=255))            # multicast target
    six("ndp_invalid", ipv6_l4(C, group(P), 58, ns(P, b"\x01\x00" + s.me), 2, hop=255))   # option length 0
    six("ndp_invalid", ipv6_l4(C, group(P), 58, ns(P, b"\x01\x02" + s.me), 2, hop=255))   # option past the end
    six("ndp_invalid", ipv6_l4(C, group(P), 58, ns(P, b"\x01"), 2, hop=255))     # 1 byte of an option
    six("ndp_invalid", ipv6_l4(C, group(P), 58, ns(P)[:20], 2, hop=255))         # 20-byte NS
    b = bytearray(ipv6_l4(C, group(P), 58, ns(P), 2, hop=255)); b[42] ^= 0x5A
    six("ndp_invalid", bytes(b))                                                 # bad checksum
    six("ndp_invalid", ipv6_l4(b"\0" * 16, group(P), 58, ns(P), 2, hop=255))     # DAD with a link-layer option
    six("ndp_ignored", ipv6_l4(C, group(V), 58, ns(V), 2, hop=255))              # not our address
    six("ndp_ignored", ipv6_l4(C, group(P), 58, struct.pack("!BBHI", 133, 0, 0, 0), 2, hop=255))  # RS
    # -- ICMPv6 and others to addresses that are no VIP, and to the port address
    echo = lambda ident, seq=1: struct.pack("!BBHHH", 128, 0, 0, ident, seq) + b"vipd6"
    six("ipv6_no_service", ipv6_l4(C, V, 58, echo(0x5700), 2))                   # echo to no VIP
    six("ipv6_no_service", ipv6_l4(C, bytes.fromhex("fd00001000960000000000000000dead"), 58, echo(0x5701), 2))
    b = bytearray(ipv6_l4(C, P, 58, echo(0x5702), 2)); b[42] ^= 0x5A
    six("icmp6_bad_checksum", bytes(b))                                          # echo, bad checksum
    six("local_unhandled", ipv6_l4(C, P, 58, struct.pack("!BBHI", 1, 4, 0, 0) + b"\0" * 40, 2))  # an error
    six("local_unhandled", ipv6_l4(C, P, 6, syn6, 16))                           # TCP to the port address
    # -- valid: answered (uncounted: they are no drops)
    probes = {}
    raw = lambda name, b, want: (s.sock.send(s.eth(0x86DD, b)), probes.__setitem__(name, want))
    raw("ns", ipv6_l4(C, group(P), 58, ns(P), 2, hop=255), (136, P))
    raw("ns_unicast", ipv6_l4(C, P, 58, ns(P), 2, hop=255), (136, P))
    raw("echo", ipv6_l4(C, P, 58, echo(0x5710), 2), (129, 0x5710))
    raw("echo_ext_chain", ipv6_l4(C, P, 58, echo(0x5711), 2, ext6(60) + ext6(44) + frag(58, 0, 0), first_nh=0),
        (129, 0x5711))
    return probes


def answered6(frames, probes):
    """Which probes of ipv6_set got their answer from vipd among `frames`."""
    got = {}
    for name, (t, m) in probes.items():
        ok = False
        for r in frames:
            d = bytes(r[IPv6].payload) if IPv6 in r else b""
            if not d or r[IPv6].nh != 58 or len(d) < (24 if t == 136 else 8) or d[0] != t:
                continue
            if (t == 136 and d[8:24] == m) or (t == 129 and struct.unpack("!H", d[4:6])[0] == m):
                ok = True
        got[name] = ok
    return got


def client_set(a):
    s = Sender(a.iface, a.mac)
    src, vip = a.src, a.vip
    port = iter(range(61000, 62000))
    nxt = lambda: next(port)
    probes = {}

    def probe(name, p):
        probes[name] = p
        return p

    # Answers to the probes (sent from ports 61000-61999), ICMP from vipd.
    bpf = "ip and dst host %s and (src host %s or src host %s) and (icmp or dst portrange 61000-61999)" % (
        src, vip, a.port_ip)
    from_vipd = lambda p: IP in p and p[IP].dst == src and p[IP].src in (vip, a.port_ip)
    sn = sniffer(a.iface, from_vipd, bpf)
    sn6 = sniffer(a.iface, lambda p: IPv6 in p, "ip6 and dst host fd00:10::10 and icmp6")
    syn = lambda **kw: bytearray(ipv4_bytes(tcp(src, vip, nxt(), 8080, **kw)))
    # -- truncated frames and headers
    s.send("truncated", s.eth(0x0800, b""))                       # Ethernet header only
    s.send("truncated", s.eth(0x0800, bytes(syn())[:10]))          # half an IPv4 header
    s.send("truncated", s.eth(0x0806, b"\x00\x01\x08\x00"))        # ARP, 4 bytes
    # -- bad IHL, version, lengths
    b = syn(); b[0] = 0x44; s.ip("bad_ip_header", fix_ip(b, 20))   # IHL 4
    b = syn(); b[0] = 0x4F; s.ip("bad_ip_header", fix_ip(b, 20))   # IHL 15 > total length
    b = syn(); b[0] = 0x65; s.ip("bad_ip_header", fix_ip(b, 20))   # version 6 in IPv4
    b = syn(); set16(b, 2, 400); s.ip("bad_ip_header", fix_ip(b))  # total length > frame
    b = syn(); set16(b, 2, 12); s.ip("bad_ip_header", fix_ip(b))   # total length < 20
    b = syn(); b[10] ^= 0x5A; s.ip("bad_ip_checksum", b)
    b = syn(); b[10] ^= 0x01; s.ip("bad_ip_checksum", b)
    b = syn(); b[32] = 0x30; s.ip("bad_l4_header", b)              # TCP data offset 3
    b = syn(); b[32] = 0xF0; s.ip("bad_l4_header", b)              # data offset 15 > segment
    b = syn()[:32]; set16(b, 2, 32); s.ip("bad_l4_header", fix_ip(b))  # 12 bytes of TCP
    u = bytearray(ipv4_bytes(IP(src=src, dst=vip) / UDP(sport=nxt(), dport=9053) / b"ping\n"))
    b = bytearray(u); set16(b, 24, 200); s.ip("bad_l4_header", b)   # UDP length > datagram
    b = bytearray(u); set16(b, 24, 4); s.ip("bad_l4_header", b)     # UDP length < 8
    b = bytearray(u[:26]); set16(b, 2, 26); s.ip("bad_l4_header", fix_ip(b))  # 6 bytes of UDP
    b = bytearray(ipv4_bytes(IP(src=src, dst=vip) / ICMP()))[:24]
    set16(b, 2, 24); s.ip("bad_l4_header", fix_ip(b))                # 4 bytes of ICMP
    # -- not IPv4, not for us
    probes6 = ipv6_set(s, socket.inet_pton(socket.AF_INET6, a.port_ip6))
    s.send("unsupported_ethertype", s.eth(0x88CC, b"\x02\x07\x04" + b"\0" * 40))
    s.send("unsupported_ethertype", s.eth(0x8100, b"\x00\x05\x08\x00" + bytes(syn())))
    s.ip("not_for_us", syn(), dst=b"\x02\x00\x00\xee\xee\xee")  # another unicast MAC
    s.ip("not_for_us", syn(), dst=b"\xff" * 6)                  # IPv4 to broadcast
    arp = bytearray(bytes(ARP(op=1, hwsrc=s.me, psrc=src, pdst="10.0.0.77")))
    s.send("arp_ignored", s.eth(0x0806, bytes(arp), b"\xff" * 6))  # for somebody else
    arp[0:2] = b"\x00\x06"
    s.send("arp_ignored", s.eth(0x0806, bytes(arp), b"\xff" * 6))  # hardware type 6
    # -- TTL, protocols, ports, addresses
    s.ip("ttl_exceeded", bytes(tcp(src, vip, nxt(), 8080, ttl=1)))
    s.ip("ttl_exceeded", bytes(IP(src=src, dst=vip, ttl=0) / UDP(sport=nxt(), dport=9053) / b"x"))
    s.ip("@answered", bytes(probe("ttl2", tcp(src, vip, nxt(), 8080, ttl=2))))
    s.ip("unsupported_protocol", bytes(IP(src=src, dst=vip, proto=47) / Raw(b"\0" * 8)))
    s.ip("vip_port_not_served", bytes(tcp(src, vip, nxt(), 9999)))
    s.ip("vip_port_not_served", bytes(IP(src=src, dst=vip) / UDP(sport=nxt(), dport=8080) / b"x"))
    s.ip("no_service", bytes(tcp(src, a.other_ip, nxt(), 8080)))
    s.ip("no_service", bytes(IP(src=src, dst=a.other_ip) / ICMP()))
    s.ip("local_unhandled", bytes(tcp(src, a.port_ip, nxt(), 22)))
    # -- TCP flags that start nothing (rr service: dropped without a connection)
    for fl in ("", "F", "R", "A", "FPU", "SR", "SF", "SFPU", "PA"):
        s.ip("no_connection", bytes(tcp(src, vip, nxt(), 8080, flags=fl)))
    # -- IP options: forwarded as they are
    opts = [IPOption_NOP(), IPOption_NOP(), IPOption_NOP(), IPOption_EOL()]
    s.ip("@answered", bytes(probe("ip_options_udp", IP(src=src, dst=vip, options=opts) /
                                  UDP(sport=nxt(), dport=9053) / b"ping\n")))
    s.ip("@answered", bytes(probe("ip_options_tcp", tcp(src, vip, nxt(), 8080, options=opts))))
    # -- fragments: lone first and later fragments, and a whole fragmented datagram
    lone = IP(src=src, dst=vip, id=4242, flags="MF") / TCP(sport=nxt(), dport=8080, flags="S")
    s.ip("@lb_reasm", bytes(lone))
    s.ip("@lb_reasm", bytes(IP(src=src, dst=vip, id=4243, frag=8, proto=6) / Raw(b"\0" * 16)))
    whole = probe("fragmented_udp", IP(src=src, dst=vip, id=4244) / UDP(sport=nxt(), dport=9053) / (b"ping\n" * 16))
    frags = fragment(whole, fragsize=32)
    for f in frags:
        s.ip("@answered", bytes(f))
    s.sent["@answered"] -= len(frags) - 1
    # -- checksums vipd does not verify (NAT keeps them bad): the receiver drops
    b = bytearray(ipv4_bytes(tcp(src, vip, nxt(), 8080))); b[36] ^= 0x5A
    s.ip("@pod_tcp_csum", b)
    b = bytearray(ipv4_bytes(IP(src=src, dst=vip) / UDP(sport=nxt(), dport=9053) / b"ping\n")); b[26] ^= 0x5A
    s.ip("@pod_udp_csum", b)
    b = bytearray(ipv4_bytes(IP(src=src, dst=vip) / ICMP(id=0x7777, seq=1) / b"bad-checksum")); b[22] ^= 0x5A
    s.ip("@client_icmp_csum", b)
    # -- ICMP errors: quoting no flow, too short, from the wrong side, to a port address
    quote = IP(src=vip, dst=src, ttl=63) / TCP(sport=8080, dport=nxt(), flags="SA")
    s.ip("icmp_error_no_conn", bytes(IP(src=src, dst=vip) / ICMP(type=3, code=4, nexthopmtu=1200) / quote))
    s.ip("icmp_error_no_conn", bytes(IP(src=src, dst=vip) / ICMP(type=11, code=0) / quote))
    s.ip("bad_l4_header", bytes(IP(src=src, dst=vip) / ICMP(type=3, code=3) / bytes(quote)[:24]))
    s.ip("local_unhandled", bytes(IP(src=src, dst=a.port_ip) / ICMP(type=3, code=3) / quote))
    if a.local_addr:  # fnat: "from the pod side", but arriving on the client port
        q = IP(src=a.local_addr, dst="10.244.1.15", ttl=63) / TCP(sport=1024, dport=8080, flags="S")
        s.ip("icmp_error_no_conn", bytes(IP(src=src, dst=a.local_addr) / ICMP(type=3, code=4, nexthopmtu=1000) / q))
    time.sleep(3.0)  # answers (the machine may be loaded)
    got = sn.stop() or []
    answered_v6 = answered6(sn6.stop() or [], probes6)

    def answered_in(frames, p):
        l4 = UDP if UDP in p else TCP
        return any(l4 in r and r[l4].dport == p[l4].sport and r[IP].src == vip for r in frames)

    answered = {name: answered_in(got, p) for name, p in probes.items()}
    # The lab's links can lose a packet under load (seen: one probe's answer
    # missing, with no vipd drop reason): an unanswered probe is sent once
    # more, from a new port, and "resent" names it. A vipd that does not
    # forward such packets fails both times.
    resent = sorted(n for n, ok in answered.items() if not ok)
    if resent:
        sn2 = sniffer(a.iface, from_vipd, bpf)
        again = {}
        for name in resent:
            p = probes[name].copy()
            l4 = UDP if UDP in p else TCP
            p[l4].sport = nxt()
            del p[IP].chksum
            del p[l4].chksum
            again[name] = p
            if name == "fragmented_udp":
                p[IP].id = 4245
                for f in fragment(p, fragsize=32):
                    s.ip("@resent", bytes(f))
            else:
                s.ip("@resent", bytes(p))
        time.sleep(3.0)
        got2 = sn2.stop() or []
        for name, p in again.items():
            answered[name] = answered_in(got2, p)
        got = list(got) + list(got2)
    te = sum(1 for r in got if ICMP in r and r[ICMP].type == 11)
    bad_echo = sum(1 for r in got if ICMP in r and r[ICMP].type == 0 and r[ICMP].id == 0x7777 and
                   csum(bytes(r[ICMP])) != 0)
    print(json.dumps({"sent": s.sent, "answered": answered, "answered6": answered_v6, "resent": resent, "time_exceeded_seen": te,
                      "bad_echo_reply_seen": bad_echo}), flush=True)
    return 0


def pod_set(a):
    s = Sender(a.iface, a.mac)
    pod, to = a.pod_ip, a.reply_to
    port = iter(range(62000, 63000))
    nxt = lambda: next(port)
    for fl in ("SA", "A", "R", "FA", "PA"):  # replies that match no flow
        s.ip("no_service", bytes(IP(src=pod, dst=to) / TCP(sport=8080, dport=nxt(), flags=fl, seq=5, ack=7)))
    s.ip("no_service", bytes(IP(src=pod, dst=to) / UDP(sport=9053, dport=nxt()) / b"pod\n"))
    s.ip("no_service", bytes(IP(src=pod, dst=a.client_ip) / ICMP()))  # echo request to a client
    s.ip("ttl_exceeded", bytes(IP(src=pod, dst=to, ttl=1) / TCP(sport=8080, dport=nxt(), flags="SA")))
    q = IP(src=to, dst=pod, ttl=63) / UDP(sport=nxt(), dport=9053) / b"ping\n"
    s.ip("icmp_error_no_conn", bytes(IP(src=pod, dst=to) / ICMP(type=3, code=4, nexthopmtu=1200) / q))
    s.ip("icmp_error_no_conn", bytes(IP(src=pod, dst=to) / ICMP(type=3, code=3) /
                                     (IP(src=to, dst=pod, ttl=63, frag=8, proto=17) / Raw(b"\0" * 8))))
    b = bytearray(bytes(IP(src=pod, dst=to) / UDP(sport=9053, dport=nxt()) / b"x")); b[11] ^= 0x33
    s.ip("bad_ip_checksum", b)
    s.send("truncated", s.eth(0x0800, b"\x45\x00\x00"))
    # A well-formed IPv6 packet (not forwarded yet: ipv6_no_service): the lab's bridge (multicast snooping) drops a
    # malformed one without counting it.
    s.send("ipv6_no_service", s.eth(0x86DD, bytes(IPv6(src="fe80::1", dst="fe80::2") / UDP(sport=1, dport=2))))
    s.ip("unsupported_protocol", bytes(IP(src=pod, dst=to, proto=132) / Raw(b"\0" * 12)))
    print(json.dumps({"sent": s.sent}), flush=True)
    return 0


def parse_icmp_error(raw):
    """Fields of an ICMP error in IPv4 bytes `raw`, every checksum checked."""
    ihl = (raw[0] & 0x0F) * 4
    tot = struct.unpack("!H", raw[2:4])[0]
    icmp = raw[ihl:tot]
    q = icmp[8:]
    qihl = (q[0] & 0x0F) * 4
    l4 = q[qihl:]
    return {
        "src": socket.inet_ntoa(raw[12:16]), "dst": socket.inet_ntoa(raw[16:20]), "ttl": raw[8],
        "type": icmp[0], "code": icmp[1], "mtu": struct.unpack("!H", icmp[6:8])[0],
        "ip_csum_ok": csum(raw[:ihl]) == 0, "icmp_csum_ok": csum(icmp) == 0,
        "inner_ip_csum_ok": csum(q[:qihl]) == 0, "inner_proto": q[9],
        "inner_src": socket.inet_ntoa(q[12:16]), "inner_dst": socket.inet_ntoa(q[16:20]),
        "inner_sport": struct.unpack("!H", l4[0:2])[0], "inner_dport": struct.unpack("!H", l4[2:4])[0],
        "inner_l4_csum": struct.unpack("!H", l4[6:8])[0] if q[9] == 17 else None,
    }


def icmp_client(a):
    host, port = a.target
    sn = sniffer("eth0", lambda p: IP in p and (ICMP in p or (UDP in p and p[UDP].dport == port)),
                 "ip and (icmp or (udp and dst port %d))" % port)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(3)
    s.connect((host, port))
    s.send(b"ping\n")
    reply = s.recv(2048).split(b"\n")[0].decode(errors="replace")
    cport = s.getsockname()[1]
    print(json.dumps({"cport": cport, "reply": reply}), flush=True)
    end = time.monotonic() + a.max_time
    while not os.path.exists(a.go) and time.monotonic() < end:
        time.sleep(0.05)
    time.sleep(1.0)
    got = sn.stop() or []
    sent_csum = [r[UDP].chksum for r in got if UDP in r and r[IP].src != host and r[UDP].sport == cport]
    errors = [parse_icmp_error(bytes(r[IP])) for r in got if ICMP in r and r[ICMP].type in (3, 11, 12)]
    try:
        mtu = s.getsockopt(socket.IPPROTO_IP, IP_MTU)
    except OSError as e:
        mtu = "error: %s" % e
    print(json.dumps({"errors": errors, "sent_udp_csum": sent_csum[0] if sent_csum else None,
                      "ip_mtu": mtu}), flush=True)
    s.close()
    print("closed", flush=True)
    return 0


def raw_send(ip_bytes, dst):
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    try:
        s.sendto(ip_bytes, (dst, 0))
    finally:
        s.close()


def icmp_pod_fragneeded(a):
    qsrc, qport = a.quoted
    q = IP(src=qsrc, dst=a.pod_ip, ttl=63, id=1) / UDP(sport=qport, dport=a.port) / b"ping\n"
    err = IP(src=a.pod_ip, dst=qsrc) / ICMP(type=3, code=4, nexthopmtu=a.mtu) / q
    raw_send(bytes(err), qsrc)
    print(json.dumps({"sent": 1, "quoted_udp_csum": IP(bytes(q))[UDP].chksum}), flush=True)
    return 0


def icmp_pod_late_reply(a):
    qsrc, qport = a.quoted
    sn = sniffer(a.iface, lambda p: IP in p and ICMP in p and p[IP].dst == a.pod_ip and p[ICMP].type in (3, 11, 12),
                 "icmp and dst host %s" % a.pod_ip)
    d = IP(src=a.pod_ip, dst=qsrc) / UDP(sport=a.port, dport=qport) / b"late\n"
    raw_send(bytes(d), qsrc)
    end = time.monotonic() + a.timeout
    while time.monotonic() < end and not sn.results:
        time.sleep(0.05)
    time.sleep(0.2)
    got = sn.stop() or []
    print(json.dumps({"sent_udp_csum": IP(bytes(d))[UDP].chksum,
                      "errors": [parse_icmp_error(bytes(r[IP])) for r in got]}), flush=True)
    return 0


def synflood(a):
    s, me = l2sock(a.iface)
    dst = bytes.fromhex(a.mac.replace(":", ""))
    vip, vport = a.target
    template = bytearray(bytes(Ether(dst=dst, src=me) / IP(src="0.0.0.0", dst=vip, id=0) /
                               TCP(sport=1, dport=vport, flags="S", seq=12345, window=1024)))
    n_addr = a.last - a.first + 1
    start = time.monotonic()
    sent = 0
    per_tick = max(1, a.pps // 100)
    tick = start
    while sent < a.count and time.monotonic() - start < a.max_time:
        for _ in range(min(per_tick, a.count - sent)):
            src = "%s.%d" % (a.net, a.first + sent % n_addr)
            sport = 1024 + sent // n_addr
            f = bytearray(template)
            f[26:30] = socket.inet_aton(src)
            set16(f, 24, 0)
            set16(f, 24, csum(bytes(f[14:34])))
            set16(f, 34, sport)
            set16(f, 50, 0)
            ph = f[26:34] + b"\x00\x06" + struct.pack("!H", len(f) - 34)
            set16(f, 50, csum(bytes(ph) + bytes(f[34:])))
            s.send(bytes(f))
            sent += 1
        tick += 0.01
        delay = tick - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    print(json.dumps({"sent": sent, "elapsed_s": round(time.monotonic() - start, 3)}), flush=True)
    return 0


def host_port(text):
    h, _, p = text.rpartition(":")
    return h, int(p)


def main():
    ap = argparse.ArgumentParser(description="hostile lab traffic (see module doc)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("client")
    for k in ("iface", "mac", "src", "vip"):
        c.add_argument(k)
    c.add_argument("--other-ip", default="10.96.0.222", help="an address in the VIP range that is no VIP")
    c.add_argument("--port-ip", default="10.0.0.1", help="vipd's address on the client port")
    c.add_argument("--port-ip6", default="fd00:10::1", help="vipd's IPv6 address on the client port (--port-ipv6)")
    c.add_argument("--local-addr", help="fnat: a local address (errors sent to it from the wrong side)")
    p = sub.add_parser("pod")
    for k in ("iface", "mac", "pod_ip", "reply_to"):
        p.add_argument(k)
    p.add_argument("--client-ip", default="10.0.0.2")
    i = sub.add_parser("icmp-client")
    i.add_argument("target", type=host_port)
    i.add_argument("--go", required=True)
    i.add_argument("--max-time", type=float, default=30.0)
    f = sub.add_parser("icmp-pod-fragneeded")
    f.add_argument("pod_ip")
    f.add_argument("quoted", type=host_port)
    f.add_argument("port", type=int)
    f.add_argument("--mtu", type=int, default=1200)
    lr = sub.add_parser("icmp-pod-late-reply")
    lr.add_argument("iface")
    lr.add_argument("pod_ip")
    lr.add_argument("quoted", type=host_port)
    lr.add_argument("port", type=int)
    lr.add_argument("--timeout", type=float, default=3.0)
    sf = sub.add_parser("synflood")
    sf.add_argument("iface")
    sf.add_argument("mac")
    sf.add_argument("net")
    sf.add_argument("target", type=host_port)
    sf.add_argument("--count", type=int, required=True)
    sf.add_argument("--first", type=int, default=10)
    sf.add_argument("--last", type=int, default=250)
    sf.add_argument("--pps", type=int, default=5000)
    sf.add_argument("--max-time", type=float, default=20.0)
    a = ap.parse_args()
    if a.cmd == "synflood":
        if not (0 < a.count <= 200000 and 0 < a.pps <= 50000 and 0 < a.max_time <= 120 and
                1 <= a.first <= a.last <= 254):
            ap.error("synflood: count 1..200000, pps 1..50000, max-time <= 120, 1 <= first <= last <= 254")
        return synflood(a)
    return {"client": client_set, "pod": pod_set, "icmp-client": icmp_client,
            "icmp-pod-fragneeded": icmp_pod_fragneeded,
            "icmp-pod-late-reply": icmp_pod_late_reply}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
