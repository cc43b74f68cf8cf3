// Connection lifecycle through the per-packet pipeline (worker_test_fixture.h):
// removed destinations and services, expiry and the sweep, persistence
// templates, port reuse, full tables and port pools, source ranges, key
// collisions.
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

// A mid-flow packet of an mh service without endpoints (a restarted vipd
// whose first sync came before the endpoints were listed): dropped, not reset,
// so the connection lives on once they are back; a SYN is still refused.
TEST_F(WorkerTest, MhMidFlowWithoutEndpointsIsDroppedNotReset) {
  build(Forward::kNat);
  if (HasFatalFailure()) return;
  cp::ServiceTable next = table_;
  put(next, vsvc(kVipEmpty, 8090, Protocol::kTcp, {}, Sched::kMh));
  const cp::TableDiff d = cp::TableDiff::compute(table_, next);
  std::string err;
  ASSERT_TRUE(pub_->apply(next, d, false, &err)) << err;
  rx(build_frame(from_client(48000, kTcpAck | kTcpPsh, kVipEmpty, 8090)), 0);
  expect_nothing_out("mid-flow packet, no endpoints");
  EXPECT_EQ(drops(kNoConn), 1u) << drop_summary();
  EXPECT_EQ(w().counters.rst_sent.load(), 0u);
  const Frame r = one_out(build_frame(from_client(48001, kTcpSyn, kVipEmpty, 8090)), 0, 0);
  ASSERT_FALSE(r.empty()) << drop_summary();
  EXPECT_EQ(tcp_flags(r.data()) & kTcpRst, kTcpRst);
  EXPECT_EQ(w().counters.rst_sent.load(), 1u);
}

TEST_F(WorkerTest, RemovedBackendMidFlowGetsRst) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  // Connection A -> B1, connection B -> B2.
  const Frame a = one_out(build_frame(from_client(45000, kTcpSyn)), 0, 1);
  const Frame b = one_out(build_frame(from_client(45001, kTcpSyn)), 0, 1);
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  ASSERT_EQ(ip_dst(a.data()), kB1);
  ASSERT_EQ(ip_dst(b.data()), kB2);
  const uint16_t lport_b = l4_sport(b.data());
  one_out(build_frame(from_client(45000, kTcpAck)), 0, 1);
  const uint32_t top_before = w().fnat[0].top;
  const int64_t slot1 = slot_of(kVip, 8080, Protocol::kTcp, kB1, 80);
  const uint32_t gen_before = sh().dest_slots[slot1].gen.load();

  // The control plane removes B1 (diff apply).
  cp::ServiceTable next = table_;
  put(next, vsvc(kVip, 8080, Protocol::kTcp, {rs(kB2, 80)}));
  const cp::TableDiff d = cp::TableDiff::compute(table_, next);
  ASSERT_EQ(d.changed.size(), 1u);
  std::string err;
  ASSERT_TRUE(pub_->apply(next, d, false, &err)) << err;
  EXPECT_EQ(sh().dest_slots[slot1].gen.load(), gen_before + 1);

  // Mid-flow ACK with data on A: RST back to the client, from the VIP.
  FrameSpec mid = from_client(45000, kTcpAck | kTcpPsh);
  mid.seq = 2000;
  mid.ack = 0xabcdef01;
  mid.payload = {1, 2, 3};
  const Frame rst = one_out(build_frame(mid), 0, 0);
  ASSERT_FALSE(rst.empty());
  const uint8_t* r = rst.data();
  expect_valid_ipv4(rst, "RST for removed backend");
  EXPECT_TRUE(mac_is(r, kClientMac));
  EXPECT_TRUE(mac_is(r + 6, kPortMac[0]));
  EXPECT_EQ(ip_src(r), kVip);
  EXPECT_EQ(l4_sport(r), 8080);
  EXPECT_EQ(ip_dst(r), kClient);
  EXPECT_EQ(l4_dport(r), 45000);
  EXPECT_EQ(tcp_flags(r), kTcpRst) << "ACK was set: plain RST";
  EXPECT_EQ(tcp_seq(r), 0xabcdef01u) << "seq = the segment's ack";
  EXPECT_EQ(w().counters.rst_sent.load(), 1u);
  EXPECT_EQ(w().conns.size(), 1u) << "connection A removed, B kept";
  EXPECT_EQ(w().fnat[0].top, top_before + 1) << "A's local port returned to the pool";
  EXPECT_EQ(w().dest_counters[slot1].active, 0);
  EXPECT_EQ(w().dest_counters[slot1].inactive, 0);

  // Connection B (on the kept backend) is unaffected.
  FrameSpec bm = from_client(45001, kTcpAck);
  const Frame bout = one_out(build_frame(bm), 0, 1);
  ASSERT_FALSE(bout.empty());
  EXPECT_EQ(ip_dst(bout.data()), kB2);
  EXPECT_EQ(l4_sport(bout.data()), lport_b);

  // A new SYN on A's 4-tuple is scheduled to the remaining backend.
  const Frame again = one_out(build_frame(from_client(45000, kTcpSyn)), 0, 1);
  ASSERT_FALSE(again.empty());
  EXPECT_EQ(ip_dst(again.data()), kB2);
  EXPECT_EQ(total_drops(), 0u) << drop_summary();
}

