// Re-steering (resteer.h) through the per-packet pipeline: a connection whose
// backend refuses its SYN (RST, ICMP unreachable), ignores it (timer) or
// whose client retransmits the SYN goes to another backend with the client's
// own SYN; never the same backend twice, at most resteer_attempts times,
// then as without re-steering. Answers that do not match the SYN (wrong ack,
// wrong seq) change nothing; re-steers skip ejected backends. Also
// sched_next's order for consistent schedulers, and the SynPool's deadline
// list.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "dataplane/fastpath/resteer.h"
#include "tests/unit/dataplane/fastpath/worker_test_fixture.h"

namespace vipd::dp {
namespace {

using namespace test;

constexpr uint16_t kPort4 = 9090;  // 4 backends, rr
constexpr uint16_t kPortMh = 9091;  // 4 backends, mh
constexpr uint16_t kPortPersist = 9092;  // 4 backends, rr, persistence
constexpr uint32_t kIsn = 0x11223344;
constexpr uint8_t kTos = 0x28;  // the client's SYN's (DSCP AF11)
const MacAddr kB4Mac{0x02, 0xb0, 0, 0, 0, 0x14};
const std::vector<uint8_t> kSynOpts = {2, 4, 0x05, 0xb4, 4, 2, 1, 3, 3, 7};  // MSS, SACK ok, NOP, WS 7 (+pad)

class ResteerTest : public WorkerTest, public ::testing::WithParamInterface<Forward> {
 protected:
  void SetUp() override {
    WorkerTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    build(GetParam());
    if (HasFatalFailure()) return;
    cp::ServiceTable next = table_;
    const std::vector<cp::RealServer> four = {rs(kB1, 80), rs(kB2, 80), rs(kB3, 80), rs(kB4, 80)};
    put(next, vsvc(kVip, kPort4, Protocol::kTcp, four));
    put(next, vsvc(kVip, kPortMh, Protocol::kTcp, four, cp::Scheduler::kMh));
    auto ps = vsvc(kVip, kPortPersist, Protocol::kTcp, four);
    ps.persistence_timeout_s = 600;
    put(next, ps);
    const cp::TableDiff d = cp::TableDiff::compute(table_, next);
    std::string err;
    ASSERT_TRUE(pub_->apply(next, d, false, &err)) << err;
    table_ = next;
    sh().neigh.update(kB3, kB3Mac.data(), kT0);
    sh().neigh.update(kB4, kB4Mac.data(), kT0);
    set_pool(64);
    sh().resteer_attempts = 3;
    sh().t_resteer = 200'000;  // TSC ticks (the tests move w.now themselves)
  }
  void set_pool(uint32_t n) {
    std::string err;
    ASSERT_TRUE(w().syn.init(uniq("tsyn_"), n, 0, &err)) << err;
  }
  FrameSpec syn(uint16_t cport, uint16_t vport, uint32_t isn = kIsn) {
    FrameSpec s = from_client(cport, kTcpSyn, kVip, vport);
    s.seq = isn;
    s.tos = kTos;
    s.window = 29200;
    s.tcp_opts = kSynOpts;
    s.tcp_opts.resize(12, 0);
    return s;
  }
  static const MacAddr& mac_of(uint32_t b) {
    return b == kB1 ? kB1Mac : b == kB2 ? kB2Mac : b == kB3 ? kB3Mac : kB4Mac;
  }
  // The backend that got SYN `out` answers it.
  FrameSpec answer(const Frame& out, uint8_t flags, uint32_t ack) {
    FrameSpec s = from_backend(ip_dst(out.data()), mac_of(ip_dst(out.data())), l4_dport(out.data()),
                               ip_src(out.data()), l4_sport(out.data()), flags);
    s.seq = flags & kTcpSyn ? 777000 : 0;
    s.ack = ack;
    return s;
  }
  // `out` is the client's SYN as vipd sends it to a backend: TOS, TTL one
  // less than received, seq, window, options, the connection's source;
  // valid checksums.
  void expect_syn(const Frame& out, uint16_t cport, const char* what) {
    ASSERT_FALSE(out.empty()) << what;
    expect_valid_ipv4(out, what);
    EXPECT_EQ(out[kEth + 1], kTos) << what << ": TOS";
    EXPECT_EQ(out[kEth + 8], 63) << what << ": TTL (64 received)";
    EXPECT_EQ(tcp_flags(out.data()), kTcpSyn) << what;
    EXPECT_EQ(tcp_seq(out.data()), kIsn) << what;
    const uint8_t* l4 = l4_of(out.data());
    EXPECT_EQ(get16(l4 + 14), 29200) << what << ": window";
    ASSERT_EQ((l4[12] >> 4) * 4u, 32u) << what << ": options kept";
    std::vector<uint8_t> want = kSynOpts;
    want.resize(12, 0);
    EXPECT_EQ(std::vector<uint8_t>(l4 + 20, l4 + 32), want) << what;
    EXPECT_EQ(l4_dport(out.data()), 80) << what;
    if (GetParam() == Forward::kFnat) {
      EXPECT_EQ(ip_src(out.data()), kLocal) << what;
    } else {
      EXPECT_EQ(ip_src(out.data()), kClient) << what;
      EXPECT_EQ(l4_sport(out.data()), cport) << what;
    }
  }
  uint64_t resteers(ResteerReason r) { return w().counters.resteers[r].load(); }
};

TEST_P(ResteerTest, RstFromBackendResteersAndTheNextBackendCompletes) {
  const Frame first = one_out(build_frame(syn(41000, kPort4)), 0, 1);
  expect_syn(first, 41000, "first SYN");
  const uint32_t b1 = ip_dst(first.data());
  // The backend refuses: the client sees nothing, the SYN goes elsewhere.
  const Frame second = one_out(build_frame(answer(first, kTcpRst | kTcpAck, kIsn + 1)), 1, 1);
  expect_syn(second, 41000, "re-steered SYN");
  EXPECT_NE(ip_dst(second.data()), b1);
  if (GetParam() == Forward::kFnat) {
    EXPECT_EQ(l4_sport(second.data()), l4_sport(first.data())) << "same local port";
  }
  EXPECT_EQ(resteers(kResteerRst), 1u);
  // A late RST from the first backend is no longer this connection's.
  rx(build_frame(answer(first, kTcpRst | kTcpAck, kIsn + 1)), 1);
  EXPECT_EQ(tx(0).size(), 0u) << "the first backend's answers are not passed on";
  tx(1);
  // The second backend answers: the client gets its SYN-ACK from the VIP.
  const Frame synack = one_out(build_frame(answer(second, kTcpSyn | kTcpAck, kIsn + 1)), 1, 0);
  ASSERT_FALSE(synack.empty());
  expect_valid_ipv4(synack, "SYN-ACK");
  EXPECT_EQ(ip_src(synack.data()), kVip);
  EXPECT_EQ(l4_sport(synack.data()), kPort4);
  EXPECT_EQ(w().syn.in_use(), 0u) << "the SYN-ACK frees the saved SYN";
  // The handshake's last ACK and data go to the second backend.
  FrameSpec ack = from_client(41000, kTcpAck, kVip, kPort4);
  ack.seq = kIsn + 1;
  ack.ack = 777001;
  const Frame out = one_out(build_frame(ack), 0, 1);
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(ip_dst(out.data()), ip_dst(second.data()));
  // A RST now (established) is the connection's own: passed on.
  FrameSpec rst = answer(second, kTcpRst | kTcpAck, kIsn + 1);
  rst.seq = 777001;
  one_out(build_frame(rst), 1, 0);
  EXPECT_EQ(resteers(kResteerRst), 1u);
  EXPECT_EQ(w().counters.resteer_gave_up.load(), 0u);
}

TEST_P(ResteerTest, AnswersThatDoNotMatchTheSynArePassedOn) {
  const Frame first = one_out(build_frame(syn(41001, kPort4)), 0, 1);
  ASSERT_FALSE(first.empty());
  // Wrong ack: not an answer to this SYN (a client cannot make vipd re-steer).
  const Frame out = one_out(build_frame(answer(first, kTcpRst | kTcpAck, kIsn + 2)), 1, 0);
  ASSERT_FALSE(out.empty());
  EXPECT_NE(tcp_flags(out.data()) & kTcpRst, 0);
  EXPECT_EQ(resteers(kResteerRst), 0u);
  EXPECT_EQ(w().syn.in_use(), 0u) << "the RST closed the connection: its SYN is forgotten";
}

TEST_P(ResteerTest, AtMostNAttemptsNeverTheSameBackendTwice) {
  sh().resteer_attempts = 2;
  Frame cur = one_out(build_frame(syn(41002, kPort4)), 0, 1);
  ASSERT_FALSE(cur.empty());
  std::set<uint32_t> seen{ip_dst(cur.data())};
  for (int i = 0; i < 2; ++i) {
    cur = one_out(build_frame(answer(cur, kTcpRst | kTcpAck, kIsn + 1)), 1, 1);
    ASSERT_FALSE(cur.empty()) << "attempt " << i;
    EXPECT_TRUE(seen.insert(ip_dst(cur.data())).second) << "a backend got the SYN twice";
  }
  // Attempts spent: the third RST reaches the client, as without re-steering.
  const Frame out = one_out(build_frame(answer(cur, kTcpRst | kTcpAck, kIsn + 1)), 1, 0);
  ASSERT_FALSE(out.empty());
  EXPECT_NE(tcp_flags(out.data()) & kTcpRst, 0);
  EXPECT_EQ(ip_src(out.data()), kVip);
  EXPECT_EQ(resteers(kResteerRst), 2u);
  EXPECT_EQ(w().counters.resteer_gave_up.load(), 1u);
  EXPECT_EQ(w().syn.in_use(), 0u);
}

TEST_P(ResteerTest, AllBackendsRefuseClientGetsTheRst) {
  sh().resteer_attempts = 7;
  Frame cur = one_out(build_frame(syn(41003, kPort4)), 0, 1);
  std::set<uint32_t> seen{ip_dst(cur.data())};
  for (int i = 0; i < 3; ++i) {
    cur = one_out(build_frame(answer(cur, kTcpRst | kTcpAck, kIsn + 1)), 1, 1);
    ASSERT_FALSE(cur.empty());
    seen.insert(ip_dst(cur.data()));
  }
  EXPECT_EQ(seen.size(), 4u) << "every backend tried once";
  const Frame out = one_out(build_frame(answer(cur, kTcpRst | kTcpAck, kIsn + 1)), 1, 0);
  ASSERT_FALSE(out.empty());
  EXPECT_NE(tcp_flags(out.data()) & kTcpRst, 0) << "no backend left: the client's error, at once";
  EXPECT_EQ(w().counters.resteer_gave_up.load(), 1u);
}

// Outlier ejection (eject.h) through the pipeline: K refused SYNs eject the
// backend, new connections skip it while it is out, its time runs out.
TEST_P(ResteerTest, KRefusedConnectionsEjectTheBackendUntilItsTimeIsUp) {
  sh().eject = EjectParams{2, 1'000'000, 10'000'000, 50};
  const int64_t s1 = slot_of(kVip, kPort4, Protocol::kTcp, kB1, 80);
  ASSERT_GE(s1, 0);
  EjectState& e = sh().dest_slots[s1].eject;
  uint16_t cport = 42000;
  // Connections until kB1 refused two of them (rr: every fourth goes there).
  int refused = 0;
  for (int i = 0; i < 16 && refused < 2; ++i, ++cport) {
    const Frame first = one_out(build_frame(syn(cport, kPort4)), 0, 1);
    ASSERT_FALSE(first.empty());
    Frame got = first;
    if (ip_dst(first.data()) == kB1) {
      EXPECT_FALSE(e.ejected(w().now)) << "ejected before K failures";
      got = one_out(build_frame(answer(first, kTcpRst | kTcpAck, kIsn + 1)), 1, 1);
      ASSERT_FALSE(got.empty());
      ++refused;
    }
    one_out(build_frame(answer(got, kTcpSyn | kTcpAck, kIsn + 1)), 1, 0);
  }
  ASSERT_EQ(refused, 2);
  EXPECT_TRUE(e.ejected(w().now));
  EXPECT_EQ(e.ejections.load(), 1u);
  // While it is out, no new connection goes there.
  for (int i = 0; i < 12; ++i, ++cport) {
    const Frame out = one_out(build_frame(syn(cport, kPort4)), 0, 1);
    ASSERT_FALSE(out.empty());
    EXPECT_NE(ip_dst(out.data()), kB1) << "an ejected backend got a new connection";
  }
  // Its time is up: back in the rotation.
  w().now += 1'000'000;
  EXPECT_FALSE(e.ejected(w().now));
  bool back = false;
  for (int i = 0; i < 4; ++i, ++cport) {
    const Frame out = one_out(build_frame(syn(cport, kPort4)), 0, 1);
    ASSERT_FALSE(out.empty());
    back |= ip_dst(out.data()) == kB1;
  }
  EXPECT_TRUE(back);
}

TEST_P(ResteerTest, EjectionOffWithKZero) {
  sh().eject = EjectParams{0, 1'000'000, 10'000'000, 100};
  const int64_t s1 = slot_of(kVip, kPort4, Protocol::kTcp, kB1, 80);
  ASSERT_GE(s1, 0);
  for (uint16_t cport = 42100; cport < 42116; ++cport) {
    const Frame first = one_out(build_frame(syn(cport, kPort4)), 0, 1);
    ASSERT_FALSE(first.empty());
    if (ip_dst(first.data()) == kB1) one_out(build_frame(answer(first, kTcpRst | kTcpAck, kIsn + 1)), 1, 1);
  }
  EXPECT_FALSE(sh().dest_slots[s1].eject.ejected(w().now));
  EXPECT_EQ(sh().dest_slots[s1].eject.fails.load(), 0u);
}

TEST_P(ResteerTest, NoSynAckInTimeResteers) {
  const Frame first = one_out(build_frame(syn(41004, kPort4)), 0, 1);
  ASSERT_FALSE(first.empty());
  w().now = kT0 + sh().t_resteer - 1;
  resteer_timers(w(), 64);
  flush_tx(w());
  expect_nothing_out("before the timeout");
  w().now = kT0 + sh().t_resteer;
  resteer_timers(w(), 64);
  flush_tx(w());
  auto out = tx(1);
  ASSERT_EQ(out.size(), 1u);
  expect_syn(out[0], 41004, "SYN after the timeout");
  EXPECT_NE(ip_dst(out[0].data()), ip_dst(first.data()));
  EXPECT_EQ(resteers(kResteerTimeout), 1u);
  // The late SYN-ACK of the first backend is not this connection's any more;
  // the second's is.
  rx(build_frame(answer(first, kTcpSyn | kTcpAck, kIsn + 1)), 1);
  EXPECT_EQ(tx(0).size(), 0u);
  one_out(build_frame(answer(out[0], kTcpSyn | kTcpAck, kIsn + 1)), 1, 0);
  w().now += 10 * sh().t_resteer;
  resteer_timers(w(), 64);
  flush_tx(w());
  expect_nothing_out("answered: no more timers");
  EXPECT_EQ(resteers(kResteerTimeout), 1u);
}

TEST_P(ResteerTest, ClientRetransmissionGoesToAnotherBackend) {
  sh().t_resteer = 0;
  const Frame first = one_out(build_frame(syn(41005, kPort4)), 0, 1);
  ASSERT_FALSE(first.empty());
  const Frame again = one_out(build_frame(syn(41005, kPort4)), 0, 1);
  expect_syn(again, 41005, "retransmitted SYN");
  EXPECT_NE(ip_dst(again.data()), ip_dst(first.data()));
  EXPECT_EQ(resteers(kResteerRetransmit), 1u);
  EXPECT_EQ(w().syn.head(), 0u) << "no timer with t_resteer 0";
}

TEST_P(ResteerTest, IcmpUnreachableQuotingTheSynResteers) {
  const Frame first = one_out(build_frame(syn(41006, kPort4)), 0, 1);
  ASSERT_FALSE(first.empty());
  auto icmp = [&](uint32_t seq_delta, uint8_t code) {
    Frame quoted = first;
    put32(l4_of(quoted.data()) + 4, kIsn + seq_delta);
    FrameSpec s;
    s.dmac = kPortMac[1];
    s.smac = kB1Mac;
    s.src = ip_dst(first.data());
    s.dst = ip_src(first.data());
    s.proto = kProtoIcmp;
    s.icmp_type = 3;
    s.icmp_code = code;
    s.icmp_id = 0;
    s.icmp_seq = 0;
    s.payload.assign(quoted.begin() + kEth, quoted.begin() + kEth + 28);
    return build_frame(s);
  };
  // A quote with another seq is not this SYN's: translated to the client.
  one_out(icmp(5, 1), 1, 0);
  EXPECT_EQ(resteers(kResteerIcmp), 0u);
  const Frame second = one_out(icmp(0, 3), 1, 1);
  expect_syn(second, 41006, "SYN after ICMP port unreachable");
  EXPECT_NE(ip_dst(second.data()), ip_dst(first.data()));
  EXPECT_EQ(resteers(kResteerIcmp), 1u);
}

TEST_P(ResteerTest, PoolFullGoesWithout) {
  set_pool(1);
  const Frame a = one_out(build_frame(syn(41007, kPort4)), 0, 1);
  const Frame b = one_out(build_frame(syn(41008, kPort4)), 0, 1);
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  EXPECT_EQ(w().counters.resteer_pool_full.load(), 1u);
  // b has no saved SYN: its RST reaches the client as today.
  const Frame out = one_out(build_frame(answer(b, kTcpRst | kTcpAck, kIsn + 1)), 1, 0);
  ASSERT_FALSE(out.empty());
  // a's is re-steered.
  one_out(build_frame(answer(a, kTcpRst | kTcpAck, kIsn + 1)), 1, 1);
  EXPECT_EQ(resteers(kResteerRst), 1u);
}

TEST_P(ResteerTest, OffPassesTheRstOn) {
  sh().resteer_attempts = 0;
  const Frame first = one_out(build_frame(syn(41009, kPort4)), 0, 1);
  ASSERT_FALSE(first.empty());
  one_out(build_frame(answer(first, kTcpRst | kTcpAck, kIsn + 1)), 1, 0);
  EXPECT_EQ(w().syn.in_use(), 0u);
}

TEST_P(ResteerTest, PersistenceFollowsTheBackendThatAnswers) {
  const Frame first = one_out(build_frame(syn(41010, kPortPersist)), 0, 1);
  ASSERT_FALSE(first.empty());
  const Frame second = one_out(build_frame(answer(first, kTcpRst | kTcpAck, kIsn + 1)), 1, 1);
  ASSERT_FALSE(second.empty());
  one_out(build_frame(answer(second, kTcpSyn | kTcpAck, kIsn + 1)), 1, 0);
  // The client's next connection follows the template: the second backend.
  const Frame next = one_out(build_frame(syn(41011, kPortPersist, kIsn)), 0, 1);
  ASSERT_FALSE(next.empty());
  EXPECT_EQ(ip_dst(next.data()), ip_dst(second.data()));
}

TEST_P(ResteerTest, MhResteersInTheKeysOwnOrder) {
  // Two connections of the same client (mh: same key) refused by the same
  // first backend take the same second one.
  const Frame a = one_out(build_frame(syn(41012, kPortMh)), 0, 1);
  const Frame b = one_out(build_frame(syn(41013, kPortMh)), 0, 1);
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  EXPECT_EQ(ip_dst(a.data()), ip_dst(b.data()));
  const Frame a2 = one_out(build_frame(answer(a, kTcpRst | kTcpAck, kIsn + 1)), 1, 1);
  const Frame b2 = one_out(build_frame(answer(b, kTcpRst | kTcpAck, kIsn + 1)), 1, 1);
  ASSERT_FALSE(a2.empty());
  ASSERT_FALSE(b2.empty());
  EXPECT_EQ(ip_dst(a2.data()), ip_dst(b2.data()));
  EXPECT_NE(ip_dst(a2.data()), ip_dst(a.data()));
}

// A re-steer skips ejected backends as a new connection's pick does, in the
// scheduler's own order (mh: the key's), and takes an ejected one only when
// every backend left is ejected (never leaving the service without one,
// whatever the share allows).
TEST_P(ResteerTest, ResteerSkipsEjectedBackendsInTheKeysOrder) {
  sh().eject = EjectParams{100, 1'000'000, 10'000'000, 50};  // K 100: the RSTs below eject nothing
  auto slot = [&](uint32_t b) {
    const int64_t s = slot_of(kVip, kPortMh, Protocol::kTcp, b, 80);
    EXPECT_GE(s, 0);
    return s;
  };
  auto eject = [&](uint32_t b, bool on) {
    sh().dest_slots[slot(b)].eject.until.store(on ? w().now + 1'000'000 : 0);
  };
  // The key's order without ejection: a connection refused by all four.
  uint16_t cport = 41020;
  std::vector<uint32_t> order;
  Frame cur = one_out(build_frame(syn(cport++, kPortMh)), 0, 1);
  ASSERT_FALSE(cur.empty());
  order.push_back(ip_dst(cur.data()));
  for (int i = 0; i < 3; ++i) {
    cur = one_out(build_frame(answer(cur, kTcpRst | kTcpAck, kIsn + 1)), 1, 1);
    ASSERT_FALSE(cur.empty());
    order.push_back(ip_dst(cur.data()));
  }
  ASSERT_EQ(std::set<uint32_t>(order.begin(), order.end()).size(), 4u);
  one_out(build_frame(answer(cur, kTcpRst | kTcpAck, kIsn + 1)), 1, 0);  // all refused: the client's RST

  // The second in that order ejected: the re-steer goes to the third.
  eject(order[1], true);
  Frame first = one_out(build_frame(syn(cport++, kPortMh)), 0, 1);
  ASSERT_FALSE(first.empty());
  EXPECT_EQ(ip_dst(first.data()), order[0]);
  Frame second = one_out(build_frame(answer(first, kTcpRst | kTcpAck, kIsn + 1)), 1, 1);
  ASSERT_FALSE(second.empty());
  EXPECT_EQ(ip_dst(second.data()), order[2]) << "the ejected backend got the re-steered SYN";
  // ... and the next one to the fourth; the ejected one only when it is the
  // last one left.
  Frame third = one_out(build_frame(answer(second, kTcpRst | kTcpAck, kIsn + 1)), 1, 1);
  ASSERT_FALSE(third.empty());
  EXPECT_EQ(ip_dst(third.data()), order[3]);
  Frame fourth = one_out(build_frame(answer(third, kTcpRst | kTcpAck, kIsn + 1)), 1, 1);
  ASSERT_FALSE(fourth.empty()) << "the ejected backend is still better than giving up";
  EXPECT_EQ(ip_dst(fourth.data()), order[1]);
  one_out(build_frame(answer(fourth, kTcpSyn | kTcpAck, kIsn + 1)), 1, 0);

  // Every backend but the first ejected (the SYN-ACK above readmitted
  // order[1]): the re-steer takes the first of them in the key's order
  // instead of giving up.
  eject(order[1], true);
  eject(order[2], true);
  eject(order[3], true);
  first = one_out(build_frame(syn(cport++, kPortMh)), 0, 1);
  ASSERT_FALSE(first.empty());
  EXPECT_EQ(ip_dst(first.data()), order[0]);
  second = one_out(build_frame(answer(first, kTcpRst | kTcpAck, kIsn + 1)), 1, 1);
  ASSERT_FALSE(second.empty());
  EXPECT_EQ(ip_dst(second.data()), order[1]);
  EXPECT_EQ(w().counters.resteer_gave_up.load(), 1u) << "only the first connection's";
}

INSTANTIATE_TEST_SUITE_P(Modes, ResteerTest, ::testing::Values(Forward::kFnat, Forward::kNat),
                         [](const auto& i) { return i.param == Forward::kFnat ? std::string("Fnat") : std::string("Nat"); });

// sched_next over a hand-made service: never a tried or weight-0 destination,
// -1 when all were tried, and for a hashing scheduler the same order for the
// same key whatever the worker's state.
struct FakeService {
  alignas(Service) unsigned char mem[sizeof(Service) + 5 * sizeof(DestRef)] = {};
  uint16_t table[251];
  Service& svc() { return *reinterpret_cast<Service*>(mem); }
  FakeService(Sched s) {
    Service& v = svc();
    v.sched = s;
    v.n_dests = 5;
    v.n_weighted = 4;
    for (uint32_t i = 0; i < 5; ++i) v.dests[i] = DestRef{ip4(10, 1, 0, 20 + i), 80, 0, i == 2 ? 0u : 1u, 100 + i, 1};
    for (uint32_t i = 0; i < 251; ++i) table[i] = static_cast<uint16_t>((i * 7) % 5 == 2 ? 0 : (i * 7) % 5);
    v.table = table;
    v.table_size = 251;
  }
};

TEST(SchedNext, NeverTriedNeverWeightZeroThenNone) {
  for (Sched s : {Sched::kRr, Sched::kWlc, Sched::kMh, Sched::kSh, Sched::kDh}) {
    FakeService f(s);
    SchedState st;
    const SchedCtx ctx{nullptr, ip4(10, 0, 0, 10), ip4(10, 96, 0, 100)};
    uint32_t tried[8] = {100};
    uint32_t n = 1;
    for (;;) {
      const int32_t i = sched_next(f.svc(), st, ctx, tried, n);
      if (i < 0) break;
      ASSERT_LT(n, 8u);
      EXPECT_NE(i, 2) << "weight 0";
      for (uint32_t k = 0; k < n; ++k) EXPECT_NE(f.svc().dests[i].slot, tried[k]) << "tried twice";
      tried[n++] = f.svc().dests[i].slot;
    }
    EXPECT_EQ(n, 4u) << "every weighted destination once, sched " << int(s);
  }
}

TEST(SchedNext, HashingOrderDependsOnTheKeyOnly) {
  FakeService f(Sched::kMh);
  SchedState st1, st2;
  st2.last = 3;
  for (uint32_t c = 1; c < 200; ++c) {
    const SchedCtx ctx{nullptr, ip4(10, 0, 1, 0) + c, 0};
    const uint32_t tried[1] = {101};
    EXPECT_EQ(sched_next(f.svc(), st1, ctx, tried, 1), sched_next(f.svc(), st2, ctx, tried, 1));
  }
}

}  // namespace
}  // namespace vipd::dp
