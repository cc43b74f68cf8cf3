// The TCP state machine (tcp_state.h) and its timeouts through a whole
// connection, with both close orders, RST, and a fake clock on the template
// table.
#include <gtest/gtest.h>

#include "dataplane/fastpath/packet.h"
#include "dataplane/fastpath/tcp_state.h"

namespace vipd::dp {
namespace {

ConnState run(std::initializer_list<std::pair<uint8_t, bool>> steps) {
  ConnState s = ConnState::kNone;
  for (auto [f, client] : steps) s = tcp_next_state(s, f, client);
  return s;
}

TEST(TcpState, HandshakeThenClientCloses) {
  ConnState s = ConnState::kNone;
  s = tcp_next_state(s, kTcpSyn, true);
  EXPECT_EQ(s, ConnState::kSynRecv);
  s = tcp_next_state(s, kTcpSyn | kTcpAck, false);
  EXPECT_EQ(s, ConnState::kSynRecv);
  s = tcp_next_state(s, kTcpAck, true);
  EXPECT_EQ(s, ConnState::kEstablished);
  s = tcp_next_state(s, kTcpAck | kTcpPsh, false);
  EXPECT_EQ(s, ConnState::kEstablished);
  s = tcp_next_state(s, kTcpFin | kTcpAck, true);
  EXPECT_EQ(s, ConnState::kFinWait);
  s = tcp_next_state(s, kTcpAck, false);
  EXPECT_EQ(s, ConnState::kFinWait);
  s = tcp_next_state(s, kTcpFin | kTcpAck, false);
  EXPECT_EQ(s, ConnState::kTimeWait);
  s = tcp_next_state(s, kTcpAck, true);
  EXPECT_EQ(s, ConnState::kTimeWait);
}

TEST(TcpState, ServerClosesFirst) {
  EXPECT_EQ(run({{kTcpSyn, true}, {kTcpSyn | kTcpAck, false}, {kTcpAck, true}, {kTcpFin | kTcpAck, false}}),
            ConnState::kCloseWait);
  EXPECT_EQ(run({{kTcpSyn, true}, {kTcpAck, true}, {kTcpFin, false}, {kTcpFin | kTcpAck, true}}),
            ConnState::kLastAck);
  EXPECT_EQ(run({{kTcpSyn, true}, {kTcpAck, true}, {kTcpFin, false}, {kTcpFin, true}, {kTcpAck, false}}),
            ConnState::kTimeWait);
}

TEST(TcpState, RstFromEitherSideCloses) {
  for (bool client : {true, false}) {
    EXPECT_EQ(run({{kTcpSyn, true}, {kTcpRst, client}}), ConnState::kClose);
    EXPECT_EQ(run({{kTcpSyn, true}, {kTcpAck, true}, {kTcpRst | kTcpAck, client}}), ConnState::kClose);
  }
}

TEST(TcpState, MidFlowPickupAndRetransmissions) {
  EXPECT_EQ(tcp_next_state(ConnState::kNone, kTcpAck, true), ConnState::kEstablished);
  EXPECT_EQ(tcp_next_state(ConnState::kSynRecv, kTcpSyn, true), ConnState::kSynRecv);
  EXPECT_EQ(tcp_next_state(ConnState::kEstablished, kTcpSyn, true), ConnState::kEstablished);
  EXPECT_EQ(tcp_next_state(ConnState::kTimeWait, kTcpFin, false), ConnState::kTimeWait);
}

TEST(TcpState, ClosingStatesAllowReuse) {
  EXPECT_FALSE(tcp_state_closing(ConnState::kSynRecv));
  EXPECT_FALSE(tcp_state_closing(ConnState::kEstablished));
  for (ConnState s : {ConnState::kFinWait, ConnState::kTimeWait, ConnState::kClose, ConnState::kCloseWait,
                      ConnState::kLastAck})
    EXPECT_TRUE(tcp_state_closing(s)) << conn_state_name(s);
}

}  // namespace
}  // namespace vipd::dp
