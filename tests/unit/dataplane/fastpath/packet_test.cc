// Frame parsing/validation, NAT rewrite and the reply builders, checked
// against frames built and checksums computed independently in the test.
#include "dataplane/fastpath/packet.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "tests/unit/dataplane/test_util.h"

namespace vipd::dp {
namespace {

using namespace test;

const uint32_t kClient = ip4(10, 0, 0, 10);
const uint32_t kVip = ip4(10, 96, 0, 100);
const MacAddr kMacA{0x02, 0xaa, 0, 0, 0, 1};
const MacAddr kMacB{0x02, 0xbb, 0, 0, 0, 2};

FrameSpec tcp_spec() {
  FrameSpec s;
  s.dmac = kMacA;
  s.smac = kMacB;
  s.src = kClient;
  s.dst = kVip;
  s.proto = 6;
  s.sport = 40000;
  s.dport = 8080;
  return s;
}
FrameSpec udp_spec() {
  FrameSpec s = tcp_spec();
  s.proto = 17;
  s.sport = 5353;
  s.dport = 53;
  s.payload = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  return s;
}
FrameSpec icmp_spec() {
  FrameSpec s = tcp_spec();
  s.proto = 1;
  s.payload = {'p', 'i', 'n', 'g', 0, 1, 2};
  return s;
}

Parsed parse(const std::vector<uint8_t>& f) { return parse_frame(f.data(), f.size()); }

void expect_drop(const std::vector<uint8_t>& f, DropReason r, const char* what) {
  Parsed p = parse(f);
  EXPECT_EQ(p.kind, FrameKind::kDrop) << what;
  EXPECT_EQ(static_cast<int>(p.drop), static_cast<int>(r))
      << what << ": got " << drop_reason_name(p.drop) << ", want " << drop_reason_name(r);
}

// ---- parse_frame: good frames ---------------------------------------------

TEST(ParseFrame, GoodTcp) {
  FrameSpec s = tcp_spec();
  s.tcp_flags = kTcpSyn | kTcpAck;
  s.ttl = 17;
  s.tcp_opts = {2, 4, 0x05, 0xb4};  // MSS
  s.payload = {1, 2, 3};
  auto f = build_frame(s);
  Parsed p = parse(f);
  ASSERT_EQ(p.kind, FrameKind::kIpv4);
  EXPECT_EQ(p.l3_off, 14);
  EXPECT_EQ(p.l4_off, 34);
  EXPECT_EQ(p.ip_total_len, 20 + 24 + 3);
  EXPECT_EQ(p.l4_len, 24 + 3);
  EXPECT_EQ(p.proto, kProtoTcp);
  EXPECT_EQ(p.tcp_flags, kTcpSyn | kTcpAck);
  EXPECT_EQ(p.ttl, 17);
  EXPECT_EQ(p.src, kClient);
  EXPECT_EQ(p.dst, kVip);
  EXPECT_EQ(p.sport, 40000);
  EXPECT_EQ(p.dport, 8080);
}

TEST(ParseFrame, GoodUdpWithEthernetPadding) {
  FrameSpec s = udp_spec();
  s.payload = {1};
  s.pad_to = 60;  // minimum Ethernet frame: trailing padding beyond IP total length
  auto f = build_frame(s);
  ASSERT_EQ(f.size(), 60u);
  Parsed p = parse(f);
  ASSERT_EQ(p.kind, FrameKind::kIpv4);
  EXPECT_EQ(p.proto, kProtoUdp);
  EXPECT_EQ(p.ip_total_len, 29);
  EXPECT_EQ(p.l4_len, 9);
  EXPECT_EQ(p.sport, 5353);
  EXPECT_EQ(p.dport, 53);
}

TEST(ParseFrame, GoodIcmp) {
  FrameSpec s = icmp_spec();
  s.icmp_type = 8;
  s.icmp_code = 0;
  s.icmp_id = 0x1357;
  auto f = build_frame(s);
  Parsed p = parse(f);
  ASSERT_EQ(p.kind, FrameKind::kIpv4);
  EXPECT_EQ(p.proto, kProtoIcmp);
  EXPECT_EQ(p.dport, 0x0800);  // type << 8 | code
  EXPECT_EQ(p.sport, 0x1357);  // identifier
  EXPECT_EQ(p.l4_len, 8 + 7);
}

TEST(ParseFrame, GoodArp) {
  auto f = build_arp(1, kMacB, kClient, MacAddr{}, kVip, MacAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff});
  Parsed p = parse(f);
  EXPECT_EQ(p.kind, FrameKind::kArp);
}

TEST(ParseFrame, IpOptionsIhl6) {
  FrameSpec s = tcp_spec();
  s.ip_opts = {0x01, 0x01, 0x01, 0x00};  // NOP NOP NOP EOL
  s.payload = {9, 8, 7, 6};
  auto f = build_frame(s);
  Parsed p = parse(f);
  ASSERT_EQ(p.kind, FrameKind::kIpv4) << drop_reason_name(p.drop);
  EXPECT_EQ(p.l3_off, 14);
  EXPECT_EQ(p.l4_off, 14 + 24);
  EXPECT_EQ(p.l4_len, 20 + 4);
  EXPECT_EQ(p.sport, 40000);
  EXPECT_EQ(p.dport, 8080);
  // UDP with maximum options (IHL 15).
  FrameSpec u = udp_spec();
  u.ip_opts.assign(40, 0x01);
  auto g = build_frame(u);
  Parsed q = parse(g);
  ASSERT_EQ(q.kind, FrameKind::kIpv4) << drop_reason_name(q.drop);
  EXPECT_EQ(q.l4_off, 14 + 60);
  EXPECT_EQ(q.sport, 5353);
}

TEST(ParseFrame, OtherProtocolIsIpv4WithProto) {
  FrameSpec s = tcp_spec();
  s.proto = 47;  // GRE
  s.payload = {0, 0, 0x08, 0x00};
  auto f = build_frame(s);
  Parsed p = parse(f);
  ASSERT_EQ(p.kind, FrameKind::kIpv4);
  EXPECT_EQ(p.proto, 47);
  EXPECT_EQ(p.l4_len, 4);
}

TEST(ParseFrame, FragmentFlagsDfOnlyIsFine) {
  FrameSpec s = udp_spec();
  s.frag = 0x4000;
  EXPECT_EQ(parse(build_frame(s)).kind, FrameKind::kIpv4);
  s.frag = 0;
  EXPECT_EQ(parse(build_frame(s)).kind, FrameKind::kIpv4);
}

// ---- parse_frame: malformed frames ----------------------------------------

TEST(ParseFrame, TruncatedEthernet) {
  auto f = build_frame(tcp_spec());
  for (size_t n = 0; n < 14; ++n) {
    Parsed p = parse_frame(f.data(), n);
    EXPECT_EQ(p.kind, FrameKind::kDrop);
    EXPECT_EQ(p.drop, kTruncated) << "len " << n;
  }
}

TEST(ParseFrame, TruncatedIpv4AndArp) {
  auto f = build_frame(tcp_spec());
  for (size_t n = 14; n < 34; ++n) {
    Parsed p = parse_frame(f.data(), n);
    EXPECT_EQ(p.kind, FrameKind::kDrop) << "len " << n;
    EXPECT_EQ(p.drop, kTruncated) << "len " << n;
  }
  auto a = build_arp(1, kMacB, kClient, MacAddr{}, kVip, kMacA);
  Parsed p = parse_frame(a.data(), 41);
  EXPECT_EQ(p.kind, FrameKind::kDrop);
  EXPECT_EQ(p.drop, kTruncated);
}

TEST(ParseFrame, NonIpv4Ethertype) {
  for (uint16_t et : {0x86dd, 0x8100, 0x88cc, 0x0000, 0x0801}) {
    FrameSpec s = tcp_spec();
    s.ethertype = et;
    expect_drop(build_frame(s), kBadEthertype, "ethertype");
  }
}

TEST(ParseFrame, IpVersionNot4) {
  for (uint8_t v : {0, 5, 6, 15}) {
    auto f = build_frame(tcp_spec());
    f[14] = static_cast<uint8_t>((v << 4) | 5);
    fix_ip_cksum(f);
    expect_drop(f, kBadIpHeader, "version");
  }
}

TEST(ParseFrame, IhlBelow5) {
  for (uint8_t ihl = 0; ihl < 5; ++ihl) {
    auto f = build_frame(tcp_spec());
    f[14] = static_cast<uint8_t>(0x40 | ihl);
    expect_drop(f, kBadIpHeader, "ihl < 5");
  }
}

TEST(ParseFrame, TotalLengthBeyondFrame) {
  auto f = build_frame(tcp_spec());
  put16(&f[16], static_cast<uint16_t>(f.size() - 14 + 1));
  fix_ip_cksum(f);
  expect_drop(f, kBadIpHeader, "total > frame");
  put16(&f[16], 0xffff);
  fix_ip_cksum(f);
  expect_drop(f, kBadIpHeader, "total 65535");
}

TEST(ParseFrame, TotalLengthBelowIhl) {
  for (uint16_t total : {0, 1, 19}) {
    auto f = build_frame(tcp_spec());
    put16(&f[16], total);
    fix_ip_cksum(f);
    expect_drop(f, kBadIpHeader, "total < ihl");
  }
  FrameSpec s = tcp_spec();
  s.ip_opts = {1, 1, 1, 0};
  auto f = build_frame(s);
  put16(&f[16], 22);  // IHL is 24
  fix_ip_cksum(f);
  expect_drop(f, kBadIpHeader, "total < ihl with options");
}

TEST(ParseFrame, BadIpChecksum) {
  auto f = build_frame(tcp_spec());
  f[24] ^= 0x01;
  expect_drop(f, kBadIpChecksum, "checksum");
  // A header byte changed without fixing the checksum.
  auto g = build_frame(tcp_spec());
  g[22] = 3;  // TTL
  expect_drop(g, kBadIpChecksum, "ttl changed");
  // Options are covered by the checksum too.
  FrameSpec s = tcp_spec();
  s.ip_opts = {1, 1, 1, 0};
  auto h = build_frame(s);
  h[14 + 21] = 7;
  expect_drop(h, kBadIpChecksum, "option changed");
}

TEST(ParseFrame, Fragments) {
  for (uint16_t frag : {0x2000, 0x2001, 0x0001, 0x1fff, 0x6000, 0x4010}) {
    FrameSpec s = udp_spec();
    s.frag = frag;
    expect_drop(build_frame(s), kFragment, "fragment");
  }
}

TEST(ParseFrame, TcpDataOffsetInvalid) {
  for (uint8_t doff : {0, 1, 4}) {
    auto f = build_frame(tcp_spec());
    f[34 + 12] = static_cast<uint8_t>(doff << 4);
    expect_drop(f, kBadL4Header, "tcp doff < 5");
  }
  // Data offset beyond the segment: 24 bytes of header claimed, 20 present.
  auto f = build_frame(tcp_spec());
  f[34 + 12] = 6 << 4;
  expect_drop(f, kBadL4Header, "tcp doff > segment");
  // ... even when the frame has bytes after the IP datagram (padding).
  FrameSpec s = tcp_spec();
  s.pad_to = 80;
  auto g = build_frame(s);
  g[34 + 12] = 15 << 4;
  expect_drop(g, kBadL4Header, "tcp doff beyond ip total, into padding");
  // A segment shorter than a TCP header.
  FrameSpec t = tcp_spec();
  t.proto = 99;
  t.payload.assign(19, 0);
  auto h = build_frame(t);
  h[14 + 9] = 6;
  fix_ip_cksum(h);
  expect_drop(h, kBadL4Header, "tcp segment < 20 bytes");
}

TEST(ParseFrame, UdpLengthInvalid) {
  for (uint16_t ulen : {0, 7}) {
    auto f = build_frame(udp_spec());
    put16(&f[34 + 4], ulen);
    expect_drop(f, kBadL4Header, "udp length < 8");
  }
  auto f = build_frame(udp_spec());
  put16(&f[34 + 4], static_cast<uint16_t>(get16(&f[34 + 4]) + 1));
  expect_drop(f, kBadL4Header, "udp length > ip payload");
  // UDP length shorter than the IP payload is accepted (trailing bytes).
  auto g = build_frame(udp_spec());
  put16(&g[34 + 4], 8);
  EXPECT_EQ(parse(g).kind, FrameKind::kIpv4);
  // IP payload shorter than a UDP header.
  FrameSpec t = udp_spec();
  t.proto = 99;
  t.payload.assign(7, 0);
  auto h = build_frame(t);
  h[14 + 9] = 17;
  fix_ip_cksum(h);
  expect_drop(h, kBadL4Header, "udp datagram < 8 bytes");
}

TEST(ParseFrame, IcmpTooShort) {
  FrameSpec t = icmp_spec();
  t.proto = 99;
  t.payload.assign(7, 0);
  auto h = build_frame(t);
  h[14 + 9] = 1;
  fix_ip_cksum(h);
  expect_drop(h, kBadL4Header, "icmp < 8 bytes");
}

// ---- Fuzz: random and mutated frames never crash; offsets stay inside ----

void check_invariants(const uint8_t* f, size_t len, const Parsed& p) {
  if (p.kind == FrameKind::kIpv4) {
    ASSERT_GE(len, 34u);
    ASSERT_EQ(p.l3_off, 14);
    ASSERT_GE(p.l4_off, 34);
    ASSERT_LE(size_t{p.l3_off} + p.ip_total_len, len);
    ASSERT_EQ(size_t{p.l4_off} + p.l4_len, size_t{p.l3_off} + p.ip_total_len);
    ASSERT_EQ(p.l4_off - p.l3_off, ihl_of(f));
    ASSERT_EQ(ref_fold(ref_add(0, f + 14, p.l4_off - 14u)), 0xffff);
    ASSERT_EQ(get16(f + 20) & 0x3fff, 0);  // no fragment
    if (p.proto == kProtoTcp) {
      ASSERT_GE(p.l4_len, 20);
      ASSERT_LE((f[p.l4_off + 12] >> 4) * 4u, p.l4_len);
      ASSERT_GE((f[p.l4_off + 12] >> 4) * 4u, 20u);
    }
    if (p.proto == kProtoUdp) {
      ASSERT_GE(p.l4_len, 8);
      ASSERT_LE(get16(f + p.l4_off + 4), p.l4_len);
    }
    if (p.proto == kProtoIcmp) {
      ASSERT_GE(p.l4_len, 8);
    }
  } else if (p.kind == FrameKind::kArp) {
    ASSERT_GE(len, 42u);
  } else {
    ASSERT_LT(static_cast<unsigned>(p.drop), kNumDropReasons);
  }
}

TEST(ParseFrame, FuzzRandomAndMutated) {
  std::mt19937_64 rng(7);
  std::vector<std::vector<uint8_t>> seeds;
  for (auto s : {tcp_spec(), udp_spec(), icmp_spec()}) {
    seeds.push_back(build_frame(s));
    s.ip_opts = {1, 1, 1, 0};
    seeds.push_back(build_frame(s));
  }
  seeds.push_back(build_arp(1, kMacB, kClient, MacAddr{}, kVip, kMacA));
  size_t kinds[3] = {};
  for (int it = 0; it < 100000; ++it) {
    std::vector<uint8_t> f;
    switch (it % 4) {
      case 0:  // pure random, random length
        f = random_bytes(rng, rng() % 200);
        if (f.size() > 14 && (rng() & 1)) put16(&f[12], 0x0800);
        break;
      default: {  // mutate a good frame, mostly fixing the IP checksum
        f = seeds[rng() % seeds.size()];
        const int flips = 1 + static_cast<int>(rng() % 4);
        for (int k = 0; k < flips; ++k) f[rng() % f.size()] = static_cast<uint8_t>(rng());
        if (rng() % 3 == 0) f.resize(rng() % (f.size() + 1));
        if (rng() % 4 == 0) f.resize(f.size() + rng() % 64, static_cast<uint8_t>(rng()));
        if (f.size() >= 34 && (f[14] >> 4) == 4 && rng() % 4 != 0) {
          const unsigned ihl = (f[14] & 15) * 4u;
          if (ihl >= 20 && 14 + ihl <= f.size()) {
            f[24] = f[25] = 0;
            put16(&f[24], ref_cksum(&f[14], ihl));
          }
        }
      }
    }
    // Parse from an exactly-sized heap copy so ASan/valgrind see overreads.
    std::unique_ptr<uint8_t[]> buf(new uint8_t[f.size() ? f.size() : 1]);
    if (!f.empty()) std::memcpy(buf.get(), f.data(), f.size());
    Parsed p = parse_frame(buf.get(), f.size());
    ++kinds[static_cast<int>(p.kind)];
    check_invariants(buf.get(), f.size(), p);
    if (HasFatalFailure()) {
      ADD_FAILURE() << "iteration " << it << " len " << f.size();
      return;
    }
  }
  // The mutation mix exercises every outcome.
  EXPECT_GT(kinds[0], 1000u);
  EXPECT_GT(kinds[1], 100u);
  EXPECT_GT(kinds[2], 1000u);
}

// ---- rewrite_l3l4 ---------------------------------------------------------

struct Rewrite {
  uint32_t src, dst;
  uint16_t sport, dport;
};

void check_rewrite(std::vector<uint8_t> f, const Rewrite& r, const char* what) {
  const std::vector<uint8_t> orig = f;
  Parsed p = parse(f);
  ASSERT_EQ(p.kind, FrameKind::kIpv4) << what;
  const bool udp_nocsum = p.proto == kProtoUdp && get16(&f[p.l4_off + 6]) == 0;
  rewrite_l3l4(f.data(), p, r.src, r.sport, r.dst, r.dport);
  const uint8_t* g = f.data();
  EXPECT_EQ(ip_src(g), r.src) << what;
  EXPECT_EQ(ip_dst(g), r.dst) << what;
  EXPECT_EQ(l4_sport(g), r.sport) << what;
  EXPECT_EQ(l4_dport(g), r.dport) << what;
  EXPECT_EQ(ip_ttl(g), static_cast<uint8_t>(orig[22] - 1)) << what;
  EXPECT_TRUE(ip_cksum_exact(g)) << what << ": IP checksum " << std::hex << get16(g + 24) << " want "
                                 << ref_ip_cksum(g + 14, ihl_of(g));
  if (udp_nocsum) {
    EXPECT_EQ(get16(l4_of(g) + 6), 0) << what << ": UDP without checksum must stay without";
  } else {
    const size_t off = p.proto == kProtoTcp ? 16 : 6;
    EXPECT_TRUE(l4_cksum_exact(g)) << what << ": L4 checksum " << std::hex << get16(l4_of(g) + off)
                                   << " want "
                                   << ref_l4_cksum(ip_src(g), ip_dst(g), p.proto, l4_of(g), l4_len_of(g), off);
  }
  // Nothing else changed: the rest of the IP header (but TTL and checksum),
  // the rest of the L4 header (but ports and checksum) and the payload.
  for (size_t i = 0; i < f.size(); ++i) {
    const size_t ip_rel = i - 14;
    if (i >= 14 && i < p.l4_off) {
      if (ip_rel == 8 || ip_rel == 10 || ip_rel == 11 || (ip_rel >= 12 && ip_rel < 20)) continue;
    }
    if (i >= p.l4_off && i < p.l4_off + 4u) continue;
    const size_t coff = p.proto == kProtoTcp ? 16 : 6;
    if (i == p.l4_off + coff || i == p.l4_off + coff + 1) continue;
    ASSERT_EQ(f[i], orig[i]) << what << ": byte " << i << " changed";
  }
  // The result still parses.
  Parsed q = parse(f);
  EXPECT_EQ(q.kind, FrameKind::kIpv4) << what;
}

TEST(RewriteL3L4, FnatAndNatRewritesRandom) {
  std::mt19937_64 rng(8);
  for (int it = 0; it < 5000; ++it) {
    FrameSpec s = (it & 1) ? udp_spec() : tcp_spec();
    s.src = static_cast<uint32_t>(rng());
    s.dst = static_cast<uint32_t>(rng());
    s.sport = static_cast<uint16_t>(rng());
    s.dport = static_cast<uint16_t>(rng());
    s.ttl = static_cast<uint8_t>(2 + rng() % 254);
    s.ip_id = static_cast<uint16_t>(rng());
    s.seq = static_cast<uint32_t>(rng());
    s.ack = static_cast<uint32_t>(rng());
    s.tcp_flags = static_cast<uint8_t>(rng());
    if (rng() % 4 == 0) s.ip_opts = {1, 1, 1, 0};
    s.payload = random_bytes(rng, rng() % 300);
    auto f = build_frame(s);
    Rewrite r;
    switch (rng() % 3) {
      case 0:  // fnat client -> dest: both addresses and ports change
        r = {static_cast<uint32_t>(rng()), static_cast<uint32_t>(rng()), static_cast<uint16_t>(rng()),
             static_cast<uint16_t>(rng())};
        break;
      case 1:  // nat client -> dest: only the destination changes
        r = {s.src, static_cast<uint32_t>(rng()), s.sport, static_cast<uint16_t>(rng())};
        break;
      default:  // nat reply: only the source changes
        r = {static_cast<uint32_t>(rng()), s.dst, static_cast<uint16_t>(rng()), s.dport};
    }
    check_rewrite(f, r, (it & 1) ? "udp" : "tcp");
    if (HasFailure()) {
      ADD_FAILURE() << "iteration " << it;
      return;
    }
  }
}

TEST(RewriteL3L4, UdpZeroChecksumStaysZero) {
  std::mt19937_64 rng(9);
  for (int it = 0; it < 500; ++it) {
    FrameSpec s = udp_spec();
    s.udp_checksum = false;
    s.payload = random_bytes(rng, rng() % 100);
    auto f = build_frame(s);
    ASSERT_EQ(get16(&f[34 + 6]), 0);
    check_rewrite(f, {static_cast<uint32_t>(rng()), static_cast<uint32_t>(rng()), static_cast<uint16_t>(rng()),
                      static_cast<uint16_t>(rng())},
                  "udp no checksum");
    if (HasFailure()) return;
  }
}

// A UDP datagram whose checksum after the rewrite computes to 0 must carry
// 0xffff (0 would mean "no checksum").
TEST(RewriteL3L4, UdpChecksumComputingToZeroIsSentAsFfff) {
  FrameSpec s = udp_spec();
  s.payload = {0, 0, 0, 0};
  const Rewrite r{ip4(10, 1, 0, 100), ip4(10, 1, 0, 11), 1024, 80};
  // Choose payload word 0 so that the post-rewrite sum is 0xffff.
  FrameSpec post = s;
  post.src = r.src;
  post.dst = r.dst;
  post.sport = r.sport;
  post.dport = r.dport;
  auto pf = build_frame(post);
  uint8_t* l4 = &pf[34];
  l4[6] = l4[7] = 0;
  uint8_t ph[12];
  put32(ph, r.src);
  put32(ph + 4, r.dst);
  ph[8] = 0;
  ph[9] = 17;
  put16(ph + 10, static_cast<uint16_t>(l4_len_of(pf.data())));
  const uint16_t rest = ref_fold(ref_add(ref_add(0, ph, 12), l4, l4_len_of(pf.data())));
  s.payload[0] = static_cast<uint8_t>(static_cast<uint16_t>(~rest) >> 8);
  s.payload[1] = static_cast<uint8_t>(~rest);
  auto f = build_frame(s);
  Parsed p = parse(f);
  ASSERT_EQ(p.kind, FrameKind::kIpv4);
  rewrite_l3l4(f.data(), p, r.src, r.sport, r.dst, r.dport);
  EXPECT_EQ(get16(&f[34 + 6]), 0xffff);
  EXPECT_TRUE(l4_cksum_exact(f.data()));
}

// A UDP datagram whose original checksum is 0xffff (computed 0) is updated
// correctly (~0xffff is one's-complement zero).
TEST(RewriteL3L4, UdpChecksumFfffInput) {
  FrameSpec s = udp_spec();
  s.payload = {0, 0, 0, 0};
  auto f0 = build_frame(s);
  uint8_t* l4 = &f0[34];
  l4[6] = l4[7] = 0;
  uint8_t ph[12];
  put32(ph, s.src);
  put32(ph + 4, s.dst);
  ph[8] = 0;
  ph[9] = 17;
  put16(ph + 10, static_cast<uint16_t>(l4_len_of(f0.data())));
  const uint16_t rest = ref_fold(ref_add(ref_add(0, ph, 12), l4, l4_len_of(f0.data())));
  s.payload[0] = static_cast<uint8_t>(static_cast<uint16_t>(~rest) >> 8);
  s.payload[1] = static_cast<uint8_t>(~rest);
  auto f = build_frame(s);
  ASSERT_EQ(get16(&f[34 + 6]), 0xffff);
  check_rewrite(f, {ip4(10, 1, 0, 100), ip4(10, 1, 0, 11), 1024, 80}, "udp checksum 0xffff in");
}

TEST(RewriteL3L4, TtlAndIdentityRewrite) {
  FrameSpec s = tcp_spec();
  s.ttl = 2;
  auto f = build_frame(s);
  check_rewrite(f, {s.src, s.dst, s.sport, s.dport}, "identity rewrite");
}

// ---- make_tcp_rst_reply ---------------------------------------------------

void check_rst(const FrameSpec& s, uint32_t want_seq, uint32_t want_ack, uint8_t want_flags, const char* what) {
  auto f = build_frame(s);
  Parsed p = parse(f);
  ASSERT_EQ(p.kind, FrameKind::kIpv4) << what;
  const size_t len = make_tcp_rst_reply(f.data(), p);
  ASSERT_EQ(len, 54u) << what;
  const uint8_t* g = f.data();
  EXPECT_TRUE(std::equal(g, g + 6, s.smac.begin())) << what << ": eth dst is the sender";
  EXPECT_TRUE(std::equal(g + 6, g + 12, s.dmac.begin())) << what << ": eth src is the receiver";
  EXPECT_EQ(get16(g + 12), 0x0800);
  EXPECT_EQ(g[14], 0x45) << what;
  EXPECT_EQ(ip_total(g), 40) << what;
  EXPECT_EQ(ip_proto(g), 6);
  EXPECT_GT(ip_ttl(g), 1);
  EXPECT_EQ(get16(g + 20) & 0x3fff, 0) << "no fragment bits";
  EXPECT_EQ(ip_src(g), s.dst) << what;
  EXPECT_EQ(ip_dst(g), s.src) << what;
  EXPECT_EQ(l4_sport(g), s.dport) << what;
  EXPECT_EQ(l4_dport(g), s.sport) << what;
  EXPECT_EQ(tcp_flags(g), want_flags) << what;
  EXPECT_EQ(tcp_seq(g), want_seq) << what;
  EXPECT_EQ(tcp_ack(g), want_ack) << what;
  EXPECT_EQ(l4_of(g)[12] >> 4, 5) << what;
  EXPECT_TRUE(ip_cksum_exact(g)) << what;
  EXPECT_TRUE(l4_cksum_exact(g)) << what;
  Parsed q = parse_frame(g, len);
  EXPECT_EQ(q.kind, FrameKind::kIpv4) << what;
}

TEST(TcpRst, AckSetSeqIsAck) {
  FrameSpec s = tcp_spec();
  s.tcp_flags = kTcpAck | kTcpPsh;
  s.seq = 5000;
  s.ack = 0xfffffff0;
  s.payload = {1, 2, 3, 4, 5};
  check_rst(s, 0xfffffff0, 0, kTcpRst, "ack set");
}

TEST(TcpRst, SynGetsRstAckSeqPlusOne) {
  FrameSpec s = tcp_spec();
  s.tcp_flags = kTcpSyn;
  s.seq = 0xffffffff;  // wraps
  check_rst(s, 0, 0, kTcpRst | kTcpAck, "syn");
}

TEST(TcpRst, NoAckWithPayloadAndFin) {
  FrameSpec s = tcp_spec();
  s.tcp_flags = kTcpFin | kTcpPsh;
  s.seq = 100;
  s.payload.assign(10, 0x55);
  check_rst(s, 0, 100 + 10 + 1, kTcpRst | kTcpAck, "fin + 10 bytes");
  s.tcp_flags = kTcpSyn;
  check_rst(s, 0, 100 + 10 + 1, kTcpRst | kTcpAck, "syn + 10 bytes");
  s.tcp_flags = 0;
  check_rst(s, 0, 100 + 10, kTcpRst | kTcpAck, "no flags + 10 bytes");
}

TEST(TcpRst, WithIpAndTcpOptions) {
  FrameSpec s = tcp_spec();
  s.ip_opts = {1, 1, 1, 0};
  s.tcp_opts = {2, 4, 5, 0xb4, 1, 1, 1, 0};
  s.tcp_flags = kTcpSyn;
  s.seq = 777;
  s.payload = {1, 2, 3};
  check_rst(s, 0, 777 + 3 + 1, kTcpRst | kTcpAck, "options");
  s.tcp_flags = kTcpAck;
  s.ack = 4242;
  check_rst(s, 4242, 0, kTcpRst, "options, ack");
}

// ---- make_icmp_unreach ----------------------------------------------------

void check_unreach(const FrameSpec& s, const char* what) {
  const auto orig = build_frame(s);
  std::vector<uint8_t> buf(28 + orig.size(), 0xee);
  std::memcpy(&buf[28], orig.data(), orig.size());
  Parsed p = parse_frame(&buf[28], orig.size());
  ASSERT_EQ(p.kind, FrameKind::kIpv4) << what;
  const uint32_t from = s.dst;
  const size_t len = make_icmp_unreach(buf.data(), p, from, 3);
  const size_t ihl = 20 + s.ip_opts.size();
  const size_t l4len = l4_len_of(orig.data());
  const size_t quoted = ihl + std::min<size_t>(8, l4len);
  ASSERT_EQ(len, 14 + 20 + 8 + quoted) << what;
  const uint8_t* g = buf.data();
  EXPECT_TRUE(std::equal(g, g + 6, s.smac.begin())) << what;
  EXPECT_TRUE(std::equal(g + 6, g + 12, s.dmac.begin())) << what;
  EXPECT_EQ(get16(g + 12), 0x0800);
  EXPECT_EQ(g[14], 0x45);
  EXPECT_EQ(ip_total(g), len - 14) << what;
  EXPECT_EQ(ip_proto(g), 1);
  EXPECT_EQ(ip_src(g), from);
  EXPECT_EQ(ip_dst(g), s.src);
  EXPECT_GT(ip_ttl(g), 1);
  EXPECT_TRUE(ip_cksum_exact(g)) << what;
  const uint8_t* icmp = g + 34;
  EXPECT_EQ(icmp[0], 3);
  EXPECT_EQ(icmp[1], 3);
  EXPECT_EQ(get32(icmp + 4), 0u) << "unused field";
  EXPECT_TRUE(icmp_cksum_ok(g)) << what;
  // Quoted: the original IP header and the first 8 bytes of its payload.
  EXPECT_TRUE(std::equal(icmp + 8, icmp + 8 + quoted, orig.begin() + 14)) << what;
  Parsed q = parse_frame(g, len);
  EXPECT_EQ(q.kind, FrameKind::kIpv4) << what;
  EXPECT_EQ(q.proto, kProtoIcmp);
  EXPECT_EQ(q.dport, 0x0303);
}

TEST(IcmpUnreach, UdpPortUnreachable) {
  FrameSpec s = udp_spec();
  s.payload.assign(100, 0x42);
  check_unreach(s, "udp");
}

TEST(IcmpUnreach, WithIpOptions) {
  FrameSpec s = udp_spec();
  s.ip_opts = {1, 1, 1, 0, 1, 1, 1, 0};
  check_unreach(s, "udp, ip options");
}

TEST(IcmpUnreach, ShortL4QuotesWhatThereIs) {
  FrameSpec s = tcp_spec();
  s.proto = 47;
  s.payload = {1, 2, 3, 4};
  check_unreach(s, "4-byte payload");
}

TEST(IcmpUnreach, TcpQuotesPortsAndSeq) {
  FrameSpec s = tcp_spec();
  s.seq = 0x01020304;
  check_unreach(s, "tcp");
}

// ---- make_icmp_echo_reply -------------------------------------------------

TEST(IcmpEcho, RequestBecomesReply) {
  FrameSpec s = icmp_spec();
  s.ttl = 3;
  s.payload.assign(56, 0xa5);
  s.icmp_id = 0xbeef;
  s.icmp_seq = 0x0102;
  auto f = build_frame(s);
  const auto orig = f;
  Parsed p = parse(f);
  ASSERT_EQ(p.kind, FrameKind::kIpv4);
  ASSERT_TRUE(make_icmp_echo_reply(f.data(), p));
  const uint8_t* g = f.data();
  EXPECT_TRUE(std::equal(g, g + 6, s.smac.begin()));
  EXPECT_TRUE(std::equal(g + 6, g + 12, s.dmac.begin()));
  EXPECT_EQ(ip_src(g), s.dst);
  EXPECT_EQ(ip_dst(g), s.src);
  EXPECT_GT(ip_ttl(g), 1);
  EXPECT_TRUE(ip_cksum_exact(g));
  EXPECT_EQ(l4_of(g)[0], 0);
  EXPECT_EQ(l4_of(g)[1], 0);
  EXPECT_TRUE(icmp_cksum_ok(g));
  // Identifier, sequence and payload unchanged.
  EXPECT_TRUE(std::equal(f.begin() + 34 + 4, f.end(), orig.begin() + 34 + 4));
}

TEST(IcmpEcho, WithIpOptions) {
  FrameSpec s = icmp_spec();
  s.ip_opts = {1, 1, 1, 0};
  auto f = build_frame(s);
  Parsed p = parse(f);
  ASSERT_EQ(p.kind, FrameKind::kIpv4);
  ASSERT_TRUE(make_icmp_echo_reply(f.data(), p));
  EXPECT_TRUE(ip_cksum_exact(f.data()));
  EXPECT_TRUE(icmp_cksum_ok(f.data()));
  EXPECT_EQ(l4_of(f.data())[0], 0);
}

// Regression (tests/fuzz/regressions/fuzz_packet/echo-all-zero.bin): a request
// of type 8 and nothing but zeros (id 0, seq 0, zero payload) got a reply with
// checksum 0x0000, which receivers reject: the all-zero reply needs 0xffff.
TEST(IcmpEcho, AllZeroReplyGetsChecksumFfff) {
  for (size_t payload : {0, 4, 5}) {
    FrameSpec s = icmp_spec();
    s.icmp_id = 0;
    s.icmp_seq = 0;
    s.payload.assign(payload, 0);
    auto f = build_frame(s);
    Parsed p = parse(f);
    ASSERT_EQ(p.kind, FrameKind::kIpv4);
    ASSERT_TRUE(make_icmp_echo_reply(f.data(), p));
    EXPECT_EQ(get16(l4_of(f.data()) + 2), 0xffff) << payload;
    EXPECT_TRUE(icmp_cksum_ok(f.data())) << payload;
  }
}

TEST(IcmpEcho, NotAnEchoRequestIsLeftAlone) {
  for (uint8_t type : {0, 3, 11, 13}) {
    FrameSpec s = icmp_spec();
    s.icmp_type = type;
    auto f = build_frame(s);
    const auto orig = f;
    Parsed p = parse(f);
    ASSERT_EQ(p.kind, FrameKind::kIpv4);
    EXPECT_FALSE(make_icmp_echo_reply(f.data(), p)) << int(type);
    EXPECT_EQ(f, orig);
  }
  FrameSpec s = icmp_spec();
  s.icmp_code = 1;  // echo request with a non-zero code
  auto f = build_frame(s);
  const auto orig = f;
  EXPECT_FALSE(make_icmp_echo_reply(f.data(), parse(f)));
  EXPECT_EQ(f, orig);
  auto t = build_frame(tcp_spec());
  const auto torig = t;
  EXPECT_FALSE(make_icmp_echo_reply(t.data(), parse(t)));
  EXPECT_EQ(t, torig);
}

// ---- ARP ------------------------------------------------------------------

TEST(Arp, ParseRequestAndReply) {
  const MacAddr bcast{0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  auto f = build_arp(1, kMacB, kClient, MacAddr{}, kVip, bcast);
  ArpInfo a;
  ASSERT_TRUE(parse_arp(f.data(), f.size(), &a));
  EXPECT_EQ(a.op, 1);
  EXPECT_TRUE(std::equal(a.sha, a.sha + 6, kMacB.begin()));
  EXPECT_EQ(a.spa, kClient);
  EXPECT_EQ(a.tpa, kVip);
  auto r = build_arp(2, kMacB, kClient, kMacA, kVip, kMacA);
  ASSERT_TRUE(parse_arp(r.data(), r.size(), &a));
  EXPECT_EQ(a.op, 2);
}

TEST(Arp, ParseRejectsMalformed) {
  const MacAddr bcast{0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  const auto good = build_arp(1, kMacB, kClient, MacAddr{}, kVip, bcast);
  ArpInfo a;
  EXPECT_FALSE(parse_arp(good.data(), 41, &a)) << "short";
  struct Mut {
    size_t off;
    uint8_t v;
    const char* what;
  } muts[] = {{14, 1, "htype 0x0101"}, {15, 6, "htype 6"},  {16, 0x86, "ptype 0x8600"},
              {18, 8, "hlen 8"},        {19, 16, "plen 16"}, {21, 3, "op 3"},
              {21, 0, "op 0"}};
  for (const auto& m : muts) {
    auto f = good;
    f[m.off] = m.v;
    EXPECT_FALSE(parse_arp(f.data(), f.size(), &a)) << m.what;
  }
}

TEST(Arp, MakeReply) {
  const MacAddr bcast{0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  auto f = build_arp(1, kMacB, kClient, MacAddr{}, kVip, bcast);
  f.resize(60, 0);  // padded as received
  const uint8_t ours[6] = {0x02, 0xaa, 0, 0, 0, 1};
  const size_t len = make_arp_reply(f.data(), ours, kVip);
  ASSERT_EQ(len, 42u);
  const uint8_t* g = f.data();
  EXPECT_TRUE(std::equal(g, g + 6, kMacB.begin())) << "eth dst = requester";
  EXPECT_TRUE(std::equal(g + 6, g + 12, ours)) << "eth src = us";
  EXPECT_EQ(get16(g + 12), 0x0806);
  ArpInfo a;
  ASSERT_TRUE(parse_arp(g, len, &a));
  EXPECT_EQ(a.op, 2);
  EXPECT_TRUE(std::equal(a.sha, a.sha + 6, ours));
  EXPECT_EQ(a.spa, kVip);
  EXPECT_EQ(a.tpa, kClient);
  EXPECT_TRUE(std::equal(g + 14 + 18, g + 14 + 24, kMacB.begin())) << "tha = requester";
}

TEST(Arp, MakeRequest) {
  std::vector<uint8_t> f(64, 0x77);
  const uint8_t ours[6] = {0x02, 0xaa, 0, 0, 0, 1};
  const size_t len = make_arp_request(f.data(), ours, ip4(10, 1, 0, 1), ip4(10, 1, 0, 13));
  ASSERT_EQ(len, 42u);
  const uint8_t* g = f.data();
  for (int i = 0; i < 6; ++i) EXPECT_EQ(g[i], 0xff);
  EXPECT_TRUE(std::equal(g + 6, g + 12, ours));
  EXPECT_EQ(get16(g + 12), 0x0806);
  ArpInfo a;
  ASSERT_TRUE(parse_arp(g, len, &a));
  EXPECT_EQ(a.op, 1);
  EXPECT_TRUE(std::equal(a.sha, a.sha + 6, ours));
  EXPECT_EQ(a.spa, ip4(10, 1, 0, 1));
  EXPECT_EQ(a.tpa, ip4(10, 1, 0, 13));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(g[14 + 18 + i], 0) << "tha zero";
  EXPECT_EQ(parse_frame(g, len).kind, FrameKind::kArp);
}

}  // namespace
}  // namespace vipd::dp
