// Thread: any (see each structure). IPv6 forwarding state of the fast path,
// kept apart from the IPv4 tables so that the IPv4 path is untouched: the
// worker dispatches on the ethertype once (worker.cc -> worker6.cc) and an
// IPv6 packet never reads an IPv4 table nor the reverse.
//   - the IPv6 VIP table: VipKey6 -> Service* (the same immutable Service as
//     IPv4, so every scheduler and persistence work unchanged; the IPv6
//     addresses live in a Service6Ext after its destinations);
//   - the IPv6 VIP addresses (answered for NDP);
//   - the full-NAT IPv6 local addresses;
//   - Neighbor6Table, the IPv6 neighbour cache (NDP), shared by the workers;
//   - per worker: ConnTable6 (IPv6 5-tuples), full-NAT port pools, packets
//     parked while their next hop is resolved.
// Set up by the control thread (init_v6 / init_worker6) before the workers
// start; nothing is allocated after that.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/fastpath/conn_table.h"
#include "dataplane/fastpath/tables.h"

struct rte_hash;
struct rte_mbuf;

namespace vipd::dp {

struct Shared;
struct Worker;

constexpr unsigned kMaxLocalAddrs6 = 16;  // full-NAT IPv6 local addresses, at most

// Key of the IPv6 VIP table: address (network order), port and protocol
// (host order), zero padding. 24 bytes, 8-aligned (the CRC hash reads 8-byte
// words).
struct alignas(8) VipKey6 {
  uint8_t vip[16];
  uint16_t port;
  uint8_t proto;
  uint8_t pad[5];
};
static_assert(sizeof(VipKey6) == 24);
// A 16-byte address as a key of the IPv6 VIP address table (8-aligned).
struct alignas(8) Addr6Key {
  uint8_t a[16];
};

// A 32-bit digest of an IPv6 address: what the schedulers hash (sh, dh, mh,
// lblc see it as the address) and the DestRef::ip of an IPv6 destination.
inline uint32_t fold6(const uint8_t a[16]) noexcept {
  uint32_t w[4];
  std::memcpy(w, a, 16);
  uint32_t h = w[0] * 0x9e3779b1u;
  h = (h ^ w[1]) * 0x85ebca77u;
  h = (h ^ w[2]) * 0xc2b2ae3du;
  h = (h ^ w[3]) * 0x27d4eb2fu;
  return h ^ (h >> 15);
}

// loadBalancerSourceRanges of an IPv6 service (network order).
struct SourceRange6 {
  uint8_t net[16];
  uint8_t mask[16];
};

// What an IPv6 Service has beyond the IPv4 fields (published in the same
// allocation, after dests[]): its address, source ranges, and the address of
// each destination (dest_ip[i] for dests[i]; dests[i].ip is fold6 of it).
struct Service6Ext {
  uint8_t vip[16];
  uint32_t n_ranges;
  uint32_t pad;
  const SourceRange6* ranges;
  const uint8_t (*dest_ip)[16];
};
inline size_t service6_ext_offset(uint32_t n_dests) noexcept {
  return (sizeof(Service) + size_t{n_dests} * sizeof(DestRef) + 7) & ~size_t{7};
}
inline const Service6Ext& service6_ext(const Service& s) noexcept {
  return *reinterpret_cast<const Service6Ext*>(reinterpret_cast<const uint8_t*>(&s) + service6_ext_offset(s.n_dests));
}
bool source_allowed6(const Service6Ext& x, const uint8_t src[16]) noexcept;

// One IPv6 flow direction as on the wire (addresses network order, ports
// host order). 40 bytes, 8-aligned (hashed by 8-byte words).
struct alignas(8) FlowKey6 {
  uint8_t src[16];
  uint8_t dst[16];
  uint16_t sport;
  uint16_t dport;
  uint8_t proto;
  uint8_t pad[3];
};
static_assert(sizeof(FlowKey6) == 40);
FlowKey6 make_key6(const uint8_t src[16], uint16_t sport, const uint8_t dst[16], uint16_t dport,
                   uint8_t proto) noexcept;
uint32_t key6_hash(const FlowKey6& k) noexcept;

// An IPv6 connection (two cache lines). Client c -> VIP v is sent as l -> d
// (fnat: l = IPv6 local address and port; nat: l = c); replies d -> l go
// back as v -> c.
struct alignas(64) Conn6 {
  uint8_t caddr[16], vaddr[16];
  uint16_t cport, vport;
  uint8_t proto;
  ConnState state;
  uint8_t in_use;
  uint8_t laddr_idx;
  uint32_t dest_slot, dest_gen;
  uint32_t tmpl;  // persistence template index + 1 (0 = none)
  uint16_t lport, dport;
  uint64_t expires;  // TSC
  uint8_t laddr[16], daddr[16];
  uint32_t proxy;  // PROXY protocol state in Worker::proxy (proxy_proto.h), 0 = none
  uint32_t syn;    // re-steering state in Worker::syn (resteer.h), 0 = none
};
static_assert(sizeof(Conn6) == 128);

// Per-worker IPv6 connection table: a fixed array of entries and an open-
// addressing index (linear probing, backward-shift deletion, at most half
// full) holding both keys of each connection. Worker thread only.
class ConnTable6 {
 public:
  ConnTable6() = default;
  ConnTable6(const ConnTable6&) = delete;
  ConnTable6& operator=(const ConnTable6&) = delete;
  void init(uint32_t capacity);
  Conn6* lookup(const FlowKey6& k, bool* reply) noexcept;
  // Adds a connection under both keys; nullptr when full or a key is in use
  // (last_insert_full() tells which).
  Conn6* insert(const FlowKey6& fwd, const FlowKey6& rev) noexcept;
  void remove(Conn6* c) noexcept;
  // Re-steering (resteer.h): the connection's reply key becomes daddr:dport
  // (its destination's). False (nothing changed) when another connection
  // has that key.
  bool move_reply(Conn6* c, const uint8_t daddr[16], uint16_t dport) noexcept;
  bool last_insert_full() const noexcept { return last_full_; }
  // Visits up to `budget` entries from where the last sweep stopped; removes
  // those for which expire(Conn6&) returns true.
  template <typename F>
  void sweep(uint32_t budget, F&& expire) noexcept {
    const uint32_t n = static_cast<uint32_t>(entries_.size());
    for (uint32_t i = 0; i < budget && n > 0; ++i) {
      Conn6& c = entries_[cursor_];
      if (++cursor_ >= n) cursor_ = 0;
      if (c.in_use && expire(c)) remove(&c);
    }
  }
  uint32_t size() const noexcept { return used_; }
  uint32_t capacity() const noexcept { return static_cast<uint32_t>(entries_.size()); }

