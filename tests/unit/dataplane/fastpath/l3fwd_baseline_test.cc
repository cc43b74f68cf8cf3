// The l3fwd baseline of the pipeline benchmark (bench/l3fwd.h): the TTL
// decrement's incremental checksum equals a recomputation for every TTL and
// many headers, including the end-around carry (a checksum whose high byte is
// 0xFF, where l3fwd's `++hdr_checksum` goes wrong), 0x0000 and 0xFFFF; MACs rewritten; bad frames refused and left untouched.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>

#include "bench/l3fwd.h"
#include "dataplane/fastpath/checksum.h"

namespace vipd::bench {
namespace {

constexpr uint8_t kNextHop[6] = {0x02, 0, 0, 0, 0x0c, 0x01};
constexpr uint8_t kPort[6] = {0x02, 0, 0, 0, 0x0a, 0x0a};

using Frame = std::array<uint8_t, 60>;

uint16_t stored_check(const Frame& f) { return static_cast<uint16_t>(f[24] << 8 | f[25]); }

// A 60-byte Ethernet/IPv4/TCP frame with a correct header checksum.
Frame make_frame(uint8_t ttl, uint16_t id, uint8_t proto = 6, uint32_t src = 0xac100001) {
  Frame f{};
  std::memcpy(f.data(), kPort, 6);  // to us
  const uint8_t peer[6] = {0x02, 0, 0, 0, 0x0b, 0x0b};
  std::memcpy(f.data() + 6, peer, 6);
  f[12] = 0x08;
  f[13] = 0x00;
  uint8_t* ip = f.data() + 14;
  ip[0] = 0x45;
  ip[2] = 0;
  ip[3] = 46;
  ip[4] = static_cast<uint8_t>(id >> 8);
  ip[5] = static_cast<uint8_t>(id);
  ip[6] = 0x40;
  ip[8] = ttl;
  ip[9] = proto;
  ip[12] = static_cast<uint8_t>(src >> 24);
  ip[13] = static_cast<uint8_t>(src >> 16);
  ip[14] = static_cast<uint8_t>(src >> 8);
  ip[15] = static_cast<uint8_t>(src);
  ip[16] = 10;
  ip[17] = 96;
  ip[19] = 1;
  const uint16_t c = dp::ipv4_header_checksum(ip, 20);  // network order as stored
  std::memcpy(ip + 10, &c, 2);
  return f;
}

// The header verifies: its one's-complement sum, checksum included, is 0xFFFF.
bool header_verifies(const Frame& f) {
  return dp::csum_fold(dp::csum_partial(f.data() + 14, 20, 0)) == 0;
}

TEST(L3fwdBaseline, ForwardRewritesMacsAndTtlWithAValidChecksum) {
  Frame f = make_frame(64, 0x1234);
  const Frame before = f;
  ASSERT_EQ(l3fwd_frame(f.data(), f.size(), kNextHop, kPort), L3fwdVerdict::kForward);
  EXPECT_EQ(0, std::memcmp(f.data(), kNextHop, 6));
  EXPECT_EQ(0, std::memcmp(f.data() + 6, kPort, 6));
  EXPECT_EQ(f[14 + 8], 63);
  EXPECT_TRUE(header_verifies(f));
  Frame want = make_frame(63, 0x1234);
  EXPECT_EQ(stored_check(f), stored_check(want));
  // Nothing else changed: ethertype, the rest of the IPv4 header, the payload.
  for (size_t i = 12; i < f.size(); ++i) {
    if (i == 14 + 8 || i == 14 + 10 || i == 14 + 11) continue;
    EXPECT_EQ(f[i], before[i]) << "byte " << i;
  }
}

// Every TTL 2..255 and ids over the whole 16-bit range (so every checksum
// value's neighbourhood, the high-byte-0xFF carry case included): the
// incremental update equals the recomputation and the header verifies.
TEST(L3fwdBaseline, IncrementalChecksumEqualsRecomputationForEveryTtl) {
  unsigned carries = 0, checked = 0;
  for (unsigned ttl = 2; ttl <= 255; ++ttl) {
    for (uint32_t id = 0; id < 0x10000; id += 97) {
      Frame f = make_frame(static_cast<uint8_t>(ttl), static_cast<uint16_t>(id));
      if ((stored_check(f) >> 8) == 0xff) ++carries;
      ASSERT_EQ(l3fwd_frame(f.data(), f.size(), kNextHop, kPort), L3fwdVerdict::kForward);
      const Frame want = make_frame(static_cast<uint8_t>(ttl - 1), static_cast<uint16_t>(id));
      ASSERT_EQ(stored_check(f), stored_check(want)) << "ttl " << ttl << " id " << id;
      ASSERT_TRUE(header_verifies(f)) << "ttl " << ttl << " id " << id;
      ++checked;
    }
  }
  EXPECT_GT(carries, 100u) << "the end-around carry case was not exercised";
  EXPECT_GT(checked, 100000u);
}

// The edges of the one's-complement arithmetic, directly on the function.
TEST(L3fwdBaseline, ChecksumEdges) {
  // TTL 64 -> 63 lowers the word by 0x100, so the checksum rises by 0x100,
  // with the end-around carry: 0xFF12 + 0x100 = 0x0012 + 1.
  EXPECT_EQ(ttl_dec_checksum(0xff12, 64, 6), 0x0013);
  EXPECT_EQ(ttl_dec_checksum(0x1234, 64, 6), 0x1334);
  // 0xFEFF + 0x100: the header's sum becomes one's-complement zero, which a
  // sum of non-zero words always reaches as 0xFFFF (-0): the checksum is
  // 0x0000, as a recomputation gives, never 0xFFFF.
  EXPECT_EQ(ttl_dec_checksum(0xfeff, 64, 6), 0x0000);
  // From 0xFFFF (the -0 some senders store for +0): 0xFFFF + 0x100 carries to 0x0100.
  EXPECT_EQ(ttl_dec_checksum(0xffff, 64, 6), 0x0100);
  EXPECT_EQ(ttl_dec_checksum(0x0000, 64, 6), 0x0100);
  // A header whose recomputed checksum after the decrement is 0x0000 (the
  // header's sum is 0xFFFF): search ids until one turns up, then check it.
  bool found = false;
  for (uint32_t src = 0; src < 0x20000 && !found; ++src) {
    Frame want = make_frame(63, 0, 17, 0x0a000000 + src);
    if (stored_check(want) != 0x0000) continue;
    found = true;
    Frame f = make_frame(64, 0, 17, 0x0a000000 + src);
    ASSERT_EQ(l3fwd_frame(f.data(), f.size(), kNextHop, kPort), L3fwdVerdict::kForward);
    EXPECT_TRUE(header_verifies(f));
    EXPECT_EQ(stored_check(f), 0x0000);
  }
  EXPECT_TRUE(found) << "no header with checksum 0x0000 found";
}

TEST(L3fwdBaseline, RefusesWhatItMustNotForwardAndLeavesItUntouched) {
  auto refused = [](Frame f, uint32_t len, L3fwdVerdict want) {
    const Frame before = f;
    EXPECT_EQ(l3fwd_frame(f.data(), len, kNextHop, kPort), want);
    EXPECT_EQ(f, before);
  };
  refused(make_frame(1, 7), 60, L3fwdVerdict::kTtlExceeded);
  refused(make_frame(0, 7), 60, L3fwdVerdict::kTtlExceeded);
  Frame arp = make_frame(64, 7);
  arp[12] = 0x08;
  arp[13] = 0x06;
  refused(arp, 60, L3fwdVerdict::kNotIpv4);
  refused(make_frame(64, 7), 13, L3fwdVerdict::kNotIpv4);
  refused(make_frame(64, 7), 33, L3fwdVerdict::kBadHeader);  // 19 bytes of IPv4
  Frame v6 = make_frame(64, 7);
  v6[14] = 0x65;
  refused(v6, 60, L3fwdVerdict::kBadHeader);
  Frame ihl4 = make_frame(64, 7);
  ihl4[14] = 0x44;
  refused(ihl4, 60, L3fwdVerdict::kBadHeader);
  Frame shortlen = make_frame(64, 7);
  shortlen[16] = 0;
  shortlen[17] = 19;
  refused(shortlen, 60, L3fwdVerdict::kBadHeader);
  Frame ihl15 = make_frame(64, 7);  // 60-byte header, 46 bytes of IPv4 in the frame
  ihl15[14] = 0x4f;
  ihl15[17] = 60;
  refused(ihl15, 60, L3fwdVerdict::kBadHeader);
}

}  // namespace
}  // namespace vipd::bench
