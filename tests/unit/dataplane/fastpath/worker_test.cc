// The per-packet pipeline on real mbufs and ports (worker_test_fixture.h):
// forwarding in both directions and both modes, services without endpoints,
// malformed and unwanted frames, ICMP echo, redirects between workers, full
// queues.
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

// SYN -> DNAT to a backend; the backend's reply -> reverse-translated; the
// handshake's ACK and data follow the same connection.
TEST_P(WorkerModeTest, SynForwardedAndReplyReverseTranslated) {
  const Forward mode = GetParam();
  build(mode);
  if (HasFatalFailure()) return;
  FrameSpec syn = from_client(40000, kTcpSyn);
  syn.tcp_opts = {2, 4, 0x05, 0xb4};
  const Frame in = build_frame(syn);
  const Frame out = one_out(in, 0, 1);
  ASSERT_FALSE(out.empty());
  const uint8_t* o = out.data();
  expect_valid_ipv4(out, "forwarded SYN");
  EXPECT_TRUE(mac_is(o, kB1Mac)) << "eth dst = first backend's MAC (rr starts at the first)";
  EXPECT_TRUE(mac_is(o + 6, kPortMac[1])) << "eth src = egress port MAC";
  EXPECT_EQ(ip_dst(o), kB1);
  EXPECT_EQ(l4_dport(o), 80);
  uint16_t lport;
  if (mode == Forward::kFnat) {
    EXPECT_EQ(ip_src(o), kLocal) << "fnat: source is the local address";
    lport = l4_sport(o);
    EXPECT_GE(lport, 1024);
  } else {
    EXPECT_EQ(ip_src(o), kClient) << "nat: source kept";
    lport = l4_sport(o);
    EXPECT_EQ(lport, 40000);
  }
  EXPECT_EQ(ip_ttl(o), 63);
  EXPECT_EQ(tcp_flags(o), kTcpSyn);
  EXPECT_EQ(tcp_seq(o), 1000u);
  EXPECT_EQ(out.size(), in.size());
  EXPECT_TRUE(std::equal(out.begin() + 34 + 4, out.begin() + 34 + 16, in.begin() + 34 + 4)) << "seq/ack/flags/window";
  EXPECT_TRUE(std::equal(out.begin() + 34 + 18, out.end(), in.begin() + 34 + 18)) << "options/payload";
  EXPECT_EQ(w().counters.new_flows.load(), 1u);
  EXPECT_EQ(w().counters.active_flows.load(), 1u);
  EXPECT_EQ(w().counters.tx.load(), 1u);
  EXPECT_EQ(w().conns.size(), 1u);
  const int64_t slot = slot_of(kVip, 8080, Protocol::kTcp, kB1, 80);
  ASSERT_GE(slot, 0);
  EXPECT_EQ(w().dest_counters[slot].conns, 1u);
  EXPECT_EQ(w().dest_counters[slot].inpkts, 1u);
  EXPECT_EQ(w().dest_counters[slot].inbytes, in.size() - 14);
  EXPECT_EQ(w().dest_counters[slot].inactive, 1);
  EXPECT_EQ(w().dest_counters[slot].active, 0);

  // SYN-ACK from the backend to (local address or client):lport.
  const uint32_t to = mode == Forward::kFnat ? kLocal : kClient;
  const Frame reply = build_frame(from_backend(kB1, kB1Mac, 80, to, lport, kTcpSyn | kTcpAck));
  const Frame back = one_out(reply, 1, 0);
  ASSERT_FALSE(back.empty());
  const uint8_t* b = back.data();
  expect_valid_ipv4(back, "reverse-translated SYN-ACK");
  EXPECT_TRUE(mac_is(b, kClientMac));
  EXPECT_TRUE(mac_is(b + 6, kPortMac[0]));
  EXPECT_EQ(ip_src(b), kVip);
  EXPECT_EQ(l4_sport(b), 8080);
  EXPECT_EQ(ip_dst(b), kClient);
  EXPECT_EQ(l4_dport(b), 40000);
  EXPECT_EQ(ip_ttl(b), 63);
  EXPECT_EQ(tcp_flags(b), kTcpSyn | kTcpAck);
  EXPECT_EQ(tcp_seq(b), 5000u);
  EXPECT_EQ(tcp_ack(b), 1001u);
  EXPECT_EQ(w().dest_counters[slot].outpkts, 1u);

  // ACK completes the handshake: established.
  const Frame ack_out = one_out(build_frame(from_client(40000, kTcpAck)), 0, 1);
  ASSERT_FALSE(ack_out.empty());
  expect_valid_ipv4(ack_out, "ACK");
  EXPECT_EQ(ip_dst(ack_out.data()), kB1);
  EXPECT_EQ(l4_sport(ack_out.data()), lport) << "same connection, same local port";
  EXPECT_EQ(w().dest_counters[slot].active, 1);
  EXPECT_EQ(w().dest_counters[slot].inactive, 0);

  // Data with payload, odd length.
  FrameSpec data = from_client(40000, kTcpAck | kTcpPsh);
  data.payload.assign(333, 0x5c);
  data.payload[0] = 0x01;
  const Frame din = build_frame(data);
  const Frame dout = one_out(din, 0, 1);
  ASSERT_FALSE(dout.empty());
  expect_valid_ipv4(dout, "data");
  EXPECT_TRUE(std::equal(dout.end() - 333, dout.end(), din.end() - 333));
  EXPECT_EQ(w().conns.size(), 1u);
  EXPECT_EQ(w().counters.new_flows.load(), 1u);
  EXPECT_EQ(total_drops(), 0u) << drop_summary();
}

