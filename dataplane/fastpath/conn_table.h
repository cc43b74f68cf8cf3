// Thread: worker (one table per worker, never shared); init/destroy from the
// control thread before the worker starts / after it stopped.
// Connection table: a cuckoo hash from flow keys to connection entries, and
// an incremental expiry sweep. The burst path (burst.cc) hashes keys itself
// (conn_hash), asks for their buckets (buckets_of) and takes the entry the
// first matching tag names as a candidate (candidate_of), its key compared
// later; a per-burst change log tells which of those results a later packet
// of the same burst may have made stale.
//
// The table is vipd's own, built from public DPDK calls only (rte_zmalloc,
// the CRC32 of rte_hash_crc.h), so a DPDK upgrade cannot change its layout.
// Entries are a flat array of 64-byte lines (a Conn in each: one line per
// connection) with a stack of free ones. Keys are found through buckets of
// 8 slots in one 64-byte line: each slot a 16-bit tag (16 bits of the key's
// hash) and the position of its entry (entry index x 2 + 1 for a reply key).
// A key may sit in either of two buckets, both derived from its one 32-bit
// hash; a lookup reads them, compares the tags, then the key of the entry a
// matching tag names. An insert takes a free slot in either bucket, or
// makes one by moving keys to their other bucket (breadth-first search, at
// most kMaxVisit buckets). The buckets are sized at init for at most 80 %
// of their slots at full capacity, and nothing is allocated after init.
//
// Both directions of a connection are keys of the hash, except in full NAT: a
// reply there is addressed to a local address and port that this worker
// handed out to one connection at a time (the fnat port pools), so the table
// finds it by that address and port in a direct index (the *port index*)
// and checks the rest of the key against the entry. Half the keys in the
// hash, one insert per new connection, and a reply reads one index line
// instead of two buckets. In NAT mode the reply key's slot names the
// connection's entry with the reply bit set.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <rte_hash_crc.h>
#include <rte_prefetch.h>

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

// Initial value of the table's CRC32 hash (conn_hash, flow_hash.h: rte_hash_crc
// over the 16-byte key).
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
// The entry's first 13 bytes are the client's FlowKey (caddr = src, vaddr =
// dst, cport = sport, vport = dport, proto), which a lookup compares: insert
// sets them, nothing may write them after. One per 64-byte line (alignas):
// a lookup that found its key reads no other line of the entry.
struct alignas(64) Conn {
  uint32_t caddr, vaddr;
  uint16_t cport, vport;
  uint8_t proto;
  ConnState state;
  uint8_t in_use;     // kSlotFree or kSlotConn
  uint8_t laddr_idx;  // fnat: index in the local address pool
  uint32_t laddr, daddr;
  uint16_t lport, dport;
  uint32_t dest_slot, dest_gen;
  uint32_t tmpl;     // persistence template index + 1 (0 = none)
  uint64_t expires;  // TSC
  // PROXY protocol state (ProxyPool handle, proxy_proto.h; 0 = none): in the
  // line a packet reads anyway, so a connection without a header pays one
  // predictable branch and no memory.
  uint32_t proxy;
  // Re-steering state (SynPool handle, resteer.h; 0 = none): held from the
  // client's SYN until the backend's SYN-ACK, in the same line.
  uint32_t syn;
  // The route of each direction (worker.cc, route_code), worked out for
  // its first packet and kept in the line the packet reads anyway: 0 = not
  // yet; else the egress port's index + 1, with bit 7 set when the next hop
  // is that port's gateway (else the destination itself). Routes are fixed
  // after start (Shared::ports), so a code never goes stale; the neighbour
  // behind it is looked up as for any packet.
  uint8_t route_d;  // to the backend (daddr)
  uint8_t route_c;  // to the client (caddr)
};
static_assert(offsetof(Conn, route_c) + sizeof(uint8_t) == 58 && sizeof(Conn) == 64, "58 bytes in one 64-byte line");
static_assert(offsetof(Conn, caddr) == offsetof(FlowKey, src) && offsetof(Conn, vaddr) == offsetof(FlowKey, dst) &&
                  offsetof(Conn, cport) == offsetof(FlowKey, sport) &&
                  offsetof(Conn, vport) == offsetof(FlowKey, dport) && offsetof(Conn, proto) == offsetof(FlowKey, proto),
              "a Conn starts with its client key in FlowKey's layout");
