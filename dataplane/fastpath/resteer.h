// Thread: worker (the pool: one per worker; init/destroy from the control
// thread before the worker starts / after it stopped).
// Re-steering a TCP connection that never got through (docs/scheduling.md,
// "Re-steering"). While a connection waits for its backend's SYN-ACK
// (SYN_RECV with a SynMem), these send the client's SYN to another backend
// of the service instead of letting the client see the failure:
//   - an RST from the backend that answers the SYN (RST+ACK, ack = ISN + 1);
//   - an ICMP destination unreachable (not "fragmentation needed") quoting
//     the SYN (its 5-tuple as vipd sent it and seq = ISN);
//   - no SYN-ACK within Shared::t_resteer of the last SYN sent;
//   - the client's retransmitted SYN (same ISN).
// Either family: an IPv4 connection (worker.cc, Conn) or an IPv6 one
// (worker6.cc, Conn6: the same steps over its own table; ICMPv6 destination
// unreachable as the ICMP error) takes its SynMem from the worker's one pool.
// Never the same backend twice, at most Shared::resteer_attempts times; then
// (or with no other backend) the connection goes on as without re-steering.
// Only the backend side's answers, matched to the state and the client's
// ISN, count: a client cannot make vipd re-steer other clients' connections.
//
// What a SYN is rebuilt from lives in a per-worker pool (SynPool), named from
// the connection entry (Conn::syn, 0 = none) and freed at the SYN-ACK: memory
// is bounded by the pool's capacity, and a connection that finds it empty is
// counted (resteer_pool_full) and goes without (today's behaviour). An IPv6
// SYN's extension headers (hop-by-hop, destination options, a routing header
// with no segments left, an atomic fragment header: as vipd forwarded them)
// are kept in the pool's extension area (SynPool::init_ext6, kSynExtMax bytes
// per entry, only with IPv6 forwarding on) and go out again in the re-sent
// SYN; a SYN whose chain is longer is counted the same way
// (resteer_pool_full) and goes without. No allocation after init, no locks,
// no throw.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "dataplane/fastpath/bytes.h"
#include "dataplane/fastpath/conn_table.h"
#include "dataplane/fastpath/packet.h"