TEST_F(WorkerTest, ReplyFromRemovedBackendIsDropped) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  const Frame a = one_out(build_frame(from_client(46000, kTcpSyn)), 0, 1);
  ASSERT_FALSE(a.empty());
  ASSERT_EQ(ip_dst(a.data()), kB1);
  const uint16_t lport = l4_sport(a.data());
  cp::ServiceTable next = table_;
  put(next, vsvc(kVip, 8080, Protocol::kTcp, {rs(kB2, 80)}));
  std::string err;
  ASSERT_TRUE(pub_->apply(next, cp::TableDiff::compute(table_, next), false, &err)) << err;
  rx(build_frame(from_backend(kB1, kB1Mac, 80, kLocal, lport, kTcpSyn | kTcpAck)), 1);
  expect_nothing_out("reply from removed backend");
  EXPECT_EQ(drops(kDestExpired), 1u) << drop_summary();
  EXPECT_EQ(w().conns.size(), 0u);
  EXPECT_EQ(w().counters.active_flows.load(), 0u);
}

// An established flow's packets do not look its Service up (burst.h), except
// to refresh a persistence template: the refresh must still happen.
TEST_F(WorkerTest, EstablishedFlowRefreshesItsPersistenceTemplate) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  cp::ServiceTable next = table_;
  cp::VirtualService v = vsvc(kVipEmpty, 8443, Protocol::kTcp, {rs(kB1, 443), rs(kB2, 443)});
  v.persistence_timeout_s = 100;
  put(next, v);
  std::string err;
  ASSERT_TRUE(pub_->apply(next, cp::TableDiff::compute(table_, next), false, &err)) << err;
  ASSERT_FALSE(one_out(build_frame(from_client(47000, kTcpSyn, kVipEmpty, 8443)), 0, 1).empty());
  Template* t = w().tmpls.lookup(TemplateKey{kVipEmpty, kClient, 8443, kProtoTcp, 0});
  ASSERT_NE(t, nullptr) << "the SYN made a template";
  EXPECT_EQ(t->expires, kT0 + 100 * sh().tsc_hz);
  w().now = kT0 + 60 * sh().tsc_hz;
  ASSERT_FALSE(one_out(build_frame(from_client(47000, kTcpAck, kVipEmpty, 8443)), 0, 1).empty());
  EXPECT_EQ(t->expires, kT0 + 160 * sh().tsc_hz) << "refreshed by the established flow's packet";
  EXPECT_EQ(total_drops(), 0u) << drop_summary();
}

// A connection whose Service was removed: its next packet is one to no
// service (the VIP still has other ports here), and the entry stays for the
// sweep, as before the Service was removed.
TEST_F(WorkerTest, EstablishedFlowOfARemovedServiceIsDropped) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  ASSERT_FALSE(one_out(build_frame(from_client(47100, kTcpSyn)), 0, 1).empty());
  ASSERT_FALSE(one_out(build_frame(from_client(47100, kTcpAck)), 0, 1).empty());
  cp::ServiceTable next = table_;
  next.services.erase(cp::ServiceKey{kVip, 8080, Protocol::kTcp});
  std::string err;
  ASSERT_TRUE(pub_->apply(next, cp::TableDiff::compute(table_, next), false, &err)) << err;
  rx(build_frame(from_client(47100, kTcpAck | kTcpPsh)), 0);
  expect_nothing_out("packet of a removed service");
  EXPECT_EQ(drops(kVipNoPort), 1u) << drop_summary();
  EXPECT_EQ(w().counters.rst_sent.load(), 0u);
  EXPECT_EQ(w().conns.size(), 1u) << "left to the sweep";
}