constexpr uint8_t kSlotFree = 0, kSlotConn = 1;

class ConnTable {
 public:
  ConnTable() = default;
  ConnTable(const ConnTable&) = delete;
  ConnTable& operator=(const ConnTable&) = delete;
  ~ConnTable();

  // Allocates everything for `capacity` connections (rte_zmalloc on
  // `socket`; `name` names the allocations and errors): 2 keys each in the
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
  // The burst change log's name for a port index entry (its index, mixed):
  // a reply found there is logged and checked (changed_in_burst) by it
  // instead of its key's conn_hash, which the burst then need not compute.
  uint32_t port_sig(const uint32_t* entry) const noexcept {
    return (static_cast<uint32_t>(entry - port_index_) + 1) * 0x9e3779b1u;
  }
  uint32_t* port_entry(int li, uint16_t port) noexcept {
    return &port_index_[(static_cast<uint32_t>(li) << 16) | port];
  }
  Conn* candidate_at(const uint32_t* entry) noexcept {
    const uint32_t v = *entry;
    return v ? at(v - 1) : nullptr;
  }
  // True when entry c is the connection of reply key k.
  // In three words of the entry: (laddr, daddr), (lport, dport) and the one
  // holding proto and in_use (state and laddr_idx masked off).
  static bool reply_matches(const Conn& c, const FlowKey& k) noexcept {
    static_assert(std::endian::native == std::endian::little, "the words are built low field first");
    static_assert(offsetof(Conn, daddr) == offsetof(Conn, laddr) + 4 && offsetof(Conn, lport) == offsetof(Conn, laddr) + 8 &&
                      offsetof(Conn, dport) == offsetof(Conn, lport) + 2 && offsetof(Conn, state) == offsetof(Conn, proto) + 1 &&
                      offsetof(Conn, in_use) == offsetof(Conn, proto) + 2 &&
                      offsetof(Conn, laddr_idx) == offsetof(Conn, proto) + 3,
                  "the layout the words assume");
    return reply_words_match(c, uint64_t{k.dst} | (uint64_t{k.src} << 32), uint32_t{k.dport} | (uint32_t{k.sport} << 16),
                             k.proto);
  }
  // reply_matches with the packet's key as words built in registers:
  // `addrs` its destination then source address (the entry's laddr,
  // daddr), `ports` its destination then source port (lport, dport), each
  // field host order, the first in the low bits. (A caller holding the
  // source first, as Parsed does, rotates the word: one instruction.)
  static bool reply_words_match(const Conn& c, uint64_t addrs, uint32_t ports, uint8_t proto) noexcept {
    const char* e = reinterpret_cast<const char*>(&c);
    uint64_t have_addrs;
    uint32_t have_ports, flags;
    std::memcpy(&have_addrs, e + offsetof(Conn, laddr), 8);
    std::memcpy(&have_ports, e + offsetof(Conn, lport), 4);
    std::memcpy(&flags, e + offsetof(Conn, proto), 4);
    const uint32_t want_flags = uint32_t{proto} | (uint32_t{kSlotConn} << 16);
    return ((have_addrs ^ addrs) | (have_ports ^ ports) | ((flags & 0x00ff00ffu) ^ want_flags)) == 0;
  }

  // Finds the connection of a packet with this key; *reply tells whether the
  // key matched the reply direction. nullptr if none.
  Conn* lookup(const FlowKey& k, bool* reply) noexcept;
  // Same with the key's precomputed hash (conn_hash(k)).
  Conn* lookup(const FlowKey& k, uint32_t sig, bool* reply) noexcept;

