// Thread: worker. The per-packet parse and NAT rewrite, inline: they run on
// every forwarded packet, and as calls (the 32-byte Parsed returned through
// memory and copied twice more) they cost ~40 instructions per packet more
// (callgrind, section 5 of docs/benchmarks.md). Included by packet.h, which
// documents them.
#pragma once

#include <bit>
#include <cstddef>
#include <cstring>

#include "dataplane/fastpath/bytes.h"
#include "dataplane/fastpath/checksum.h"

namespace vipd::dp {
namespace packet_detail {

using namespace bytes;  // rd16/wr16/raw16/... (bytes.h)

// Host order -> the raw (memory order) view of the big-endian value.
inline uint32_t be32(uint32_t v) {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  return __builtin_bswap32(v);
#else
  return v;
#endif
}

// The raw word of the TTL and protocol bytes (`old`, memory order) with
// the TTL byte replaced by `ttl`.
inline uint16_t ttl_word(uint16_t old, uint8_t ttl) {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  return static_cast<uint16_t>((old & 0xff00) | ttl);
#else
  return static_cast<uint16_t>((old & 0x00ff) | (uint16_t{ttl} << 8));
#endif
}

// The raw (memory order) 32-bit word of two big-endian 16-bit ports, source
// first, built in a register.
inline uint32_t raw_ports(uint16_t sport, uint16_t dport) {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  return uint32_t{__builtin_bswap16(sport)} | (uint32_t{__builtin_bswap16(dport)} << 16);
#else
  return (uint32_t{sport} << 16) | dport;
#endif
}

// The checksum field `check_raw` after changes whose one's-complement
// deltas (~old + new per word, any word size) sum to `delta` (< 2^40).
// End-around-carry folds: bit for bit what summing 16-bit words gives
// (csum_apply), zero only when every term is.
// The end-around-carry sum of a 64-bit value's 16-bit words (0 only for 0):
// adding a word rotated by half its width leaves, in the upper half, the
// sum of the two halves plus the carry out of their sum, which is what
// folding twice ((x & low) + (x >> half), two times) gives, in half the
// instructions.
inline uint16_t fold64(uint64_t s) {
  s += (s >> 32) | (s << 32);
  uint32_t t = static_cast<uint32_t>(s >> 32);
  t += (t >> 16) | (t << 16);
  return static_cast<uint16_t>(t >> 16);
}

inline uint16_t csum_apply64(uint16_t check_raw, uint64_t delta) {
  return static_cast<uint16_t>(~fold64(uint64_t{static_cast<uint16_t>(~check_raw)} + delta));
}

// The IPv4 header checksum verifies (the one's-complement sum of the header
// is 0xffff). The usual 20-byte header as five 32-bit words; the result is
// the same as csum_fold(csum_partial(ip, ihl, 0)) == 0.
[[gnu::always_inline]] inline bool ipv4_checksum_ok(const uint8_t* ip, unsigned ihl) {
  if (ihl != 20) return csum_fold(csum_partial(ip, ihl, 0)) == 0;
  // Five loads straight from the frame (a 20-byte array copy would go
  // through the stack).
  return fold64(uint64_t{raw32(ip)} + raw32(ip + 4) + raw32(ip + 8) + raw32(ip + 12) + raw32(ip + 16)) == 0xffff;
}

inline Parsed drop_as(Parsed p, DropReason r) {
  p.kind = FrameKind::kDrop;
  p.drop = r;
  return p;
}

// The frames that are not IPv4, off the IPv4 path (one compare there).
inline Parsed parse_other(Parsed p, uint16_t et, size_t len) {
  if (et == kEtherTypeArp) {
    p.kind = FrameKind::kArp;
    if (len < kEthLen + 28) return drop_as(p, kTruncated);
    return p;
  }
  if (et == kEtherTypeIpv6Frame) {
    p.kind = FrameKind::kIpv6;
    return p;
  }
  return drop_as(p, kBadEthertype);
}

}  // namespace packet_detail

inline Parsed parse_frame(const uint8_t* f, size_t len) noexcept {
  using namespace packet_detail;
  Parsed p;
  if (len < kEthLen) return drop_as(p, kTruncated);
  uint16_t et = rd16(f + 12);
  if (et != kEtherTypeIpv4) return parse_other(p, et, len);
  if (len < kEthLen + 20) return drop_as(p, kTruncated);
  const uint8_t* ip = f + kEthLen;
  // Version 4 and a 20-byte header (almost every packet): one compare, and
  // the checksum of five words.
  const bool plain = ip[0] == 0x45;
  unsigned ihl = 20;
  if (!plain) [[unlikely]] {
    if ((ip[0] >> 4) != 4) return drop_as(p, kBadIpHeader);
    ihl = (ip[0] & 0x0f) * 4u;
    if (ihl < 20) return drop_as(p, kBadIpHeader);
  }
  uint16_t total = rd16(ip + 2);
  // (With ihl <= total and the total within the frame, so is the header.)
  if (total < ihl || kEthLen + size_t{total} > len) return drop_as(p, kBadIpHeader);
  if (!(plain ? ipv4_checksum_ok(ip, 20) : ipv4_checksum_ok(ip, ihl))) return drop_as(p, kBadIpChecksum);
  uint16_t frag = rd16(ip + 6);
  if (frag & 0x3fff) return drop_as(p, kFragment);  // more fragments, or an offset
  p.ip_total_len = total;
  p.l4_off = static_cast<uint16_t>(kEthLen + ihl);
  p.l4_len = static_cast<uint16_t>(total - ihl);
  p.ttl = ip[8];
  p.proto = ip[9];
  p.src = rd32(ip + 12);
  p.dst = rd32(ip + 16);
  const uint8_t* l4 = f + p.l4_off;
  switch (p.proto) {
    case kProtoTcp: {
      if (p.l4_len < 20) return drop_as(p, kBadL4Header);
      unsigned doff = (l4[12] >> 4) * 4u;
      if (doff < 20 || doff > p.l4_len) return drop_as(p, kBadL4Header);
      p.sport = rd16(l4);
      p.dport = rd16(l4 + 2);
      p.tcp_flags = l4[13];
      break;
    }
    case kProtoUdp: {
      if (p.l4_len < 8) return drop_as(p, kBadL4Header);
      uint16_t ulen = rd16(l4 + 4);
      if (ulen < 8 || ulen > p.l4_len) return drop_as(p, kBadL4Header);
      p.sport = rd16(l4);
      p.dport = rd16(l4 + 2);
      break;
    }
    case kProtoIcmp: {
      if (p.l4_len < 8) return drop_as(p, kBadL4Header);
      p.dport = rd16(l4);       // type, code
      p.sport = rd16(l4 + 4);   // identifier (echo)
      break;
    }
    default:
      break;  // the caller decides (only ICMP/TCP/UDP are handled)
  }
  p.kind = FrameKind::kIpv4;
  return p;
}

inline bool parse_tcp_udp4(const uint8_t* f, size_t len, Parsed& out, uint64_t* addrs,
                           uint32_t* ports) noexcept {
  using namespace packet_detail;
  static_assert(offsetof(Parsed, dst) == offsetof(Parsed, src) + 4 &&
                    offsetof(Parsed, dport) == offsetof(Parsed, sport) + 2,
                "the key's words are stored whole");
  static_assert(std::endian::native == std::endian::little, "the words are byte-swapped to host order");
  if (len < kEthLen + 20 || raw16(f + 12) != __builtin_bswap16(kEtherTypeIpv4)) return false;
  const uint8_t* ip = f + kEthLen;
  if (ip[0] != 0x45) return false;
  const uint16_t total = rd16(ip + 2);
  if (total < 20 || kEthLen + size_t{total} > len) return false;
  if (!ipv4_checksum_ok(ip, 20)) return false;
  if (rd16(ip + 6) & 0x3fff) return false;
  const uint8_t proto = ip[9];
  const uint16_t l4_len = static_cast<uint16_t>(total - 20);
  const uint8_t* l4 = ip + 20;
  uint8_t flags = 0;
  if (proto == kProtoTcp) {
    if (l4_len < 20) return false;
    const unsigned doff = (l4[12] >> 4) * 4u;
    if (doff < 20 || doff > l4_len) return false;
    flags = l4[13];
  } else if (proto == kProtoUdp) {
    if (l4_len < 8) return false;
    const uint16_t ulen = rd16(l4 + 4);
    if (ulen < 8 || ulen > l4_len) return false;
  } else {
    return false;
  }
  // The addresses as one word and the ports as another, each loaded once
  // and put in host order with one byte swap: src | dst << 32, sport |
  // dport << 16 (flow_hash.h's flow_word0 and the low half of flow_word1).
  uint64_t a;
  std::memcpy(&a, ip + 12, 8);
  a = std::rotl(__builtin_bswap64(a), 32);
  const uint32_t pp = std::rotl(__builtin_bswap32(raw32(l4)), 16);
  out.kind = FrameKind::kIpv4;
  out.drop = kTruncated;
  out.l3_off = kEthLen;
  out.l4_off = kEthLen + 20;
  out.ip_total_len = total;
  out.l4_len = l4_len;
  out.proto = proto;
  out.tcp_flags = flags;
  out.ttl = ip[8];
  std::memcpy(&out.src, &a, 8);
  std::memcpy(&out.sport, &pp, 4);
  *addrs = a;
  *ports = pp;
  return true;
}

inline void rewrite_l3l4(uint8_t* f, const Parsed& p, uint32_t new_src, uint16_t new_sport,
                         uint32_t new_dst, uint16_t new_dport) noexcept {
  using namespace packet_detail;
  rewrite_l3l4_raw(f, p, be32(new_src), be32(new_dst), raw_ports(new_sport, new_dport));
}

namespace packet_detail {

// rewrite_l3l4_raw, and with kFwd rewrite_l3l4_fwd: the IPv4 header at
// kEthLen and a TTL above 1 taken as given.
template <bool kFwd>
[[gnu::always_inline]] inline void rewrite_raw(uint8_t* f, const Parsed& p, uint32_t nsrc, uint32_t ndst,
                                               uint32_t new_ports) {
  uint8_t* ip = f + (kFwd ? size_t{kEthLen} : size_t{p.l3_off});
  uint8_t* l4 = f + p.l4_off;
  // Everything in raw (memory order) words, built in registers; the
  // one's-complement deltas are summed in 32-bit words (RFC 1624 eqn. 3).
  const uint32_t old_src = raw32(ip + 12), old_dst = raw32(ip + 16);
  put_raw32(ip + 12, nsrc);
  put_raw32(ip + 16, ndst);
  // The address change enters both checksums (the L4 one through the pseudo
  // header): summed once, applied twice.
  const uint64_t addr_delta = uint64_t{~old_src} + uint64_t{~old_dst} + nsrc + ndst;
  // IPv4 header: addresses and TTL. The TTL shares a word with the protocol;
  // with a TTL above 0 (the callers drop TTL <= 1 before) one less in its
  // byte is the word one less in the TTL's place, so the word's delta
  // ~old + new is a constant: 0xffff - 1 in the TTL's place. TTL 0 (wraps
  // to 255) takes the general form.
  const uint8_t old_ttl = ip[8];
  const uint8_t new_ttl = static_cast<uint8_t>(old_ttl - 1);
  ip[8] = new_ttl;
  uint64_t ttl_delta = static_cast<uint16_t>(~ttl_word(0, 1));  // 0xfffe little-endian, 0xfeff big
  if (!kFwd && old_ttl == 0) [[unlikely]] {
    const uint16_t new_tw = raw16(ip + 8);  // (the new TTL stored above)
    ttl_delta = uint64_t{static_cast<uint16_t>(~ttl_word(new_tw, old_ttl))} + new_tw;
  }
  put_raw16(ip + 10, csum_apply64(raw16(ip + 10), addr_delta + ttl_delta));

  const uint32_t old_ports = raw32(l4);
  put_raw32(l4, new_ports);
  const uint64_t l4_delta = addr_delta + uint64_t{~old_ports} + new_ports;
  // TCP (the common case) tests the protocol once; anything else is UDP here.
  if (p.proto == kProtoTcp) [[likely]] {
    put_raw16(l4 + 16, csum_apply64(raw16(l4 + 16), l4_delta));
    return;
  }
  uint16_t c = raw16(l4 + 6);
  if (c == 0) return;  // no UDP checksum: keep none
  c = csum_apply64(c, l4_delta);
  if (c == 0) c = 0xffff;
  put_raw16(l4 + 6, c);
}

}  // namespace packet_detail

inline void rewrite_l3l4_raw(uint8_t* f, const Parsed& p, uint32_t nsrc, uint32_t ndst, uint32_t new_ports) noexcept {
  packet_detail::rewrite_raw<false>(f, p, nsrc, ndst, new_ports);
}

inline void rewrite_l3l4_fwd(uint8_t* f, const Parsed& p, uint32_t nsrc, uint32_t ndst, uint32_t new_ports) noexcept {
  packet_detail::rewrite_raw<true>(f, p, nsrc, ndst, new_ports);
}

}  // namespace vipd::dp