TEST_P(WorkerModeTest, RoundRobinAcrossBackends) {
  build(GetParam());
  if (HasFatalFailure()) return;
  std::vector<uint32_t> got;
  std::set<uint16_t> lports;
  for (uint16_t k = 0; k < 6; ++k) {
    const Frame out = one_out(build_frame(from_client(41000 + k, kTcpSyn)), 0, 1);
    ASSERT_FALSE(out.empty());
    got.push_back(ip_dst(out.data()));
    lports.insert(l4_sport(out.data()));
    EXPECT_TRUE(mac_is(out.data(), ip_dst(out.data()) == kB1 ? kB1Mac : kB2Mac)) << "MAC of the chosen backend";
  }
  EXPECT_EQ(got, (std::vector<uint32_t>{kB1, kB2, kB1, kB2, kB1, kB2}));
  EXPECT_EQ(lports.size(), 6u) << "each connection has its own source port";
  EXPECT_EQ(w().conns.size(), 6u);
}

TEST_P(WorkerModeTest, UdpFlowBothDirections) {
  const Forward mode = GetParam();
  build(mode);
  if (HasFatalFailure()) return;
  FrameSpec u = from_client(5000, 0, kVip, 5353);
  u.proto = kProtoUdp;
  u.payload = {'q', 'u', 'e', 'r', 'y'};
  const Frame out = one_out(build_frame(u), 0, 1);
  ASSERT_FALSE(out.empty());
  expect_valid_ipv4(out, "udp out");
  EXPECT_EQ(ip_dst(out.data()), kB1);
  EXPECT_EQ(l4_dport(out.data()), 53);
  const uint32_t to = ip_src(out.data());
  const uint16_t tport = l4_sport(out.data());
  EXPECT_EQ(to, mode == Forward::kFnat ? kLocal : kClient);
  FrameSpec r = from_backend(kB1, kB1Mac, 53, to, tport, 0);
  r.proto = kProtoUdp;
  r.payload = {'a', 'n', 's'};
  const Frame back = one_out(build_frame(r), 1, 0);
  ASSERT_FALSE(back.empty());
  expect_valid_ipv4(back, "udp back");
  EXPECT_EQ(ip_src(back.data()), kVip);
  EXPECT_EQ(l4_sport(back.data()), 5353);
  EXPECT_EQ(ip_dst(back.data()), kClient);
  EXPECT_EQ(l4_dport(back.data()), 5000);
  // A datagram without checksum keeps none.
  u.udp_checksum = false;
  const Frame out2 = one_out(build_frame(u), 0, 1);
  ASSERT_FALSE(out2.empty());
  EXPECT_EQ(get16(l4_of(out2.data()) + 6), 0);
  EXPECT_TRUE(ip_cksum_exact(out2.data()));
  EXPECT_EQ(w().conns.size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Modes, WorkerModeTest, ::testing::Values(Forward::kFnat, Forward::kNat),
                         [](const ::testing::TestParamInfo<Forward>& i) {
                           return std::string(cp::name(i.param));
                         });

TEST_F(WorkerTest, NonSynWithoutConnectionIsDropped) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  rx(build_frame(from_client(42000, kTcpAck)), 0);
  expect_nothing_out("ACK without connection");
  EXPECT_EQ(drops(kNoConn), 1u);
  rx(build_frame(from_client(42001, kTcpSyn | kTcpAck)), 0);
  rx(build_frame(from_client(42002, kTcpRst)), 0);
  rx(build_frame(from_client(42003, kTcpSyn | kTcpRst)), 0);
  rx(build_frame(from_client(42004, kTcpFin | kTcpAck)), 0);
  expect_nothing_out("non-SYN");
  EXPECT_EQ(drops(kNoConn), 5u);
  EXPECT_EQ(w().conns.size(), 0u);
  EXPECT_EQ(w().counters.new_flows.load(), 0u);
  EXPECT_EQ(total_drops(), 5u) << drop_summary();
}

