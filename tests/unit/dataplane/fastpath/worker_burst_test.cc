// Bursts through the per-packet pipeline (worker_test_fixture.h): more packets
// than the tx buffer, and packets of one burst that change what a later packet
// of the same burst must see (burst.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "dataplane/fastpath/conn_table.h"
#include "dataplane/fastpath/flow_hash.h"
#include "tests/unit/dataplane/fastpath/worker_test_fixture.h"

namespace vipd::dp {
namespace {

using namespace test;

TEST_F(WorkerTest, BurstOfManyPacketsAndTxBufferFlushes) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  // More packets than the tx buffer holds (kBurst * 2) in one burst.
  std::vector<rte_mbuf*> ms;
  for (uint16_t k = 0; k < 100; ++k) ms.push_back(mbuf_of(build_frame(from_client(58000 + k, kTcpSyn)), 0));
  for (size_t off = 0; off < ms.size(); off += kBurst) {
    const uint16_t n = static_cast<uint16_t>(std::min<size_t>(kBurst, ms.size() - off));
    process_burst(w(), ms.data() + off, n, false);
  }
  flush_tx(w());
  auto out = tx(1);
  EXPECT_EQ(out.size(), 100u) << drop_summary();
  for (const auto& f : out) {
    expect_valid_ipv4(f, "burst");
    if (HasFailure()) break;
  }
  EXPECT_EQ(w().counters.tx.load(), 100u);
  EXPECT_EQ(w().conns.size(), 100u);
}

// process_burst looks the whole burst up first (burst.h): a packet whose flow
// an earlier packet of the same burst created, or removed and created again,
// must see that, exactly as if the packets came one by one.
class WorkerBurstTest : public WorkerTest {
 protected:
  // Runs the frames through worker 0 as one burst; returns what left on port 1.
  std::vector<Frame> one_burst(const std::vector<Frame>& in) {
    std::vector<rte_mbuf*> ms;
    for (const auto& f : in) ms.push_back(mbuf_of(f, 0));
    process_burst(w(), ms.data(), static_cast<uint16_t>(ms.size()), false);
    flush_tx(w());
    return tx(1);
  }
  static std::vector<uint8_t> tuple_of(const Frame& f) { return Frame(f.begin() + 26, f.begin() + 38); }

  // The entry-reuse tests' table: kReuseCap connections, filled by the flow
  // on B1 and kFillers more, so that once that flow is expired its entry
  // is the only free one and the next new connection takes it (the hash
  // hands freed key slots out last).
  static constexpr uint32_t kReuseCap = 16, kFillers = kReuseCap - 1;

  // An established flow from `cport` on B1, `fillers` SYN-only flows from
  // the ports above it, then B1 removed by the control plane (the flow's next
  // packet expires it): its connection entry.
  const Conn* flow_on_removed_b1(uint16_t cport, uint32_t fillers) {
    const Frame a = one_out(build_frame(from_client(cport, kTcpSyn)), 0, 1);
    EXPECT_FALSE(a.empty());
    if (a.empty()) return nullptr;
    EXPECT_EQ(ip_dst(a.data()), kB1);
    one_out(build_frame(from_client(cport, kTcpAck)), 0, 1);
    for (uint32_t k = 0; k < fillers; ++k)
      EXPECT_FALSE(one_out(build_frame(from_client(static_cast<uint16_t>(cport + 100 + k), kTcpSyn)), 0, 1).empty())
          << "filler " << k << drop_summary();
    bool reply = false;
    const Conn* c = w().conns.lookup(make_key(kClient, cport, kVip, 8080, kProtoTcp), &reply);
    cp::ServiceTable next = table_;
    put(next, vsvc(kVip, 8080, Protocol::kTcp, {rs(kB2, 80)}));
    std::string err;
    EXPECT_TRUE(pub_->apply(next, cp::TableDiff::compute(table_, next), false, &err)) << err;
    return c;
  }

