// The IPv6 packet layer (dataplane/fastpath/ipv6.h) as pure functions:
// parsing and the extension chain (valid and hostile), checksums against the
// reference in ipv6_test_util.h, the NAT rewrite, NDP, echo, ICMPv6 errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>

#include "dataplane/fastpath/ipv6.h"
#include "dataplane/fastpath/v6_tables.h"
#include "tests/unit/dataplane/fastpath/ipv6_test_util.h"

namespace vipd::dp {
namespace {

using namespace test;

const Addr6 kA = a6({0xfd00, 0x10, 0, 0, 0, 0, 0, 0x10});   // client
const Addr6 kB = a6({0xfd00, 0x10, 0, 0, 0, 0, 0, 0x1});    // port
const Addr6 kVip6 = a6({0xfd00, 0x10, 0x96, 0, 0, 0, 0, 0x100});

Frame6 base(uint8_t next, Bytes l4) {
  Frame6 s;
  s.src = kA;
  s.dst = kB;
  s.next = next;
  s.l4 = std::move(l4);
  return s;
}

bool parse(const Bytes& f, Parsed6* p) { return parse_ipv6(f.data(), f.size(), p); }

void expect_drop(const Bytes& f, DropReason r, const char* what) {
  Parsed6 p;
  EXPECT_FALSE(parse(f, &p)) << what;
  EXPECT_EQ(p.drop, r) << what << ": got " << drop_reason_name(p.drop) << ", want " << drop_reason_name(r);
}

TEST(Ipv6Parse, PlainTcpUdpIcmp) {
  Parsed6 p;
  Bytes f = build6(base(kProtoTcp, tcp6(40000, 8080, kTcpSyn, 5)));
  ASSERT_TRUE(parse(f, &p)) << drop_reason_name(p.drop);
  EXPECT_EQ(p.proto, kProtoTcp);
  EXPECT_EQ(p.l4_off, 54);
  EXPECT_EQ(p.l4_len, 25);
  EXPECT_EQ(p.payload_len, 25);
  EXPECT_EQ(p.sport, 40000);
  EXPECT_EQ(p.dport, 8080);
  EXPECT_EQ(p.tcp_flags, kTcpSyn);
  EXPECT_EQ(p.hop_limit, 64);
  EXPECT_EQ(p.n_ext, 0);
  EXPECT_TRUE(std::equal(kA.begin(), kA.end(), p.src));
  EXPECT_TRUE(std::equal(kB.begin(), kB.end(), p.dst));
  f = build6(base(kProtoUdp, udp6(5353, 53, 3)));
  ASSERT_TRUE(parse(f, &p));
  EXPECT_EQ(p.proto, kProtoUdp);
  EXPECT_EQ(p.dport, 53);
  f = build6(base(kProtoIcmp6, echo6(7, 1)));
  ASSERT_TRUE(parse(f, &p));
  EXPECT_EQ(p.dport, 128 << 8);
  EXPECT_EQ(p.sport, 7);
  // Ethernet padding after the packet is fine.
  auto s = base(kProtoUdp, udp6(1, 2));
  s.pad = 20;
  ASSERT_TRUE(parse(build6(s), &p));
  EXPECT_EQ(p.l4_len, 8);
}

TEST(Ipv6Parse, ExtensionChainIsWalked) {
  auto s = base(kIp6HopByHop, tcp6(1, 80, kTcpSyn));
  const Bytes hbh = ext_hdr(kIp6DestOpts, 0), dst = ext_hdr(kIp6Routing, 1), rt = ext_hdr(kIp6Fragment, 0, 0),
              fr = frag_hdr(kProtoTcp, 0, false);
  for (const Bytes* h : {&hbh, &dst, &rt, &fr}) s.ext.insert(s.ext.end(), h->begin(), h->end());
  Parsed6 p;
  ASSERT_TRUE(parse(build6(s), &p)) << drop_reason_name(p.drop);
  EXPECT_EQ(p.proto, kProtoTcp);
  EXPECT_EQ(p.n_ext, 4);
  EXPECT_TRUE(p.atomic_fragment);
  EXPECT_EQ(p.l4_off, 54 + 8 + 16 + 8 + 8);
  EXPECT_EQ(p.l4_len, 20);
  EXPECT_EQ(p.dport, 80);
  // Exactly kMaxExtHeaders destination options headers pass; one more does not.
  for (unsigned n : {kMaxExtHeaders, kMaxExtHeaders + 1}) {
    auto c = base(kIp6DestOpts, udp6(1, 53));
    for (unsigned i = 0; i < n; ++i) {
      Bytes h = ext_hdr(i + 1 == n ? kProtoUdp : kIp6DestOpts, 0);
      c.ext.insert(c.ext.end(), h.begin(), h.end());
    }
    Parsed6 q;
    const bool ok = parse(build6(c), &q);
    EXPECT_EQ(ok, n <= kMaxExtHeaders) << n;
    if (!ok) {
      EXPECT_EQ(q.drop, kIpv6ExtChainTooLong);
    }
  }
}

TEST(Ipv6Parse, HostileFramesGetTheirReasons) {
  Parsed6 p;
  Bytes f = build6(base(kProtoTcp, tcp6(1, 2, kTcpSyn)));
  expect_drop(Bytes(f.begin(), f.begin() + 53), kTruncated, "fixed header cut");
  Bytes v = f;
  v[14] = 0x40;
  expect_drop(v, kIpv6BadHeader, "version 4");
  Bytes mc = f;
  mc[22] = 0xff;  // source ff..: a multicast source is never valid
  expect_drop(mc, kIpv6BadHeader, "multicast source");
  auto s = base(kProtoTcp, tcp6(1, 2, kTcpSyn));
  s.plen_delta = 1;
  expect_drop(build6(s), kIpv6BadHeader, "payload length beyond the frame");
  s.plen_delta = -20;  // payload length 0: jumbogram
  expect_drop(build6(s), kIpv6BadHeader, "payload length 0");
  s.plen_delta = -1;
  expect_drop(build6(s), kBadL4Header, "TCP header cut by the payload length");
  // Hop-by-hop not first.
  s = base(kIp6DestOpts, udp6(1, 2));
  s.ext = ext_hdr(kIp6HopByHop, 0);
  Bytes h = ext_hdr(kProtoUdp, 0);
  s.ext.insert(s.ext.end(), h.begin(), h.end());
  expect_drop(build6(s), kIpv6BadExtHeader, "hop-by-hop second");
  // An extension header longer than the payload (its length field).
  s = base(kIp6DestOpts, udp6(1, 2));
  s.ext = ext_hdr(kProtoUdp, 0);
  s.ext[1] = 200;
  expect_drop(build6(s), kIpv6BadExtHeader, "ext header length beyond payload");
  // Payload ends inside an extension header (fewer than 8 bytes left).
  s = base(kIp6DestOpts, Bytes{});
  s.ext = Bytes{kProtoUdp, 0, 0, 0};
  expect_drop(build6(s), kIpv6BadExtHeader, "ext header truncated");
  // A routing header that would make us an intermediate hop.
  s = base(kIp6Routing, udp6(1, 2));
  s.ext = ext_hdr(kProtoUdp, 2, 1);
  expect_drop(build6(s), kIpv6BadExtHeader, "routing, segments left 1");
  // Fragments: non-first, and first with more to come. Atomic: passes.
  for (auto [off, more] : {std::pair<uint16_t, bool>{8, false}, {0, true}, {1448, true}}) {
    s = base(kIp6Fragment, udp6(1, 2));
    s.ext = frag_hdr(kProtoUdp, off, more);
    expect_drop(build6(s), kIpv6Fragment, "fragment");
  }
  s = base(kIp6Fragment, udp6(1, 2));
  s.ext = frag_hdr(kProtoUdp, 0, false);
  EXPECT_TRUE(parse(build6(s), &p)) << "atomic fragment";
  // L4: UDP checksum 0 (not allowed over IPv6), UDP length, TCP offset, ICMPv6 short.
  Bytes u = udp6(1, 2);
  u[6] = u[7] = 0;
  expect_drop(build6(base(kProtoUdp, u)), kBadL4Header, "UDP checksum 0");
  u = udp6(1, 2);
  u[5] = 9;
  expect_drop(build6(base(kProtoUdp, u)), kBadL4Header, "UDP length beyond payload");
  Bytes t = tcp6(1, 2, kTcpSyn);
  t[12] = 4 << 4;
  expect_drop(build6(base(kProtoTcp, t)), kBadL4Header, "TCP offset 16");
  expect_drop(build6(base(kProtoIcmp6, Bytes{128, 0, 0})), kBadL4Header, "ICMPv6 of 3 bytes");
}

TEST(Ipv6Parse, EveryTruncationOfAChainIsRejectedNotOverread) {
  // Cut a frame with a full chain at every length, with the payload length
  // either kept (beyond the frame) or shrunk to what is left.
  auto s = base(kIp6HopByHop, tcp6(1, 80, kTcpSyn, 4));
  for (const Bytes& h : {ext_hdr(kIp6DestOpts, 1), ext_hdr(kIp6Fragment, 0), frag_hdr(kProtoTcp, 0, false)})
    s.ext.insert(s.ext.end(), h.begin(), h.end());
  const Bytes full = build6(s);
  for (size_t cut = 14; cut < full.size(); ++cut) {
    Bytes f(full.begin(), full.begin() + static_cast<long>(cut));
    Parsed6 p;
    EXPECT_FALSE(parse(f, &p)) << cut;
    if (cut >= 54 && cut < 54 + s.ext.size() + 20) {
      f[18] = static_cast<uint8_t>((cut - 54) >> 8);
      f[19] = static_cast<uint8_t>(cut - 54);
      EXPECT_FALSE(parse(f, &p)) << "shrunk payload length, cut " << cut;
    }
  }
}

TEST(Ipv6Checksum, MatchesReferenceAndVerifies) {
  std::mt19937 rng(6);
  for (int i = 0; i < 300; ++i) {
    Addr6 s, d;
    for (auto& b : s) b = static_cast<uint8_t>(rng());
    for (auto& b : d) b = static_cast<uint8_t>(rng());
    const uint8_t proto = i % 3 == 0 ? kProtoTcp : i % 3 == 1 ? kProtoUdp : kProtoIcmp6;
    const size_t coff = proto == kProtoTcp ? 16 : proto == kProtoUdp ? 6 : 2;
    Bytes m(20 + rng() % 300);
    for (auto& b : m) b = static_cast<uint8_t>(rng());
    const uint16_t raw = l4_checksum6(s.data(), d.data(), proto, m.data(), m.size(), coff);
    std::memcpy(&m[coff], &raw, 2);
    EXPECT_TRUE(cksum6_matches(s, d, proto, m, coff)) << i;
    EXPECT_TRUE(l4_checksum6_ok(s.data(), d.data(), proto, m.data(), m.size())) << i;
    m[m.size() / 2] ^= 0x10;
    EXPECT_FALSE(l4_checksum6_ok(s.data(), d.data(), proto, m.data(), m.size())) << i;
  }
}

TEST(Ipv6Checksum, UdpZeroBecomesAllOnes) {
  // Choose the payload so that the sum is 0xffff: the checksum would be 0.
  Addr6 s{}, d{};
  Bytes m = {0, 1, 0, 2, 0, 10, 0, 0, 0, 0};
  const uint16_t c0 = ref_cksum6(s, d, kProtoUdp, m, 6);
  // Put the complement of what is missing into the last word.
  m[8] = static_cast<uint8_t>(c0 >> 8);
  m[9] = static_cast<uint8_t>(c0);
  ASSERT_EQ(ref_cksum6(s, d, kProtoUdp, m, 6), 0);
  const uint16_t raw = l4_checksum6(s.data(), d.data(), kProtoUdp, m.data(), m.size(), 6);
  EXPECT_EQ(raw, 0xffff);
}

TEST(Ipv6Checksum, IncrementalRewriteEqualsFromScratch) {
  std::mt19937 rng(17);
  for (int i = 0; i < 200; ++i) {
    const bool tcp = i % 2;
    auto s = base(tcp ? kProtoTcp : kProtoUdp, tcp ? tcp6(static_cast<uint16_t>(rng()), 80, kTcpAck, rng() % 40)
                                                    : udp6(static_cast<uint16_t>(rng()), 53, rng() % 40 + 1));
    for (auto& b : s.src) b = static_cast<uint8_t>(rng());
    if (i % 4 == 0) s.ext = ext_hdr(tcp ? kProtoTcp : kProtoUdp, 0), s.next = kIp6DestOpts;
    Bytes f = build6(s);
    const size_t coff = tcp ? 16 : 6;
    const size_t l4 = 54 + s.ext.size();
    fix_cksum6(f, l4, tcp ? kProtoTcp : kProtoUdp, coff);
    Parsed6 p;
    ASSERT_TRUE(parse(f, &p)) << drop_reason_name(p.drop);
    Addr6 ns, nd;
    for (auto& b : ns) b = static_cast<uint8_t>(rng());
    for (auto& b : nd) b = static_cast<uint8_t>(rng());
    const uint16_t sp = static_cast<uint16_t>(rng()), dp = static_cast<uint16_t>(rng());
    rewrite6_l3l4(f.data(), p, ns.data(), sp, nd.data(), dp);
    EXPECT_TRUE(std::equal(ns.begin(), ns.end(), f.begin() + 22));
    EXPECT_TRUE(std::equal(nd.begin(), nd.end(), f.begin() + 38));
    EXPECT_EQ(f[21], 63) << "hop limit decremented";
    EXPECT_EQ((f[l4] << 8) | f[l4 + 1], sp);
    EXPECT_EQ((f[l4 + 2] << 8) | f[l4 + 3], dp);
    Bytes msg(f.begin() + static_cast<long>(l4), f.end());
    EXPECT_TRUE(cksum6_matches(ns, nd, tcp ? kProtoTcp : kProtoUdp, msg, coff)) << i;
  }
}

// A valid NS from kA for kB (to kB's solicited-node group), as a frame.
Bytes ns_frame(const MacAddr* sll, const Addr6& src = kA, uint8_t hop = 255) {
  Frame6 s;
  s.src = src;
  s.dst = sol_node(kB);
  s.dmac = mcast_mac(s.dst);
  s.next = kProtoIcmp6;
  s.hop_limit = hop;
  s.l4 = ns6(kB, sll);
  Bytes f = build6(s);
  fix_cksum6(f, 54, kProtoIcmp6, 2);
  return f;
}

const MacAddr kOurMac{0x02, 0, 0, 0, 0xa0, 0};
const MacAddr kPeerMac{0x02, 0xc1, 0, 0, 0, 0x10};

TEST(Ndp, NeighborAdvertisementExactBytes) {
  Bytes f = ns_frame(&kPeerMac);
  Parsed6 p;
  ASSERT_TRUE(parse(f, &p));
  NdInfo nd;
  ASSERT_EQ(parse_nd(f.data(), p, &nd), kNumDropReasons);
  EXPECT_EQ(nd.type, 135);
  EXPECT_TRUE(nd.has_lladdr);
  f.resize(86);
  ASSERT_EQ(make_nd_advert(f.data(), p, nd, kOurMac.data(), kB.data()), 86u);
  Bytes want = {0x02, 0xc1, 0, 0, 0, 0x10,  0x02, 0, 0, 0, 0xa0, 0,  0x86, 0xdd,
                0x60, 0, 0, 0, 0, 32, 58, 255};
  want.insert(want.end(), kB.begin(), kB.end());
  want.insert(want.end(), kA.begin(), kA.end());
  want.insert(want.end(), {136, 0, 0, 0, 0x60, 0, 0, 0});  // solicited + override
  want.insert(want.end(), kB.begin(), kB.end());
  want.insert(want.end(), {2, 1, 0x02, 0, 0, 0, 0xa0, 0});  // target link-layer option
  Bytes msg(f.begin() + 54, f.end());
  const uint16_t c = ref_cksum6(kB, kA, 58, msg, 2);
  want[56] = static_cast<uint8_t>(c >> 8);
  want[57] = static_cast<uint8_t>(c);
  EXPECT_EQ(f, want);
  // Without a source link-layer option: back to the frame's source MAC.
  f = ns_frame(nullptr);
  f[6 + 5] = 0x77;
  ASSERT_TRUE(parse(f, &p));
  ASSERT_EQ(parse_nd(f.data(), p, &nd), kNumDropReasons);
  EXPECT_FALSE(nd.has_lladdr);
  f.resize(86);
  make_nd_advert(f.data(), p, nd, kOurMac.data(), kB.data());
  EXPECT_EQ(f[5], 0x77);
}

TEST(Ndp, DuplicateAddressDetectionGetsAllNodesAdvert) {
  const Addr6 any{};
  Bytes f = ns_frame(nullptr, any);
  Parsed6 p;
  ASSERT_TRUE(parse(f, &p));
  NdInfo nd;
  ASSERT_EQ(parse_nd(f.data(), p, &nd), kNumDropReasons);
  f.resize(86);
  make_nd_advert(f.data(), p, nd, kOurMac.data(), kB.data());
  const Bytes all_nodes_mac = {0x33, 0x33, 0, 0, 0, 1};
  EXPECT_TRUE(std::equal(all_nodes_mac.begin(), all_nodes_mac.end(), f.begin()));
  const Addr6 all = a6({0xff02, 0, 0, 0, 0, 0, 0, 1});
  EXPECT_TRUE(std::equal(all.begin(), all.end(), f.begin() + 38));
  EXPECT_EQ(f[54 + 4], 0x20) << "override only, not solicited";
  EXPECT_TRUE(cksum6_matches(kB, all, 58, Bytes(f.begin() + 54, f.end()), 2));
  // DAD with a source link-layer option is invalid (RFC 4861 7.1.1).
  f = ns_frame(&kPeerMac, any);
  ASSERT_TRUE(parse(f, &p));
  EXPECT_EQ(parse_nd(f.data(), p, &nd), kNdpInvalid);
}

TEST(Ndp, InvalidSolicitationsAreRejected) {
  struct Case {
    const char* what;
    void (*mutate)(Bytes&);
  } cases[] = {
      {"hop limit 254", [](Bytes& f) { f[21] = 254; }},
      {"code 1", [](Bytes& f) { f[55] = 1; }},
      {"bad checksum", [](Bytes& f) { f[57] ^= 1; }},
      {"multicast target", [](Bytes& f) { f[54 + 8] = 0xff; }},
      {"option length 0", [](Bytes& f) { f[54 + 25] = 0; }},
      {"option beyond message", [](Bytes& f) { f[54 + 25] = 2; }},
  };
  for (const auto& c : cases) {
    Bytes f = ns_frame(&kPeerMac);
    c.mutate(f);
    if (std::string(c.what) != "bad checksum" && std::string(c.what) != "hop limit 254") fix_cksum6(f, 54, 58, 2);
    Parsed6 p;
    ASSERT_TRUE(parse(f, &p)) << c.what;
    NdInfo nd;
    EXPECT_EQ(parse_nd(f.data(), p, &nd), kNdpInvalid) << c.what;
  }
  // Shorter than 24 bytes.
  Frame6 s;
  s.src = kA;
  s.dst = kB;
  s.next = kProtoIcmp6;
  s.hop_limit = 255;
  s.l4 = Bytes{135, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4};
  Bytes f = build6(s);
  fix_cksum6(f, 54, 58, 2);
  Parsed6 p;
  ASSERT_TRUE(parse(f, &p));
  NdInfo nd;
  EXPECT_EQ(parse_nd(f.data(), p, &nd), kNdpInvalid);
}

TEST(Ndp, SolicitationExactBytes) {
  Bytes f(86, 0xee);
  const Addr6 target = a6({0xfd00, 0x10, 0, 0, 0, 0, 0x12, 0x3456});
  ASSERT_EQ(make_nd_solicit(f.data(), kOurMac.data(), kB.data(), target.data()), 86u);
  const Addr6 g = a6({0xff02, 0, 0, 0, 0, 1, 0xff12, 0x3456});
  Bytes want = {0x33, 0x33, 0xff, 0x12, 0x34, 0x56, 0x02, 0, 0, 0, 0xa0, 0, 0x86, 0xdd,
                0x60, 0, 0, 0, 0, 32, 58, 255};
  want.insert(want.end(), kB.begin(), kB.end());
  want.insert(want.end(), g.begin(), g.end());
  want.insert(want.end(), {135, 0, 0, 0, 0, 0, 0, 0});
  want.insert(want.end(), target.begin(), target.end());
  want.insert(want.end(), {1, 1, 0x02, 0, 0, 0, 0xa0, 0});
  const uint16_t c = ref_cksum6(kB, g, 58, Bytes(want.begin() + 54, want.end()), 2);
  want[56] = static_cast<uint8_t>(c >> 8);
  want[57] = static_cast<uint8_t>(c);
  EXPECT_EQ(f, want);
  // And it passes our own validation.
  Parsed6 p;
  ASSERT_TRUE(parse(f, &p));
  NdInfo nd;
  EXPECT_EQ(parse_nd(f.data(), p, &nd), kNumDropReasons);
}

TEST(Icmp6, EchoReplyWithAndWithoutExtensionHeaders) {
  for (bool ext : {false, true}) {
    auto s = base(ext ? kIp6DestOpts : kProtoIcmp6, echo6(0x4242, 3, 13));
    if (ext) s.ext = ext_hdr(kProtoIcmp6, 1);
    Bytes f = build6(s);
    fix_cksum6(f, 54 + s.ext.size(), 58, 2);
    Parsed6 p;
    ASSERT_TRUE(parse(f, &p));
    size_t len = 0;
    ASSERT_TRUE(make_icmp6_echo_reply(f.data(), p, &len));
    EXPECT_EQ(len, 54u + 21);
    f.resize(len);
    EXPECT_TRUE(std::equal(s.smac.begin(), s.smac.end(), f.begin())) << "eth dst = requester";
    EXPECT_EQ(f[20], 58);
    EXPECT_EQ(f[19], 21) << "payload length";
    EXPECT_TRUE(std::equal(kB.begin(), kB.end(), f.begin() + 22));
    EXPECT_TRUE(std::equal(kA.begin(), kA.end(), f.begin() + 38));
    EXPECT_EQ(f[54], 129);
    Bytes msg(f.begin() + 54, f.end());
    Bytes req = echo6(0x4242, 3, 13);
    EXPECT_TRUE(std::equal(req.begin() + 4, req.end(), msg.begin() + 4)) << "id, seq, data kept";
    EXPECT_TRUE(cksum6_matches(kB, kA, 58, msg, 2));
  }
  Bytes f = build6(base(kProtoIcmp6, Bytes{129, 0, 0, 0, 0, 0, 0, 0}));
  Parsed6 p;
  ASSERT_TRUE(parse(f, &p));
  size_t len = 0;
  EXPECT_FALSE(make_icmp6_echo_reply(f.data(), p, &len)) << "a reply is not answered";
}

// The offending frame at buf + kIcmp6ErrorRoom, as the worker has it after
// prepending the room.
Bytes error_for(const Bytes& orig, uint8_t type, uint8_t code, uint32_t param, size_t* out_len) {
  Bytes buf(kIcmp6ErrorRoom, 0);
  buf.insert(buf.end(), orig.begin(), orig.end());
  Parsed6 p;
  EXPECT_TRUE(parse_ipv6(buf.data() + kIcmp6ErrorRoom, orig.size(), &p));
  *out_len = make_icmp6_error(buf.data(), p, orig.size() - kEthLen, kVip6.data(), type, code, param);
  buf.resize(*out_len);
  return buf;
}

TEST(Icmp6, PortUnreachableQuotesTheWholeSmallPacket) {
  auto s = base(kProtoUdp, udp6(40000, 53, 10));
  s.dst = kVip6;
  Bytes orig = build6(s);
  fix_cksum6(orig, 54, kProtoUdp, 6);
  size_t len = 0;
  Bytes e = error_for(orig, kIcmp6DestUnreach, 4, 0, &len);
  const size_t l3 = orig.size() - 14;
  ASSERT_EQ(len, 14 + 40 + 8 + l3);
  Bytes want(s.smac.begin(), s.smac.end());
  want.insert(want.end(), s.dmac.begin(), s.dmac.end());
  want.insert(want.end(), {0x86, 0xdd, 0x60, 0, 0, 0, 0, static_cast<uint8_t>(8 + l3), 58, 64});
  want.insert(want.end(), kVip6.begin(), kVip6.end());
  want.insert(want.end(), kA.begin(), kA.end());
  want.insert(want.end(), {1, 4, 0, 0, 0, 0, 0, 0});
  want.insert(want.end(), orig.begin() + 14, orig.end());
  const uint16_t c = ref_cksum6(kVip6, kA, 58, Bytes(want.begin() + 54, want.end()), 2);
  want[56] = static_cast<uint8_t>(c >> 8);
  want[57] = static_cast<uint8_t>(c);
  EXPECT_EQ(e, want);
}

TEST(Icmp6, PacketTooBigIsCutToTheMinimumMtu) {
  auto s = base(kProtoTcp, tcp6(40000, 443, kTcpAck, 1400));
  Bytes orig = build6(s);
  size_t len = 0;
  Bytes e = error_for(orig, kIcmp6PacketTooBig, 0, 1280, &len);
  ASSERT_EQ(len, 14u + kIp6MinMtu);
  EXPECT_EQ((e[18] << 8) | e[19], 1280 - 40) << "payload length";
  EXPECT_EQ(e[54], 2);
  EXPECT_EQ(e[55], 0);
  EXPECT_EQ((e[58] << 24) | (e[59] << 16) | (e[60] << 8) | e[61], 1280) << "MTU";
  EXPECT_TRUE(std::equal(e.begin() + 62, e.end(), orig.begin() + 14)) << "quote: the packet's start";
  EXPECT_TRUE(cksum6_matches(kVip6, kA, 58, Bytes(e.begin() + 54, e.end()), 2));
}

TEST(Ip6Addr, SolicitedNodeAndMulticastMac) {
  const Addr6 t = a6({0xfd00, 0x10, 0, 0, 0, 0, 0xab, 0xcdef});
  uint8_t g[16], mac[6];
  ip6_solicited_node(t.data(), g);
  const Addr6 want = a6({0xff02, 0, 0, 0, 0, 1, 0xffab, 0xcdef});
  EXPECT_TRUE(std::equal(want.begin(), want.end(), g));
  ip6_multicast_mac(g, mac);
  const Bytes wm = {0x33, 0x33, 0xff, 0xab, 0xcd, 0xef};
  EXPECT_TRUE(std::equal(wm.begin(), wm.end(), mac));
  EXPECT_TRUE(ip6_is_unspecified(Addr6{}.data()));
  EXPECT_FALSE(ip6_is_unspecified(t.data()));
  EXPECT_TRUE(ip6_is_multicast(g));
}

// The free list is a fixed array taken at init: a full table refuses, every
// removed entry comes back (and only once), for as many rounds as one likes.
TEST(ConnTable6, FullTableRefusesAndFreedEntriesComeBack) {
  constexpr uint32_t kCap = 4;
  ConnTable6 t;
  t.init(kCap);
  const Addr6 c = a6({0xfd00, 0, 0, 0, 0, 0, 0, 1}), v = a6({0xfd00, 0, 0, 0, 0, 0, 0, 2}),
              d = a6({0xfd00, 0, 0, 0, 0, 0, 0, 3});
  auto fwd = [&](uint16_t port) { return make_key6(c.data(), port, v.data(), 80, kProtoTcp); };
  auto rev = [&](uint16_t port) { return make_key6(d.data(), 8080, c.data(), port, kProtoTcp); };
  for (int round = 0; round < 3; ++round) {
    Conn6* conns[kCap];
    for (uint32_t i = 0; i < kCap; ++i) {
      const uint16_t port = static_cast<uint16_t>(1000 + round * 10 + i);
      conns[i] = t.insert(fwd(port), rev(port));
      ASSERT_NE(conns[i], nullptr) << "round " << round << " entry " << i;
    }
    EXPECT_EQ(t.size(), kCap);
    EXPECT_EQ(t.insert(fwd(2000), rev(2000)), nullptr);
    EXPECT_TRUE(t.last_insert_full());
    for (uint32_t i = 0; i < kCap; ++i) {
      t.remove(conns[i]);
      t.remove(conns[i]);  // a second remove is a no-op: the entry is not freed twice
    }
    EXPECT_EQ(t.size(), 0u);
    bool reply = true;
    EXPECT_EQ(t.lookup(fwd(static_cast<uint16_t>(1000 + round * 10)), &reply), nullptr);
  }
  // After the rounds, still exactly kCap entries to give.
  for (uint32_t i = 0; i < kCap; ++i) {
    const uint16_t port = static_cast<uint16_t>(3000 + i);
    ASSERT_NE(t.insert(fwd(port), rev(port)), nullptr);
  }
  EXPECT_EQ(t.insert(fwd(4000), rev(4000)), nullptr);
  EXPECT_TRUE(t.last_insert_full());
}

}  // namespace
}  // namespace vipd::dp