  // The burst path's lookup, for n (<= 64) keys with precomputed hashes in
  // the hash (not the port index: a full-NAT reply key never hits here):
  // cand[i] is 1 + the position of the first slot of sigs[i]'s buckets whose
  // tag is the key's (its entry prefetched), else 0. No key is compared: the
  // caller checks the candidate (holds) or finds the key by itself
  // (find_pos) when it is not that one. burst.cc runs it in two steps,
  // buckets_of in its loop right after each key's hash, candidate_of after.
  void lookup_candidates(const uint32_t* sigs, uint32_t n, uint32_t* cand) noexcept;
  // A key's buckets (prefetched) and tag (a non-empty table: buckets() > 0).
  void buckets_of(uint32_t sig, const void** a, const void** b, uint16_t* tag) const noexcept {
    const uint16_t t = tag_of(sig);
    const uint32_t b1 = sig & mask_;
    *tag = t;
    *a = &buckets_[b1];
    *b = &buckets_[other_bucket(b1, t, mask_)];
    rte_prefetch0(*a);
    rte_prefetch0(*b);
  }
  // A key's candidate: 1 + the position the first slot of its buckets a, b
  // (buckets_of) with its tag holds (the entry prefetched), else 0.
  uint32_t candidate_of(const void* a, const void* b, uint16_t tag) const noexcept {
    const Bucket& ba = *static_cast<const Bucket*>(a);
    const Bucket& bb = *static_cast<const Bucket*>(b);
    const uint32_t hits = tag_hits(ba, bb, tag);
    if (!hits) return 0;
    const uint32_t s = static_cast<uint32_t>(std::countr_zero(hits));
    const uint32_t p1 = (s < kBucketSlots ? ba : bb).pos1[s & (kBucketSlots - 1)];
    rte_prefetch0(&entries_[(p1 - 1) >> 1]);
    return p1;
  }
  // Whether position `pos` holds key k.
  [[gnu::always_inline]] bool holds(int32_t pos, const FlowKey& k) const noexcept {
    const Conn& c = entries_[static_cast<uint32_t>(pos) >> 1];
    return (pos & 1) ? reply_matches(c, k) : key_equal(k, c);
  }
  // Position of the key with this hash, or -1.
  int32_t find_pos(const FlowKey& k, uint32_t sig) const noexcept { return find(k, sig); }
  // The entry and direction a position (holds, find_pos) stands for.
  Conn* decode(int32_t pos, bool* reply) noexcept {
    *reply = pos & 1;
    return at(static_cast<uint32_t>(pos) >> 1);
  }

  // Burst change log: begin_burst() forgets; then every key added or removed
  // is logged by its hash (in a kFilterBits-bit filter and a list), a
  // full-NAT reply key by its port index entry (port_sig). changed_in_burst
  // (sig): a key with this hash (entry) was added or removed since
  // begin_burst() (or the list overflowed), so a lookup made before is
  // stale: repeat it.
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
  // already exists): last_insert_full() tells which.
  Conn* insert(const FlowKey& fwd, const FlowKey& rev) noexcept;
  // Same with fwd's precomputed hash; fwd_absent: the caller has just looked
  // fwd up and not found it (saves the table's own check).
  Conn* insert(const FlowKey& fwd, uint32_t fwd_sig, const FlowKey& rev, bool fwd_absent) noexcept;
  // Full NAT: the same as insert(fwd, fwd_sig, rev, fwd_absent) with the
  // client key fwd = caddr:cport -> vaddr:vport (proto) and the reply key
  // rev = daddr:dport -> laddr:lport (proto), where laddr is local_addrs[li]
  // of init (the fnat pool the port came from): its port index entry is
  // found from li, without looking laddr up, and neither key is built in
  // memory. Without a port index (li not below the n_local of init): insert
  // itself.
  Conn* insert_local(uint32_t caddr, uint16_t cport, uint32_t vaddr, uint16_t vport, uint8_t proto, uint32_t fwd_sig,
                     uint32_t li, uint32_t laddr, uint16_t lport, uint32_t daddr, uint16_t dport,
                     bool fwd_absent) noexcept;

