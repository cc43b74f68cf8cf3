// ARP and the neighbour table through the per-packet pipeline
// (worker_test_fixture.h): answers for our addresses, resolution of next hops,
// stale and unresolved entries, routing through a gateway.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tests/unit/dataplane/fastpath/worker_test_fixture.h"

namespace vipd::dp {
namespace {

using namespace test;

TEST_F(WorkerTest, ArpRequestForVipGetsReply) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  const MacAddr newmac{0x02, 0xc1, 0, 0, 0, 0x99};
  struct Case {
    uint32_t target;
    uint16_t port;
    const char* what;
  } cases[] = {{kVip, 0, "VIP"}, {kPort0Ip, 0, "port address"}, {kLocal, 1, "fnat local address"}};
  for (const auto& c : cases) {
    const uint32_t sender = c.port == 0 ? kClient : kB1;
    const Frame req = build_arp(1, newmac, sender, MacAddr{}, c.target, kBcast);
    const Frame out = one_out(req, c.port, c.port);
    ASSERT_FALSE(out.empty()) << c.what;
    const uint8_t* o = out.data();
    EXPECT_EQ(out.size(), 42u);
    EXPECT_TRUE(mac_is(o, newmac)) << c.what << ": eth dst = requester";
    EXPECT_TRUE(mac_is(o + 6, kPortMac[c.port])) << c.what;
    ArpInfo ai;
    ASSERT_TRUE(parse_arp(o, out.size(), &ai));
    EXPECT_EQ(ai.op, 2);
    EXPECT_TRUE(std::equal(ai.sha, ai.sha + 6, kPortMac[c.port].begin())) << c.what << ": sha = port MAC";
    EXPECT_EQ(ai.spa, c.target) << c.what;
    EXPECT_EQ(ai.tpa, sender);
    EXPECT_TRUE(mac_is(o + 14 + 18, newmac)) << "tha";
    // The requester (on the port's subnet) was learned.
    uint8_t mac[6];
    ASSERT_NE(sh().neigh.lookup(sender, mac, w().now), NeighState::kMissing);
    EXPECT_TRUE(std::equal(mac, mac + 6, newmac.begin()));
  }
  EXPECT_EQ(w().counters.arp_replies.load(), 3u);
  // Not ours: ignored, nothing sent.
  rx(build_arp(1, kClientMac, kClient, MacAddr{}, ip4(10, 0, 0, 77), kBcast), 0);
  expect_nothing_out("ARP for someone else");
  EXPECT_EQ(drops(kArpIgnored), 1u);
  // ARP between others (and gratuitous ARP) creates no entry, so spoofed
  // senders cannot fill the cache; it only refreshes an entry we have.
  const uint32_t stranger = ip4(10, 0, 0, 66);
  uint8_t seen[6];
  rx(build_arp(1, newmac, stranger, MacAddr{}, ip4(10, 0, 0, 77), kBcast), 0);
  rx(build_arp(2, newmac, stranger, MacAddr{}, stranger, kBcast), 0);
  EXPECT_EQ(sh().neigh.lookup(stranger, seen, w().now), NeighState::kMissing) << "learned from ARP not for us";
  const MacAddr moved{0x02, 0xc1, 0, 0, 0, 0x42};
  rx(build_arp(1, moved, kClient, MacAddr{}, ip4(10, 0, 0, 77), kBcast), 0);
  ASSERT_NE(sh().neigh.lookup(kClient, seen, w().now), NeighState::kMissing);
  EXPECT_TRUE(std::equal(seen, seen + 6, moved.begin())) << "a known neighbour's new MAC is taken";
  EXPECT_EQ(drops(kArpIgnored), 3u);
  // An ARP reply is consumed (learned), not counted as a drop.
  rx(build_arp(2, kClientMac, kClient2, kPortMac[0], kPort0Ip, kPortMac[0]), 0);
  expect_nothing_out("ARP reply");
  uint8_t mac[6];
  EXPECT_EQ(sh().neigh.lookup(kClient2, mac, w().now), NeighState::kReachable);
  EXPECT_TRUE(std::equal(mac, mac + 6, kClientMac.begin()));
  EXPECT_EQ(drops(kArpIgnored), 3u);
  // A sender outside the port's subnet is not learned.
  rx(build_arp(2, kClientMac, ip4(192, 168, 9, 9), kPortMac[0], kPort0Ip, kPortMac[0]), 0);
  EXPECT_EQ(sh().neigh.lookup(ip4(192, 168, 9, 9), mac, w().now), NeighState::kMissing);
  // Malformed ARP.
  Frame bad = build_arp(1, kClientMac, kClient, MacAddr{}, kVip, kBcast);
  bad[18] = 8;  // hlen
  rx(bad, 0);
  expect_nothing_out("malformed ARP");
  EXPECT_EQ(drops(kArpIgnored), 4u);
}

TEST_F(WorkerTest, UnresolvedNextHopArpsAndSendsWhenResolved) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  // kVipArp:80 -> kB3, whose MAC is unknown.
  const Frame in = build_frame(from_client(49000, kTcpSyn, kVipArp, 80));
  rx(in, 0);
  auto p1 = tx(1);
  EXPECT_EQ(tx(0).size(), 0u);
  ASSERT_EQ(p1.size(), 1u) << "one ARP request, the packet is held";
  {
    const uint8_t* o = p1[0].data();
    EXPECT_TRUE(mac_is(o, kBcast));
    EXPECT_TRUE(mac_is(o + 6, kPortMac[1]));
    ArpInfo ai;
    ASSERT_TRUE(parse_arp(o, p1[0].size(), &ai));
    EXPECT_EQ(ai.op, 1);
    EXPECT_TRUE(std::equal(ai.sha, ai.sha + 6, kPortMac[1].begin()));
    EXPECT_EQ(ai.spa, kPort1Ip);
    EXPECT_EQ(ai.tpa, kB3);
  }
  EXPECT_EQ(w().n_pending, 1u);
  EXPECT_EQ(w().counters.arp_requests.load(), 1u);
  // Nothing new at the same time (rate limited), packet still held.
  service_pending(w());
  flush_tx(w());
  EXPECT_EQ(tx(1).size(), 0u);
  EXPECT_EQ(w().n_pending, 1u);
  // After the retry interval: another request.
  w().now = kT0 + sh().arp_retry + 1;
  service_pending(w());
  flush_tx(w());
  auto p2 = tx(1);
  ASSERT_EQ(p2.size(), 1u);
  EXPECT_EQ(get16(&p2[0][12]), 0x0806);
  EXPECT_EQ(w().counters.arp_requests.load(), 2u);
  // The backend answers; the held packet goes out with its MAC.
  rx(build_arp(2, kB3Mac, kB3, kPortMac[1], kPort1Ip, kPortMac[1]), 1);
  EXPECT_EQ(tx(1).size(), 0u) << "the ARP reply itself sends nothing";
  service_pending(w());
  flush_tx(w());
  auto p3 = tx(1);
  ASSERT_EQ(p3.size(), 1u);
  const uint8_t* o = p3[0].data();
  expect_valid_ipv4(p3[0], "held packet");
  EXPECT_TRUE(mac_is(o, kB3Mac));
  EXPECT_TRUE(mac_is(o + 6, kPortMac[1]));
  EXPECT_EQ(ip_dst(o), kB3);
  EXPECT_EQ(ip_src(o), kLocal);
  EXPECT_EQ(ip_ttl(o), 63);
  EXPECT_EQ(w().n_pending, 0u);
  // Next packets of the flow go straight out.
  const Frame ack = one_out(build_frame(from_client(49000, kTcpAck, kVipArp, 80)), 0, 1);
  ASSERT_FALSE(ack.empty());
  EXPECT_TRUE(mac_is(ack.data(), kB3Mac));
  EXPECT_EQ(total_drops(), 0u) << drop_summary();
}