  // After a burst in which flow A (on the removed B1, entry `ca`, with
  // kFillers other connections) got its RST and a new flow B from `bport`
  // took A's entry: only B's `n_to_backends` packets went to a backend (B2),
  // A's later packet was dropped (no_conn).
  void expect_b_took_a_entry(const Conn* ca, uint16_t bport, size_t n_to_backends) {
    bool reply = false;
    const Conn* cb = w().conns.lookup(make_key(kClient, bport, kVip, 8080, kProtoTcp), &reply);
    ASSERT_NE(cb, nullptr);
    EXPECT_EQ(cb, ca) << "the test needs B to reuse A's entry";
    const auto to_client = tx(0), to_backends = tx(1);
    ASSERT_EQ(to_client.size(), 1u) << drop_summary();
    EXPECT_EQ(tcp_flags(to_client[0].data()), kTcpRst);
    ASSERT_EQ(to_backends.size(), n_to_backends) << drop_summary();
    for (const auto& f : to_backends) {
      EXPECT_EQ(l4_sport(f.data()), cb->lport) << "only B's packets went to a backend";
      EXPECT_EQ(ip_dst(f.data()), kB2);
    }
    EXPECT_EQ(drops(kNoConn), 1u) << drop_summary();
    EXPECT_EQ(w().conns.size(), 1u + kFillers);
  }
};

TEST_F(WorkerBurstTest, PacketsOfANewFlowInOneBurstShareItsConnection) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  // SYN, its retransmission, the handshake's ACK and data: one connection.
  const auto out = one_burst({build_frame(from_client(52000, kTcpSyn)), build_frame(from_client(52000, kTcpSyn)),
                              build_frame(from_client(52000, kTcpAck)),
                              build_frame(from_client(52000, kTcpAck | kTcpPsh)),
                              build_frame(from_client(52001, kTcpSyn))});
  ASSERT_EQ(out.size(), 5u) << drop_summary();
  EXPECT_EQ(total_drops(), 0u) << drop_summary();
  EXPECT_EQ(w().conns.size(), 2u);
  for (size_t i = 1; i < 4; ++i) EXPECT_EQ(tuple_of(out[i]), tuple_of(out[0])) << "packet " << i;
  EXPECT_NE(tuple_of(out[4]), tuple_of(out[0]));
  for (const auto& f : out) expect_valid_ipv4(f, "burst");
}

TEST_F(WorkerBurstTest, PortReuseAfterCloseWithinOneBurst) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  const Frame first = one_out(build_frame(from_client(52100, kTcpSyn)), 0, 1);
  one_out(build_frame(from_client(52100, kTcpRst)), 0, 1);  // closed
  // A new SYN on the same port replaces the closed connection; the ACK right
  // behind it in the same burst must follow the new one.
  const auto out = one_burst({build_frame(from_client(52100, kTcpSyn)), build_frame(from_client(52100, kTcpAck))});
  ASSERT_EQ(out.size(), 2u) << drop_summary();
  EXPECT_EQ(total_drops(), 0u) << drop_summary();
  EXPECT_EQ(tuple_of(out[1]), tuple_of(out[0]));
  EXPECT_EQ(w().conns.size(), 1u);
  bool reply = false;
  const Conn* c = w().conns.lookup(make_key(kClient, 52100, kVip, 8080, kProtoTcp), &reply);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->state, ConnState::kEstablished);
  (void)first;
}

// A connection removed by an earlier packet of the burst, and its entry taken
// by another flow's new connection right after (the only free entry, in a
// full table), must not be used by a later packet of the removed flow: the
// burst's lookup for that packet named the entry, the change log sends it to
// a fresh lookup, which finds nothing (as one packet at a time would).
TEST_F(WorkerBurstTest, EntryReusedByAnotherFlowWithinOneBurst) {
  build(Forward::kFnat, 1, kReuseCap);
  if (HasFatalFailure()) return;
  const Conn* ca = flow_on_removed_b1(46000, kFillers);  // the flow's next packet expires it
  ASSERT_FALSE(HasFailure());
  ASSERT_NE(ca, nullptr);
  // One burst: A mid-flow (expired: RST), a new flow B (takes A's entry), A
  // again (no connection any more: dropped, not sent on B's connection).
  std::vector<rte_mbuf*> ms{mbuf_of(build_frame(from_client(46000, kTcpAck)), 0),
                            mbuf_of(build_frame(from_client(46001, kTcpSyn)), 0),
                            mbuf_of(build_frame(from_client(46000, kTcpAck | kTcpPsh)), 0)};
  process_burst(w(), ms.data(), static_cast<uint16_t>(ms.size()), false);
  flush_tx(w());
  expect_b_took_a_entry(ca, 46001, 1);  // B's SYN
}