  // Whether the last insert that returned nullptr did so for want of room
  // (capacity reached, or no free slot reachable for a key), not for a key
  // in use.
  bool last_insert_full() const noexcept { return last_full_; }

  // Removes both keys and frees the entry.
  void remove(Conn* c) noexcept;

  // Points the connection at another destination (re-steering, resteer.h):
  // its reply key becomes daddr:dport -> laddr:lport, the entry stays where
  // it is. Full NAT: only the entry changes (the port index finds replies by
  // local address and port). False, nothing changed, when the new reply key
  // is another connection's or no slot can be made for it. The entry's
  // kept route to the destination (route_d) is forgotten.
  bool move_reply(Conn* c, uint32_t daddr, uint16_t dport) noexcept;

  // Visits up to `budget` entries from where the last sweep stopped (slots()
  // of them, free or not); removes each connection for which expire(Conn&)
  // returns true (the callback releases what the entry holds).
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
  // Buckets of the hash (a power of two; 0 before init).
  uint32_t buckets() const noexcept { return mask_ ? mask_ + 1 : 0; }
  // Whether a FlowKey and the client key of a Conn (the first 13 bytes of
  // each) are equal; nothing of the entry after its key is read. Reads the
  // first 16 bytes of each and masks the last 3 of them (a Conn's state
  // there, a FlowKey's zero padding) off the second 8-byte word.
  static bool key_equal(const FlowKey& k, const Conn& c) noexcept {
    uint64_t k0, k1;
    std::memcpy(&k0, &k, 8);
    std::memcpy(&k1, reinterpret_cast<const char*>(&k) + 8, 8);
    return key_words_equal(k0, k1, c);
  }
  // key_equal of the key whose two words (flow_word0, flow_word1) are k0, k1
  // (bytes 13..15 of k1 are not compared).
  static bool key_words_equal(uint64_t k0, uint64_t k1, const Conn& c) noexcept {
    static_assert(std::endian::native == std::endian::little, "the mask keeps a word's low 5 bytes");
    constexpr uint64_t kLow5Bytes = 0xffffffffffull;  // bytes 8..12: ports and protocol
    uint64_t b0, b1;
    std::memcpy(&b0, &c, 8);
    std::memcpy(&b1, reinterpret_cast<const char*>(&c) + 8, 8);
    return ((k0 ^ b0) | ((k1 ^ b1) & kLow5Bytes)) == 0;
  }
  // Buckets for `keys` keys: at most 80 % of their slots taken, a power of
  // two, at least 2.
  static uint32_t buckets_for(uint64_t keys) noexcept;
  // A key's tag (never 0) and buckets: the first from the hash's low bits,
  // the other from the first and the tag (so a key's other bucket is known
  // from where it is, without its key; never the first).
  static uint16_t tag_of(uint32_t sig) noexcept {
    const uint16_t t = static_cast<uint16_t>(sig >> 16);
    return t + (t == 0);
  }
  uint32_t first_bucket(uint32_t sig) const noexcept { return sig & mask_; }
  uint32_t other_bucket(uint32_t b, uint16_t tag) const noexcept { return other_bucket(b, tag, mask_); }
  static uint32_t other_bucket(uint32_t b, uint16_t tag, uint32_t mask) noexcept {
    return (b ^ (((uint32_t{tag} * 0x9e3779b1u) >> 7) | 1)) & mask;
  }
  // Entry number `idx` (0 .. slots() - 1).
  Conn* at(uint32_t idx) noexcept { return &entries_[idx]; }

