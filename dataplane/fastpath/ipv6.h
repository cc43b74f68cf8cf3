// Thread: worker (pure functions over one frame; also used by tests).
// The IPv6 packet layer of the fast path: header and extension-chain parsing
// with validation, checksums over the IPv6 pseudo header (from scratch and
// incremental), Neighbor Discovery (RFC 4861: NS validation, NA and NS
// builders), ICMPv6 echo replies and ICMPv6 error messages. No allocation, no
// locks, no exceptions; every loop is bounded by a constant or the frame.
//
// What the worker does with it today (worker.cc, docs/architecture.md "IPv6"):
// answers NS and echo requests for a port's IPv6 address and drops every
// other IPv6 packet with a counted reason. IPv6 VIP forwarding is not there
// yet; rewrite6_l3l4 and make_icmp6_error are the pieces it will use.
#pragma once

#include <cstddef>
#include <cstdint>

#include "dataplane/fastpath/drop_reasons.h"
#include "dataplane/fastpath/packet.h"

namespace vipd::dp {

constexpr uint16_t kEtherTypeIpv6 = kEtherTypeIpv6Frame;
constexpr uint8_t kProtoIcmp6 = 58;
constexpr size_t kIp6Len = 40;
// The IPv6 minimum MTU: an ICMPv6 error is at most this long (RFC 4443 2.4).
constexpr size_t kIp6MinMtu = 1280;
// Extension headers skipped before the L4 header, at most (a longer chain is
// dropped as ipv6_ext_chain_too_long). Real traffic has 0-2.
constexpr unsigned kMaxExtHeaders = 8;

// Extension header types parse_ipv6 walks (RFC 8200 4.1).
constexpr uint8_t kIp6HopByHop = 0, kIp6Routing = 43, kIp6Fragment = 44, kIp6DestOpts = 60;

// ICMPv6 types (RFC 4443, RFC 4861).
constexpr uint8_t kIcmp6DestUnreach = 1, kIcmp6PacketTooBig = 2, kIcmp6TimeExceeded = 3,
                  kIcmp6ParamProblem = 4, kIcmp6EchoRequest = 128, kIcmp6EchoReply = 129,
                  kNdRouterSolicit = 133, kNdRouterAdvert = 134, kNdNeighborSolicit = 135,
                  kNdNeighborAdvert = 136, kNdRedirect = 137;

// Result of parse_ipv6. Addresses as on the wire; ports in host order.
struct Parsed6 {
  DropReason drop = kTruncated;  // valid when parse_ipv6 returned false
  uint16_t l3_off = kEthLen;
  uint16_t l4_off = 0;
  uint16_t payload_len = 0;  // the IPv6 header's payload length
  uint16_t l4_len = 0;       // bytes from l4_off to the end of the payload
  uint8_t proto = 0;         // the last next-header value (the L4 protocol)
  uint8_t hop_limit = 0;
  uint8_t n_ext = 0;          // extension headers skipped
  bool atomic_fragment = false;  // a fragment header with offset 0 and M = 0
  uint8_t tcp_flags = 0;
  uint16_t sport = 0, dport = 0;  // ICMPv6: identifier in sport, type<<8|code in dport
  uint8_t src[16]{}, dst[16]{};
};

// Parses the IPv6 packet of an Ethernet frame (ethertype already 0x86dd).
// Checks: version, payload length (not 0, i.e. no jumbograms, and within the
// frame; trailing Ethernet padding is allowed), the extension chain (hop-by-
// hop only first, routing headers with segments left 0 only, each header
// within the payload, at most kMaxExtHeaders), fragments (only atomic ones
// pass: see docs/architecture.md "IPv6"), then TCP data offset, UDP length
// and checksum present, ICMPv6 at least 4 bytes. The hop limit is not
// checked here. False with out->drop set on a bad packet.
bool parse_ipv6(const uint8_t* frame, size_t len, Parsed6* out) noexcept;

// The Internet checksum of an upper-layer message over the IPv6 pseudo
// header (RFC 8200 8.1), in raw (memory) order, ready to store; the 2 bytes at
// `check_offset` are treated as 0 when check_offset + 2 <= len. UDP: 0 becomes
// 0xffff. TCP 16, UDP 6, ICMPv6 2.
uint16_t l4_checksum6(const uint8_t src[16], const uint8_t dst[16], uint8_t proto, const void* l4,
                      size_t len, size_t check_offset) noexcept;
// Whether the message verifies (sum over pseudo header and message is 0xffff).
bool l4_checksum6_ok(const uint8_t src[16], const uint8_t dst[16], uint8_t proto, const void* l4,
                     size_t len) noexcept;
// The one's-complement delta (~old + new, in 32-bit raw words) of a 16-byte
// address change, for csum_apply64-style folding (< 2^35: sum a few).
uint64_t csum_delta16(const uint8_t old_addr[16], const uint8_t new_addr[16]) noexcept;

// The NAT rewrite for IPv6 TCP/UDP: new addresses and ports (ports host
// order), the L4 checksum updated incrementally (IPv6 has no header checksum;
// a UDP checksum never becomes 0), hop limit decremented.
void rewrite6_l3l4(uint8_t* frame, const Parsed6& p, const uint8_t new_src[16], uint16_t new_sport,
                   const uint8_t new_dst[16], uint16_t new_dport) noexcept;

// Address classes.
inline bool ip6_is_multicast(const uint8_t a[16]) { return a[0] == 0xff; }
bool ip6_is_unspecified(const uint8_t a[16]) noexcept;
bool ip6_equal(const uint8_t a[16], const uint8_t b[16]) noexcept;
// ff02::1:ffXX:XXXX for `target` (RFC 4291 2.7.1), and its Ethernet group
// address 33:33:ff:XX:XX:XX (RFC 2464 7).
void ip6_solicited_node(const uint8_t target[16], uint8_t out[16]) noexcept;
void ip6_multicast_mac(const uint8_t group[16], uint8_t mac[6]) noexcept;

// A Neighbor Solicitation or Advertisement that passed RFC 4861 7.1
// validation: hop limit 255, code 0, ICMPv6 checksum, length >= 24, target
// not multicast, every option of non-zero length within the message; NS from
// the unspecified address: to a solicited-node group and without a source
// link-layer option; NA to a multicast group: S flag clear.
struct NdInfo {
  uint8_t type = 0;   // 135 NS, 136 NA
  uint8_t flags = 0;  // NA: 0x80 router, 0x40 solicited, 0x20 override
  uint8_t target[16]{};
  bool has_lladdr = false;  // NS: source, NA: target link-layer address option
  uint8_t lladdr[6]{};
};
// kNumDropReasons when valid, else kNdpInvalid. `p` must be a parsed ICMPv6
// packet of type 135 or 136.
DropReason parse_nd(const uint8_t* frame, const Parsed6& p, NdInfo* out) noexcept;

// Turns a valid NS (`p`, `nd`) for `our_addr` into our Neighbor Advertisement
// in place: solicited and override set (to the all-nodes group with S clear
// when the NS came from ::), target link-layer option `our_mac`, hop limit
// 255, from our_addr. Ethernet: to the NS's source link-layer address (or
// the frame's source without one), from our_mac. The frame needs room for
// 86 bytes. Returns the new length (86).
size_t make_nd_advert(uint8_t* frame, const Parsed6& p, const NdInfo& nd, const uint8_t our_mac[6],
                      const uint8_t our_addr[16]) noexcept;

// Writes a multicast Neighbor Solicitation for `target` from `our_addr` into
// `frame` (>= 86 bytes): to the target's solicited-node group, with our
// source link-layer option. Returns the length (86).
size_t make_nd_solicit(uint8_t* frame, const uint8_t our_mac[6], const uint8_t our_addr[16],
                       const uint8_t target[16]) noexcept;

// ICMPv6 echo request -> echo reply in place: addresses and Ethernet
// addresses swapped, hop limit 64, extension headers removed (the ICMPv6
// message moves up to follow the fixed header), checksum updated. False if
// the packet is not an echo request (type 128, code 0). Returns the new frame
// length in *new_len.
bool make_icmp6_echo_reply(uint8_t* frame, const Parsed6& p, size_t* new_len) noexcept;

// Turns a TCP segment into the RST the receiver would send back, in place
// (as make_tcp_rst_reply for IPv4): addresses, ports and Ethernet addresses
// swapped, hop limit 64, no extension headers, a 20-byte TCP header (seq =
// the segment's ack when it has ACK, else RST+ACK acking it). The frame is
// at least that long (a parsed TCP segment). Returns the new length (74).
size_t make_tcp_rst6_reply(uint8_t* frame, const Parsed6& p) noexcept;

// Turns an IPv6 packet into an ICMPv6 error (`type`, `code`, the 32-bit
// `param`: the MTU for packet too big, the pointer for parameter problem, else
// 0) from `from` back to the packet's source, quoting as much of the
// offending packet (from its IPv6 header) as fits in kIp6MinMtu. Needs 48
// bytes of room in front of the frame: `frame` points to the new start, the
// old frame begins at frame + 48 (as make_icmp_unreach's 28 for IPv4).
// `old_l3_len`: bytes of the old frame from its IPv6 header on. Returns the
// new length.
constexpr size_t kIcmp6ErrorRoom = kIp6Len + 8;
size_t make_icmp6_error(uint8_t* frame, const Parsed6& p, size_t old_l3_len, const uint8_t from[16],
                        uint8_t type, uint8_t code, uint32_t param) noexcept;

}  // namespace vipd::dp