// process_burst prepares a burst before the one in hand has run (its
// lookups then overlap that one's work): a lookup of the second burst of an
// rx can be older than what the first changed, and later bursts' preparation
// must not make the change log forget it. The scenario above across bursts
// of kBurst: A expired and B taking A's entry in the first, A's next packet
// in the second, and a third burst prepared in between.
TEST_F(WorkerBurstTest, EntryReusedByAnotherFlowSeenByTheNextBurst) {
  build(Forward::kFnat, 1, kReuseCap);
  if (HasFatalFailure()) return;
  const Conn* ca = flow_on_removed_b1(46100, kFillers);
  ASSERT_FALSE(HasFailure());
  ASSERT_NE(ca, nullptr);
  // [0] A (expired: RST), [1] B's SYN (A's entry), B's ACKs up to the end of
  // the first burst, [kBurst] A again, B's ACKs through a third burst.
  std::vector<rte_mbuf*> ms{mbuf_of(build_frame(from_client(46100, kTcpAck)), 0),
                            mbuf_of(build_frame(from_client(46101, kTcpSyn)), 0)};
  while (ms.size() < kBurst) ms.push_back(mbuf_of(build_frame(from_client(46101, kTcpAck)), 0));
  ms.push_back(mbuf_of(build_frame(from_client(46100, kTcpAck | kTcpPsh)), 0));
  while (ms.size() < 2 * kBurst + 1) ms.push_back(mbuf_of(build_frame(from_client(46101, kTcpAck)), 0));
  process_burst(w(), ms.data(), static_cast<uint16_t>(ms.size()), false);
  flush_tx(w());
  expect_b_took_a_entry(ca, 46101, 2 * kBurst - 1);  // B's SYN and ACKs
}

// prepare_burst takes the entry the first matching tag names as a
// connection's candidate without comparing keys (burst.cc); the per-packet
// stage compares it. A flow whose key shares its buckets and tag with an
// established one's must get a connection of its own, and both flows' later
// packets their own connections, in one burst and across bursts.
TEST_F(WorkerBurstTest, FlowWhoseTagNamesAnotherFlowsEntry) {
  build(Forward::kFnat, 1, kReuseCap);
  if (HasFatalFailure()) return;
  const uint32_t mask = w().conns.buckets() - 1;
  ASSERT_GT(mask, 0u);
  // (CRC32 is linear: keys that differ in the port alone never share a tag
  // and bucket here, so the client's address varies too.)
  std::map<uint32_t, std::pair<uint32_t, uint16_t>> seen;  // (tag, first bucket) -> client
  std::pair<uint32_t, uint16_t> ca{0, 0}, cb{0, 0};
  for (uint32_t i = 0; i < (1u << 20) && !ca.first; ++i) {
    const std::pair<uint32_t, uint16_t> c{kClient + (i >> 10), static_cast<uint16_t>(40000 + (i & 1023))};
    const uint32_t h = conn_hash(make_key(c.first, c.second, kVip, 8080, kProtoTcp));
    auto [it, fresh] = seen.emplace((uint32_t{ConnTable::tag_of(h)} << 16) | (h & mask), c);
    if (!fresh) {
      ca = it->second;
      cb = c;
    }
  }
  ASSERT_NE(ca.first, 0u) << "no two clients share a tag and bucket";
  const auto pkt = [&](const std::pair<uint32_t, uint16_t>& c, uint8_t flags) {
    FrameSpec s = from_client(c.second, flags);
    s.src = c.first;
    return build_frame(s);
  };
  const Frame a = one_out(pkt(ca, kTcpSyn), 0, 1);
  ASSERT_FALSE(a.empty()) << drop_summary();
  // One burst: B's SYN (its candidate is A's entry), A's ACK, B's ACK.
  const auto out = one_burst({pkt(cb, kTcpSyn), pkt(ca, kTcpAck), pkt(cb, kTcpAck)});
  ASSERT_EQ(out.size(), 3u) << drop_summary();
  EXPECT_EQ(total_drops(), 0u) << drop_summary();
  EXPECT_EQ(w().conns.size(), 2u);
  EXPECT_NE(tuple_of(out[0]), tuple_of(a)) << "B has a connection of its own";
  EXPECT_EQ(tuple_of(out[1]), tuple_of(a)) << "A's packet on A's connection";
  EXPECT_EQ(tuple_of(out[2]), tuple_of(out[0])) << "B's packet on B's connection";
  // A later burst (no change logged): each flow's packet on its connection.
  const auto again = one_burst({pkt(cb, kTcpAck | kTcpPsh), pkt(ca, kTcpAck | kTcpPsh)});
  ASSERT_EQ(again.size(), 2u) << drop_summary();
  EXPECT_EQ(tuple_of(again[0]), tuple_of(out[0]));
  EXPECT_EQ(tuple_of(again[1]), tuple_of(a));
  bool reply = true;
  const Conn* conn_b = w().conns.lookup(make_key(cb.first, cb.second, kVip, 8080, kProtoTcp), &reply);
  ASSERT_NE(conn_b, nullptr);
  EXPECT_FALSE(reply);
  EXPECT_EQ(conn_b->state, ConnState::kEstablished);
}

