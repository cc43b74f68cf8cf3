// Thread: any (pure). The TCP connection state machine, IPVS-like, seen from a
// middlebox that sees both directions:
//
//   NONE --client SYN--> SYN_RECV --client ACK--> ESTABLISHED
//   ESTABLISHED --client FIN--> FIN_WAIT --server FIN--> TIME_WAIT
//   ESTABLISHED --server FIN--> CLOSE_WAIT --client FIN--> LAST_ACK --server ACK--> TIME_WAIT
//   SYN_RECV --FIN (either)--> FIN_WAIT / CLOSE_WAIT as above
//   any --RST (either)--> CLOSE
//
// Timeouts (IPVS defaults): ESTABLISHED 900 s, SYN_RECV 60 s, FIN_WAIT 120 s,
// TIME_WAIT 120 s, CLOSE_WAIT 60 s, LAST_ACK 30 s, CLOSE 10 s, UDP 300 s.
#pragma once

#include <cstdint>

#include "dataplane/fastpath/conn_table.h"

namespace vipd::dp {

ConnState tcp_next_state(ConnState s, uint8_t tcp_flags, bool from_client) noexcept;

// A client SYN on a connection in this state starts a new connection (the
// client reused its port after closing).
inline bool tcp_state_closing(ConnState s) noexcept {
  return s == ConnState::kFinWait || s == ConnState::kTimeWait || s == ConnState::kClose ||
         s == ConnState::kCloseWait || s == ConnState::kLastAck;
}

}  // namespace vipd::dp
