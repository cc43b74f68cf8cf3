// Thread: any.
#include "dataplane/fastpath/tcp_state.h"

#include "dataplane/fastpath/packet.h"

namespace vipd::dp {

ConnState tcp_next_state(ConnState s, uint8_t f, bool from_client) noexcept {
  if (f & kTcpRst) return ConnState::kClose;
  if (f & kTcpFin) {
    switch (s) {
      case ConnState::kNone:
      case ConnState::kSynRecv:
      case ConnState::kEstablished:
        return from_client ? ConnState::kFinWait : ConnState::kCloseWait;
      case ConnState::kFinWait:
        return from_client ? ConnState::kFinWait : ConnState::kTimeWait;
      case ConnState::kCloseWait:
        return from_client ? ConnState::kLastAck : ConnState::kCloseWait;
      default:
        return s;  // TIME_WAIT, LAST_ACK, CLOSE: retransmitted FINs
    }
  }
  if (f & kTcpSyn) {
    if (s == ConnState::kNone) return from_client ? ConnState::kSynRecv : s;
    return s;  // SYN retransmissions and the server's SYN-ACK
  }
  if (f & kTcpAck) {
    if (s == ConnState::kSynRecv && from_client) return ConnState::kEstablished;
    if (s == ConnState::kLastAck && !from_client) return ConnState::kTimeWait;
    if (s == ConnState::kNone && from_client) return ConnState::kEstablished;  // picked up mid-flow
  }
  return s;
}

}  // namespace vipd::dp