TEST_F(WorkerTest, SynToServiceWithoutBackendsGetsRst) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  FrameSpec syn = from_client(43000, kTcpSyn, kVipEmpty, 80);
  syn.seq = 0x11223344;
  syn.tcp_opts = {2, 4, 0x05, 0xb4};
  const Frame out = one_out(build_frame(syn), 0, 0);
  ASSERT_FALSE(out.empty());
  const uint8_t* o = out.data();
  expect_valid_ipv4(out, "RST");
  EXPECT_EQ(out.size(), 54u);
  EXPECT_TRUE(mac_is(o, kClientMac)) << "back to the sender's MAC";
  EXPECT_TRUE(mac_is(o + 6, kPortMac[0]));
  EXPECT_EQ(ip_src(o), kVipEmpty);
  EXPECT_EQ(ip_dst(o), kClient);
  EXPECT_EQ(l4_sport(o), 80);
  EXPECT_EQ(l4_dport(o), 43000);
  EXPECT_EQ(tcp_flags(o), kTcpRst | kTcpAck);
  EXPECT_EQ(tcp_seq(o), 0u);
  EXPECT_EQ(tcp_ack(o), 0x11223345u);
  EXPECT_EQ(w().counters.rst_sent.load(), 1u);
  EXPECT_EQ(w().conns.size(), 0u);
  EXPECT_EQ(total_drops(), 0u) << drop_summary();
}

TEST_F(WorkerTest, UdpToServiceWithoutBackendsGetsPortUnreachable) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  FrameSpec u = from_client(6000, 0, kVipEmpty, 53);
  u.proto = kProtoUdp;
  u.payload.assign(40, 0x33);
  const Frame in = build_frame(u);
  const Frame out = one_out(in, 0, 0);
  ASSERT_FALSE(out.empty());
  const uint8_t* o = out.data();
  expect_valid_ipv4(out, "ICMP unreachable");
  EXPECT_EQ(out.size(), 14u + 20 + 8 + 20 + 8);
  EXPECT_TRUE(mac_is(o, kClientMac));
  EXPECT_TRUE(mac_is(o + 6, kPortMac[0]));
  EXPECT_EQ(ip_proto(o), kProtoIcmp);
  EXPECT_EQ(ip_src(o), kVipEmpty);
  EXPECT_EQ(ip_dst(o), kClient);
  EXPECT_EQ(o[34], 3);
  EXPECT_EQ(o[35], 3);
  EXPECT_TRUE(std::equal(o + 42, o + 42 + 28, in.begin() + 14)) << "quotes the original IP header + 8 bytes";
  EXPECT_EQ(w().counters.icmp_unreach_sent.load(), 1u);
  EXPECT_EQ(total_drops(), 0u) << drop_summary();
}

