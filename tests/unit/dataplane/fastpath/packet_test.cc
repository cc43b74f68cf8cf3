// Frame parsing and validation (parse_frame), checked against frames built
// and checksums computed independently in the test. The rewrite and the reply
// builders: packet_build_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <type_traits>
#include <vector>

#include "tests/unit/dataplane/fastpath/packet_test_util.h"

namespace vipd::dp {
namespace {

using namespace packet_test;

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
  for (uint16_t et : {0x8100, 0x88cc, 0x0000, 0x0801}) {
    FrameSpec s = tcp_spec();
    s.ethertype = et;
    expect_drop(build_frame(s), kBadEthertype, "ethertype");
  }
}

// IPv6 is only classified here; the worker parses it (ipv6.h, ipv6_test.cc).
TEST(ParseFrame, Ipv6IsClassifiedNotParsed) {
  FrameSpec s = tcp_spec();
  s.ethertype = 0x86dd;
  EXPECT_EQ(parse(build_frame(s)).kind, FrameKind::kIpv6);
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

// A good frame mutated: 1..max_flips random bytes, maybe cut or grown, and
// (three times in four) the IPv4 header checksum fixed again so that the
// parse gets past it.
std::vector<uint8_t> mutate(std::mt19937_64& rng, std::vector<uint8_t> f, unsigned max_flips) {
  const int flips = 1 + static_cast<int>(rng() % max_flips);
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
  return f;
}

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
        f = mutate(rng, seeds[rng() % seeds.size()], 4);
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

// ---- parse_tcp_udp4: parse_frame's common frame alone ---------------------

// Whether parse_tcp_udp4 took frame f (exactly sized on the heap) exactly
// when parse_frame says IPv4 TCP/UDP with a 20-byte header, and then wrote
// what parse_frame returns, and the key's words; else nothing.
void expect_fast_parse_agrees(const std::vector<uint8_t>& f, size_t* taken) {
  static_assert(std::is_trivially_copyable_v<Parsed>, "filled with a pattern byte by byte");
  std::unique_ptr<uint8_t[]> buf(new uint8_t[f.size() ? f.size() : 1]);
  if (!f.empty()) std::memcpy(buf.get(), f.data(), f.size());
  const Parsed want = parse_frame(buf.get(), f.size());
  const bool usual = want.kind == FrameKind::kIpv4 && (want.proto == kProtoTcp || want.proto == kProtoUdp) &&
                     want.l4_off == kEthLen + 20;
  Parsed got;
  std::memset(static_cast<void*>(&got), 0xa5, sizeof got);
  Parsed untouched;
  std::memcpy(&untouched, &got, sizeof got);
  uint64_t addrs = 1;
  uint32_t ports = 2;
  const bool fast = parse_tcp_udp4(buf.get(), f.size(), got, &addrs, &ports);
  ASSERT_EQ(fast, usual) << "len " << f.size() << " kind " << static_cast<int>(want.kind) << " drop "
                         << static_cast<int>(want.drop);
  if (!fast) {
    EXPECT_EQ(std::memcmp(&got, &untouched, sizeof got), 0) << "nothing written";
    EXPECT_EQ(addrs, 1u);
    EXPECT_EQ(ports, 2u);
    return;
  }
  ++*taken;
  EXPECT_EQ(got.kind, want.kind);
  EXPECT_EQ(got.drop, want.drop);
  EXPECT_EQ(got.l3_off, want.l3_off);
  EXPECT_EQ(got.l4_off, want.l4_off);
  EXPECT_EQ(got.ip_total_len, want.ip_total_len);
  EXPECT_EQ(got.l4_len, want.l4_len);
  EXPECT_EQ(got.proto, want.proto);
  EXPECT_EQ(got.tcp_flags, want.tcp_flags);
  EXPECT_EQ(got.ttl, want.ttl);
  EXPECT_EQ(got.src, want.src);
  EXPECT_EQ(got.dst, want.dst);
  EXPECT_EQ(got.sport, want.sport);
  EXPECT_EQ(got.dport, want.dport);
  EXPECT_EQ(addrs, uint64_t{want.src} | (uint64_t{want.dst} << 32));
  EXPECT_EQ(ports, uint32_t{want.sport} | (uint32_t{want.dport} << 16));
}

TEST(ParseTcpUdp4, AgreesWithParseFrameOnGoodFrames) {
  size_t taken = 0;
  FrameSpec t = tcp_spec();
  t.tcp_flags = kTcpSyn | kTcpAck;
  t.ttl = 17;
  t.tcp_opts = {2, 4, 0x05, 0xb4};
  t.payload = {1, 2, 3};
  expect_fast_parse_agrees(build_frame(t), &taken);
  FrameSpec u = udp_spec();
  u.payload = {1};
  u.pad_to = 60;
  expect_fast_parse_agrees(build_frame(u), &taken);
  EXPECT_EQ(taken, 2u);
  // Frames it leaves to parse_frame: ICMP, IP options, another protocol.
  expect_fast_parse_agrees(build_frame(icmp_spec()), &taken);
  FrameSpec o = tcp_spec();
  o.ip_opts = {1, 1, 1, 0};
  expect_fast_parse_agrees(build_frame(o), &taken);
  EXPECT_EQ(taken, 2u);
}

TEST(ParseTcpUdp4, AgreesWithParseFrameOnMutatedFrames) {
  std::mt19937_64 rng(11);
  std::vector<std::vector<uint8_t>> seeds;
  for (auto s : {tcp_spec(), udp_spec(), icmp_spec()}) {
    seeds.push_back(build_frame(s));
    s.ip_opts = {1, 1, 1, 0};
    seeds.push_back(build_frame(s));
  }
  size_t taken = 0;
  for (int it = 0; it < 50000; ++it) {
    const std::vector<uint8_t> f = mutate(rng, seeds[rng() % seeds.size()], 3);
    expect_fast_parse_agrees(f, &taken);
    if (HasFailure()) {
      ADD_FAILURE() << "iteration " << it;
      return;
    }
  }
  EXPECT_GT(taken, 1000u);  // the mix exercises both ways
}

// ---- rewrite_l3l4 ---------------------------------------------------------

}  // namespace
}  // namespace vipd::dp