 private:
  static FlowKey6 fwd_of(const Conn6& c) noexcept;
  static FlowKey6 rev_of(const Conn6& c) noexcept;
  int64_t find(const FlowKey6& k, uint32_t h) const noexcept;  // index slot or -1
  bool add(uint32_t h, uint32_t val) noexcept;
  void del(const FlowKey6& k, uint32_t h) noexcept;
  std::vector<Conn6> entries_;
  std::unique_ptr<uint32_t[]> free_;  // [capacity]: free entries, free_[0 .. n_free_)
  uint32_t n_free_ = 0;
  std::vector<uint32_t> idx_;   // (entry << 1 | reply) + 1; 0 = empty
  std::vector<uint32_t> hash_;  // the key's hash, per index slot
  uint32_t mask_ = 0, used_ = 0, cursor_ = 0;
  bool last_full_ = false;
};

enum class Neigh6State { kMissing, kReachable, kStale };

// The IPv6 neighbour cache (RFC 4861, reduced: reachable / stale / gone by
// age, no probes). Shared by the workers, lock-free: every write to an entry
// (claiming it for an address, learning its MAC) holds the entry's sequence
// word odd for its duration (a CAS takes it), and readers retry on a moved
// or odd sequence, so nobody reads a torn entry or another address's MAC.
// Open addressing over a fixed array; an entry whose MAC expired and whose
// last solicitation is older than the unresolved time is taken over by the
// next address that needs a slot in its probe range, so spoofed addresses
// fill the table only for that long.
class Neighbor6Table {
 public:
  static constexpr uint32_t kProbe = 16;
  void init(uint32_t capacity, uint64_t reachable_tsc, uint64_t expire_tsc, uint64_t unresolved_tsc);
  Neigh6State lookup(const uint8_t ip[16], uint8_t mac[6], uint64_t now) const noexcept;
  // Learns ip -> mac, claiming an entry if it has none. False: no entry free.
  bool update(const uint8_t ip[16], const uint8_t mac[6], uint64_t now) noexcept;
  // Learns only for an address that has an entry already.
  bool refresh(const uint8_t ip[16], const uint8_t mac[6], uint64_t now) noexcept;
  // True: the caller sends a Neighbor Solicitation for ip now (one per
  // `interval` per address across the workers). Claims an entry if needed;
  // false also when the table has no room (counted by the caller).
  bool claim_request(const uint8_t ip[16], uint64_t now, uint64_t interval) noexcept;
  uint32_t size() const noexcept;