 private:
  static constexpr uint32_t kLogMax = 256;  // 4 per packet of a 64-packet rx (kRxBurst)
  static constexpr uint32_t kFilterBits = 4096;
  void log_change(uint32_t sig) noexcept {
    const uint32_t b = (sig >> 7) & (kFilterBits - 1);
    filter_[b >> 6] |= uint64_t{1} << (b & 63);
    if (n_log_ < kLogMax) log_[n_log_] = sig;
    if (n_log_ <= kLogMax) ++n_log_;
  }
  // log_change(a), then log_change(b): one check of the list's room.
  void log_changes(uint32_t a, uint32_t b) noexcept {
    const uint32_t n = n_log_;
    if (n + 2 > kLogMax) [[unlikely]] {
      log_change(a);
      log_change(b);
      return;
    }
    const uint32_t ba = (a >> 7) & (kFilterBits - 1), bb = (b >> 7) & (kFilterBits - 1);
    filter_[ba >> 6] |= uint64_t{1} << (ba & 63);
    filter_[bb >> 6] |= uint64_t{1} << (bb & 63);
    log_[n] = a;
    log_[n + 1] = b;
    n_log_ = n + 2;
  }
  // The last step of either insert, its keys added: the slot is taken, its
  // keys' names logged for the burst's lookups (hf: the client key's hash;
  // hr: the reply key's hash, or in full NAT its port index entry's port_sig),
  // the entry marked live.
  Conn* take_slot(Conn* c, uint32_t hf, uint32_t hr) noexcept {
    --n_free_;
    log_changes(hf, hr);
    ++used_;
    c->in_use = kSlotConn;
    return c;
  }

  // A bucket: 8 keys' tags and entry positions (position + 1). An empty
  // slot has tag 0 and position 0, and no key's tag is 0.
  static constexpr uint32_t kBucketSlots = 8;
  struct alignas(64) Bucket {
    uint16_t tag[kBucketSlots];
    uint32_t pos1[kBucketSlots];
  };
  static constexpr uint32_t kMaxVisit = 256;  // buckets an insert's search visits, at most
  // Slots of buckets a (bit i: slot i) and b (bit 8 + i) whose tag is `tag`.
  static uint32_t tag_hits(const Bucket& a, const Bucket& b, uint16_t tag) noexcept;
  // Position of the key with this hash, or -1.
  int32_t find(const FlowKey& k, uint32_t sig) const noexcept;
  int32_t match_in(const Bucket& a, const Bucket& b, uint32_t hits, const FlowKey& k) const noexcept;
  // Adds a key that is not in the hash; false when no slot can be made.
  bool add_key(uint32_t sig, uint32_t pos) noexcept;
  // Slots of buckets a (bit i: slot i) and b (bit 8 + i) that are free.
  static uint32_t free_slots(const Bucket& a, const Bucket& b) noexcept;
  // conn_hash(make_key(src, sport, dst, dport, proto)) (flow_hash.h) from
  // the key's two 8-byte words, built in registers.
  static uint32_t conn_hash_of(uint32_t src, uint16_t sport, uint32_t dst, uint16_t dport, uint8_t proto) noexcept;
  // The entry for a new connection (the top of the free stack, n_free_ > 0):
  // zeroed, with the client key fwd and its reply's addresses and ports.
  Conn* fill_free(const FlowKey& fwd, uint32_t laddr, uint16_t lport, uint32_t daddr, uint16_t dport) noexcept;
  // insert_local's rare ways, out of line (they build the keys): whether
  // the client key is in the hash; insert with both keys.
  [[gnu::noinline]] bool has_client_key(uint32_t caddr, uint16_t cport, uint32_t vaddr, uint16_t vport, uint8_t proto,
                                        uint32_t sig) const noexcept;
  [[gnu::noinline]] Conn* insert_keys(uint32_t caddr, uint16_t cport, uint32_t vaddr, uint16_t vport, uint8_t proto,
                                      uint32_t fwd_sig, uint32_t laddr, uint16_t lport, uint32_t daddr, uint16_t dport,
                                      bool fwd_absent) noexcept;
  bool make_room(uint32_t b1, uint32_t b2, uint32_t* bucket, uint32_t* slot) noexcept;
  // Deletes the key with this hash at `pos`, if there.
  void del_key(uint32_t sig, uint32_t pos) noexcept;