// A stale neighbour is still used, and refreshed with one ARP request.
TEST_F(WorkerTest, StaleNeighbourIsUsedAndRefreshed) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  w().now = kT0 + 61 * sh().tsc_hz;  // B1 confirmed at kT0; reachable time is 60 s
  uint8_t mac[6];
  ASSERT_EQ(sh().neigh.lookup(kB1, mac, w().now), NeighState::kStale);
  rx(build_frame(from_client(49500, kTcpSyn)), 0);
  auto out = tx(1);
  ASSERT_EQ(out.size(), 2u) << "the packet and one ARP request; drops:" << drop_summary();
  int data = 0, arp = 0;
  for (const auto& f : out) {
    if (get16(&f[12]) == 0x0806) {
      ++arp;
      ArpInfo ai;
      ASSERT_TRUE(parse_arp(f.data(), f.size(), &ai));
      EXPECT_EQ(ai.tpa, kB1);
    } else {
      ++data;
      EXPECT_TRUE(mac_is(f.data(), kB1Mac)) << "the stale MAC is still used";
    }
  }
  EXPECT_EQ(data, 1);
  EXPECT_EQ(arp, 1);
  // The next packet in the same interval does not ARP again.
  rx(build_frame(from_client(49500, kTcpAck)), 0);
  EXPECT_EQ(tx(1).size(), 1u);
  EXPECT_EQ(w().counters.arp_requests.load(), 1u);
}

