// IPv6 frame builders and an independent checksum reference for the IPv6
// suites (ipv6_test.cc, worker_ipv6_test.cc). The reference sums 16-bit words
// of a pseudo header + message copied into one buffer, folding only at the
// end: written from RFC 1071 / RFC 8200 8.1, not from checksum.cc.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "tests/unit/dataplane/test_util.h"

namespace vipd::dp::test {

using Addr6 = std::array<uint8_t, 16>;
using Bytes = std::vector<uint8_t>;

inline Addr6 a6(std::initializer_list<uint16_t> groups_then_last) {
  // a6({0xfd00, 0x10, 0, 0, 0, 0, 0, 0x1}): eight 16-bit groups.
  Addr6 a{};
  size_t i = 0;
  for (uint16_t g : groups_then_last) {
    a[i++] = static_cast<uint8_t>(g >> 8);
    a[i++] = static_cast<uint8_t>(g);
  }
  return a;
}

// ~(sum of 16-bit words) over pseudo header and message, the message's
// checksum field (at check_off) counted as zero. Host-order result.
inline uint16_t ref_cksum6(const Addr6& src, const Addr6& dst, uint8_t proto, const Bytes& msg,
                           size_t check_off) {
  Bytes b(src.begin(), src.end());
  b.insert(b.end(), dst.begin(), dst.end());
  const uint32_t len = static_cast<uint32_t>(msg.size());
  for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(len >> s));
  b.insert(b.end(), {0, 0, 0, proto});
  const size_t at = b.size();
  b.insert(b.end(), msg.begin(), msg.end());
  if (check_off + 2 <= msg.size()) b[at + check_off] = b[at + check_off + 1] = 0;
  if (b.size() % 2) b.push_back(0);
  uint64_t sum = 0;
  for (size_t i = 0; i < b.size(); i += 2) sum += (uint32_t{b[i]} << 8) | b[i + 1];
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum & 0xffff);
}

// Whether a message's stored checksum is what the reference computes.
inline bool cksum6_matches(const Addr6& src, const Addr6& dst, uint8_t proto, const Bytes& msg,
                           size_t check_off) {
  uint16_t want = ref_cksum6(src, dst, proto, msg, check_off);
  if (proto == 17 && want == 0) want = 0xffff;
  return ((uint16_t{msg[check_off]} << 8) | msg[check_off + 1]) == want;
}

// An Ethernet + IPv6 frame: `ext` (already chained: the caller sets each
// extension header's next-header byte) between the fixed header and `l4`.
struct Frame6 {
  MacAddr dmac{0x02, 0x00, 0x00, 0x00, 0xa0, 0x00};
  MacAddr smac{0x02, 0xc1, 0, 0, 0, 0x10};
  Addr6 src{}, dst{};
  uint8_t next = 0;  // the fixed header's next header
  uint8_t hop_limit = 64;
  Bytes ext, l4;
  int plen_delta = 0;  // added to the correct payload length (hostile frames)
  size_t pad = 0;      // Ethernet padding after the packet
};

inline Bytes build6(const Frame6& s) {
  Bytes f(s.dmac.begin(), s.dmac.end());
  f.insert(f.end(), s.smac.begin(), s.smac.end());
  f.insert(f.end(), {0x86, 0xdd});
  const int plen = static_cast<int>(s.ext.size() + s.l4.size()) + s.plen_delta;
  f.insert(f.end(), {0x60, 0, 0, 0, static_cast<uint8_t>(plen >> 8), static_cast<uint8_t>(plen), s.next,
                     s.hop_limit});
  f.insert(f.end(), s.src.begin(), s.src.end());
  f.insert(f.end(), s.dst.begin(), s.dst.end());
  f.insert(f.end(), s.ext.begin(), s.ext.end());
  f.insert(f.end(), s.l4.begin(), s.l4.end());
  f.insert(f.end(), s.pad, 0);
  return f;
}