// A full-NAT reply is found by its port index entry, which the change log
// names (ConnTable::port_sig): a reply to a local port that a new connection
// took earlier in the same burst (no connection there when the burst was
// prepared) must find that connection, as one packet at a time would.
TEST_F(WorkerBurstTest, ReplyToAPortTakenEarlierInTheBurst) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  const FnatPool& fp = w().fnat[0];
  ASSERT_EQ(fp.buckets, 0u) << "the test predicts the pool's next port (no RSS buckets)";
  ASSERT_GT(fp.top, 0u);
  const uint16_t lport = fp.ports[fp.top - 1];
  // The client's SYN (to B1: rr starts there) and, behind it in the same
  // burst, B1's SYN-ACK to the local port the SYN takes.
  std::vector<rte_mbuf*> ms{mbuf_of(build_frame(from_client(48000, kTcpSyn)), 0),
                            mbuf_of(build_frame(from_backend(kB1, kB1Mac, 80, kLocal, lport, kTcpSyn | kTcpAck)), 1)};
  process_burst(w(), ms.data(), static_cast<uint16_t>(ms.size()), false);
  flush_tx(w());
  const auto to_backends = tx(1), to_client = tx(0);
  ASSERT_EQ(to_backends.size(), 1u) << drop_summary();
  EXPECT_EQ(ip_dst(to_backends[0].data()), kB1);
  ASSERT_EQ(l4_sport(to_backends[0].data()), lport) << "the SYN took the predicted port";
  ASSERT_EQ(to_client.size(), 1u) << drop_summary();
  EXPECT_EQ(ip_dst(to_client[0].data()), kClient);
  EXPECT_EQ(l4_dport(to_client[0].data()), 48000);
  EXPECT_EQ(total_drops(), 0u) << drop_summary();
}

// The other way: a reply to a local port whose connection an earlier packet
// of the same burst removed (its destination gone: the client's next packet
// expires it). The burst found the connection in the port index; the change
// log (port_sig) sends the reply to a fresh lookup, which finds none (and the
// entry, free again, would not match its key either: reply_matches checks
// in_use): it is dropped as one packet at a time would drop it, and the
// removed entry is not expired a second time.
TEST_F(WorkerBurstTest, ReplyToAPortFreedEarlierInTheBurst) {
  build(Forward::kFnat, 1, kReuseCap);
  if (HasFatalFailure()) return;
  const Conn* ca = flow_on_removed_b1(47000, 0);
  ASSERT_FALSE(HasFailure());
  ASSERT_NE(ca, nullptr);
  const uint32_t laddr = ca->laddr;
  const uint16_t lport = ca->lport;
  ASSERT_NE(w().conns.local_candidate(w().conns.local_index(laddr), lport), nullptr);
  // One burst: the client's ACK (expired: RST to the client), then B1's ACK
  // to the connection's local port.
  std::vector<rte_mbuf*> ms{mbuf_of(build_frame(from_client(47000, kTcpAck)), 0),
                            mbuf_of(build_frame(from_backend(kB1, kB1Mac, 80, laddr, lport, kTcpAck)), 1)};
  process_burst(w(), ms.data(), static_cast<uint16_t>(ms.size()), false);
  flush_tx(w());
  const auto to_client = tx(0), to_backends = tx(1);
  ASSERT_EQ(to_client.size(), 1u) << drop_summary();
  EXPECT_EQ(tcp_flags(to_client[0].data()), kTcpRst);
  EXPECT_TRUE(to_backends.empty());
  EXPECT_EQ(drops(kNoService), 1u) << drop_summary();
  EXPECT_EQ(drops(kDestExpired), 0u) << drop_summary();
  EXPECT_EQ(total_drops(), 1u) << drop_summary();
  EXPECT_EQ(w().conns.size(), 0u);
  EXPECT_EQ(w().conns.local_candidate(w().conns.local_index(laddr), lport), nullptr);
  // The table is whole: a new flow gets a connection.
  EXPECT_FALSE(one_out(build_frame(from_client(47001, kTcpSyn)), 0, 1).empty()) << drop_summary();
  EXPECT_EQ(w().conns.size(), 1u);
}