namespace vipd::dp {

struct Conn6;  // v6_tables.h

// Most re-steers of one connection (backends tried: 1 + this).
constexpr uint32_t kResteerMax = 7;
// A TCP header with its options, at most.
constexpr size_t kTcpHdrMax = 60;
// An IPv6 SYN's extension headers a saved SYN keeps, at most (bytes; each
// header is a multiple of 8): room for the usual ones (a hop-by-hop and a
// destination options header, an atomic fragment header) together.
constexpr size_t kSynExtMax = 64;

enum ResteerReason : uint8_t { kResteerRst, kResteerIcmp, kResteerTimeout, kResteerRetransmit, kNumResteerReasons };
const char* resteer_reason_name(unsigned r) noexcept;

// One connection's saved SYN and its re-steering state.
struct alignas(64) SynMem {  // two cache lines: handles index with a shift
  union {
    Conn* conn;    // the connection (entries never move): v6 0
    Conn6* conn6;  // v6 1
  };
  uint64_t deadline;  // TSC: re-steer when no SYN-ACK came by then
  uint32_t prev, next;  // deadline list (handles, 0: the sentinel), oldest first; prev kUnlinked: not on it
  uint8_t n_tried;      // backends the SYN went to before the connection's current one
  uint8_t v6;           // 1: an IPv6 connection (conn6)
  // Bytes 1 .. 8 of the SYN's IPv4 header as vipd sent it first: the TOS
  // (ip[0]) and the TTL (ip[7], one less than received), in one copy.
  // IPv6: bytes 0 .. 7 (version, traffic class and flow label in ip[0..3],
  // the hop limit in ip[7]).
  uint8_t ip[8];
  // The client's TCP header as vipd sent it first (the client's but for the
  // ports and the checksum, which syn_build writes anew; seq, flags, window
  // and options kept). Copied whole: one fixed-size copy is cheaper than
  // parsing it on every new connection; its length and the ISN are read
  // from it (syn_tcp_len, syn_isn).
  uint8_t tcp[kTcpHdrMax];
  // IPv6: bytes of extension headers between the IPv6 header and the TCP
  // header, kept in the pool's extension area (SynPool::ext); 0 = none (the
  // first next header, ip[6], is then TCP). IPv4: unused.
  uint8_t ext_len;
  uint32_t tried[kResteerMax];  // their destination slots (tried[0 .. n_tried))
};
static_assert(sizeof(SynMem) == 128);

// Fixed-size pool of SynMem with a stack of free ones and a list of the
// entries with a deadline, oldest first (every deadline is "now + the one
// timeout", so appending keeps the order). Handles are indexes from 1: entry
// 0 is the list's sentinel (its next: the head, its prev: the tail), so
// queueing and unlinking take no branches.
class SynPool {
 public:
  SynPool() = default;
  SynPool(const SynPool&) = delete;
  SynPool& operator=(const SynPool&) = delete;
  ~SynPool();
  // Allocates `capacity` entries (rte_zmalloc on `socket`). 0 = no pool:
  // every alloc_armed() fails. No extension area (init_ext6).
  bool init(const std::string& name, uint32_t capacity, int socket, std::string* error);
  // Adds the IPv6 extension area: kSynExtMax bytes per entry (after init;
  // with IPv6 forwarding on). Without it an IPv6 SYN with extension headers
  // is not kept (has_ext6 false).
  bool init_ext6(const std::string& name, int socket, std::string* error);
  bool has_ext6() const noexcept { return ext_ != nullptr; }
  // Entry h's extension bytes (kSynExtMax of room; has_ext6 only).
  uint8_t* ext(uint32_t h) noexcept { return ext_ + size_t{h} * kSynExtMax; }
  const uint8_t* ext(uint32_t h) const noexcept { return ext_ + size_t{h} * kSynExtMax; }
  void release(uint32_t h) noexcept {
    if (!h) return;
    unlink(h);
    free_[n_free_++] = h;
  }
  SynMem& at(uint32_t h) noexcept { return slots_[h]; }
  // An entry for a new connection (nullptr: the pool is empty; n_tried 0,
  // v6 as given) and its handle, put at the end of the deadline list with deadline
  // now + t in the same pass (t 0: no timer). The one pass and no branch on
  // the tail (the sentinel) keep it short: it is on every new connection's
  // path (callgrind: docs/benchmarks.md, "Measured changes").
  SynMem* alloc_armed(uint64_t now, uint64_t t, uint32_t* handle, uint8_t v6 = 0) noexcept {
    if (!n_free_) return nullptr;
    SynMem* const sl = slots_;  // (not reloaded after the stores below)
    const uint32_t h = free_[--n_free_];
    SynMem* s = sl + h;
    *handle = h;
    s->n_tried = 0;
    s->v6 = v6;  // (the two bytes in one store)
    if (!t) {
      s->prev = kUnlinked;
      return s;
    }
    const uint32_t tail = sl[0].prev;
    s->deadline = now + t;
    s->prev = tail;
    s->next = 0;
    sl[tail].next = h;
    sl[0].prev = h;
    return s;
  }
  // Puts h at the end of the deadline list with this deadline.
  void arm(uint32_t h, uint64_t deadline) noexcept {
    unlink(h);
    append(slots_, at(h), h, deadline);
  }
  void unlink(uint32_t h) noexcept {
    SynMem& s = at(h);
    if (s.prev == kUnlinked) return;
    slots_[s.prev].next = s.next;
    slots_[s.next].prev = s.prev;
    s.prev = kUnlinked;
  }
  // The entry with the earliest deadline, 0 = none.
  uint32_t head() const noexcept { return slots_ ? slots_[0].next : 0; }
  uint32_t capacity() const noexcept { return capacity_; }
  uint32_t in_use() const noexcept { return capacity_ - n_free_; }
  static constexpr size_t kBytesPerEntry = sizeof(SynMem) + sizeof(uint32_t);
  static constexpr uint32_t kUnlinked = UINT32_MAX;  // SynMem::prev of an entry not on the list