  static constexpr uint32_t kMaxLocal = 64;
  static constexpr uint32_t kLocalMap = 256;  // open addressing, at most a quarter full
  static uint32_t local_slot(uint32_t addr) noexcept { return (addr * 0x9e3779b1u) >> 24; }
  // The port index entry of a reply key, or nullptr if its destination is not
  // a local address (writable: insert and remove set and clear it).
  uint32_t* port_slot(const FlowKey& rev) noexcept {
    const int li = local_index(rev.dst);
    return li < 0 ? nullptr : port_entry(li, rev.dport);
  }

  Bucket* buckets_ = nullptr;
  uint32_t mask_ = 0;  // buckets - 1
  Conn* entries_ = nullptr;  // [slots_]
  uint32_t* free_ = nullptr;  // [slots_]: free entries, free_[0 .. n_free_)
  uint32_t n_free_ = 0;
  bool last_full_ = false;
  uint32_t* port_index_ = nullptr;  // [n_local_ << 16]: entry position + 1, 0 = free
  uint32_t local_addrs_[kMaxLocal] = {};
  int8_t local_map_[kLocalMap];     // slot -> index in local_addrs_, -1 = empty
  uint8_t local_first_[kMaxLocal] = {};  // i -> local_index(local_addrs[i] of init)
  uint32_t n_local_ = 0;
  uint32_t capacity_ = 0;  // connections
  uint32_t slots_ = 0;     // entries (= capacity_ once initialised)
  uint32_t used_ = 0;
  uint32_t cursor_ = 0;
  uint32_t n_log_ = 0;
  uint64_t filter_[kFilterBits / 64] = {};
  uint32_t log_[kLogMax];
};

// The connection table's insert path, inline where a new connection is made
// (worker.cc): no call on a new connection's path.

// conn_hash(make_key(src, sport, dst, dport, proto)) from the key's two
// 8-byte words, built in registers (FlowKey's layout, zero padding).
inline uint32_t ConnTable::conn_hash_of(uint32_t src, uint16_t sport, uint32_t dst, uint16_t dport, uint8_t proto) noexcept {
  static_assert(std::endian::native == std::endian::little, "the words are built low field first");
  static_assert(offsetof(FlowKey, dst) == 4 && offsetof(FlowKey, sport) == 8 && offsetof(FlowKey, dport) == 10 &&
                    offsetof(FlowKey, proto) == 12,
                "FlowKey's layout");
  const uint64_t a = uint64_t{src} | (uint64_t{dst} << 32);
  const uint64_t b = uint64_t{sport} | (uint64_t{dport} << 16) | (uint64_t{proto} << 32);
  return rte_hash_crc_8byte(b, rte_hash_crc_8byte(a, kConnHashInit));
}

// Slots of buckets a (bits 0-7) and b (bits 8-15) whose tag is `tag`.
inline __attribute__((always_inline)) uint32_t ConnTable::tag_hits(const Bucket& a, const Bucket& b,
                                                                   uint16_t tag) noexcept {
#if defined(__SSE2__)
  const __m128i t = _mm_set1_epi16(static_cast<short>(tag));
  const __m128i ea = _mm_cmpeq_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(a.tag)), t);
  const __m128i eb = _mm_cmpeq_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(b.tag)), t);
  return static_cast<uint32_t>(_mm_movemask_epi8(_mm_packs_epi16(ea, eb)));
#else
  // Four 16-bit lanes per word: a lane of x is zero iff its top bit ends
  // up clear in ((x & 0x7fff) + 0x7fff) | x.
  constexpr uint64_t kLow15 = 0x7fff7fff7fff7fffull;
  const uint64_t t = uint64_t{tag} * 0x0001000100010001ull;
  uint32_t hits = 0;
  for (int w = 0; w < 4; ++w) {
    uint64_t x;
    std::memcpy(&x, w < 2 ? &a.tag[4 * w] : &b.tag[4 * (w - 2)], 8);
    x ^= t;
    const uint64_t zero = ~(((x & kLow15) + kLow15) | x) & ~kLow15;  // top bit of each zero lane
    const uint32_t m = static_cast<uint32_t>(((zero >> 15) & 1) | ((zero >> 30) & 2) | ((zero >> 45) & 4) |
                                             ((zero >> 60) & 8));
    hits |= m << (4 * w);
  }
  return hits;
