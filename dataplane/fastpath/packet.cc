// Thread: worker.
#include "dataplane/fastpath/packet.h"

#include <cstring>

#include "dataplane/fastpath/bytes.h"
#include "dataplane/fastpath/checksum.h"

namespace vipd::dp {
namespace {

using namespace bytes;  // rd16/wr16/raw16/... (bytes.h)
// Host order -> the raw (memory order) view of the big-endian value.
inline uint32_t be32(uint32_t v) {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  return __builtin_bswap32(v);
#else
  return v;
#endif
}

// The checksum field `check_raw` after changes whose one's-complement
// deltas (~old + new per word, any word size) sum to `delta` (< 2^40).
// End-around-carry folds: bit for bit what summing 16-bit words gives
// (csum_apply), zero only when every term is.
inline uint16_t csum_apply64(uint16_t check_raw, uint64_t delta) {
  uint64_t s = uint64_t{static_cast<uint16_t>(~check_raw)} + delta;
  s = (s & 0xffffffffu) + (s >> 32);
  s = (s & 0xffffffffu) + (s >> 32);
  uint32_t t = static_cast<uint32_t>(s);
  t = (t & 0xffff) + (t >> 16);
  t = (t & 0xffff) + (t >> 16);
  return static_cast<uint16_t>(~t);
}

// The IPv4 header checksum verifies (the one's-complement sum of the header
// is 0xffff). The usual 20-byte header as five 32-bit words; the result is
// the same as csum_fold(csum_partial(ip, ihl, 0)) == 0.
inline bool ipv4_checksum_ok(const uint8_t* ip, unsigned ihl) {
  if (ihl != 20) return csum_fold(csum_partial(ip, ihl, 0)) == 0;
  uint32_t w[5];
  std::memcpy(w, ip, 20);
  uint64_t s = uint64_t{w[0]} + w[1] + w[2] + w[3] + w[4];
  s = (s & 0xffffffffu) + (s >> 32);
  s = (s & 0xffffffffu) + (s >> 32);
  uint32_t t = static_cast<uint32_t>(s);
  t = (t & 0xffff) + (t >> 16);
  t = (t & 0xffff) + (t >> 16);
  return t == 0xffff;
}

inline Parsed drop(Parsed p, DropReason r) {
  p.kind = FrameKind::kDrop;
  p.drop = r;
  return p;
}

void swap_eth(uint8_t* frame) {
  uint8_t tmp[6];
  std::memcpy(tmp, frame, 6);
  std::memcpy(frame, frame + 6, 6);
  std::memcpy(frame + 6, tmp, 6);
}

void write_ipv4_header(uint8_t* ip, uint16_t total_len, uint8_t proto, uint32_t src,
                       uint32_t dst) {
  ip[0] = 0x45;
  ip[1] = 0;
  wr16(ip + 2, total_len);
  wr16(ip + 4, 0);       // id
  wr16(ip + 6, 0x4000);  // DF
  ip[8] = 64;
  ip[9] = proto;
  wr16(ip + 10, 0);
  wr32(ip + 12, src);
  wr32(ip + 16, dst);
  put_raw16(ip + 10, ipv4_header_checksum(ip, 20));
}

}  // namespace

Parsed parse_frame(const uint8_t* f, size_t len) noexcept {
  Parsed p;
  if (len < kEthLen) return drop(p, kTruncated);
  uint16_t et = rd16(f + 12);
  if (et == kEtherTypeArp) {
    p.kind = FrameKind::kArp;
    if (len < kEthLen + 28) return drop(p, kTruncated);
    return p;
  }
  if (et != kEtherTypeIpv4) return drop(p, kBadEthertype);
  if (len < kEthLen + 20) return drop(p, kTruncated);
  const uint8_t* ip = f + kEthLen;
  if ((ip[0] >> 4) != 4) return drop(p, kBadIpHeader);
  unsigned ihl = (ip[0] & 0x0f) * 4u;
  if (ihl < 20) return drop(p, kBadIpHeader);
  uint16_t total = rd16(ip + 2);
  if (total < ihl || kEthLen + size_t{total} > len) return drop(p, kBadIpHeader);
  if (kEthLen + size_t{ihl} > len) return drop(p, kTruncated);
  if (!ipv4_checksum_ok(ip, ihl)) return drop(p, kBadIpChecksum);
  uint16_t frag = rd16(ip + 6);
  if ((frag & 0x2000) || (frag & 0x1fff)) return drop(p, kFragment);
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
      if (p.l4_len < 20) return drop(p, kBadL4Header);
      unsigned doff = (l4[12] >> 4) * 4u;
      if (doff < 20 || doff > p.l4_len) return drop(p, kBadL4Header);
      p.sport = rd16(l4);
      p.dport = rd16(l4 + 2);
      p.tcp_flags = l4[13];
      break;
    }
    case kProtoUdp: {
      if (p.l4_len < 8) return drop(p, kBadL4Header);
      uint16_t ulen = rd16(l4 + 4);
      if (ulen < 8 || ulen > p.l4_len) return drop(p, kBadL4Header);
      p.sport = rd16(l4);
      p.dport = rd16(l4 + 2);
      break;
    }
    case kProtoIcmp: {
      if (p.l4_len < 8) return drop(p, kBadL4Header);
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

void rewrite_l3l4(uint8_t* f, const Parsed& p, uint32_t new_src, uint16_t new_sport,
                  uint32_t new_dst, uint16_t new_dport) noexcept {
  uint8_t* ip = f + p.l3_off;
  uint8_t* l4 = f + p.l4_off;
  // Everything in raw (memory order) words, built in registers; the
  // one's-complement deltas are summed in 32-bit words (RFC 1624 eqn. 3).
  const uint32_t old_src = raw32(ip + 12), old_dst = raw32(ip + 16);
  const uint32_t nsrc = be32(new_src), ndst = be32(new_dst);
  put_raw32(ip + 12, nsrc);
  put_raw32(ip + 16, ndst);
  // The address change enters both checksums (the L4 one through the pseudo
  // header): summed once, applied twice.
  const uint64_t addr_delta = uint64_t{~old_src} + uint64_t{~old_dst} + nsrc + ndst;
  // IPv4 header: addresses and TTL (the TTL shares a word with the protocol).
  uint8_t tw[2];
  std::memcpy(tw, ip + 8, 2);
  const uint16_t old_tw = raw16(tw);
  tw[0] = static_cast<uint8_t>(tw[0] - 1);
  const uint16_t new_tw = raw16(tw);
  std::memcpy(ip + 8, tw, 2);
  put_raw16(ip + 10, csum_apply64(raw16(ip + 10), addr_delta + static_cast<uint16_t>(~old_tw) + new_tw));

  const uint32_t old_ports = raw32(l4);
  uint8_t pb[4];
  wr16(pb, new_sport);
  wr16(pb + 2, new_dport);
  const uint32_t new_ports = raw32(pb);
  put_raw32(l4, new_ports);
  const size_t coff = p.proto == kProtoTcp ? 16 : 6;
  uint16_t c = raw16(l4 + coff);
  if (p.proto == kProtoUdp && c == 0) return;  // no UDP checksum: keep none
  c = csum_apply64(c, addr_delta + uint64_t{~old_ports} + new_ports);
  if (p.proto == kProtoUdp && c == 0) c = 0xffff;
  put_raw16(l4 + coff, c);
}

size_t make_tcp_rst_reply(uint8_t* f, const Parsed& p) noexcept {
  swap_eth(f);
  uint8_t* ip = f + kEthLen;
  // Rebuild a plain 20-byte IPv4 header and a 20-byte TCP header after it.
  const uint8_t* old_l4 = f + p.l4_off;
  uint32_t seq = rd32(old_l4 + 4);
  uint32_t ack = rd32(old_l4 + 8);
  unsigned doff = (old_l4[12] >> 4) * 4u;
  uint32_t payload = p.l4_len - doff;
  uint32_t seg_len = payload + ((p.tcp_flags & kTcpSyn) ? 1 : 0) + ((p.tcp_flags & kTcpFin) ? 1 : 0);
  uint8_t* tcp = ip + 20;
  uint8_t out[20] = {};
  wr16(out, p.dport);
  wr16(out + 2, p.sport);
  if (p.tcp_flags & kTcpAck) {
    wr32(out + 4, ack);
    wr32(out + 8, 0);
    out[13] = kTcpRst;
  } else {
    wr32(out + 4, 0);
    wr32(out + 8, seq + seg_len);
    out[13] = kTcpRst | kTcpAck;
  }
  out[12] = 5 << 4;
  std::memcpy(tcp, out, 20);
  write_ipv4_header(ip, 40, kProtoTcp, p.dst, p.src);
  uint32_t dst_be = raw32(ip + 16), src_be = raw32(ip + 12);
  put_raw16(tcp + 16, l4_checksum(src_be, dst_be, kProtoTcp, tcp, 20, 16));
  return kEthLen + 40;
}

size_t make_icmp_unreach(uint8_t* f, const Parsed& p, uint32_t from, uint8_t code) noexcept {
  uint8_t* old = f + 28;
  std::memcpy(f, old, kEthLen);
  swap_eth(f);
  const size_t ihl = p.l4_off - p.l3_off;
  const size_t quoted = ihl + (p.l4_len < 8 ? p.l4_len : 8);
  // The quoted original IP header is already in place at f + 42.
  uint8_t* icmp = f + kEthLen + 20;
  icmp[0] = 3;
  icmp[1] = code;
  wr16(icmp + 2, 0);
  wr32(icmp + 4, 0);
  uint16_t c = csum_fold(csum_partial(icmp, 8 + quoted, 0));
  wr16(icmp + 2, c);
  write_ipv4_header(f + kEthLen, static_cast<uint16_t>(20 + 8 + quoted), kProtoIcmp, from, p.src);
  return kEthLen + 20 + 8 + quoted;
}

bool make_icmp_echo_reply(uint8_t* f, const Parsed& p) noexcept {
  if (p.proto != kProtoIcmp) return false;
  uint8_t* icmp = f + p.l4_off;
  if (icmp[0] != 8 || icmp[1] != 0) return false;
  swap_eth(f);
  uint8_t* ip = f + p.l3_off;
  uint8_t tmp[4];
  std::memcpy(tmp, ip + 12, 4);
  std::memcpy(ip + 12, ip + 16, 4);
  std::memcpy(ip + 16, tmp, 4);
  ip[8] = 64;
  wr16(ip + 10, 0);
  put_raw16(ip + 10, ipv4_header_checksum(ip, p.l4_off - p.l3_off));
  const uint16_t old_word = raw16(icmp);
  icmp[0] = 0;
  uint16_t c = csum_replace2(raw16(icmp + 2), old_word, raw16(icmp));
  // The incremental update gives 0x0000 where a reply of all zero bytes
  // needs 0xffff (receivers reject 0x0000 there). Found by tests/fuzz/fuzz_packet.
  if (c == 0) {
    bool all_zero = true;
    for (size_t i = 4; i < p.l4_len && all_zero; ++i) all_zero = icmp[i] == 0;
    if (all_zero) c = 0xffff;
  }
  put_raw16(icmp + 2, c);
  return true;
}

bool parse_arp(const uint8_t* f, size_t len, ArpInfo* out) noexcept {
  if (len < kEthLen + 28) return false;
  const uint8_t* a = f + kEthLen;
  if (rd16(a) != 1 || rd16(a + 2) != kEtherTypeIpv4 || a[4] != 6 || a[5] != 4) return false;
  out->op = rd16(a + 6);
  std::memcpy(out->sha, a + 8, 6);
  out->spa = rd32(a + 14);
  out->tpa = rd32(a + 24);
  return out->op == 1 || out->op == 2;
}

size_t make_arp_reply(uint8_t* f, const uint8_t our_mac[6], uint32_t our_ip) noexcept {
  uint8_t* a = f + kEthLen;
  uint8_t req_mac[6];
  uint8_t req_ip[4];
  std::memcpy(req_mac, a + 8, 6);
  std::memcpy(req_ip, a + 14, 4);
  std::memcpy(f, req_mac, 6);
  std::memcpy(f + 6, our_mac, 6);
  wr16(a + 6, 2);
  std::memcpy(a + 8, our_mac, 6);
  wr32(a + 14, our_ip);
  std::memcpy(a + 18, req_mac, 6);
  std::memcpy(a + 24, req_ip, 4);
  return kEthLen + 28;
}

size_t make_arp_request(uint8_t* f, const uint8_t our_mac[6], uint32_t our_ip,
                        uint32_t target_ip) noexcept {
  std::memset(f, 0xff, 6);
  std::memcpy(f + 6, our_mac, 6);
  wr16(f + 12, kEtherTypeArp);
  uint8_t* a = f + kEthLen;
  wr16(a, 1);
  wr16(a + 2, kEtherTypeIpv4);
  a[4] = 6;
  a[5] = 4;
  wr16(a + 6, 1);
  std::memcpy(a + 8, our_mac, 6);
  wr32(a + 14, our_ip);
  std::memset(a + 18, 0, 6);
  wr32(a + 24, target_ip);
  return kEthLen + 28;
}

}  // namespace vipd::dp
