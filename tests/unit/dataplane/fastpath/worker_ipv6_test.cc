// IPv6 through the per-packet pipeline (worker_test_fixture.h): NS and echo
// for the port's IPv6 address answered, other NDP and IPv6 traffic counted
// under its drop reason, hostile frames dropped without harm, IPv4 unchanged.
#include <gtest/gtest.h>

#include <algorithm>

#include "dataplane/fastpath/ipv6.h"
#include "tests/unit/dataplane/fastpath/ipv6_test_util.h"
#include "tests/unit/dataplane/fastpath/worker_test_fixture.h"

namespace vipd::dp {
namespace {

using namespace test;

const Addr6 kPort6 = a6({0xfd00, 0x10, 0, 0, 0, 0, 0, 0x1});
const Addr6 kClient6 = a6({0xfd00, 0x10, 0, 0, 0, 0, 0, 0x10});
const Addr6 kVip6 = a6({0xfd00, 0x10, 0x96, 0, 0, 0, 0, 0x100});

class WorkerIpv6Test : public WorkerTest {
 protected:
  void SetUp() override {
    WorkerTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    build(Forward::kFnat);
    if (HasFatalFailure()) return;
    sh().ports[0].has_ip6 = true;
    std::copy(kPort6.begin(), kPort6.end(), sh().ports[0].ip6);
  }