#endif
}

// A free slot's tag is 0, and no key's.
inline uint32_t ConnTable::free_slots(const Bucket& a, const Bucket& b) noexcept {
#if defined(__SSE2__)
  const __m128i z = _mm_setzero_si128();
  const __m128i ea = _mm_cmpeq_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(a.tag)), z);
  const __m128i eb = _mm_cmpeq_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(b.tag)), z);
  return static_cast<uint32_t>(_mm_movemask_epi8(_mm_packs_epi16(ea, eb)));
#else
  uint32_t m = 0;
  for (uint32_t s = 0; s < kBucketSlots; ++s) m |= uint32_t{a.tag[s] == 0} << s | uint32_t{b.tag[s] == 0} << (8 + s);
  return m;
#endif
}

// The first free slot of the first bucket, else of the other (a free slot's
// tag is 0, and no key's), else one make_room frees.
[[gnu::always_inline]] inline bool ConnTable::add_key(uint32_t sig, uint32_t pos) noexcept {
  const uint16_t tag = tag_of(sig);
  const uint32_t b1 = first_bucket(sig), b2 = other_bucket(b1, tag);
  const uint32_t empty = free_slots(buckets_[b1], buckets_[b2]);
  uint32_t b, s;
  if (empty) [[likely]] {
    const uint32_t f = static_cast<uint32_t>(std::countr_zero(empty));
    b = f < kBucketSlots ? b1 : b2;
    s = f & (kBucketSlots - 1);
  } else if (!make_room(b1, b2, &b, &s)) {
    return false;
  }
  buckets_[b].tag[s] = tag;
  buckets_[b].pos1[s] = pos + 1;
  return true;
}

[[gnu::always_inline]] inline Conn* ConnTable::fill_free(const FlowKey& fwd, uint32_t laddr, uint16_t lport,
                                                                 uint32_t daddr, uint16_t dport) noexcept {
  Conn* c = at(free_[n_free_ - 1]);
  *c = Conn{};
  std::memcpy(c, &fwd, 13);
  c->laddr = laddr;
  c->lport = lport;
  c->daddr = daddr;
  c->dport = dport;
  return c;
}

[[gnu::always_inline]] inline Conn* ConnTable::insert_local(uint32_t caddr, uint16_t cport, uint32_t vaddr,
                                                            uint16_t vport, uint8_t proto, uint32_t fwd_sig,
                                                            uint32_t li, uint32_t laddr, uint16_t lport,
                                                            uint32_t daddr, uint16_t dport, bool fwd_absent) noexcept {
  if (li >= n_local_) [[unlikely]]
    return insert_keys(caddr, cport, vaddr, vport, proto, fwd_sig, laddr, lport, daddr, dport, fwd_absent);
  last_full_ = true;
  if (n_free_ == 0) return nullptr;
  last_full_ = false;
  // As in insert: a client's key to a local address is refused, and so is a
  // port another connection holds.
  uint32_t* port = port_entry(local_first_[li], lport);
  if (local_index(vaddr) >= 0 || *port != 0 ||
      (!fwd_absent && has_client_key(caddr, cport, vaddr, vport, proto, fwd_sig)))
    return nullptr;
  const uint32_t hr = port_sig(port);
  const uint32_t idx = free_[n_free_ - 1];
  Conn* c = at(idx);
  *c = Conn{};
  c->caddr = caddr;
  c->vaddr = vaddr;
  c->cport = cport;
  c->vport = vport;
  c->proto = proto;
  c->laddr = laddr;
  c->lport = lport;
  c->daddr = daddr;
  c->dport = dport;
  if (!add_key(fwd_sig, idx << 1)) {
    last_full_ = true;
    return nullptr;
  }
  *port = idx + 1;
  return take_slot(c, fwd_sig, hr);
}

}  // namespace vipd::dp