// Full NAT: a packet to a local address and port that match a connection's
// reply direction is that connection's reply, even when a Service claims the
// same address and port (a misconfiguration): full-NAT replies do not consult
// the VIP table.
TEST_F(WorkerTest, FnatReplyWinsOverAServiceOnTheLocalAddress) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  const Frame a = one_out(build_frame(from_client(47200, kTcpSyn)), 0, 1);
  ASSERT_FALSE(a.empty());
  const uint16_t lport = l4_sport(a.data());
  const uint32_t b = ip_dst(a.data());
  cp::ServiceTable next = table_;
  put(next, vsvc(kLocal, lport, Protocol::kTcp, {rs(kB3, 80)}));
  std::string err;
  ASSERT_TRUE(pub_->apply(next, cp::TableDiff::compute(table_, next), false, &err)) << err;
  const Frame r = one_out(build_frame(from_backend(b, b == kB1 ? kB1Mac : kB2Mac, 80, kLocal, lport, kTcpSyn | kTcpAck)), 1, 0);
  ASSERT_FALSE(r.empty()) << drop_summary();
  EXPECT_EQ(ip_src(r.data()), kVip);
  EXPECT_EQ(l4_sport(r.data()), 8080);
  EXPECT_EQ(ip_dst(r.data()), kClient);
  EXPECT_EQ(l4_dport(r.data()), 47200);
  EXPECT_EQ(total_drops(), 0u) << drop_summary();
}

// Full NAT finds a reply by its local address and port (the connection
// table's port index): the source must still be the connection's backend
// address and port, or the packet is one to no service.
TEST_F(WorkerTest, FnatPacketToAHeldLocalPortFromAnotherSourceIsDropped) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  const Frame a = one_out(build_frame(from_client(47250, kTcpSyn)), 0, 1);
  ASSERT_FALSE(a.empty());
  const uint16_t lport = l4_sport(a.data());
  const uint32_t b = ip_dst(a.data());
  const auto mac = b == kB1 ? kB1Mac : kB2Mac;
  rx(build_frame(from_backend(kB3, mac, 80, kLocal, lport, kTcpSyn | kTcpAck)), 1);
  expect_nothing_out("another address to the held local port");
  rx(build_frame(from_backend(b, mac, 81, kLocal, lport, kTcpSyn | kTcpAck)), 1);
  expect_nothing_out("another port of the backend to the held local port");
  rx(build_frame(from_backend(b, mac, 80, kLocal, static_cast<uint16_t>(lport ^ 1), kTcpSyn | kTcpAck)), 1);
  expect_nothing_out("the backend to another local port");
  EXPECT_EQ(drops(kNoService), 3u) << drop_summary();
  const Frame r = one_out(build_frame(from_backend(b, mac, 80, kLocal, lport, kTcpSyn | kTcpAck)), 1, 0);
  ASSERT_FALSE(r.empty()) << drop_summary();
  EXPECT_EQ(ip_dst(r.data()), kClient);
  EXPECT_EQ(l4_dport(r.data()), 47250);
  EXPECT_EQ(w().conns.size(), 1u);
}

// Full NAT: a packet to a local address is only ever a reply (the port index
// owns those addresses), so a Service published on one, which the control
// plane refuses anyway, opens no connection in the dataplane either.
TEST_F(WorkerTest, FnatServiceOnALocalAddressOpensNoConnection) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  cp::ServiceTable next = table_;
  put(next, vsvc(kLocal, 9000, Protocol::kTcp, {rs(kB3, 80)}));
  std::string err;
  ASSERT_TRUE(pub_->apply(next, cp::TableDiff::compute(table_, next), false, &err)) << err;
  rx(build_frame(from_client(47260, kTcpSyn, kLocal, 9000)), 0);
  expect_nothing_out("a SYN to a Service on a local address");
  EXPECT_EQ(drops(kNoService), 1u) << drop_summary();
  EXPECT_EQ(w().conns.size(), 0u);
}

