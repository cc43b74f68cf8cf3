// Thread: worker (one table per worker, never shared); init/destroy from the
// control thread before the worker starts / after it stopped.
// Connection table: an rte_hash from flow keys (both directions) to entries of
// a preallocated array, a free list, and an incremental expiry sweep.
#pragma once

#include <cstdint>
#include <string>

struct rte_hash;

namespace vipd::dp {

// One direction of a flow as it appears on the wire, host order. 16 bytes.
struct FlowKey {
  uint32_t src;
  uint32_t dst;
  uint16_t sport;
  uint16_t dport;
  uint8_t proto;
  uint8_t pad[3];
};
static_assert(sizeof(FlowKey) == 16);

inline FlowKey make_key(uint32_t src, uint16_t sport, uint32_t dst, uint16_t dport, uint8_t proto) {
  FlowKey k{};
  k.src = src;
  k.dst = dst;
  k.sport = sport;
  k.dport = dport;
  k.proto = proto;
  return k;
}

// TCP states as IPVS names them (see tcp_state.h for the transitions).
enum class ConnState : uint8_t {
  kNone,
  kSynRecv,      // SYN seen from the client
  kEstablished,  // handshake completed
  kFinWait,      // the client sent FIN first
  kClose,        // RST seen
  kUdp,
  kTimeWait,     // FINs seen from both sides
  kCloseWait,    // the server sent FIN first
  kLastAck,      // server FIN, then client FIN: waiting for the last ACK
};
constexpr unsigned kNumConnStates = 9;
const char* conn_state_name(ConnState s);

// Client c -> VIP v is sent as l -> d (fnat: l = local address/port; nat:
// l = c). Replies d -> l are sent back as v -> c.
struct Conn {
  uint32_t caddr, vaddr, laddr, daddr;
  uint16_t cport, vport, lport, dport;
  uint8_t proto;
  ConnState state;
  uint8_t in_use;
  uint8_t laddr_idx;  // fnat: index in the local address pool
  uint32_t dest_slot, dest_gen;
  uint32_t tmpl;     // persistence template index + 1 (0 = none)
  uint64_t expires;  // TSC
};

class ConnTable {
 public:
  ConnTable() = default;
  ConnTable(const ConnTable&) = delete;
  ConnTable& operator=(const ConnTable&) = delete;
  ~ConnTable();

  // Allocates everything for `capacity` connections (2 keys each).
  bool init(const std::string& name, uint32_t capacity, int socket, std::string* error);

  // Finds the connection of a packet with this key; *reply tells whether the
  // key matched the reply direction. nullptr if none.
  Conn* lookup(const FlowKey& k, bool* reply) noexcept;

  // Takes a free entry and indexes it under both keys. nullptr when full
  // (or the key already exists).
  Conn* insert(const FlowKey& fwd, const FlowKey& rev) noexcept;

  // Removes both keys and frees the entry.
  void remove(Conn* c) noexcept;

  // Visits up to `budget` entries from where the last sweep stopped; removes
  // each in-use entry for which expire(Conn&) returns true (the callback
  // releases what the entry holds).
  template <typename F>
  void sweep(uint32_t budget, F&& expire) noexcept {
    for (uint32_t n = 0; n < budget && capacity_ > 0; ++n) {
      Conn& c = conns_[cursor_];
      if (++cursor_ >= capacity_) cursor_ = 0;
      if (c.in_use && expire(c)) remove(&c);
    }
  }

  uint32_t size() const noexcept { return used_; }
  uint32_t capacity() const noexcept { return capacity_; }
  Conn* entry(uint32_t i) noexcept { return &conns_[i]; }

 private:
  rte_hash* hash_ = nullptr;
  Conn* conns_ = nullptr;
  uint32_t* free_ = nullptr;  // stack of free indexes
  uint32_t free_top_ = 0;
  uint32_t capacity_ = 0;
  uint32_t used_ = 0;
  uint32_t cursor_ = 0;
};

}  // namespace vipd::dp
