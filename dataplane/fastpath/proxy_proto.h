// Thread: worker (the pool: one per worker; init/destroy from the control
// thread before the worker starts / after it stopped).
// The PROXY protocol (HAProxy's spec, v1 text and v2 binary) in full NAT: a
// backend sees the gateway's local address as the source, so for the
// services that ask for it (Service::proxy_protocol) the worker puts a header
// with the client's address:port and the VIP:port in front of the client's
// first byte. TCP in full NAT only: NAT mode keeps the client's address (no
// header needed) and UDP has no stream to put it in. IPv4 (worker.cc) and
// IPv6 (worker6.cc) alike: the sequence arithmetic and the pool are shared,
// the header and the frame helpers come in one form per family.
//
// Sequence spaces. The backend sees the client's stream with hdr_len extra
// bytes at its start: client byte k (seq client_isn + 1 + k) is byte hdr_len
// + k for the backend. So client -> backend seq += hdr_len, and backend ->
// client ack (and SACK edges) -= hdr_len, modulo 2^32, for the whole
// connection. Until the backend acknowledged past the header (its ack >=
// client_isn + 1 + hdr_len), every client segment whose unshifted seq is
// client_isn + 1 (the handshake's last ACK, the first data segment, their
// retransmissions) carries the header in front of its payload (seq stays
// client_isn + 1): the header reaches the backend however segments are lost,
// also when the backend speaks first. Once acknowledged, never again. The
// backend's SYN-ACK has its MSS lowered by hdr_len, so that a full-size first
// segment still fits with the header.
//
// The per-connection state lives in a per-worker pool (ProxyPool), named
// from the connection entry (Conn::proxy, 0 = none): a connection without a
// header costs nothing more. No allocation after init, no locks, no throw.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "dataplane/fastpath/ipv6.h"
#include "dataplane/fastpath/packet.h"
#include "model/kinds.h"

namespace vipd::dp {

// Header lengths (IPv4): v1 "PROXY TCP4 " + two addresses and two ports,
// space separated, + CRLF: at most 56 bytes; v2: 16 + 12 bytes.
constexpr size_t kProxyV1Max = 56;
constexpr size_t kProxyV2Len = 28;
constexpr size_t kProxyHdrMax = kProxyV1Max;
// IPv6: v1 "PROXY TCP6 " with RFC 5952 text addresses (at most 39
// characters each): at most 104 bytes; v2: 16 + 36 bytes.
constexpr size_t kProxyV1Max6 = 104;
constexpr size_t kProxyV2Len6 = 52;
constexpr size_t kProxyHdrMax6 = kProxyV1Max6;

// Writes the header for a TCP4 connection from src:sport to dst:dport (host
// order) into `out` (kProxyHdrMax bytes). Returns its length (0 for kNone).
size_t proxy_header(cp::ProxyProtocol v, uint32_t src, uint16_t sport, uint32_t dst, uint16_t dport,
                    uint8_t* out) noexcept;
// The same for a TCP6 connection (addresses in network order) into `out`
// (kProxyHdrMax6 bytes).
size_t proxy_header(cp::ProxyProtocol v, const uint8_t src[16], uint16_t sport, const uint8_t dst[16],
                     uint16_t dport, uint8_t* out) noexcept;

// One connection's state: 8 bytes.
struct ProxyConn {
  uint32_t client_isn;  // the client's SYN's seq
  uint8_t hdr_len;
  cp::ProxyProtocol version;
  uint8_t acked;  // the backend acknowledged the whole header
  uint8_t sent;   // inserted at least once (the next insertions are retransmissions)
};
static_assert(sizeof(ProxyConn) == 8);

// Fixed-size pool of ProxyConn with a stack of free ones. Handles are index
// + 1 (0 = none), what Conn::proxy holds.
class ProxyPool {
 public:
  ProxyPool() = default;
  ProxyPool(const ProxyPool&) = delete;
  ProxyPool& operator=(const ProxyPool&) = delete;
  ~ProxyPool();
  // Allocates `capacity` entries (rte_zmalloc on `socket`). 0 = no pool:
  // every alloc() fails.
  bool init(const std::string& name, uint32_t capacity, int socket, std::string* error);
  // A free entry's handle (zeroed), or 0 when none is left.
  uint32_t alloc() noexcept {
    if (!n_free_) return 0;
    const uint32_t h = free_[--n_free_] + 1;
    slots_[h - 1] = ProxyConn{};
    return h;
  }
  // Returns an entry (h = 0: nothing).
  void release(uint32_t h) noexcept {
    if (h) free_[n_free_++] = h - 1;
  }
  ProxyConn& at(uint32_t h) noexcept { return slots_[h - 1]; }
  uint32_t capacity() const noexcept { return capacity_; }
  uint32_t in_use() const noexcept { return capacity_ - n_free_; }
  // Memory per entry: the entry and its place in the free stack.
  static constexpr size_t kBytesPerEntry = sizeof(ProxyConn) + sizeof(uint32_t);

 private:
  ProxyConn* slots_ = nullptr;
  uint32_t* free_ = nullptr;
  uint32_t n_free_ = 0;
  uint32_t capacity_ = 0;
};

// Frame helpers: `frame` is a TCP segment parsed into `p` (its addresses
// already rewritten or not: the checksums follow what is in the frame), IPv4
// (Parsed) or IPv6 (Parsed6: the payload length instead of the total length,
// no header checksum, the TCP checksum over the IPv6 pseudo header).

// Client -> backend, not a SYN: what to do with this segment.
enum class ProxyStep : uint8_t { kShift, kInsert };
inline ProxyStep proxy_client_step(const ProxyConn& pc, uint32_t seq, uint8_t flags) noexcept {
  if (!pc.acked && seq == pc.client_isn + 1 && !(flags & kTcpRst)) return ProxyStep::kInsert;
  return ProxyStep::kShift;
}
// Adds `n` to the segment's seq (checksum updated incrementally).
void tcp_shift_seq(uint8_t* frame, const Parsed& p, uint32_t n) noexcept;
void tcp_shift_seq(uint8_t* frame, const Parsed6& p, uint32_t n) noexcept;
// Puts hdr[0..n) in front of the segment's payload: the caller made sure the
// buffer holds p.l3_off + p.ip_total_len + n bytes. Updates the IPv4 total
// length and both checksums (the TCP one recomputed, a bad one stays bad).
// Returns the new frame length.
size_t tcp_insert_payload(uint8_t* frame, const Parsed& p, const uint8_t* hdr, size_t n) noexcept;
size_t tcp_insert_payload(uint8_t* frame, const Parsed6& p, const uint8_t* hdr, size_t n) noexcept;
// A sequence number of the client's as the backend sees it (after the
// shift) back in the client's own space; one inside the header: ISN + 1.
uint32_t proxy_seq_to_client(const ProxyConn& pc, uint32_t v) noexcept;
// Backend -> client: ack and SACK edges back into the client's space, MSS
// of a SYN lowered by hdr_len; marks the header acknowledged. Checksum
// updated incrementally.
void proxy_from_backend(uint8_t* frame, const Parsed& p, ProxyConn& pc) noexcept;
void proxy_from_backend(uint8_t* frame, const Parsed6& p, ProxyConn& pc) noexcept;

}  // namespace vipd::dp