// NAT mode: a packet that matches a connection's reply key is the reply,
// even when its destination (the client's address and port) is also a
// Service: the connection table is looked up first, and the VIP table not at
// all for it (burst.cc).
TEST_F(WorkerTest, NatReplyWinsOverAServiceOnTheClientAddress) {
  build(Forward::kNat);
  if (HasFatalFailure()) return;
  const Frame a = one_out(build_frame(from_client(47300, kTcpSyn)), 0, 1);
  ASSERT_FALSE(a.empty());
  const uint32_t b = ip_dst(a.data());
  ASSERT_EQ(ip_src(a.data()), kClient) << "NAT keeps the client's address";
  cp::ServiceTable next = table_;
  put(next, vsvc(kClient, 47300, Protocol::kTcp, {rs(kB3, 80)}));
  std::string err;
  ASSERT_TRUE(pub_->apply(next, cp::TableDiff::compute(table_, next), false, &err)) << err;
  const Frame r = one_out(build_frame(from_backend(b, b == kB1 ? kB1Mac : kB2Mac, 80, kClient, 47300,
                                                   kTcpSyn | kTcpAck)), 1, 0);
  ASSERT_FALSE(r.empty()) << drop_summary();
  EXPECT_EQ(ip_src(r.data()), kVip);
  EXPECT_EQ(l4_sport(r.data()), 8080);
  EXPECT_EQ(ip_dst(r.data()), kClient);
  EXPECT_EQ(l4_dport(r.data()), 47300);
  EXPECT_EQ(w().conns.size(), 1u) << "no connection to the Service on the client's address";
  EXPECT_EQ(total_drops(), 0u) << drop_summary();
}

// A connection whose destination was removed stays until its next packet
// (which gets a RST) or, at the latest, for t_dead; then the sweep frees it.
TEST_F(WorkerTest, SweepReclaimsConnectionsOfRemovedDestAfterGrace) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  const uint32_t top0 = w().fnat[0].top;
  const Frame a = one_out(build_frame(from_client(46500, kTcpSyn)), 0, 1);
  ASSERT_FALSE(a.empty());
  ASSERT_EQ(ip_dst(a.data()), kB1);
  one_out(build_frame(from_client(46500, kTcpAck)), 0, 1);  // established: 900 s timeout
  cp::ServiceTable next = table_;
  put(next, vsvc(kVip, 8080, Protocol::kTcp, {rs(kB2, 80)}));
  std::string err;
  ASSERT_TRUE(pub_->apply(next, cp::TableDiff::compute(table_, next), false, &err)) << err;
  sweep_conns(w(), 4096);
  EXPECT_EQ(w().conns.size(), 1u) << "kept for the grace period";
  w().now = kT0 + sh().t_dead - 1;
  sweep_conns(w(), 4096);
  EXPECT_EQ(w().conns.size(), 1u);
  w().now = kT0 + sh().t_dead + 1;
  sweep_conns(w(), 4096);
  EXPECT_EQ(w().conns.size(), 0u) << "reclaimed after t_dead, long before the established timeout";
  EXPECT_EQ(w().fnat[0].top, top0);
  EXPECT_EQ(w().counters.active_flows.load(), 0u);
}

TEST_F(WorkerTest, SweepExpiresConnections) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  const uint32_t top0 = w().fnat[0].top;
  for (uint16_t k = 0; k < 5; ++k) one_out(build_frame(from_client(47000 + k, kTcpSyn)), 0, 1);
  one_out(build_frame(from_client(47000, kTcpAck)), 0, 1);  // established: longer timeout
  EXPECT_EQ(w().conns.size(), 5u);
  EXPECT_EQ(w().fnat[0].top, top0 - 5);
  // Not yet expired.
  w().now = kT0 + sh().t_syn - 1;
  sweep_conns(w(), 4096);
  EXPECT_EQ(w().conns.size(), 5u);
  // SYN_RECV ones expire, the established one stays.
  w().now = kT0 + sh().t_syn + 1;
  sweep_conns(w(), 4096);
  EXPECT_EQ(w().conns.size(), 1u);
  EXPECT_EQ(w().counters.active_flows.load(), 1u);
  EXPECT_EQ(w().fnat[0].top, top0 - 1);
  const int64_t s1 = slot_of(kVip, 8080, Protocol::kTcp, kB1, 80), s2 = slot_of(kVip, 8080, Protocol::kTcp, kB2, 80);
  EXPECT_EQ(w().dest_counters[s1].inactive + w().dest_counters[s2].inactive, 0);
  EXPECT_EQ(w().dest_counters[s1].active + w().dest_counters[s2].active, 1);
  // Packets of an expired flow are no longer forwarded.
  rx(build_frame(from_client(47001, kTcpAck)), 0);
  expect_nothing_out("expired flow");
  EXPECT_EQ(drops(kNoConn), 1u);
  // Established connections expire after their own, longer timeout.
  w().now = kT0 + sh().t_est - 1;
  sweep_conns(w(), 4096);
  EXPECT_EQ(w().conns.size(), 1u);
  w().now = kT0 + sh().t_est + 1;
  sweep_conns(w(), 4096);
  EXPECT_EQ(w().conns.size(), 0u);
  EXPECT_EQ(w().fnat[0].top, top0);
  EXPECT_EQ(w().counters.active_flows.load(), 0u);
}