// prepare_burst parses a frame received on the burst's first frame's port,
// to that port's MAC, straight into its PktInfo, and any other frame with
// the whole check_and_parse (burst.cc): in one burst, frames to the other
// port's MAC, to group MACs, from a port not ours and on the other port are
// each checked as they would be alone.
TEST_F(WorkerBurstTest, FramesOfOtherPortsAndMacsInOneBurst) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  const auto with_mac = [&](uint16_t cport, const MacAddr& mac) {
    FrameSpec s = from_client(cport, kTcpSyn);
    s.dmac = mac;
    return build_frame(s);
  };
  rte_mbuf* stranger = mbuf_of(build_frame(from_client(49004, kTcpSyn)), 0);
  ASSERT_NE(stranger, nullptr);
  stranger->port = 31;  // a port the dataplane does not own
  std::vector<rte_mbuf*> ms{mbuf_of(build_frame(from_client(49000, kTcpSyn)), 0),
                            mbuf_of(with_mac(49001, kPortMac[1]), 0),  // the other port's MAC
                            mbuf_of(with_mac(49002, kBcast), 0),
                            mbuf_of(with_mac(49003, MacAddr{0x01, 0x00, 0x5e, 0x00, 0x00, 0x01}), 0),
                            stranger,
                            mbuf_of(with_mac(49005, kPortMac[1]), 1),  // on port 1, to its MAC
                            mbuf_of(build_frame(from_client(49000, kTcpAck)), 0)};
  process_burst(w(), ms.data(), static_cast<uint16_t>(ms.size()), false);
  flush_tx(w());
  const auto out = tx(1);
  ASSERT_EQ(out.size(), 3u) << drop_summary();
  EXPECT_EQ(tuple_of(out[2]), tuple_of(out[0])) << "the ACK on the SYN's connection";
  EXPECT_NE(tuple_of(out[1]), tuple_of(out[0]));
  EXPECT_EQ(drops(kNotForUs), 4u) << drop_summary();
  EXPECT_EQ(total_drops(), 4u) << drop_summary();
  EXPECT_EQ(w().conns.size(), 2u);
}

// output() keeps the last reachable next hop for the rest of the burst; an
// ARP reply that moves that neighbour to a new MAC in the middle of a burst
// counts from the next packet on, as it would one packet at a time.
TEST_F(WorkerBurstTest, NeighbourMacChangeWithinOneBurst) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  one_out(build_frame(from_client(47000, kTcpSyn)), 0, 1);  // to B1 (rr starts there)
  const MacAddr moved{0x02, 0xb0, 0, 0, 0, 0x99};
  std::vector<rte_mbuf*> ms{mbuf_of(build_frame(from_client(47000, kTcpAck)), 0),
                            mbuf_of(build_arp(2, moved, kB1, kPortMac[1], kPort1Ip, kPortMac[1]), 1),
                            mbuf_of(build_frame(from_client(47000, kTcpAck | kTcpPsh)), 0)};
  process_burst(w(), ms.data(), static_cast<uint16_t>(ms.size()), false);
  flush_tx(w());
  const auto out = tx(1);
  ASSERT_EQ(out.size(), 2u) << drop_summary();
  EXPECT_TRUE(mac_is(out[0].data(), kB1Mac));
  EXPECT_TRUE(mac_is(out[1].data(), moved)) << "the MAC learned in the burst";
  EXPECT_EQ(total_drops(), 0u) << drop_summary();
}

}  // namespace
}  // namespace vipd::dp
