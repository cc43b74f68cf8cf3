// The NAT rewrite (rewrite_l3l4) and the reply builders (TCP RST, ICMP port
// unreachable, ICMP echo reply, ARP), checked against frames built and
// checksums computed independently in the test. parse_frame: packet_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "tests/unit/dataplane/fastpath/packet_test_util.h"

namespace vipd::dp {
namespace {

using namespace packet_test;

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

// rewrite_l3l4_fwd (the worker's, for packets whose TTL it checked above 1)
// writes the same bytes as rewrite_l3l4, TCP and UDP (with and without a
// checksum), with and without IP options, TTL 2 included.
TEST(RewriteL3L4, FwdVariantWritesTheSameBytes) {
  std::mt19937_64 rng(10);
  for (int it = 0; it < 3000; ++it) {
    FrameSpec s = (it & 1) ? udp_spec() : tcp_spec();
    s.src = static_cast<uint32_t>(rng());
    s.dst = static_cast<uint32_t>(rng());
    s.sport = static_cast<uint16_t>(rng());
    s.dport = static_cast<uint16_t>(rng());
    s.ttl = static_cast<uint8_t>(it % 7 == 0 ? 2 : 2 + rng() % 254);
    s.tcp_flags = static_cast<uint8_t>(rng());
    if (rng() % 4 == 0) s.ip_opts = {1, 1, 1, 0};
    if ((it & 1) && rng() % 4 == 0) s.udp_checksum = false;
    s.payload = random_bytes(rng, rng() % 200);
    auto a = build_frame(s);
    auto b = a;
    const Parsed p = parse(a);
    ASSERT_EQ(p.kind, FrameKind::kIpv4);
    const Rewrite r{static_cast<uint32_t>(rng()), static_cast<uint32_t>(rng()), static_cast<uint16_t>(rng()),
                    static_cast<uint16_t>(rng())};
    rewrite_l3l4(a.data(), p, r.src, r.sport, r.dst, r.dport);
    rewrite_l3l4_fwd(b.data(), p, __builtin_bswap32(r.src), __builtin_bswap32(r.dst),
                     packet_detail::raw_ports(r.sport, r.dport));
    ASSERT_EQ(a, b) << "iteration " << it << ", ttl " << int{s.ttl};
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

// The checksum update takes the TTL word's delta as a constant for a TTL
// above 0; TTL 1 (the smallest the callers forward) and 0 (wraps to 255,
// the general form) must come out exact too, for TCP and UDP.
TEST(RewriteL3L4, TtlOneAndZeroChecksumsExact) {
  std::mt19937_64 rng(10);
  for (uint8_t ttl : {uint8_t{1}, uint8_t{0}}) {
    for (int it = 0; it < 200; ++it) {
      FrameSpec s = (it & 1) ? udp_spec() : tcp_spec();
      s.ttl = ttl;
      s.src = static_cast<uint32_t>(rng());
      s.sport = static_cast<uint16_t>(rng());
      s.payload = random_bytes(rng, rng() % 64);
      check_rewrite(build_frame(s),
                    {static_cast<uint32_t>(rng()), static_cast<uint32_t>(rng()), static_cast<uint16_t>(rng()),
                     static_cast<uint16_t>(rng())},
                    ttl ? "ttl 1" : "ttl 0");
      if (HasFailure()) return;
    }
  }
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
