// Thread: worker. No allocation, no locks, no exceptions.
#include "dataplane/fastpath/ipv6.h"

#include <cstring>

#include "dataplane/fastpath/bytes.h"
#include "dataplane/fastpath/checksum.h"

namespace vipd::dp {
namespace {

using namespace bytes;  // rd16/wr16/raw16/... (bytes.h)

constexpr uint8_t kAllNodes[16] = {0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
constexpr uint8_t kNaRouter = 0x80, kNaSolicited = 0x40, kNaOverride = 0x20;
constexpr uint8_t kOptSourceLl = 1, kOptTargetLl = 2;
// An NS or NA with one link-layer address option: 8 + 16 + 8 bytes.
constexpr size_t kNdLen = 32;

bool fail(Parsed6* p, DropReason r) {
  p->drop = r;
  return false;
}

// The one's-complement sum of the IPv6 pseudo header (RFC 8200 8.1).
uint32_t pseudo_sum(const uint8_t src[16], const uint8_t dst[16], uint8_t proto, size_t len) {
  uint8_t tail[8] = {};
  wr32(tail, static_cast<uint32_t>(len));
  tail[7] = proto;
  uint32_t s = csum_partial(src, 16, 0);
  s = csum_partial(dst, 16, s);
  return csum_partial(tail, sizeof tail, s);
}

void swap_eth(uint8_t* f) {
  uint8_t tmp[6];
  std::memcpy(tmp, f, 6);
  std::memcpy(f, f + 6, 6);
  std::memcpy(f + 6, tmp, 6);
}

// A fixed IPv6 header (traffic class and flow label 0).
void write_ip6(uint8_t* ip, uint16_t payload_len, uint8_t next, uint8_t hop_limit, const uint8_t src[16],
               const uint8_t dst[16]) {
  wr32(ip, 0x60000000u);
  wr16(ip + 4, payload_len);
  ip[6] = next;
  ip[7] = hop_limit;
  std::memmove(ip + 8, src, 16);
  std::memmove(ip + 24, dst, 16);
}

bool is_solicited_node(const uint8_t a[16]) {
  static constexpr uint8_t kPrefix[13] = {0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff};
  return std::memcmp(a, kPrefix, sizeof kPrefix) == 0;
}

// The L4 checks after the extension chain.
bool parse_l4(const uint8_t* l4, Parsed6* p) {
  switch (p->proto) {
    case kProtoTcp: {
      if (p->l4_len < 20) return fail(p, kBadL4Header);
      const unsigned doff = (l4[12] >> 4) * 4u;
      if (doff < 20 || doff > p->l4_len) return fail(p, kBadL4Header);
      p->sport = rd16(l4);
      p->dport = rd16(l4 + 2);
      p->tcp_flags = l4[13];
      return true;
    }
    case kProtoUdp: {
      if (p->l4_len < 8) return fail(p, kBadL4Header);
      const uint16_t ulen = rd16(l4 + 4);
      // RFC 8200 8.1: a zero UDP checksum is not allowed over IPv6.
      if (ulen < 8 || ulen > p->l4_len || raw16(l4 + 6) == 0) return fail(p, kBadL4Header);
      p->sport = rd16(l4);
      p->dport = rd16(l4 + 2);
      return true;
    }
    case kProtoIcmp6:
      if (p->l4_len < 4) return fail(p, kBadL4Header);
      p->dport = rd16(l4);
      p->sport = p->l4_len >= 8 ? rd16(l4 + 4) : 0;
      return true;
    default:
      return true;  // the caller decides
  }
}

}  // namespace

bool parse_ipv6(const uint8_t* f, size_t len, Parsed6* out) noexcept {
  *out = Parsed6{};
  Parsed6* p = out;
  if (len < kEthLen + kIp6Len) return fail(p, kTruncated);
  const uint8_t* ip = f + kEthLen;
  if ((ip[0] >> 4) != 6) return fail(p, kIpv6BadHeader);
  const uint16_t plen = rd16(ip + 4);
  // 0: a jumbogram (RFC 2675), never on Ethernet.
  if (plen == 0 || kEthLen + kIp6Len + plen > len) return fail(p, kIpv6BadHeader);
  p->payload_len = plen;
  p->hop_limit = ip[7];
  std::memcpy(p->src, ip + 8, 16);
  std::memcpy(p->dst, ip + 24, 16);
  // A multicast source is never valid (RFC 4291 2.7); answering one (an NA
  // or echo reply) would send a unicast answer to a group.
  if (ip[8] == 0xff) return fail(p, kIpv6BadHeader);
  uint8_t next = ip[6];
  size_t off = kEthLen + kIp6Len;
  const size_t end = off + plen;
  unsigned n = 0;
  // Each header moves `off` forward by at least 8 bytes and at most
  // kMaxExtHeaders are taken: the loop ends within the payload.
  while (next == kIp6HopByHop || next == kIp6Routing || next == kIp6DestOpts || next == kIp6Fragment) {
    if (n == kMaxExtHeaders) return fail(p, kIpv6ExtChainTooLong);
    // Hop-by-hop options only right after the fixed header (RFC 8200 4.1).
    if (next == kIp6HopByHop && n != 0) return fail(p, kIpv6BadExtHeader);
    if (end - off < 8) return fail(p, kIpv6BadExtHeader);
    const uint8_t* h = f + off;
    size_t hlen = 8;
    if (next == kIp6Fragment) {
      // Not reassembled (as IPVS): a fragment other than an atomic one
      // (offset 0, no more fragments; RFC 6946) is dropped.
      const uint16_t offm = rd16(h + 2);
      if ((offm & 0xfff8) != 0 || (offm & 1) != 0) return fail(p, kIpv6Fragment);
      p->atomic_fragment = true;
    } else {
      hlen = (size_t{h[1]} + 1) * 8;
      if (hlen > end - off) return fail(p, kIpv6BadExtHeader);
      // vipd is never an intermediate hop of a source route.
      if (next == kIp6Routing && h[3] != 0) return fail(p, kIpv6BadExtHeader);
    }
    next = h[0];
    off += hlen;
    ++n;
  }
  p->n_ext = static_cast<uint8_t>(n);
  p->proto = next;
  p->l4_off = static_cast<uint16_t>(off);
  p->l4_len = static_cast<uint16_t>(end - off);
  return parse_l4(f + off, p);
}

uint16_t l4_checksum6(const uint8_t src[16], const uint8_t dst[16], uint8_t proto, const void* l4,
                      size_t len, size_t check_offset) noexcept {
  return l4_checksum_finish(pseudo_sum(src, dst, proto, len), proto, l4, len, check_offset);
}

bool l4_checksum6_ok(const uint8_t src[16], const uint8_t dst[16], uint8_t proto, const void* l4,
                     size_t len) noexcept {
  return csum_fold(csum_partial(l4, len, pseudo_sum(src, dst, proto, len))) == 0;
}

uint64_t csum_delta16(const uint8_t o[16], const uint8_t n[16]) noexcept {
  uint64_t d = 0;
  for (int i = 0; i < 16; i += 4) d += uint64_t{~raw32(o + i)} + raw32(n + i);
  return d;
}

void rewrite6_l3l4(uint8_t* f, const Parsed6& p, const uint8_t new_src[16], uint16_t new_sport,
                   const uint8_t new_dst[16], uint16_t new_dport) noexcept {
  uint8_t* ip = f + p.l3_off;
  uint8_t* l4 = f + p.l4_off;
  uint64_t delta = csum_delta16(ip + 8, new_src) + csum_delta16(ip + 24, new_dst);
  std::memmove(ip + 8, new_src, 16);
  std::memmove(ip + 24, new_dst, 16);
  ip[7] = static_cast<uint8_t>(ip[7] - 1);
  const uint32_t old_ports = raw32(l4);
  uint8_t pb[4];
  wr16(pb, new_sport);
  wr16(pb + 2, new_dport);
  const uint32_t new_ports = raw32(pb);
  put_raw32(l4, new_ports);
  delta += uint64_t{~old_ports} + new_ports;
  const size_t coff = p.proto == kProtoTcp ? 16 : 6;
  uint16_t c = packet_detail::csum_apply64(raw16(l4 + coff), delta);
  if (p.proto == kProtoUdp && c == 0) c = 0xffff;
  put_raw16(l4 + coff, c);
}

bool ip6_is_unspecified(const uint8_t a[16]) noexcept {
  uint8_t any = 0;
  for (int i = 0; i < 16; ++i) any |= a[i];
  return any == 0;
}

bool ip6_equal(const uint8_t a[16], const uint8_t b[16]) noexcept { return std::memcmp(a, b, 16) == 0; }

void ip6_solicited_node(const uint8_t t[16], uint8_t out[16]) noexcept {
  static constexpr uint8_t kPrefix[13] = {0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff};
  uint8_t tail[3] = {t[13], t[14], t[15]};
  std::memcpy(out, kPrefix, sizeof kPrefix);
  std::memcpy(out + 13, tail, 3);
}

void ip6_multicast_mac(const uint8_t g[16], uint8_t mac[6]) noexcept {
  mac[0] = 0x33;
  mac[1] = 0x33;
  std::memcpy(mac + 2, g + 12, 4);
}

DropReason parse_nd(const uint8_t* f, const Parsed6& p, NdInfo* out) noexcept {
  *out = NdInfo{};
  if (p.proto != kProtoIcmp6 || p.hop_limit != 255 || p.l4_len < 24) return kNdpInvalid;
  const uint8_t* m = f + p.l4_off;
  if ((m[0] != kNdNeighborSolicit && m[0] != kNdNeighborAdvert) || m[1] != 0) return kNdpInvalid;
  if (!l4_checksum6_ok(p.src, p.dst, kProtoIcmp6, m, p.l4_len)) return kNdpInvalid;
  out->type = m[0];
  if (out->type == kNdNeighborAdvert) out->flags = m[4] & (kNaRouter | kNaSolicited | kNaOverride);
  std::memcpy(out->target, m + 8, 16);
  if (ip6_is_multicast(out->target)) return kNdpInvalid;
  const uint8_t want = out->type == kNdNeighborSolicit ? kOptSourceLl : kOptTargetLl;
  // Options: each at least 8 bytes, so at most l4_len / 8 of them.
  for (size_t off = 24; off < p.l4_len;) {
    if (p.l4_len - off < 2) return kNdpInvalid;
    const size_t olen = size_t{m[off + 1]} * 8;
    if (olen == 0 || olen > p.l4_len - off) return kNdpInvalid;
    if (m[off] == want) {
      out->has_lladdr = true;
      std::memcpy(out->lladdr, m + off + 2, 6);
    }
    off += olen;
  }
  if (out->type == kNdNeighborSolicit && ip6_is_unspecified(p.src)) {
    // Duplicate address detection (RFC 4861 7.1.1).
    if (!is_solicited_node(p.dst) || out->has_lladdr) return kNdpInvalid;
  }
  if (out->type == kNdNeighborAdvert && ip6_is_multicast(p.dst) && (out->flags & kNaSolicited))
    return kNdpInvalid;
  return kNumDropReasons;
}

size_t make_nd_advert(uint8_t* f, const Parsed6& p, const NdInfo& nd, const uint8_t our_mac[6],
                      const uint8_t our_addr[16]) noexcept {
  const bool dad = ip6_is_unspecified(p.src);
  uint8_t to_mac[6];
  uint8_t to[16];
  if (dad) {
    std::memcpy(to, kAllNodes, 16);
    ip6_multicast_mac(kAllNodes, to_mac);
  } else {
    std::memcpy(to, p.src, 16);
    std::memcpy(to_mac, nd.has_lladdr ? nd.lladdr : f + 6, 6);
  }
  uint8_t target[16];
  std::memcpy(target, nd.target, 16);
  std::memcpy(f, to_mac, 6);
  std::memcpy(f + 6, our_mac, 6);
  wr16(f + 12, kEtherTypeIpv6);
  write_ip6(f + kEthLen, kNdLen, kProtoIcmp6, 255, our_addr, to);
  uint8_t* m = f + kEthLen + kIp6Len;
  std::memset(m, 0, kNdLen);
  m[0] = kNdNeighborAdvert;
  m[4] = dad ? kNaOverride : static_cast<uint8_t>(kNaSolicited | kNaOverride);
  std::memcpy(m + 8, target, 16);
  m[24] = kOptTargetLl;
  m[25] = 1;
  std::memcpy(m + 26, our_mac, 6);
  put_raw16(m + 2, l4_checksum6(our_addr, to, kProtoIcmp6, m, kNdLen, 2));
  return kEthLen + kIp6Len + kNdLen;
}

size_t make_nd_solicit(uint8_t* f, const uint8_t our_mac[6], const uint8_t our_addr[16],
                       const uint8_t target[16]) noexcept {
  uint8_t group[16];
  ip6_solicited_node(target, group);
  ip6_multicast_mac(group, f);
  std::memcpy(f + 6, our_mac, 6);
  wr16(f + 12, kEtherTypeIpv6);
  write_ip6(f + kEthLen, kNdLen, kProtoIcmp6, 255, our_addr, group);
  uint8_t* m = f + kEthLen + kIp6Len;
  std::memset(m, 0, kNdLen);
  m[0] = kNdNeighborSolicit;
  std::memcpy(m + 8, target, 16);
  m[24] = kOptSourceLl;
  m[25] = 1;
  std::memcpy(m + 26, our_mac, 6);
  put_raw16(m + 2, l4_checksum6(our_addr, group, kProtoIcmp6, m, kNdLen, 2));
  return kEthLen + kIp6Len + kNdLen;
}

bool make_icmp6_echo_reply(uint8_t* f, const Parsed6& p, size_t* new_len) noexcept {
  if (p.proto != kProtoIcmp6 || p.l4_len < 8) return false;
  const uint8_t* req = f + p.l4_off;
  if (req[0] != kIcmp6EchoRequest || req[1] != 0) return false;
  swap_eth(f);
  uint8_t* m = f + kEthLen + kIp6Len;
  if (p.l4_off != kEthLen + kIp6Len) std::memmove(m, req, p.l4_len);  // drop extension headers
  write_ip6(f + kEthLen, p.l4_len, kProtoIcmp6, 64, p.dst, p.src);
  m[0] = kIcmp6EchoReply;
  // From scratch (the request's was verified by the caller): the message
  // may have moved, and the sum can never be 0 here (the pseudo header is not).
  put_raw16(m + 2, l4_checksum6(p.dst, p.src, kProtoIcmp6, m, p.l4_len, 2));
  *new_len = kEthLen + kIp6Len + p.l4_len;
  return true;
}

size_t make_tcp_rst6_reply(uint8_t* f, const Parsed6& p) noexcept {
  uint8_t tcp[20];
  make_tcp_rst_header(tcp, f + p.l4_off, p.l4_len, p.sport, p.dport, p.tcp_flags);
  swap_eth(f);
  uint8_t* ip = f + kEthLen;
  write_ip6(ip, 20, kProtoTcp, 64, p.dst, p.src);
  std::memcpy(ip + kIp6Len, tcp, 20);
  bytes::put_raw16(ip + kIp6Len + 16, l4_checksum6(p.dst, p.src, kProtoTcp, ip + kIp6Len, 20, 16));
  return kEthLen + kIp6Len + 20;
}

size_t make_icmp6_error(uint8_t* f, const Parsed6& p, size_t old_l3_len, const uint8_t from[16],
                        uint8_t type, uint8_t code, uint32_t param) noexcept {
  uint8_t to[16], src[16];
  std::memcpy(to, p.src, 16);
  std::memcpy(src, from, 16);
  std::memcpy(f, f + kIcmp6ErrorRoom, kEthLen);
  swap_eth(f);
  const size_t room = kIp6MinMtu - kIcmp6ErrorRoom;
  const size_t quoted = old_l3_len < room ? old_l3_len : room;
  // The quoted packet is already in place, right after the new ICMPv6 header.
  uint8_t* m = f + kEthLen + kIp6Len;
  m[0] = type;
  m[1] = code;
  wr16(m + 2, 0);
  wr32(m + 4, param);
  write_ip6(f + kEthLen, static_cast<uint16_t>(8 + quoted), kProtoIcmp6, 64, src, to);
  put_raw16(m + 2, l4_checksum6(src, to, kProtoIcmp6, m, 8 + quoted, 2));
  return kEthLen + kIp6Len + 8 + quoted;
}

}  // namespace vipd::dp