 private:
  struct Entry {
    std::atomic<uint32_t> seq;  // 0: never used; odd: being written
    uint32_t pad;
    std::atomic<uint64_t> a0, a1;  // the address
    std::atomic<uint64_t> mac;     // 48 bits, bit 63 = valid
    std::atomic<uint64_t> confirmed, requested;
  };
  Entry* find(const uint8_t ip[16], bool claim, uint64_t now) noexcept;
  const Entry* find_ro(const uint8_t ip[16]) const noexcept;
  std::vector<Entry> e_;
  uint32_t mask_ = 0;
  uint64_t reachable_ = 0, expire_ = 0, unresolved_ = 0;
};

// Shared IPv6 state (Shared::v6). Control thread sets it up; workers read.
struct Shared6 {
  rte_hash* vip_table = nullptr;  // VipKey6 -> Service* (RW_CONCURRENCY_LF)
  rte_hash* vip_addrs = nullptr;  // 16-byte VIP address -> refcount (LF)
  uint8_t local_addrs[kMaxLocalAddrs6][16]{};
  uint32_t n_local_addrs = 0;
  uint8_t port_prefix[8]{};  // on-link prefix length of each port's IPv6 address
  // Each port's IPv6 gateway (--port-ipv6 "... via GW"): the next hop of
  // destinations outside every port's prefix, taken from the first port
  // that has one (as PortInfo::gateway for IPv4).
  bool port_has_gw[8]{};
  uint8_t port_gw[8][16]{};
  Neighbor6Table neigh;
  ~Shared6();
};

struct PendingPkt6 {
  rte_mbuf* m;
  uint8_t nexthop[16];
  uint16_t port;
  uint64_t since;
};

struct FnatPool6 {
  std::vector<uint16_t> ports;
  uint32_t top = 0;
};

// Per-worker IPv6 state (Worker::v6).
struct Worker6 {
  ConnTable6 conns;
  FnatPool6 fnat[kMaxLocalAddrs6];
  uint32_t fnat_cursor = 0;
  static constexpr uint32_t kPendingMax = 64;
  PendingPkt6 pending[kPendingMax];
  uint32_t n_pending = 0;
};

// Creates v6's tables and points sh.v6 at it ("PREFIX" names the rte_hash
// objects): `entries` VIP keys; the local addresses (network order, at most
// 16) for full NAT; the neighbour cache with `neigh_entries` entries,
// reachable for `reachable_tsc` after a confirmation, usable (stale) for 4
// times that, and a slot of an address that never answered reusable 3 s
// after its last solicitation. Every port's on-link prefix: /64. Control
// thread, at set-up; false with *error on failure.
bool init_v6(Shared& sh, Shared6& v6, const std::string& prefix, uint32_t entries, uint32_t neigh_entries,
             uint64_t reachable_tsc, const std::vector<std::array<uint8_t, 16>>& local_addrs, int socket,
             std::string* error);
// A worker's IPv6 state: `capacity` connections, the full-NAT port pools
// (ports p with p % n_workers == index, as for IPv4).
void init_worker6(Worker& w, Worker6& v6, uint32_t capacity);
// Frees the packets a worker's IPv6 state still holds (shutdown, tests).
void free_worker6_pending(Worker6& v6) noexcept;

}  // namespace vipd::dp
