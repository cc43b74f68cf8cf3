// Internet checksum helpers against an independent reference (RFC 1071 sums
// written in test_util.h) and against known vectors.
#include "dataplane/fastpath/checksum.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "tests/unit/dataplane/test_util.h"

namespace vipd::dp {
namespace {

using namespace test;

// Raw (network order, as stored in memory) 16/32-bit values.
uint16_t raw16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
uint32_t raw32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
void put_raw16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

TEST(Checksum, Rfc1071ExampleSum) {
  // RFC 1071 section 3: the sum of these bytes is ddf2 (before complement).
  const uint8_t data[] = {0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7};
  uint32_t s = csum_partial(data, sizeof data, 0);
  EXPECT_EQ(ref_fold(s), 0xddf2);
  EXPECT_EQ(csum_fold(s), static_cast<uint16_t>(~0xddf2));
}

TEST(Checksum, PartialMatchesReferenceRandom) {
  std::mt19937_64 rng(1);
  for (int it = 0; it < 2000; ++it) {
    const size_t n = rng() % 1600;
    auto buf = random_bytes(rng, n);
    const uint32_t init = static_cast<uint32_t>(rng() & 0xffff);
    const uint32_t s = csum_partial(buf.data(), n, init);
    ASSERT_EQ(ref_fold(s), ref_fold(ref_add(init, buf.data(), n))) << "len " << n;
    ASSERT_EQ(csum_fold(s), static_cast<uint16_t>(~ref_fold(ref_add(init, buf.data(), n))));
  }
}

TEST(Checksum, PartialAllOnesDoesNotOverflow) {
  std::vector<uint8_t> buf(65535, 0xff);
  EXPECT_EQ(csum_fold(csum_partial(buf.data(), buf.size(), 0)), ref_cksum(buf.data(), buf.size()));
}

TEST(Checksum, KnownIpv4HeaderVector) {
  // The classic example header (checksum b861).
  uint8_t h[20] = {0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
                   0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7};
  const uint16_t c = ipv4_header_checksum(h, 20);
  put_raw16(h + 10, c);
  EXPECT_EQ(h[10], 0xb8);
  EXPECT_EQ(h[11], 0x61);
  // A garbage value already in the field is ignored.
  h[10] = 0x12;
  h[11] = 0x34;
  EXPECT_EQ(ipv4_header_checksum(h, 20), c);
}

TEST(Checksum, Ipv4HeaderChecksumVerifiesRandom) {
  std::mt19937_64 rng(2);
  for (int it = 0; it < 5000; ++it) {
    const size_t ihl = 20 + 4 * (rng() % 11);  // 20..60
    auto h = random_bytes(rng, ihl);
    h[0] = static_cast<uint8_t>(0x40 | (ihl / 4));
    put_raw16(&h[10], ipv4_header_checksum(h.data(), ihl));
    ASSERT_EQ(ref_fold(ref_add(0, h.data(), ihl)), 0xffff) << "header does not verify, ihl " << ihl;
    ASSERT_EQ(get16(&h[10]), ref_ip_cksum(h.data(), ihl));
  }
}

TEST(Checksum, L4ChecksumKnownTcpVector) {
  // A TCP SYN 10.0.0.1:12345 -> 10.0.0.2:80, computed by hand-written
  // reference code (pseudo header + header), checksum field garbage.
  uint8_t tcp[20] = {0x30, 0x39, 0x00, 0x50, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00,
                     0x00, 0x00, 0x50, 0x02, 0x72, 0x10, 0xde, 0xad, 0x00, 0x00};
  const uint32_t src = ip4(10, 0, 0, 1), dst = ip4(10, 0, 0, 2);
  // Pseudo header words: 0a00 0001 0a00 0002 0006 0014; header words with
  // checksum 0: 3039 0050 0000 0001 0000 0000 5002 7210 0000 0000.
  uint32_t sum = 0x0a00 + 0x0001 + 0x0a00 + 0x0002 + 0x0006 + 0x0014 + 0x3039 + 0x0050 + 0x0001 +
                 0x5002 + 0x7210;
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  const uint16_t expect = static_cast<uint16_t>(~sum);
  uint32_t sb, db;
  uint8_t a[4];
  put32(a, src);
  std::memcpy(&sb, a, 4);
  put32(a, dst);
  std::memcpy(&db, a, 4);
  const uint16_t c = l4_checksum(sb, db, 6, tcp, 20, 16);
  put_raw16(tcp + 16, c);
  EXPECT_EQ(get16(tcp + 16), expect);
  EXPECT_EQ(expect, ref_l4_cksum(src, dst, 6, tcp, 20, 16));
}

TEST(Checksum, L4ChecksumRandomTcpUdpOddLengths) {
  std::mt19937_64 rng(3);
  for (int it = 0; it < 5000; ++it) {
    const uint8_t proto = (it & 1) ? 17 : 6;
    const size_t hdr = proto == 6 ? 20 : 8;
    const size_t len = hdr + rng() % 1480;
    auto l4 = random_bytes(rng, len);
    const uint32_t src = static_cast<uint32_t>(rng()), dst = static_cast<uint32_t>(rng());
    uint8_t a[4];
    uint32_t sb, db;
    put32(a, src);
    std::memcpy(&sb, a, 4);
    put32(a, dst);
    std::memcpy(&db, a, 4);
    const size_t off = proto == 6 ? 16 : 6;
    const uint16_t c = l4_checksum(sb, db, proto, l4.data(), len, off);
    put_raw16(&l4[off], c);
    ASSERT_EQ(get16(&l4[off]), ref_l4_cksum(src, dst, proto, l4.data(), len, off)) << "len " << len;
  }
}

TEST(Checksum, L4ChecksumUdpZeroBecomesFfff) {
  // Build a UDP datagram whose checksum computes to 0: adjust one payload
  // word so that the whole sum is 0xffff.
  const uint32_t src = ip4(10, 1, 2, 3), dst = ip4(10, 4, 5, 6);
  std::vector<uint8_t> u(12, 0);
  put16(&u[0], 1111);
  put16(&u[2], 2222);
  put16(&u[4], 12);
  uint8_t ph[12];
  put32(ph, src);
  put32(ph + 4, dst);
  ph[8] = 0;
  ph[9] = 17;
  put16(ph + 10, 12);
  const uint16_t rest = ref_fold(ref_add(ref_add(0, ph, 12), u.data(), u.size()));
  put16(&u[8], static_cast<uint16_t>(~rest));  // rest + ~rest = 0xffff
  ASSERT_EQ(ref_fold(ref_add(ref_add(0, ph, 12), u.data(), u.size())), 0xffff);
  uint8_t a[4];
  uint32_t sb, db;
  put32(a, src);
  std::memcpy(&sb, a, 4);
  put32(a, dst);
  std::memcpy(&db, a, 4);
  EXPECT_EQ(l4_checksum(sb, db, 17, u.data(), u.size(), 6), 0xffff);
  // TCP does not get this substitution (0 is a valid TCP checksum).
  uint8_t cb[2];
  put_raw16(cb, l4_checksum(sb, db, 6, u.data(), u.size(), 100));
  EXPECT_EQ(get16(cb), ref_l4_cksum(src, dst, 6, u.data(), u.size(), 100));
}

// One random rewrite of a 16-bit word: incremental update == from scratch.
TEST(Checksum, Replace2MatchesRecomputation) {
  std::mt19937_64 rng(4);
  for (int it = 0; it < 20000; ++it) {
    const size_t n = 2 * (2 + rng() % 750);
    auto buf = random_bytes(rng, n);
    // Word 0 stays non-zero (like the protocol in a pseudo header): an
    // all-zero buffer is the one case where 0x0000 and 0xffff differ.
    put16(&buf[0], 0x0011);
    uint8_t cb[2];
    put16(cb, ref_cksum(buf.data(), n));
    uint16_t check_raw = raw16(cb);
    // Several successive rewrites of random even-offset words.
    const int rewrites = 1 + static_cast<int>(rng() % 4);
    for (int r = 0; r < rewrites; ++r) {
      const size_t off = 2 + 2 * (rng() % (n / 2 - 1));
      const uint16_t old_raw = raw16(&buf[off]);
      uint16_t nv = static_cast<uint16_t>(rng());
      if (rng() % 8 == 0) nv = 0;
      if (rng() % 8 == 0) nv = 0xffff;
      put16(&buf[off], nv);
      check_raw = csum_replace2(check_raw, old_raw, raw16(&buf[off]));
    }
    put_raw16(cb, check_raw);
    ASSERT_EQ(get16(cb), ref_cksum(buf.data(), n)) << "iteration " << it;
  }
}

// Several fields changed, their deltas summed and applied once (what
// rewrite_l3l4 does per packet): == from scratch, and == the same changes
// applied one by one with csum_replace2.
TEST(Checksum, FoldedDeltasMatchRecomputationAndStepwise) {
  std::mt19937_64 rng(6);
  for (int it = 0; it < 20000; ++it) {
    const size_t n = 2 * (4 + rng() % 750);
    auto buf = random_bytes(rng, n);
    put16(&buf[0], 0x0011);
    uint8_t cb[2];
    put16(cb, ref_cksum(buf.data(), n));
    const uint16_t start = raw16(cb);
    uint16_t stepwise = start;
    uint32_t delta = 0;
    const int rewrites = 1 + static_cast<int>(rng() % 6);
    for (int r = 0; r < rewrites; ++r) {
      if (rng() % 2) {  // a 32-bit field (an address)
        const size_t off = 2 + 2 * (rng() % (n / 2 - 2));
        const uint32_t old_raw = raw32(&buf[off]);
        put32(&buf[off], static_cast<uint32_t>(rng()));
        delta += csum_delta4(old_raw, raw32(&buf[off]));
        stepwise = csum_replace4(stepwise, old_raw, raw32(&buf[off]));
      } else {  // a 16-bit field (a port, the TTL word)
        const size_t off = 2 + 2 * (rng() % (n / 2 - 1));
        const uint16_t old_raw = raw16(&buf[off]);
        uint16_t nv = static_cast<uint16_t>(rng());
        if (rng() % 8 == 0) nv = 0;
        if (rng() % 8 == 0) nv = 0xffff;
        put16(&buf[off], nv);
        delta += csum_delta2(old_raw, raw16(&buf[off]));
        stepwise = csum_replace2(stepwise, old_raw, raw16(&buf[off]));
      }
    }
    const uint16_t folded = csum_apply(start, delta);
    put_raw16(cb, folded);
    ASSERT_EQ(get16(cb), ref_cksum(buf.data(), n)) << "iteration " << it;
    ASSERT_EQ(folded, stepwise) << "iteration " << it;
  }
}

TEST(Checksum, Replace4MatchesRecomputation) {
  std::mt19937_64 rng(5);
  for (int it = 0; it < 20000; ++it) {
    const size_t n = 2 * (3 + rng() % 750);
    auto buf = random_bytes(rng, n);
    put16(&buf[0], 0x0011);
    uint8_t cb[2];
    put16(cb, ref_cksum(buf.data(), n));
    uint16_t check_raw = raw16(cb);
    const size_t off = 2 + 2 * (rng() % (n / 2 - 2));  // 32-bit field at an even offset
    const uint32_t old_raw = raw32(&buf[off]);
    put32(&buf[off], static_cast<uint32_t>(rng()));
    check_raw = csum_replace4(check_raw, old_raw, raw32(&buf[off]));
    put_raw16(cb, check_raw);
    ASSERT_EQ(get16(cb), ref_cksum(buf.data(), n)) << "iteration " << it;
  }
}

TEST(Checksum, ReplaceNoChangeIsIdentity) {
  std::mt19937_64 rng(6);
  for (int it = 0; it < 1000; ++it) {
    auto buf = random_bytes(rng, 40);
    uint8_t cb[2];
    put16(cb, ref_cksum(buf.data(), 40));
    const uint16_t c = raw16(cb);
    EXPECT_EQ(csum_replace2(c, raw16(&buf[4]), raw16(&buf[4])), c);
    EXPECT_EQ(csum_replace4(c, raw32(&buf[8]), raw32(&buf[8])), c);
  }
}

}  // namespace
}  // namespace vipd::dp