 private:
  static void append(SynMem* sl, SynMem& s, uint32_t h, uint64_t deadline) noexcept {
    const uint32_t t = sl[0].prev;
    s.deadline = deadline;
    s.prev = t;
    s.next = 0;
    sl[t].next = h;
    sl[0].prev = h;
  }
  SynMem* slots_ = nullptr;  // capacity_ + 1: [0] the sentinel
  uint32_t* free_ = nullptr;
  uint8_t* ext_ = nullptr;   // (capacity_ + 1) * kSynExtMax, indexed by handle; null: none
  uint32_t n_free_ = 0;
  uint32_t capacity_ = 0;
};

// The saved TCP header's length (with options) and the client's ISN.
inline size_t syn_tcp_len(const SynMem& s) noexcept { return (s.tcp[12] >> 4) * 4u; }
inline uint32_t syn_isn(const SynMem& s) noexcept { return bytes::rd32(s.tcp + 4); }

// Fills a new SynMem's IP and TCP header bytes from the SYN as vipd sends it first (a TCP frame parsed
// into p and rewritten, in a buffer with `room` bytes from `frame` on: data
// and tailroom). Inline: it is on every new connection's path. kIpFrom: the
// first IP header byte kept (IPv4 1, IPv6 0: see SynMem::ip); ParsedT:
// Parsed or Parsed6.
template <unsigned kIpFrom = 1, class ParsedT>
inline void syn_save(SynMem& s, const uint8_t* frame, size_t room, const ParsedT& p) noexcept {
  const uint8_t* tcp = frame + p.l4_off;
  const bool whole = size_t{p.l4_off} + kTcpHdrMax <= room;
  uint8_t ip[8];
  std::memcpy(ip, frame + p.l3_off + kIpFrom, 8);
  // A fixed-size copy where the buffer has the bytes (nearly always: the
  // tailroom); only the header's length of them count.
  if (whole) [[likely]] {  // four 16-byte moves
    std::memcpy(s.tcp, tcp, 16);
    std::memcpy(s.tcp + 16, tcp + 16, 16);
    std::memcpy(s.tcp + 32, tcp + 32, 16);
    std::memcpy(s.tcp + kTcpHdrMax - 16, tcp + kTcpHdrMax - 16, 16);
  } else {
    std::memcpy(s.tcp, tcp, (tcp[12] >> 4) * 4u);  // parse_frame: 20 <= doff <= l4_len
  }
  std::memcpy(s.ip, ip, 8);
}
// Writes the saved SYN as src:sport -> dst:dport into `frame` (room for
// kEthLen + 20 + kTcpHdrMax bytes; the Ethernet addresses are left for
// the output stage): IPv4 (DF, TTL one less than received, checksum) and
// the client's TCP header (seq, flags, window, options; new ports and
// checksum). Returns its length.
size_t syn_build(uint8_t* frame, const SynMem& s, uint32_t src, uint16_t sport, uint32_t dst,
                 uint16_t dport) noexcept;
// The same over IPv6 (room for kEthLen + 40 + kSynExtMax + kTcpHdrMax
// bytes): traffic class and flow label as received, the hop limit one less,
// the extension headers as forwarded the first time (s.ext_len bytes at
// `ext`; the first next header as saved), the TCP checksum over the IPv6
// pseudo header.
size_t syn_build6(uint8_t* frame, const SynMem& s, const uint8_t* ext, const uint8_t src[16], uint16_t sport,
                  const uint8_t dst[16], uint16_t dport) noexcept;

// What a segment from the backend means to a connection waiting for its
// SYN-ACK (flags and ack as received).
enum class SynAnswer : uint8_t { kOther, kSynAck, kRst };
inline SynAnswer syn_answer(const SynMem& s, uint8_t flags, uint32_t ack) noexcept {
  if (!(flags & kTcpAck) || ack != syn_isn(s) + 1) return SynAnswer::kOther;
  if (flags & kTcpRst) return SynAnswer::kRst;
  if (flags & kTcpSyn) return SynAnswer::kSynAck;
  return SynAnswer::kOther;
}

}  // namespace vipd::dp
