// Thread: any (pure functions on one frame). No allocation, no throw.
//
// The l3fwd baseline of benchmark 1 (bench/pipeline_bench.cc, phase
// "l3fwd"): what DPDK's l3fwd example does to every packet, less the route
// lookup (one port, one next hop): parse Ethernet/IPv4 with the RFC 1812
// sanity checks, rewrite both MACs, decrement the TTL and update the header
// checksum incrementally (RFC 1624 eqn. 3, end-around carry included, where
// l3fwd's `++hdr_checksum` is wrong for a checksum whose high byte is 0xFF).
// Header-only and free of DPDK so that the unit tests can check it byte by
// byte (tests/unit/dataplane/fastpath/l3fwd_baseline_test.cc).
#pragma once

#include <cstdint>
#include <cstring>

namespace vipd::bench {

enum class L3fwdVerdict : uint8_t {
  kForward,      // rewritten in place: send it
  kNotIpv4,      // ethertype is not IPv4 (or the frame is shorter than Ethernet)
  kBadHeader,    // RFC 1812 5.2.2: short, version != 4, IHL < 5, total length < IHL
  kTtlExceeded,  // TTL <= 1: not forwarded (l3fwd would answer ICMP time exceeded)
};

// The IPv4 header checksum (network order as stored, in two bytes) after the
// TTL of the header went from `ttl` to `ttl - 1`, protocol `proto`
// unchanged. RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m') with m = ttl:proto, the
// 16-bit word the TTL sits in, and m' = (ttl - 1):proto.
inline uint16_t ttl_dec_checksum(uint16_t check_host, uint8_t ttl, uint8_t proto) noexcept {
  const uint16_t m = static_cast<uint16_t>(ttl << 8 | proto);
  const uint16_t m2 = static_cast<uint16_t>(m - 0x100);
  uint32_t s = uint32_t{static_cast<uint16_t>(~check_host)} + static_cast<uint16_t>(~m) + m2;
  s = (s & 0xffff) + (s >> 16);
  s = (s & 0xffff) + (s >> 16);
  return static_cast<uint16_t>(~s);
}

// One frame of `len` bytes starting at `f` (Ethernet II, no VLAN).
inline L3fwdVerdict l3fwd_frame(uint8_t* f, uint32_t len, const uint8_t next_hop_mac[6],
                                const uint8_t port_mac[6]) noexcept {
  constexpr uint32_t kEth = 14;
  if (len < kEth || f[12] != 0x08 || f[13] != 0x00) return L3fwdVerdict::kNotIpv4;
  uint8_t* ip = f + kEth;
  if (len < kEth + 20) return L3fwdVerdict::kBadHeader;
  const uint32_t ihl = (ip[0] & 0x0f) * 4u;
  const uint32_t total = uint32_t{ip[2]} << 8 | ip[3];
  if ((ip[0] >> 4) != 4 || ihl < 20 || total < ihl || len < kEth + ihl) return L3fwdVerdict::kBadHeader;
  const uint8_t ttl = ip[8];
  if (ttl <= 1) return L3fwdVerdict::kTtlExceeded;
  const uint16_t check = static_cast<uint16_t>(ip[10] << 8 | ip[11]);
  const uint16_t c2 = ttl_dec_checksum(check, ttl, ip[9]);
  ip[8] = static_cast<uint8_t>(ttl - 1);
  ip[10] = static_cast<uint8_t>(c2 >> 8);
  ip[11] = static_cast<uint8_t>(c2);
  std::memcpy(f, next_hop_mac, 6);
  std::memcpy(f + 6, port_mac, 6);
  return L3fwdVerdict::kForward;
}

}  // namespace vipd::bench