TEST_F(WorkerTest, UnresolvedNextHopGivesUp) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  rx(build_frame(from_client(50000, kTcpSyn, kVipArp, 81)), 0);  // -> kB4, never answers
  tx(1);
  EXPECT_EQ(w().n_pending, 1u);
  w().now = kT0 + sh().arp_give_up / 2;
  service_pending(w());
  flush_tx(w());
  tx(1);
  EXPECT_EQ(w().n_pending, 1u);
  w().now = kT0 + sh().arp_give_up + 1;
  service_pending(w());
  flush_tx(w());
  EXPECT_EQ(w().n_pending, 0u);
  EXPECT_EQ(drops(kNeighUnresolved), 1u) << drop_summary();
  auto rest = tx(1);
  for (const auto& f : rest) EXPECT_EQ(get16(&f[12]), 0x0806) << "only ARP requests, never the packet";
}

// Replies to a client outside every connected subnet go to the gateway's MAC;
// without a gateway there is no route.
TEST_F(WorkerTest, ClientBehindGatewayAndNoRoute) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  const uint32_t far = ip4(192, 168, 5, 5), gw = ip4(10, 0, 0, 254);
  const MacAddr gw_mac{0x02, 0x99, 0, 0, 0, 0xfe};
  sh().neigh.update(gw, gw_mac.data(), kT0);
  FrameSpec syn = from_client(59000, kTcpSyn);
  syn.src = far;
  syn.smac = gw_mac;
  const Frame out = one_out(build_frame(syn), 0, 1);
  ASSERT_FALSE(out.empty());
  // Without a gateway the reply cannot be routed.
  const Frame reply = build_frame(from_backend(ip_dst(out.data()), ip_dst(out.data()) == kB1 ? kB1Mac : kB2Mac, 80,
                                               kLocal, l4_sport(out.data()), kTcpSyn | kTcpAck));
  rx(reply, 1);
  expect_nothing_out("no route to the client");
  EXPECT_EQ(drops(kNoRoute), 1u) << drop_summary();
  // With a gateway on port 0 it goes there.
  sh().ports[0].gateway = gw;
  const Frame back = one_out(reply, 1, 0);
  ASSERT_FALSE(back.empty());
  EXPECT_TRUE(mac_is(back.data(), gw_mac)) << "next hop is the gateway";
  EXPECT_TRUE(mac_is(back.data() + 6, kPortMac[0]));
  EXPECT_EQ(ip_dst(back.data()), far);
  expect_valid_ipv4(back, "via gateway");
}

