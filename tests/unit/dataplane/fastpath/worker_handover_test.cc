// Connection hand-over between full-NAT gateways (docs/gateway.md,
// "Hand-over"): a TCP packet without SYN of no connection goes to every peer
// (ethertype 0x88b5, IP packet unchanged); a peer's frame is forwarded when
// its connection lives here and dropped otherwise, never handed over again;
// the per-worker rate; the counters.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "tests/unit/dataplane/fastpath/handover_test_util.h"

namespace vipd::dp {
namespace {

using namespace test;

class HandoverTest : public WorkerTest {
 protected:
  void SetUp() override {
    WorkerTest::SetUp();
    if (HasFatalFailure() || IsSkipped()) return;
    build(Forward::kFnat);
    if (HasFatalFailure()) return;
    set_handover_peers(sh());
  }
  // Opens a connection (SYN, SYN-ACK) and returns the forwarded SYN.
  Frame open_conn(uint16_t cport) {
    const Frame out = one_out(build_frame(from_client(cport, kTcpSyn)), 0, 1);
    if (out.empty()) return out;
    rx(build_frame(from_backend(ip_dst(out.data()), kB1Mac, 80, kLocal, l4_sport(out.data()), kTcpSyn | kTcpAck)),
       1);
    tx(0);
    return out;
  }
  void serve() { serve_handed_over(w()); }
};

TEST_F(HandoverTest, AckOfNoConnectionGoesToEveryPeerUnchanged) {
  const Frame in = build_frame(from_client(43000, kTcpAck));
  rx(in, 0);
  EXPECT_EQ(tx(0).size(), 0u);
  expect_handed_over(w(), tx(1), in);
  if (HasFatalFailure()) return;
  EXPECT_EQ(w().conns.size(), 0u) << "no connection made here";
  EXPECT_EQ(total_drops(), 0u) << drop_summary();
  // FIN and RST of no connection too; not SYN+ACK nor SYN+FIN (they carry SYN).
  rx(build_frame(from_client(43001, kTcpFin | kTcpAck)), 0);
  rx(build_frame(from_client(43002, kTcpRst)), 0);
  EXPECT_EQ(tx(1).size(), 4u);
  rx(build_frame(from_client(43003, kTcpSyn | kTcpAck)), 0);
  rx(build_frame(from_client(43004, kTcpSyn | kTcpFin)), 0);
  expect_nothing_out("SYN-carrying non-starts");
  EXPECT_EQ(drops(kNoConn), 2u);
  EXPECT_EQ(w().counters.handovers.load(), 3u);
}

TEST_F(HandoverTest, SynAndUdpAreNotHandedOver) {
  const Frame syn = one_out(build_frame(from_client(43100, kTcpSyn)), 0, 1);
  ASSERT_FALSE(syn.empty());
  EXPECT_EQ(get16(&syn[12]), 0x0800);
  EXPECT_EQ(ip_src(syn.data()), kLocal) << "a SYN starts a connection here";
  FrameSpec u = from_client(43101, 0, kVip, 5353);
  u.proto = kProtoUdp;
  const Frame udp = one_out(build_frame(u), 0, 1);
  ASSERT_FALSE(udp.empty());
  EXPECT_EQ(ip_src(udp.data()), kLocal) << "UDP without an entry starts a flow here";
  EXPECT_EQ(w().counters.handovers.load(), 0u);
  EXPECT_EQ(w().conns.size(), 2u);
}

TEST_F(HandoverTest, PeerFrameOfAConnectionHereIsForwardedAfterTheBurst) {
  const Frame syn = open_conn(43200);
  ASSERT_FALSE(syn.empty());
  const Frame ack = build_frame(from_client(43200, kTcpAck));
  rx(as_peer_frame(ack, kPeer1Mac), 1);
  expect_nothing_out("queued for serve_peer_frames");
  EXPECT_EQ(w().counters.handover_matched.load(), 1u);
  serve();
  const auto out = tx(1);
  ASSERT_EQ(out.size(), 1u) << drop_summary();
  expect_valid_ipv4(out[0], "forwarded peer frame");
  EXPECT_TRUE(mac_is(out[0].data(), kB1Mac));
  EXPECT_EQ(ip_src(out[0].data()), kLocal);
  EXPECT_EQ(l4_sport(out[0].data()), l4_sport(syn.data())) << "the connection's own local port";
  EXPECT_EQ(ip_dst(out[0].data()), ip_dst(syn.data()));
  EXPECT_EQ(w().counters.handovers.load(), 0u);
  EXPECT_EQ(total_drops(), 0u) << drop_summary();
}

TEST_F(HandoverTest, PeerFrameOfNoConnectionIsDroppedNeverHandedOverAgain) {
  rx(as_peer_frame(build_frame(from_client(43300, kTcpAck)), kPeer2Mac), 1);
  serve();
  expect_nothing_out("not held here");
  EXPECT_EQ(drops(kHandoverNotHeld), 1u);
  EXPECT_EQ(w().counters.handovers.load(), 0u);
  EXPECT_EQ(w().counters.handover_matched.load(), 0u);
  // A peer's SYN (none sends one) starts nothing either.
  rx(as_peer_frame(build_frame(from_client(43301, kTcpSyn)), kPeer2Mac), 1);
  serve();
  expect_nothing_out("a peer's SYN");
  EXPECT_EQ(drops(kHandoverNotHeld), 2u);
  EXPECT_EQ(w().conns.size(), 0u);
}

// Only a configured peer may hand frames over: a station on the segment (here
// a backend) that sends 0x88b5 frames of a connection here, or a peer's MAC
// on the wrong port, is dropped (handover_not_peer) before any lookup.
TEST_F(HandoverTest, FrameNotFromAPeerIsDropped) {
  ASSERT_FALSE(open_conn(43250).empty());
  const Frame ack = build_frame(from_client(43250, kTcpAck));
  rx(as_peer_frame(ack, kB1Mac), 1);  // a resolved neighbour, but no peer
  Frame wrong_port = as_peer_frame(ack, kPeer1Mac);
  std::copy(kPortMac[0].begin(), kPortMac[0].end(), wrong_port.begin());
  rx(wrong_port, 0);  // a peer's MAC where no peer is
  rx(as_peer_frame(ack, MacAddr{0x02, 0xee, 0, 0, 0, 0x09}), 1);  // unknown MAC
  serve();
  expect_nothing_out("not from a peer");
  EXPECT_EQ(drops(kHandoverNotPeer), 3u) << drop_summary();
  EXPECT_EQ(w().counters.handover_matched.load(), 0u);
  EXPECT_EQ(drops(kHandoverNotHeld), 0u);
  // The peer itself still gets through.
  rx(as_peer_frame(ack, kPeer2Mac), 1);
  serve();
  EXPECT_EQ(tx(1).size(), 1u) << drop_summary();
  EXPECT_EQ(w().counters.handover_matched.load(), 1u);
}

TEST_F(HandoverTest, RateLimitedPerWorker) {
  sh().handover_tau = 1000 * 2;  // 3 at once, then one per 1000 TSC
  for (uint16_t i = 0; i < 5; ++i) rx(build_frame(from_client(static_cast<uint16_t>(43400 + i), kTcpAck)), 0);
  EXPECT_EQ(tx(1).size(), 6u) << "3 packets, 2 copies each";
  EXPECT_EQ(w().counters.handovers.load(), 3u);
  EXPECT_EQ(drops(kHandoverRateLimited), 2u);
  w().now += 1000;
  rx(build_frame(from_client(43410, kTcpAck)), 0);
  rx(build_frame(from_client(43411, kTcpAck)), 0);
  EXPECT_EQ(w().counters.handovers.load(), 4u);
  EXPECT_EQ(drops(kHandoverRateLimited), 3u);
  tx(1);
}

TEST_F(HandoverTest, UnresolvedPeerGetsArpAndIsNotParked) {
  Shared& s = sh();
  s.handover_peers[1] = ip4(10, 1, 0, 203);  // no neighbour entry
  rx(build_frame(from_client(43500, kTcpAck)), 0);
  const auto out = tx(1);
  ASSERT_EQ(out.size(), 2u) << "one copy to the known peer, one ARP request";
  int arp = 0, ho = 0;
  for (const Frame& o : out) (get16(&o[12]) == 0x0806 ? arp : ho)++;
  EXPECT_EQ(arp, 1);
  EXPECT_EQ(ho, 1);
  EXPECT_EQ(drops(kNeighUnresolved), 1u);
  EXPECT_EQ(w().n_pending, 0u) << "a dead peer must not fill the ARP queue";
}

// The peers are resolved in advance (worker 0's poll loop, from the start):
// an ARP request for each peer without an entry, at most one per arp_retry,
// and again once an entry ages past reachable; none for a reachable one.
TEST_F(HandoverTest, PeersAreResolvedInAdvance) {
  const uint32_t kPeer3 = ip4(10, 1, 0, 203), kPeer4 = ip4(10, 1, 0, 204);
  Shared& s = sh();
  s.handover_peers[2] = kPeer3;
  s.handover_peers[3] = kPeer4;
  s.n_handover_peers = 4;
  auto arp_targets = [&] {
    std::vector<uint32_t> t;
    for (const Frame& o : tx(1))
      if (get16(&o[12]) == 0x0806 && get16(&o[20]) == 1) t.push_back(get32(&o[38]));
    std::sort(t.begin(), t.end());
    return t;
  };
  resolve_peers(w());
  flush_tx(w());
  EXPECT_EQ(arp_targets(), (std::vector<uint32_t>{kPeer3, kPeer4})) << "before any packet to hand over";
  resolve_peers(w());
  flush_tx(w());
  EXPECT_TRUE(arp_targets().empty()) << "not again within arp_retry";
  s.neigh.update(kPeer3, MacAddr{0x02, 0xee, 0, 0, 0, 0x03}.data(), w().now);
  w().now += s.arp_retry;
  resolve_peers(w());
  flush_tx(w());
  EXPECT_EQ(arp_targets(), (std::vector<uint32_t>{kPeer4})) << "the unanswered one again";
  w().now += 61 * s.tsc_hz;  // the learned entries aged past reachable (60 s)
  resolve_peers(w());
  flush_tx(w());
  EXPECT_EQ(arp_targets(), (std::vector<uint32_t>{kPeer1, kPeer2, kPeer3, kPeer4})) << "re-ARP as entries age";
  EXPECT_EQ(total_drops(), 0u) << drop_summary();
}

// A copy the mbuf pool cannot give is counted (handover_no_mbuf); the last
// peer still gets the packet itself.
TEST_F(HandoverTest, CopyWithoutMbufIsCounted) {
  rte_mempool* empty = rte_pktmbuf_pool_create("dpt_ho_empty", 1, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
  ASSERT_NE(empty, nullptr);
  rte_mbuf* only = rte_pktmbuf_alloc(empty);
  ASSERT_NE(only, nullptr);
  rte_mempool* pool = w().pool;
  w().pool = empty;
  rx(build_frame(from_client(43700, kTcpAck)), 0);
  w().pool = pool;
  const auto out = tx(1);
  rte_pktmbuf_free(only);
  rte_mempool_free(empty);
  ASSERT_EQ(out.size(), 1u) << "the last peer's";
  EXPECT_TRUE(mac_is(out[0].data(), kPeer2Mac));
  EXPECT_EQ(w().counters.handovers.load(), 1u);
  EXPECT_EQ(drops(kHandoverNoMbuf), 1u) << drop_summary();
}

TEST_F(HandoverTest, WithoutPeersOff) {
  sh().n_handover_peers = 0;
  rx(build_frame(from_client(43600, kTcpAck)), 0);
  rx(as_peer_frame(build_frame(from_client(43601, kTcpAck)), kPeer1Mac), 1);
  expect_nothing_out("off");
  EXPECT_EQ(drops(kNoConn), 1u);
  EXPECT_EQ(drops(kBadEthertype), 1u);
  EXPECT_EQ(w().counters.handovers.load(), 0u);
}

}  // namespace
}  // namespace vipd::dp