  Bytes ns(const Addr6& target, const Addr6& to, uint8_t hop = 255) {
    Frame6 s;
    s.dmac = ip6_is_multicast(to.data()) ? mcast_mac(to) : kPortMac[0];
    s.smac = kClientMac;
    s.src = kClient6;
    s.dst = to;
    s.next = kProtoIcmp6;
    s.hop_limit = hop;
    s.l4 = ns6(target, &kClientMac);
    Bytes f = build6(s);
    fix_cksum6(f, 54, kProtoIcmp6, 2);
    return f;
  }
  Bytes to_port(uint8_t next, Bytes l4, const Addr6& dst = kPort6) {
    Frame6 s;
    s.dmac = kPortMac[0];
    s.smac = kClientMac;
    s.src = kClient6;
    s.dst = dst;
    s.next = next;
    s.l4 = std::move(l4);
    return build6(s);
  }
};

TEST_F(WorkerIpv6Test, NeighborSolicitationForPortAddressIsAnswered) {
  for (bool unicast : {false, true}) {
    const Frame out = one_out(ns(kPort6, unicast ? kPort6 : sol_node(kPort6)), 0, 0);
    ASSERT_EQ(out.size(), 86u) << unicast;
    EXPECT_TRUE(mac_is(out.data(), kClientMac)) << "to the source link-layer address";
    EXPECT_TRUE(mac_is(out.data() + 6, kPortMac[0]));
    Parsed6 p;
    ASSERT_TRUE(parse_ipv6(out.data(), out.size(), &p)) << drop_reason_name(p.drop);
    NdInfo nd;
    ASSERT_EQ(parse_nd(out.data(), p, &nd), kNumDropReasons) << "a valid NA";
    EXPECT_EQ(nd.type, kNdNeighborAdvert);
    EXPECT_EQ(nd.flags, 0x60);
    EXPECT_TRUE(std::equal(kPort6.begin(), kPort6.end(), nd.target));
    ASSERT_TRUE(nd.has_lladdr);
    EXPECT_TRUE(std::equal(nd.lladdr, nd.lladdr + 6, kPortMac[0].begin()));
    EXPECT_TRUE(std::equal(kClient6.begin(), kClient6.end(), p.dst));
  }
  EXPECT_EQ(drops(kNdpIgnored) + drops(kNdpInvalid), 0u);
}

TEST_F(WorkerIpv6Test, OtherNdpIsCountedNotAnswered) {
  // For another address; for our address on the port without one; invalid.
  rx(ns(kVip6, sol_node(kVip6)), 0);
  expect_nothing_out("NS for an address not ours");
  EXPECT_EQ(drops(kNdpIgnored), 1u);
  rx(ns(kPort6, sol_node(kPort6)), 1);
  expect_nothing_out("NS on the port without an IPv6 address");
  EXPECT_EQ(drops(kNdpIgnored), 2u);
  rx(ns(kPort6, sol_node(kPort6), 64), 0);
  expect_nothing_out("NS with hop limit 64");
  EXPECT_EQ(drops(kNdpInvalid), 1u);
  // A router advertisement.
  Bytes ra = to_port(kProtoIcmp6, Bytes{134, 0, 0, 0, 64, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  rx(ra, 0);
  expect_nothing_out("RA");
  EXPECT_EQ(drops(kNdpIgnored), 3u);
}

TEST_F(WorkerIpv6Test, EchoToPortAddressIsAnswered) {
  Bytes f = to_port(kProtoIcmp6, echo6(9, 1, 32));
  fix_cksum6(f, 54, kProtoIcmp6, 2);
  const Frame out = one_out(f, 0, 0);
  ASSERT_EQ(out.size(), f.size());
  EXPECT_TRUE(mac_is(out.data(), kClientMac));
  EXPECT_TRUE(mac_is(out.data() + 6, kPortMac[0]));
  EXPECT_EQ(out[54], kIcmp6EchoReply);
  EXPECT_TRUE(cksum6_matches(kPort6, kClient6, 58, Bytes(out.begin() + 54, out.end()), 2));
  // A bad checksum is counted, not answered.
  f[60] ^= 1;
  rx(f, 0);
  expect_nothing_out("echo with a bad checksum");
  EXPECT_EQ(drops(kIcmp6BadChecksum), 1u);
}

TEST_F(WorkerIpv6Test, Ipv6TrafficIsCountedByReason) {
  struct Case {
    Bytes frame;
    DropReason want;
    const char* what;
  };
  Bytes tcp_vip = to_port(kProtoTcp, tcp6(40000, 80, kTcpSyn), kVip6);
  Bytes tcp_port = to_port(kProtoTcp, tcp6(40000, 80, kTcpSyn));
  Bytes cut = tcp_vip;
  cut.resize(60);
  Bytes chain = to_port(kIp6DestOpts, Bytes{}, kVip6);
  {
    Frame6 s;
    s.dmac = kPortMac[0];
    s.src = kClient6;
    s.dst = kVip6;
    s.next = kIp6DestOpts;
    for (unsigned i = 0; i < kMaxExtHeaders + 1; ++i) {
      Bytes h = ext_hdr(kIp6DestOpts, 0);
      s.ext.insert(s.ext.end(), h.begin(), h.end());
    }
    chain = build6(s);
  }
  Bytes frag = to_port(kIp6Fragment, frag_hdr(kProtoUdp, 8, false), kVip6);
  Bytes hbh2 = to_port(kIp6DestOpts, ext_hdr(kIp6HopByHop, 0), kVip6);
  const Case cases[] = {
      {tcp_vip, kIpv6NoService, "TCP to an IPv6 VIP (not served yet)"},
      {tcp_port, kLocalUnhandled, "TCP to the port's IPv6 address"},
      {cut, kIpv6BadHeader, "payload length beyond the frame"},
      {chain, kIpv6ExtChainTooLong, "extension chain too long"},
      {frag, kIpv6Fragment, "non-first fragment"},
      {hbh2, kIpv6BadExtHeader, "hop-by-hop after another header"},
  };
  for (const auto& c : cases) {
    const uint64_t before = drops(c.want);
    rx(c.frame, 0);
    expect_nothing_out(c.what);
    EXPECT_EQ(drops(c.want), before + 1) << c.what << "; drops:" << drop_summary();
  }
  EXPECT_EQ(drops(kBadEthertype), 0u) << "IPv6 is no longer an unknown ethertype";
}

TEST_F(WorkerIpv6Test, Ipv4IsUnchanged) {
  // The IPv4 path next to IPv6 traffic: an ICMP echo to the port address and
  // a new flow still go through.
  rx(to_port(kProtoTcp, tcp6(1, 80, kTcpSyn), kVip6), 0);
  const Frame out = one_out(build_frame(from_client(40000, kTcpSyn)), 0, 1);
  ASSERT_FALSE(out.empty());
  expect_valid_ipv4(out, "SYN to the IPv4 VIP");
}

}  // namespace
}  // namespace vipd::dp