// A connection's entry keeps its route (Conn::route_d, route_c) from its
// first packet on; the next hop's MAC is still looked up afresh each burst:
// a neighbour whose MAC changes mid-connection, or a gateway that changes,
// gets the next packet in either direction.
TEST_F(WorkerTest, KeptRouteFollowsNeighbourAndGatewayChanges) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  const uint32_t far = ip4(192, 168, 5, 5), gw1 = ip4(10, 0, 0, 254), gw2 = ip4(10, 0, 0, 253);
  const MacAddr gw1_mac{0x02, 0x99, 0, 0, 0, 0xfe}, gw2_mac{0x02, 0x99, 0, 0, 0, 0xfd};
  sh().neigh.update(gw1, gw1_mac.data(), kT0);
  sh().neigh.update(gw2, gw2_mac.data(), kT0);
  sh().ports[0].gateway = gw1;
  FrameSpec syn = from_client(59100, kTcpSyn);
  syn.src = far;
  syn.smac = gw1_mac;
  const Frame out = one_out(build_frame(syn), 0, 1);
  ASSERT_FALSE(out.empty()) << drop_summary();
  const uint32_t b = ip_dst(out.data());
  const MacAddr bmac = b == kB1 ? kB1Mac : kB2Mac;
  EXPECT_TRUE(mac_is(out.data(), bmac));
  const uint16_t lport = l4_sport(out.data());
  const Frame reply = build_frame(from_backend(b, bmac, 80, kLocal, lport, kTcpSyn | kTcpAck));
  FrameSpec ack = from_client(59100, kTcpAck);
  ack.src = far;
  ack.smac = gw1_mac;
  const Frame fwd = build_frame(ack);
  // Both directions once, as they were: the routes are now kept.
  Frame back = one_out(reply, 1, 0);
  ASSERT_FALSE(back.empty()) << drop_summary();
  EXPECT_TRUE(mac_is(back.data(), gw1_mac));
  Frame again = one_out(fwd, 0, 1);
  ASSERT_FALSE(again.empty()) << drop_summary();
  EXPECT_TRUE(mac_is(again.data(), bmac));
  // The backend's MAC changes (as an ARP update would change it).
  const MacAddr bmac2{0x02, 0xb0, 0, 0, 0x77, 0x01};
  sh().neigh.update(b, bmac2.data(), w().now);
  again = one_out(fwd, 0, 1);
  ASSERT_FALSE(again.empty()) << drop_summary();
  EXPECT_TRUE(mac_is(again.data(), bmac2)) << "the backend's new MAC, on the next packet";
  EXPECT_TRUE(mac_is(again.data() + 6, kPortMac[1]));
  expect_valid_ipv4(again, "to the backend, new MAC");
  // The gateway's MAC changes: the next reply goes to the new one.
  const MacAddr gw1_mac2{0x02, 0x99, 0, 0, 0x77, 0xfe};
  sh().neigh.update(gw1, gw1_mac2.data(), w().now);
  back = one_out(build_frame(from_backend(b, bmac2, 80, kLocal, lport, kTcpAck)), 1, 0);
  ASSERT_FALSE(back.empty()) << drop_summary();
  EXPECT_TRUE(mac_is(back.data(), gw1_mac2)) << "the gateway's new MAC, on the next reply";
  // The route changes: port 0's gateway is another router.
  sh().ports[0].gateway = gw2;
  back = one_out(build_frame(from_backend(b, bmac2, 80, kLocal, lport, kTcpAck)), 1, 0);
  ASSERT_FALSE(back.empty()) << drop_summary();
  EXPECT_TRUE(mac_is(back.data(), gw2_mac)) << "the new gateway, on the next reply";
  EXPECT_TRUE(mac_is(back.data() + 6, kPortMac[0]));
  EXPECT_EQ(ip_dst(back.data()), far);
  expect_valid_ipv4(back, "via the new gateway");
  // The backend's entry goes stale: the next packet still goes to its MAC
  // and asks again (an ARP request), as any packet's next hop would.
  w().now = kT0 + 62 * sh().tsc_hz;  // reachable time is 60 s
  rx(fwd, 0);
  int data = 0, asked = 0;
  for (const auto& f : tx(1)) {
    ArpInfo ai;
    if (get16(&f[12]) == 0x0806) {
      asked += parse_arp(f.data(), f.size(), &ai) && ai.tpa == b;
    } else {
      ++data;
      EXPECT_TRUE(mac_is(f.data(), bmac2));
    }
  }
  EXPECT_EQ(data, 1);
  EXPECT_EQ(asked, 1) << "an ARP request for the stale backend";
  EXPECT_EQ(total_drops(), 0u) << drop_summary();
}

TEST_F(WorkerTest, NeighbourQueueFull) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  for (uint16_t k = 0; k < kPendingMax; ++k) rx(build_frame(from_client(60000 + k, kTcpSyn, kVipArp, 80)), 0);
  EXPECT_EQ(w().n_pending, kPendingMax);
  EXPECT_EQ(total_drops(), 0u) << drop_summary();
  rx(build_frame(from_client(60100, kTcpSyn, kVipArp, 80)), 0);
  EXPECT_EQ(drops(kNeighQueueFull), 1u) << drop_summary();
  EXPECT_EQ(w().n_pending, kPendingMax);
  auto arps = tx(1);
  EXPECT_EQ(arps.size(), 1u) << "one ARP request for the address, however many packets wait";
}

}  // namespace
}  // namespace vipd::dp