TEST_F(WorkerTest, WhenEmptyDropDropsSilently) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  rx(build_frame(from_client(44000, kTcpSyn, kVipEmpty, 81)), 0);
  expect_nothing_out("when_empty drop");
  EXPECT_EQ(drops(kNoEndpointsDrop), 1u);
  EXPECT_EQ(w().counters.rst_sent.load(), 0u);
}

TEST_F(WorkerTest, MalformedFramesCountedByReason) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  struct Case {
    Frame f;
    DropReason r;
  };
  std::vector<Case> cases;
  const Frame good = build_frame(from_client(51000, kTcpSyn));
  cases.push_back({Frame(good.begin(), good.begin() + 10), kTruncated});
  {
    FrameSpec s = from_client(51000, kTcpSyn);
    s.ethertype = 0x88cc;  // LLDP
    cases.push_back({build_frame(s), kBadEthertype});
  }
  {
    Frame f = good;
    f[14] = 0x65;  // version 6
    fix_ip_cksum(f);
    cases.push_back({f, kBadIpHeader});
  }
  {
    Frame f = good;
    f[24] ^= 0xff;
    cases.push_back({f, kBadIpChecksum});
  }
  {
    FrameSpec s = from_client(51000, kTcpSyn);
    s.frag = 0x2000;
    cases.push_back({build_frame(s), kFragment});
  }
  {
    FrameSpec s = from_client(51000, kTcpSyn);
    s.ttl = 1;
    cases.push_back({build_frame(s), kTtlExceeded});
  }
  {
    Frame f = good;
    f[34 + 12] = 0x30;  // data offset 3
    cases.push_back({f, kBadL4Header});
  }
  {
    FrameSpec s = from_client(51000, kTcpSyn);
    s.proto = 47;
    s.payload = {0, 0, 8, 0};
    cases.push_back({build_frame(s), kUnsupportedProto});
  }
  cases.push_back({build_frame(from_client(51000, kTcpSyn, kVip, 9999)), kVipNoPort});
  cases.push_back({build_frame(from_client(51000, kTcpSyn, ip4(10, 0, 0, 99), 80)), kNoService});
  cases.push_back({build_frame(from_client(51000, kTcpSyn, kPort0Ip, 22)), kLocalUnhandled});
  {
    FrameSpec s = from_client(51000, kTcpSyn);
    s.proto = kProtoIcmp;
    s.icmp_type = 13;  // timestamp: not handled
    cases.push_back({build_frame(s), kLocalUnhandled});
  }
  std::map<DropReason, uint64_t> want;
  for (const auto& c : cases) {
    rx(c.f, 0);
    ++want[c.r];
    EXPECT_EQ(drops(c.r), want[c.r]) << "expected " << drop_reason_name(c.r) << "; drops:" << drop_summary();
  }
  expect_nothing_out("malformed frames");
  EXPECT_EQ(total_drops(), cases.size()) << drop_summary();
  EXPECT_EQ(w().conns.size(), 0u);
}