// An options-type extension header (hop-by-hop / destination options /
// routing) of 8 * (hdr_len + 1) bytes, the options all Pad1; routing: type 0,
// segments left in byte 3.
inline Bytes ext_hdr(uint8_t next, uint8_t hdr_len, uint8_t seg_left = 0) {
  Bytes h(8 * (size_t{hdr_len} + 1), 0);
  h[0] = next;
  h[1] = hdr_len;
  h[3] = seg_left;  // routing: segments left; options: Pad1 (0) bytes
  return h;
}
inline Bytes frag_hdr(uint8_t next, uint16_t offset_bytes, bool more, uint32_t id = 0x1234) {
  const uint16_t v = static_cast<uint16_t>((offset_bytes & 0xfff8) | (more ? 1 : 0));
  return {next, 0, static_cast<uint8_t>(v >> 8), static_cast<uint8_t>(v), static_cast<uint8_t>(id >> 24),
          static_cast<uint8_t>(id >> 16), static_cast<uint8_t>(id >> 8), static_cast<uint8_t>(id)};
}

// Fills in the L4 checksum of a built frame (reference implementation).
inline void fix_cksum6(Bytes& f, size_t l4_off, uint8_t proto, size_t check_off) {
  Addr6 src, dst;
  std::copy(f.begin() + 22, f.begin() + 38, src.begin());
  std::copy(f.begin() + 38, f.begin() + 54, dst.begin());
  const size_t plen = (size_t{f[18]} << 8) | f[19];
  Bytes msg(f.begin() + static_cast<long>(l4_off), f.begin() + 54 + static_cast<long>(plen));
  uint16_t c = ref_cksum6(src, dst, proto, msg, check_off);
  if (proto == 17 && c == 0) c = 0xffff;
  f[l4_off + check_off] = static_cast<uint8_t>(c >> 8);
  f[l4_off + check_off + 1] = static_cast<uint8_t>(c);
}

inline Bytes tcp6(uint16_t sport, uint16_t dport, uint8_t flags, size_t payload = 0) {
  Bytes t(20 + payload, 0);
  t[0] = static_cast<uint8_t>(sport >> 8), t[1] = static_cast<uint8_t>(sport);
  t[2] = static_cast<uint8_t>(dport >> 8), t[3] = static_cast<uint8_t>(dport);
  t[4] = 0, t[5] = 0, t[6] = 0x03, t[7] = 0xe8;  // seq 1000
  t[12] = 5 << 4;
  t[13] = flags;
  t[14] = 0xff, t[15] = 0xff;
  for (size_t i = 0; i < payload; ++i) t[20 + i] = static_cast<uint8_t>(i * 7 + 1);
  return t;
}
inline Bytes udp6(uint16_t sport, uint16_t dport, size_t payload = 0) {
  Bytes u(8 + payload, 0);
  u[0] = static_cast<uint8_t>(sport >> 8), u[1] = static_cast<uint8_t>(sport);
  u[2] = static_cast<uint8_t>(dport >> 8), u[3] = static_cast<uint8_t>(dport);
  u[4] = static_cast<uint8_t>(u.size() >> 8), u[5] = static_cast<uint8_t>(u.size());
  u[6] = 0x12, u[7] = 0x34;  // placeholder checksum (non-zero)
  for (size_t i = 0; i < payload; ++i) u[8 + i] = static_cast<uint8_t>(i * 13 + 5);
  return u;
}
inline Bytes echo6(uint16_t id, uint16_t seq, size_t payload = 8) {
  Bytes e(8 + payload, 0);
  e[0] = 128;
  e[4] = static_cast<uint8_t>(id >> 8), e[5] = static_cast<uint8_t>(id);
  e[6] = static_cast<uint8_t>(seq >> 8), e[7] = static_cast<uint8_t>(seq);
  for (size_t i = 0; i < payload; ++i) e[8 + i] = static_cast<uint8_t>(0xa0 + i);
  return e;
}
// A Neighbor Solicitation for `target`, with a source link-layer option
// unless sll is nullptr.
inline Bytes ns6(const Addr6& target, const MacAddr* sll) {
  Bytes m(24, 0);
  m[0] = 135;
  std::copy(target.begin(), target.end(), m.begin() + 8);
  if (sll) {
    m.insert(m.end(), {1, 1});
    m.insert(m.end(), sll->begin(), sll->end());
  }
  return m;
}
inline Addr6 sol_node(const Addr6& t) {
  Addr6 g = a6({0xff02, 0, 0, 0, 0, 1, 0xff00, 0});
  g[13] = t[13], g[14] = t[14], g[15] = t[15];
  return g;
}
inline MacAddr mcast_mac(const Addr6& g) { return {0x33, 0x33, g[12], g[13], g[14], g[15]}; }

}  // namespace vipd::dp::test
