// Thread: worker (one table per worker, never shared); init/destroy from the
// control thread before the worker starts / after it stopped.
// Connection table: an rte_hash from flow keys to connection entries, and an
// incremental expiry sweep. The burst path (burst.cc) hashes keys itself
// (conn_hash) and looks them up in bulk; a per-burst change log tells which
// of those results a later packet of the same burst may have made stale.
//
// An entry lives in the hash's own key slot: the hash's key is the whole
// Conn (48 bytes), of which the table's compare and hash functions read the
// client's flow key only (its first 13 bytes); the rest is the entry's state,
// which the hash copies in at insert and never reads. The key slot is the
// line a lookup reads to compare the key, so a packet of a known flow finds
// its entry there instead of reading one more random line of a separate
// array. rte_hash returns a key's position, and its key slots are
// one array of 64-byte slots: init checks that layout and refuses to run on
// a DPDK that lays them out otherwise.
//
// Both directions of a connection are keys of the hash, except in full NAT: a
// reply there is addressed to a local address and port that this worker
// handed out to one connection at a time (the fnat port pools), so the table
// finds it by that address and port in a direct index (the *port index*)
// and checks the rest of the key against the entry. Half the keys in the
// hash, one insert per new connection, and a reply reads one index line
// instead of two buckets and a key slot. In NAT mode the reply key's slot is
// an *alias*: it holds the position of the connection's slot.
#pragma once

#include <cstddef>
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

// Initial value of the table's CRC32 hash (rte_hash_crc over the 16-byte key):
// whoever precomputes a signature must use the same.
constexpr uint32_t kConnHashInit = 0x9e3779b9;

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
//
// The entry is the hash's key (see the top of this file): its first 13 bytes
// are the client's FlowKey (caddr = src, vaddr = dst, cport = sport, vport =
// dport, proto), which the hash compares: insert sets them, nothing may
// write them after.
struct Conn {
  uint32_t caddr, vaddr;
  uint16_t cport, vport;
  uint8_t proto;
  ConnState state;
  uint8_t in_use;     // kSlotFree, kSlotConn, or kSlotAlias (a NAT reply key)
  uint8_t laddr_idx;  // fnat: index in the local address pool
  uint32_t laddr, daddr;
  uint16_t lport, dport;
  uint32_t dest_slot, dest_gen;  // an alias: dest_slot is its connection's position
  uint32_t tmpl;     // persistence template index + 1 (0 = none)
  uint64_t expires;  // TSC
};
static_assert(sizeof(Conn) == 48, "48 bytes: with rte_hash's 8-byte data pointer, one 64-byte key slot");
static_assert(offsetof(Conn, caddr) == offsetof(FlowKey, src) && offsetof(Conn, vaddr) == offsetof(FlowKey, dst) &&
                  offsetof(Conn, cport) == offsetof(FlowKey, sport) &&
                  offsetof(Conn, vport) == offsetof(FlowKey, dport) && offsetof(Conn, proto) == offsetof(FlowKey, proto),
              "a Conn starts with its client key in FlowKey's layout");
constexpr uint8_t kSlotFree = 0, kSlotConn = 1, kSlotAlias = 2;

class ConnTable {
 public:
  ConnTable() = default;
  ConnTable(const ConnTable&) = delete;
  ConnTable& operator=(const ConnTable&) = delete;
  ~ConnTable();

  // Allocates everything for `capacity` connections: 2 keys each in the
  // hash, or (full NAT: `local_addrs`, n_local <= 64 of them) 1 key each and
  // a port index of n_local x 65536 entries for the replies. A key whose
  // destination is one of `local_addrs` is then only ever a reply.
  bool init(const std::string& name, uint32_t capacity, int socket, std::string* error,
            const uint32_t* local_addrs = nullptr, uint32_t n_local = 0);

  // Port index: which local address `addr` is (its index in local_addrs),
  // or -1. The candidate entry for a reply to local address li, port: the
  // one connection that holds that port, or nullptr; its other fields are
  // not checked (reply_matches does that). The burst path reads it in two
  // steps, so that it can prefetch the index entries of a whole burst first:
  // port_entry (where to look), then candidate_at (what it holds).
  int local_index(uint32_t addr) const noexcept {
    if (!n_local_) return -1;
    for (uint32_t h = local_slot(addr);; h = (h + 1) & (kLocalMap - 1)) {
      const int8_t i = local_map_[h];
      if (i < 0 || local_addrs_[i] == addr) return i;
    }
  }
  Conn* local_candidate(int li, uint16_t port) noexcept { return candidate_at(port_entry(li, port)); }
  uint32_t* port_entry(int li, uint16_t port) noexcept {
    return &port_index_[(static_cast<uint32_t>(li) << 16) | port];
  }
  Conn* candidate_at(const uint32_t* entry) noexcept {
    const uint32_t v = *entry;
    return v ? at(v - 1) : nullptr;
  }
  // True when entry c is the connection of reply key k.
  static bool reply_matches(const Conn& c, const FlowKey& k) noexcept {
    return c.in_use == kSlotConn && c.daddr == k.src && c.dport == k.sport && c.laddr == k.dst && c.lport == k.dport &&
           c.proto == k.proto;
  }

  // Finds the connection of a packet with this key; *reply tells whether the
  // key matched the reply direction. nullptr if none.
  Conn* lookup(const FlowKey& k, bool* reply) noexcept;
  // Same with the key's precomputed hash (rte_hash_crc(k, 16, kConnHashInit)).
  Conn* lookup(const FlowKey& k, uint32_t sig, bool* reply) noexcept;