TEST_F(WorkerTest, SynAfterFinStartsNewConnection) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  const Frame a = one_out(build_frame(from_client(48000, kTcpSyn)), 0, 1);
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(ip_dst(a.data()), kB1);
  one_out(build_frame(from_client(48000, kTcpAck)), 0, 1);
  one_out(build_frame(from_client(48000, kTcpFin | kTcpAck)), 0, 1);
  const Frame b = one_out(build_frame(from_client(48000, kTcpSyn)), 0, 1);
  ASSERT_FALSE(b.empty());
  EXPECT_EQ(ip_dst(b.data()), kB2) << "a new connection, scheduled again";
  EXPECT_EQ(w().counters.new_flows.load(), 2u);
  EXPECT_EQ(w().conns.size(), 1u);
  EXPECT_EQ(w().counters.active_flows.load(), 1u);
}

TEST_F(WorkerTest, ConnTableFull) {
  build(Forward::kFnat, 1, 16);
  if (HasFatalFailure()) return;
  for (uint16_t k = 0; k < 16; ++k) one_out(build_frame(from_client(53000 + k, kTcpSyn)), 0, 1);
  const uint32_t top = w().fnat[0].top;
  rx(build_frame(from_client(53100, kTcpSyn)), 0);
  expect_nothing_out("table full");
  EXPECT_EQ(drops(kConnTableFull), 1u) << drop_summary();
  EXPECT_EQ(w().fnat[0].top, top) << "the local port taken for the refused flow is returned";
  EXPECT_EQ(w().counters.active_flows.load(), 16u);
}

// The poll loop's sweep visits the whole table once per kSweepPeriodS, in
// slices sized by the time since its last call, whatever the packet rate.
TEST_F(WorkerTest, PacedSweepVisitsTheTableOncePerPeriod) {
  build(Forward::kFnat, 1, 1000);  // one key slot per connection (NAT: two)
  if (HasFatalFailure()) return;
  const uint32_t cap = w().conns.capacity();
  ASSERT_EQ(w().conns.slots(), cap);
  for (uint32_t k = 0; k < cap; ++k) rx(build_frame(from_client(static_cast<uint16_t>(20000 + k), kTcpSyn)), 0);
  drain_all();
  ASSERT_EQ(w().conns.size(), cap) << "every entry in use, so each one visited is one reclaimed;" << drop_summary();
  const uint64_t period = sh().tsc_hz * kSweepPeriodS;
  uint64_t t = kT0 + 61 * sh().tsc_hz;  // past every entry's SYN_RECV timeout (60 s)
  w().now = t;
  sweep_conns_paced(w());  // the first call starts the clock
  EXPECT_EQ(w().conns.size(), cap);
  for (int i = 0; i < 100; ++i) {  // a tenth of the period, in 1 ms steps
    t += period / 1000;
    w().now = t;
    sweep_conns_paced(w());
  }
  const uint32_t tenth = cap - w().conns.size();
  EXPECT_GE(tenth, cap / 10 - 2);
  EXPECT_LE(tenth, cap / 10 + 2);
  // A pause of ten periods: one call visits at most a slice.
  t += 10 * period;
  w().now = t;
  sweep_conns_paced(w());
  EXPECT_EQ(cap - w().conns.size(), tenth + std::min(std::max(kSweepMaxSlice, cap / 64), cap - tenth));
  // Within one period in all, every entry was visited.
  for (int i = 0; i < 1000 && w().conns.size() > 0; ++i) {
    t += period / 1000;
    w().now = t;
    sweep_conns_paced(w());
  }
  EXPECT_EQ(w().conns.size(), 0u);
  EXPECT_EQ(w().counters.active_flows.load(), 0u);
}

