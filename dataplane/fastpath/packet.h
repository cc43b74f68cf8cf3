// Thread: worker (pure functions over one frame; also used by tests).
// Header parsing with validation, NAT rewrite with incremental checksums, and
// in-place builders for the replies the dataplane originates (TCP RST, ICMP
// port unreachable, ICMP echo reply, ARP reply/request). No allocation, no
// locks, no exceptions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "dataplane/fastpath/drop_reasons.h"

namespace vipd::dp {

constexpr uint8_t kProtoIcmp = 1;
constexpr uint8_t kProtoTcp = 6;
constexpr uint8_t kProtoUdp = 17;
constexpr size_t kEthLen = 14;
constexpr uint16_t kEtherTypeIpv4 = 0x0800;
constexpr uint16_t kEtherTypeArp = 0x0806;
constexpr uint16_t kEtherTypeIpv6Frame = 0x86dd;  // ipv6.h parses these
// An IPv4 frame handed over by a peer gateway (docs/gateway.md, "Hand-over"):
// the IEEE 802 local experimental ethertype 1 in place of 0x0800, the rest
// unchanged. It marks the frame (never handed over again) and keeps it off
// the IPv4 path until the worker has counted it.
constexpr uint16_t kEtherTypeHandover = 0x88b5;

constexpr uint8_t kTcpFin = 0x01, kTcpSyn = 0x02, kTcpRst = 0x04, kTcpPsh = 0x08,
                  kTcpAck = 0x10;

// kIpv6: only the ethertype is known; the worker parses it (ipv6.h) off the
// IPv4 path.
enum class FrameKind : uint8_t { kDrop, kArp, kIpv4, kIpv6 };

// Result of parsing one Ethernet frame. Addresses and ports in HOST order.
struct Parsed {
  FrameKind kind = FrameKind::kDrop;
  DropReason drop = kTruncated;  // valid when kind == kDrop
  uint16_t l3_off = kEthLen;
  uint16_t l4_off = 0;
  uint16_t ip_total_len = 0;  // from the IPv4 header
  uint16_t l4_len = 0;        // ip_total_len - ihl
  uint8_t proto = 0;
  uint8_t tcp_flags = 0;
  uint8_t ttl = 0;
  uint32_t src = 0, dst = 0;
  uint16_t sport = 0, dport = 0;  // ICMP: id in sport, type<<8|code in dport
};

// Parses and validates an Ethernet frame of `len` bytes. IPv4: version, IHL,
// total length against the frame, header checksum, fragments (dropped),
// TCP data offset, UDP length. TTL is not checked here.
inline Parsed parse_frame(const uint8_t* frame, size_t len) noexcept;  // packet_inline.h

// parse_frame for the common frame alone: IPv4 with a 20-byte header, TCP or
// UDP, every check of parse_frame passing. Then `out` holds what parse_frame
// would return (every field written), *addrs the addresses as src | dst << 32
// and *ports the ports as sport | dport << 16 (host order: the flow key's
// words, flow_hash.h); true. Any other frame (or one that fails a check):
// false, nothing written; parse_frame gives its kind or drop reason.
inline bool parse_tcp_udp4(const uint8_t* frame, size_t len, Parsed& out, uint64_t* addrs,
                           uint32_t* ports) noexcept;  // packet_inline.h

// Rewrites addresses/ports of an IPv4 TCP/UDP packet (host-order values);
// updates L4 checksum incrementally (UDP checksum 0 stays 0), decrements TTL
// and updates the IPv4 checksum incrementally.
inline void rewrite_l3l4(uint8_t* frame, const Parsed& p, uint32_t new_src, uint16_t new_sport,
                         uint32_t new_dst, uint16_t new_dport) noexcept;  // packet_inline.h
// The same with the new values as they go into the frame (memory order):
// the addresses, and the ports as one word (source first).
inline void rewrite_l3l4_raw(uint8_t* frame, const Parsed& p, uint32_t new_src_raw, uint32_t new_dst_raw,
                             uint32_t new_ports_raw) noexcept;  // packet_inline.h
// The same for a packet the worker forwards, with what its callers know
// taken as given instead of tested: the IPv4 header right after the
// Ethernet header (parse_frame's: l3_off == kEthLen) and a TTL above 1
// (they drop TTL <= 1 first), so that the decrement never wraps.
inline void rewrite_l3l4_fwd(uint8_t* frame, const Parsed& p, uint32_t new_src_raw, uint32_t new_dst_raw,
                             uint32_t new_ports_raw) noexcept;  // packet_inline.h

// Turns a TCP packet into the RST the receiver would send back (addresses
// and ports swapped), in place. Returns the new frame length.
size_t make_tcp_rst_reply(uint8_t* frame, const Parsed& p) noexcept;
// The 20-byte TCP header of that RST (either family; checksum 0) for the
// segment at `l4` (l4_len bytes with its payload; ports and flags as
// parsed): seq = its ack when it has ACK, else RST+ACK acking it.
void make_tcp_rst_header(uint8_t out[20], const uint8_t* l4, uint32_t l4_len, uint16_t sport, uint16_t dport,
                         uint8_t flags) noexcept;

// Turns an IPv4 packet into an ICMP destination unreachable (type 3, `code`)
// from `from` (host order) back to its source, quoting the IP header + 8
// bytes. Needs 28 bytes of room in front of the frame's L3 header: the caller
// passes the frame start already moved 28 bytes earlier (`frame` points to the
// new start, the old frame begins at frame + 28). Returns the new length.
size_t make_icmp_unreach(uint8_t* frame, const Parsed& p, uint32_t from, uint8_t code) noexcept;

// ICMP echo request -> echo reply in place (addresses swapped). Returns false
// if the packet is not an echo request.
bool make_icmp_echo_reply(uint8_t* frame, const Parsed& p) noexcept;

// ARP (Ethernet/IPv4 only).
struct ArpInfo {
  uint16_t op = 0;  // 1 request, 2 reply
  uint8_t sha[6]{};
  uint32_t spa = 0;  // host order
  uint32_t tpa = 0;  // host order
};
bool parse_arp(const uint8_t* frame, size_t len, ArpInfo* out) noexcept;
// Turns a request into our reply in place (frame >= 42 bytes). Returns length.
size_t make_arp_reply(uint8_t* frame, const uint8_t our_mac[6], uint32_t our_ip) noexcept;
// Writes a broadcast ARP request into `frame` (>= 42 bytes). Returns length.
size_t make_arp_request(uint8_t* frame, const uint8_t our_mac[6], uint32_t our_ip,
                        uint32_t target_ip) noexcept;

}  // namespace vipd::dp

#include "dataplane/fastpath/packet_inline.h"  // parse_frame, rewrite_l3l4