  // Looks up n (1..64) keys with precomputed hashes at once in the hash (not
  // the port index: a full-NAT reply key never hits here); returns the
  // bitmask of hits, pos[i] of a hit goes to decode().
  uint64_t lookup_bulk(const void** keys, uint32_t* sigs, uint32_t n, int32_t* pos) noexcept;
  // The entry and direction a bulk lookup's position stands for. The slot is
  // in cache (the lookup compared its key); an alias's connection is not.
  Conn* decode(int32_t pos, bool* reply) noexcept {
    Conn* c = at(static_cast<uint32_t>(pos));
    *reply = c->in_use == kSlotAlias;
    return *reply ? at(c->dest_slot) : c;
  }

  // Burst change log: begin_burst() forgets; then every key added or removed
  // is logged by its hash (in a 1024-bit filter and a list). changed_in_burst
  // (sig): a key with this hash was added or removed since begin_burst() (or
  // the list overflowed), so a lookup made before is stale: repeat it.
  void begin_burst() noexcept {
    if (n_log_ == 0) return;
    n_log_ = 0;
    for (uint64_t& f : filter_) f = 0;
  }
  bool changed_in_burst(uint32_t sig) const noexcept {
    if (n_log_ == 0) return false;  // the common case: nothing changed
    const uint32_t b = (sig >> 7) & (kFilterBits - 1);
    if (!((filter_[b >> 6] >> (b & 63)) & 1)) return false;
    if (n_log_ > kLogMax) return true;
    for (uint32_t i = 0; i < n_log_; ++i)
      if (log_[i] == sig) return true;
    return false;
  }

  // Adds an entry under both keys and fills in what they say (client key,
  // laddr/lport, daddr/dport); the rest is zero. nullptr when full (or a key
  // already exists).
  Conn* insert(const FlowKey& fwd, const FlowKey& rev) noexcept;
  // Same with fwd's precomputed hash; fwd_absent: the caller has just looked
  // fwd up and not found it (saves the table's own check).
  Conn* insert(const FlowKey& fwd, uint32_t fwd_sig, const FlowKey& rev, bool fwd_absent) noexcept;

  // Removes both keys and frees the entry.
  void remove(Conn* c) noexcept;

  // Visits up to `budget` key slots from where the last sweep stopped
  // (slots() of them: one per connection in full NAT, two in NAT); removes
  // each connection for which expire(Conn&) returns true (the callback
  // releases what the entry holds).
  template <typename F>
  void sweep(uint32_t budget, F&& expire) noexcept {
    for (uint32_t n = 0; n < budget && slots_ > 0; ++n) {
      Conn& c = *at(cursor_);
      if (++cursor_ >= slots_) cursor_ = 0;
      if (c.in_use == kSlotConn && expire(c)) remove(&c);
    }
  }

  uint32_t size() const noexcept { return used_; }
  uint32_t capacity() const noexcept { return capacity_; }
  uint32_t slots() const noexcept { return slots_; }
  // The hash's compare and hash functions: they read the client key of a
  // Conn or a FlowKey (the first 13 bytes), nothing after it. 0 = equal.
  static int key_cmp(const void* a, const void* b, size_t key_len) noexcept;
  static uint32_t key_hash(const void* key, uint32_t key_len, uint32_t init) noexcept;
  // The entry in key slot `pos` (a position rte_hash returned).
  Conn* at(uint32_t pos) noexcept { return reinterpret_cast<Conn*>(base_ + size_t{pos} * kSlotBytes); }

 private:
  static constexpr uint32_t kLogMax = 256;  // 4 per packet of a 64-packet rx (kRxBurst)
  static constexpr uint32_t kFilterBits = 1024;
  void log_change(uint32_t sig) noexcept {
    const uint32_t b = (sig >> 7) & (kFilterBits - 1);
    filter_[b >> 6] |= uint64_t{1} << (b & 63);
    if (n_log_ < kLogMax) log_[n_log_] = sig;
    if (n_log_ <= kLogMax) ++n_log_;
  }

  static constexpr size_t kSlotBytes = 64;  // rte_hash key slot: 8-byte data pointer, then the key
  bool find_layout(std::string* error) noexcept;

  static constexpr uint32_t kMaxLocal = 64;
  static constexpr uint32_t kLocalMap = 256;  // open addressing, at most a quarter full
  static uint32_t local_slot(uint32_t addr) noexcept { return (addr * 0x9e3779b1u) >> 24; }
  // The port index entry of a reply key, or nullptr if its destination is not
  // a local address (writable: insert and remove set and clear it).
  uint32_t* port_slot(const FlowKey& rev) noexcept {
    const int li = local_index(rev.dst);
    return li < 0 ? nullptr : port_entry(li, rev.dport);
  }

  rte_hash* hash_ = nullptr;
  uint32_t* port_index_ = nullptr;  // [n_local_ << 16]: entry position + 1, 0 = free
  uint32_t local_addrs_[kMaxLocal] = {};
  int8_t local_map_[kLocalMap];     // slot -> index in local_addrs_, -1 = empty
  uint32_t n_local_ = 0;
  char* base_ = nullptr;  // the Conn of position 0 (in the hash's key slots)
  uint32_t capacity_ = 0;  // connections
  uint32_t slots_ = 0;     // key slots: positions 0 .. slots_ - 1
  uint32_t used_ = 0;
  uint32_t cursor_ = 0;
  uint32_t n_log_ = 0;
  uint64_t filter_[kFilterBits / 64] = {};
  uint32_t log_[kLogMax];
};

}  // namespace vipd::dp