TEST_F(WorkerTest, FnatPortsExhausted) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  w().fnat[0].top = 2;  // two local ports left
  one_out(build_frame(from_client(54000, kTcpSyn)), 0, 1);
  one_out(build_frame(from_client(54001, kTcpSyn)), 0, 1);
  rx(build_frame(from_client(54002, kTcpSyn)), 0);
  expect_nothing_out("no local port");
  EXPECT_EQ(drops(kFnatPortsExhausted), 1u) << drop_summary();
  EXPECT_EQ(w().conns.size(), 2u);
}

// loadBalancerSourceRanges: a client outside every range cannot open a flow
// (counted), one inside can; a range the publisher cannot read is refused.
TEST_F(WorkerTest, SourceRangesLimitNewFlows) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  cp::ServiceTable next = table_;
  auto open_to_client = vsvc(ip4(10, 96, 0, 120), 443, Protocol::kTcp, {rs(kB1, 80)});
  open_to_client.kind = cp::ServiceKind::kLoadBalancer;
  open_to_client.source_ranges = {"10.0.0.0/24", "192.0.2.0/24"};
  put(next, open_to_client);
  auto closed = vsvc(ip4(10, 96, 0, 121), 443, Protocol::kTcp, {rs(kB1, 80)});
  closed.kind = cp::ServiceKind::kLoadBalancer;
  closed.source_ranges = {"10.0.0.11/32", "192.0.2.0/24"};  // kClient is 10.0.0.10
  put(next, closed);
  std::string err;
  ASSERT_TRUE(pub_->apply(next, cp::TableDiff::compute(table_, next), false, &err)) << err;
  const Frame a = one_out(build_frame(from_client(45000, kTcpSyn, ip4(10, 96, 0, 120), 443)), 0, 1);
  ASSERT_FALSE(a.empty()) << drop_summary();
  rx(build_frame(from_client(45001, kTcpSyn, ip4(10, 96, 0, 121), 443)), 0);
  expect_nothing_out("source outside the ranges");
  EXPECT_EQ(drops(kSourceNotAllowed), 1u) << drop_summary();
  EXPECT_STREQ(drop_reason_name(kSourceNotAllowed), "source_not_allowed");

  cp::ServiceTable bad = next;
  auto broken = vsvc(ip4(10, 96, 0, 122), 443, Protocol::kTcp, {rs(kB1, 80)});
  broken.source_ranges = {"10.0.0.0/33"};
  put(bad, broken);
  EXPECT_FALSE(pub_->apply(bad, cp::TableDiff::compute(next, bad), false, &err));
  EXPECT_NE(err.find("not an IPv4 CIDR"), std::string::npos) << err;
}

// nat mode: one client port reaching the same backend through two VIPs gives
// both connections the same reply key; the second one is refused.
TEST_F(WorkerTest, NatReplyKeyCollisionIsRefused) {
  build(Forward::kNat);
  if (HasFatalFailure()) return;
  cp::ServiceTable next = table_;
  put(next, vsvc(ip4(10, 96, 0, 110), 8080, Protocol::kTcp, {rs(kB1, 80)}));
  put(next, vsvc(ip4(10, 96, 0, 111), 8080, Protocol::kTcp, {rs(kB1, 80)}));
  std::string err;
  ASSERT_TRUE(pub_->apply(next, cp::TableDiff::compute(table_, next), false, &err)) << err;
  const Frame a = one_out(build_frame(from_client(55000, kTcpSyn, ip4(10, 96, 0, 110), 8080)), 0, 1);
  ASSERT_FALSE(a.empty());
  rx(build_frame(from_client(55000, kTcpSyn, ip4(10, 96, 0, 111), 8080)), 0);
  expect_nothing_out("colliding reply key");
  EXPECT_EQ(drops(kConnKeyInUse), 1u) << drop_summary();
  // The first connection's replies still come back from its own VIP.
  const Frame back = one_out(build_frame(from_backend(kB1, kB1Mac, 80, kClient, 55000, kTcpSyn | kTcpAck)), 1, 0);
  ASSERT_FALSE(back.empty());
  EXPECT_EQ(ip_src(back.data()), ip4(10, 96, 0, 110));
}

}  // namespace
}  // namespace vipd::dp