TEST_F(WorkerTest, WrongMacIsNotForUs) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  FrameSpec s = from_client(52000, kTcpSyn);
  s.dmac = {0x02, 0x12, 0x34, 0x56, 0x78, 0x9a};
  rx(build_frame(s), 0);
  EXPECT_EQ(drops(kNotForUs), 1u);
  s.dmac = kPortMac[1];  // the other port's MAC
  rx(build_frame(s), 0);
  EXPECT_EQ(drops(kNotForUs), 2u);
  s.dmac = kBcast;  // IP to broadcast
  rx(build_frame(s), 0);
  EXPECT_EQ(drops(kNotForUs), 3u);
  s.dmac = {0x01, 0x00, 0x5e, 0x00, 0x00, 0x01};  // IP multicast
  rx(build_frame(s), 0);
  EXPECT_EQ(drops(kNotForUs), 4u);
  // A packet from a port the dataplane does not own.
  rte_mbuf* m = mbuf_of(build_frame(from_client(52000, kTcpSyn)), 0);
  ASSERT_NE(m, nullptr);
  m->port = 31;
  process_burst(w(), &m, 1, false);
  flush_tx(w());
  EXPECT_EQ(drops(kNotForUs), 5u);
  expect_nothing_out("not for us");
  EXPECT_EQ(w().conns.size(), 0u);
  EXPECT_EQ(total_drops(), 5u) << drop_summary();
}

TEST_F(WorkerTest, MultiSegmentMbufIsDropped) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  const Frame f = build_frame(from_client(52500, kTcpSyn));
  rte_mbuf* a = mbuf_of(Frame(f.begin(), f.begin() + 30), 0);
  rte_mbuf* b = mbuf_of(Frame(f.begin() + 30, f.end()), 0);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(rte_pktmbuf_chain(a, b), 0);
  process_burst(w(), &a, 1, false);
  flush_tx(w());
  expect_nothing_out("chained mbuf");
  EXPECT_EQ(drops(kTruncated), 1u);
}

TEST_F(WorkerTest, IcmpEchoToVipGetsReply) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  FrameSpec s = from_client(0, 0);
  s.proto = kProtoIcmp;
  s.icmp_type = 8;
  s.icmp_id = 0x77;
  s.payload.assign(56, 0x61);
  const Frame in = build_frame(s);
  const Frame out = one_out(in, 0, 0);
  ASSERT_FALSE(out.empty());
  const uint8_t* o = out.data();
  expect_valid_ipv4(out, "echo reply");
  EXPECT_TRUE(mac_is(o, kClientMac));
  EXPECT_TRUE(mac_is(o + 6, kPortMac[0]));
  EXPECT_EQ(ip_src(o), kVip);
  EXPECT_EQ(ip_dst(o), kClient);
  EXPECT_EQ(o[34], 0);
  EXPECT_EQ(out.size(), in.size());
  EXPECT_TRUE(std::equal(out.begin() + 38, out.end(), in.begin() + 38));
  // To a port address too; elsewhere: no service.
  s.dst = kPort0Ip;
  EXPECT_FALSE(one_out(build_frame(s), 0, 0).empty());
  s.dst = ip4(8, 8, 8, 8);
  rx(build_frame(s), 0);
  expect_nothing_out("echo to a foreign address");
  EXPECT_EQ(drops(kNoService), 1u);
}

