// vipctl explain on two workers (IPv4): the query goes to the worker that
// owns the flow in the query's direction (explain_owner, the worker
// DpdkDataplane::explain asks), which finds the connection in both
// directions, in fnat and nat mode. The IPv6 counterpart is in
// worker_ipv6_test.cc (ExplainAsksTheOwnerOfEitherDirection).
#include <gtest/gtest.h>

#include "tests/unit/dataplane/fastpath/worker_test_fixture.h"

namespace vipd::dp {
namespace {

using namespace test;

// Asks worker `w`'s mailbox as DpdkDataplane::explain does.
ExplainAnswer ask(Worker& w, const ExplainQuery& q) {
  w.mailbox.q = q;
  w.mailbox.req.store(w.mailbox.req.load() + 1);
  serve_mailbox(w);
  EXPECT_EQ(w.mailbox.done.load(), w.mailbox.req.load()) << "answered";
  return w.mailbox.a;
}

ExplainQuery query4(uint8_t proto, uint32_t src, uint16_t sport, uint32_t dst, uint16_t dport) {
  return ExplainQuery{proto, 0, src, dst, sport, dport, {}, {}};
}

// A UDP flow to kVip:5353 (one backend, kB1) from a client that another
// worker owns than the backend's address would pick: in nat mode the reply
// (kB1 -> client) is owned by the client's worker (flow_owner of the reply's
// destination), in fnat mode by the local port's. Asking the worker chosen
// from the reply's source (kB1) misses the connection.
TEST_P(WorkerModeTest, ExplainAsksTheOwnerOfEitherDirection) {
  const Forward fwd = GetParam();
  build(fwd, 2);
  if (HasFatalFailure()) return;
  serve_rings_ = true;
  uint32_t client = 0;
  for (uint32_t a = 10; a < 250 && !client; ++a)
    if (flow_owner(ip4(10, 0, 0, a), 0, 2) != flow_owner(kB1, 0, 2)) client = ip4(10, 0, 0, a);
  ASSERT_NE(client, 0u);
  const uint32_t owner = flow_owner(client, 0, 2);
  sh().neigh.update(client, kClientMac.data(), kT0);
  FrameSpec s = from_client(41000, 0, kVip, 5353);
  s.proto = kProtoUdp;
  s.src = client;
  rx(build_frame(s), 0, 1 - owner);  // arrives at the other worker: redirected
  auto out = tx(1);
  ASSERT_EQ(out.size(), 1u) << drop_summary(0) << " /" << drop_summary(1);
  ASSERT_EQ(ip_dst(out[0].data()), kB1);
  EXPECT_EQ(w(owner).conns.size(), 1u);
  EXPECT_EQ(w(1 - owner).conns.size(), 0u);
  const uint32_t rdst = ip_src(out[0].data());  // client (nat) or local address (fnat)
  const uint16_t rport = l4_sport(out[0].data());
  EXPECT_EQ(rdst, fwd == Forward::kNat ? client : kLocal);

  const ExplainQuery fwd_q = query4(kProtoUdp, client, 41000, kVip, 5353);
  EXPECT_EQ(explain_owner(sh(), fwd_q), owner) << "client direction: the client's worker";
  ExplainAnswer a = ask(w(explain_owner(sh(), fwd_q)), fwd_q);
  EXPECT_TRUE(a.service_found);
  EXPECT_TRUE(a.conn_found);
  EXPECT_FALSE(a.conn_reply);

  const ExplainQuery rep_q = query4(kProtoUdp, kB1, 53, rdst, rport);
  const uint32_t rep_owner = explain_owner(sh(), rep_q);
  EXPECT_EQ(rep_owner, fwd == Forward::kNat ? owner : rport % 2u) << "reply direction: the reply's owner";
  a = ask(w(rep_owner), rep_q);
  EXPECT_TRUE(a.conn_found) << "the reply's owner holds the connection";
  EXPECT_TRUE(a.conn_reply);
  EXPECT_EQ(a.conn_dest_ip, kB1);
  EXPECT_EQ(a.conn_dest_port, 53);
}

// Instantiated (fnat, nat) in worker_test.cc.

}  // namespace
}  // namespace vipd::dp