// Two workers: a packet arriving at the worker that does not own its flow is
// handed over through the owner's ring; the owner translates it and sends
// on its own tx queue; the reply comes back to the same owner.
TEST_F(WorkerTest, RedirectToOwningWorker) {
  build(Forward::kFnat, 2);
  if (HasFatalFailure()) return;
  // Find a client (address, port) whose flow belongs to worker 1 and one for
  // worker 0 (bounded search: flow_owner may hash the address only).
  auto find_client = [&](uint32_t owner, uint32_t* addr, uint16_t* port) {
    for (uint32_t a = 10; a < 250; ++a)
      for (uint16_t p = 56000; p < 56016; ++p)
        if (flow_owner(ip4(10, 0, 0, a), p, 2) == owner) {
          *addr = ip4(10, 0, 0, a);
          *port = p;
          return true;
        }
    return false;
  };
  uint32_t c1, c0;
  uint16_t p1, p0;
  ASSERT_TRUE(find_client(1, &c1, &p1));
  ASSERT_TRUE(find_client(0, &c0, &p0));
  sh().neigh.update(c1, kClientMac.data(), kT0);
  sh().neigh.update(c0, kClientMac.data(), kT0);
  FrameSpec syn = from_client(p1, kTcpSyn);
  syn.src = c1;
  rx(build_frame(syn), 0, /*worker*/ 0);
  expect_nothing_out("redirected, not processed by worker 0");
  EXPECT_EQ(w(0).counters.redirects_out.load(), 1u);
  EXPECT_EQ(w(0).conns.size(), 0u);
  rte_mbuf* got[4];
  unsigned n = rte_ring_sc_dequeue_burst(sh().rings[1], reinterpret_cast<void**>(got), 4, nullptr);
  ASSERT_EQ(n, 1u);
  process_burst(w(1), got, 1, true);
  flush_tx(w(1));
  auto q1 = tx_queue(1, 1);
  EXPECT_EQ(tx_queue(1, 0).size(), 0u) << "worker 1 sends on its own queue";
  ASSERT_EQ(q1.size(), 1u) << drop_summary(1);
  const uint16_t lport = l4_sport(q1[0].data());
  EXPECT_EQ(lport % 2, 1) << "worker 1's local ports are the odd ones";
  EXPECT_EQ(w(1).conns.size(), 1u);
  // The reply arrives at worker 0 and is redirected to worker 1 (full-NAT
  // replies are owned by local port).
  const uint32_t b = ip_dst(q1[0].data());
  rx(build_frame(from_backend(b, b == kB1 ? kB1Mac : kB2Mac, 80, kLocal, lport, kTcpSyn | kTcpAck)), 1, 0);
  expect_nothing_out("reply redirected");
  EXPECT_EQ(w(0).counters.redirects_out.load(), 2u);
  n = rte_ring_sc_dequeue_burst(sh().rings[1], reinterpret_cast<void**>(got), 4, nullptr);
  ASSERT_EQ(n, 1u);
  process_burst(w(1), got, 1, true);
  flush_tx(w(1));
  auto back = tx_queue(0, 1);
  ASSERT_EQ(back.size(), 1u) << drop_summary(1);
  EXPECT_EQ(ip_src(back[0].data()), kVip);
  EXPECT_EQ(ip_dst(back[0].data()), c1);
  EXPECT_EQ(l4_dport(back[0].data()), p1);
  // A flow owned by worker 0 is processed in place.
  FrameSpec syn0 = from_client(p0, kTcpSyn);
  syn0.src = c0;
  rx(build_frame(syn0), 0, 0);
  auto q0 = tx_queue(1, 0);
  ASSERT_EQ(q0.size(), 1u) << drop_summary(0);
  EXPECT_EQ(l4_sport(q0[0].data()) % 2, 0);
  EXPECT_EQ(w(0).counters.redirects_out.load(), 2u);
  EXPECT_EQ(total_drops(0) + total_drops(1), 0u);
}

TEST_F(WorkerTest, TxQueueFullIsCountedAndFreed) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  // The loopback ring holds 1023 frames; nothing drains it during the burst.
  FrameSpec u = from_client(61000, 0, kVip, 5353);
  u.proto = kProtoUdp;
  u.payload = {1, 2, 3};
  const Frame f = build_frame(u);
  const unsigned total = 1100;
  for (unsigned k = 0; k < total; k += kBurst) {
    rte_mbuf* ms[kBurst];
    const unsigned n = std::min<unsigned>(kBurst, total - k);
    for (unsigned i = 0; i < n; ++i) ms[i] = mbuf_of(f, 0);
    process_burst(w(), ms, static_cast<uint16_t>(n), false);
    flush_tx(w());
  }
  const uint64_t sent = w().counters.tx.load(), full = drops(kTxFull);
  EXPECT_EQ(sent + full, total) << drop_summary();
  EXPECT_GT(full, 0u);
  EXPECT_EQ(tx(1).size(), sent);
}

}  // namespace
}  // namespace vipd::dp
