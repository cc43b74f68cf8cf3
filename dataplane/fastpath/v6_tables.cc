// Thread: see v6_tables.h. The lookups and updates run on workers: no
// allocation, no locks, no exceptions there (init_* allocate, at set-up).
#include "dataplane/fastpath/v6_tables.h"

#include <rte_hash.h>
#include <rte_hash_crc.h>
#include <rte_mbuf.h>

#include "dataplane/fastpath/worker.h"

namespace vipd::dp {

bool source_allowed6(const Service6Ext& x, const uint8_t src[16]) noexcept {
  for (uint32_t i = 0; i < x.n_ranges; ++i) {
    const SourceRange6& r = x.ranges[i];
    bool in = true;
    for (int b = 0; b < 16 && in; ++b) in = (src[b] & r.mask[b]) == r.net[b];
    if (in) return true;
  }
  return x.n_ranges == 0;
}

FlowKey6 make_key6(const uint8_t src[16], uint16_t sport, const uint8_t dst[16], uint16_t dport,
                   uint8_t proto) noexcept {
  FlowKey6 k{};
  std::memcpy(k.src, src, 16);
  std::memcpy(k.dst, dst, 16);
  k.sport = sport;
  k.dport = dport;
  k.proto = proto;
  return k;
}

uint32_t key6_hash(const FlowKey6& k) noexcept { return rte_hash_crc(&k, sizeof k, kConnHashInit); }

// ---- ConnTable6 ----

void ConnTable6::init(uint32_t capacity) {
  if (capacity == 0) capacity = 1;
  entries_.assign(capacity, Conn6{});
  free_ = std::make_unique<uint32_t[]>(capacity);
  for (uint32_t i = 0; i < capacity; ++i) free_[i] = capacity - 1 - i;  // entry 0 first
  n_free_ = capacity;
  uint32_t n = 4;
  while (n < 4ull * capacity) n <<= 1;  // 2 keys per connection, at most half full
  idx_.assign(n, 0);
  hash_.assign(n, 0);
  mask_ = n - 1;
  used_ = cursor_ = 0;
}

FlowKey6 ConnTable6::fwd_of(const Conn6& c) noexcept { return make_key6(c.caddr, c.cport, c.vaddr, c.vport, c.proto); }
FlowKey6 ConnTable6::rev_of(const Conn6& c) noexcept { return make_key6(c.daddr, c.dport, c.laddr, c.lport, c.proto); }

int64_t ConnTable6::find(const FlowKey6& k, uint32_t h) const noexcept {
  for (uint32_t i = h & mask_;; i = (i + 1) & mask_) {
    const uint32_t v = idx_[i];
    if (v == 0) return -1;
    if (hash_[i] != h) continue;
    const Conn6& c = entries_[(v - 1) >> 1];
    const FlowKey6 ck = ((v - 1) & 1) ? rev_of(c) : fwd_of(c);
    if (std::memcmp(&ck, &k, sizeof k) == 0) return i;
  }
}

Conn6* ConnTable6::lookup(const FlowKey6& k, bool* reply) noexcept {
  if (entries_.empty()) return nullptr;
  const int64_t i = find(k, key6_hash(k));
  if (i < 0) return nullptr;
  const uint32_t v = idx_[static_cast<uint32_t>(i)] - 1;
  *reply = v & 1;
  return &entries_[v >> 1];
}

bool ConnTable6::add(uint32_t h, uint32_t val) noexcept {
  for (uint32_t i = h & mask_;; i = (i + 1) & mask_) {
    if (idx_[i] == 0) {
      idx_[i] = val;
      hash_[i] = h;
      return true;
    }
  }
}

void ConnTable6::del(const FlowKey6& k, uint32_t h) noexcept {
  const int64_t found = find(k, h);
  if (found < 0) return;
  // Backward-shift deletion: move up every following key that may sit at
  // the hole (its home slot is not between the hole and itself).
  uint32_t hole = static_cast<uint32_t>(found);
  for (uint32_t j = (hole + 1) & mask_;; j = (j + 1) & mask_) {
    if (idx_[j] == 0) break;
    const uint32_t home = hash_[j] & mask_;
    const bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (stays) continue;
    idx_[hole] = idx_[j];
    hash_[hole] = hash_[j];
    hole = j;
  }
  idx_[hole] = 0;
  hash_[hole] = 0;
}

Conn6* ConnTable6::insert(const FlowKey6& fwd, const FlowKey6& rev) noexcept {
  last_full_ = false;
  if (n_free_ == 0) {
    last_full_ = true;
    return nullptr;
  }
  const uint32_t hf = key6_hash(fwd), hr = key6_hash(rev);
  if (find(fwd, hf) >= 0 || find(rev, hr) >= 0) return nullptr;
  const uint32_t e = free_[--n_free_];
  Conn6& c = entries_[e];
  c = Conn6{};
  std::memcpy(c.caddr, fwd.src, 16);
  std::memcpy(c.vaddr, fwd.dst, 16);
  c.cport = fwd.sport;
  c.vport = fwd.dport;
  c.proto = fwd.proto;
  std::memcpy(c.daddr, rev.src, 16);
  std::memcpy(c.laddr, rev.dst, 16);
  c.dport = rev.sport;
  c.lport = rev.dport;
  c.in_use = 1;
  add(hf, (e << 1) + 1);
  add(hr, (e << 1 | 1) + 1);
  ++used_;
  return &c;
}

void ConnTable6::remove(Conn6* c) noexcept {
  if (!c->in_use) return;
  const FlowKey6 f = fwd_of(*c), r = rev_of(*c);
  del(f, key6_hash(f));
  del(r, key6_hash(r));
  c->in_use = 0;
  free_[n_free_++] = static_cast<uint32_t>(c - entries_.data());  // n_free_ < capacity: c was in use
  --used_;
}

bool ConnTable6::move_reply(Conn6* c, const uint8_t daddr[16], uint16_t dport) noexcept {
  if (!c->in_use) return false;
  const FlowKey6 next = make_key6(daddr, dport, c->laddr, c->lport, c->proto);
  const uint32_t h = key6_hash(next);
  if (find(next, h) >= 0) return false;
  const FlowKey6 old = rev_of(*c);
  del(old, key6_hash(old));  // (before the entry changes: del compares with it)
  add(h, (static_cast<uint32_t>(c - entries_.data()) << 1 | 1) + 1);
  std::memcpy(c->daddr, daddr, 16);
  c->dport = dport;
  return true;
}

// ---- Neighbor6Table ----

namespace {

uint64_t word(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

uint64_t pack_mac(const uint8_t mac[6]) {
  uint64_t v = 0;
  for (int i = 0; i < 6; ++i) v |= uint64_t{mac[i]} << (8 * i);
  return v | (uint64_t{1} << 63);
}

void unpack_mac(uint64_t v, uint8_t mac[6]) {
  for (int i = 0; i < 6; ++i) mac[i] = static_cast<uint8_t>(v >> (8 * i));
}

}  // namespace

void Neighbor6Table::init(uint32_t capacity, uint64_t reachable_tsc, uint64_t expire_tsc, uint64_t unresolved_tsc) {
  uint32_t n = kProbe;
  while (n < capacity) n <<= 1;
  e_ = std::vector<Entry>(n);
  mask_ = n - 1;
  reachable_ = reachable_tsc;
  expire_ = expire_tsc;
  unresolved_ = unresolved_tsc ? unresolved_tsc : expire_tsc;
}

const Neighbor6Table::Entry* Neighbor6Table::find_ro(const uint8_t ip[16]) const noexcept {
  if (e_.empty()) return nullptr;
  const uint64_t a0 = word(ip), a1 = word(ip + 8);
  const uint32_t h = fold6(ip);
  for (uint32_t k = 0; k < kProbe; ++k) {
    const Entry& e = e_[(h + k) & mask_];
    const uint32_t s = e.seq.load(std::memory_order_acquire);
    if (s == 0) return nullptr;  // never used: the address was never further on
    if (s & 1) continue;
    if (e.a0.load(std::memory_order_relaxed) == a0 && e.a1.load(std::memory_order_relaxed) == a1) return &e;
  }
  return nullptr;
}

Neigh6State Neighbor6Table::lookup(const uint8_t ip[16], uint8_t mac[6], uint64_t now) const noexcept {
  const Entry* e = find_ro(ip);
  if (!e) return Neigh6State::kMissing;
  const uint32_t s = e->seq.load(std::memory_order_acquire);
  const uint64_t m = e->mac.load(std::memory_order_relaxed);
  const uint64_t conf = e->confirmed.load(std::memory_order_relaxed);
  const bool same = e->a0.load(std::memory_order_relaxed) == word(ip) && e->a1.load(std::memory_order_relaxed) == word(ip + 8);
  std::atomic_thread_fence(std::memory_order_acquire);
  if ((s & 1) || e->seq.load(std::memory_order_relaxed) != s || !same) return Neigh6State::kMissing;
  if (!(m >> 63) || now - conf >= expire_) return Neigh6State::kMissing;
  unpack_mac(m, mac);
  return now - conf < reachable_ ? Neigh6State::kReachable : Neigh6State::kStale;
}

Neighbor6Table::Entry* Neighbor6Table::find(const uint8_t ip[16], bool claim, uint64_t now) noexcept {
  if (e_.empty()) return nullptr;
  const uint64_t a0 = word(ip), a1 = word(ip + 8);
  const uint32_t h = fold6(ip);
  Entry* spare = nullptr;
  for (uint32_t k = 0; k < kProbe; ++k) {
    Entry& e = e_[(h + k) & mask_];
    const uint32_t s = e.seq.load(std::memory_order_acquire);
    if (s == 0) {
      if (!spare) spare = &e;
      break;
    }
    if (s & 1) continue;
    if (e.a0.load(std::memory_order_relaxed) == a0 && e.a1.load(std::memory_order_relaxed) == a1) return &e;
    if (!spare) {
      const uint64_t m = e.mac.load(std::memory_order_relaxed);
      const bool dead = !(m >> 63) || now - e.confirmed.load(std::memory_order_relaxed) >= expire_;
      if (dead && now - e.requested.load(std::memory_order_relaxed) >= unresolved_) spare = &e;
    }
  }
  if (!claim || !spare) return nullptr;
  uint32_t s = spare->seq.load(std::memory_order_acquire);
  if ((s & 1) || !spare->seq.compare_exchange_strong(s, s + 1, std::memory_order_acq_rel)) return nullptr;
  spare->a0.store(a0, std::memory_order_relaxed);
  spare->a1.store(a1, std::memory_order_relaxed);
  spare->mac.store(0, std::memory_order_relaxed);
  spare->confirmed.store(0, std::memory_order_relaxed);
  spare->requested.store(0, std::memory_order_relaxed);
  spare->seq.store(s + 2, std::memory_order_release);
  return spare;
}

namespace {

// Stores a MAC into an entry that held `ip` when found: under the sequence.
template <typename Entry>
bool store_mac(Entry* e, const uint8_t ip[16], const uint8_t mac[6], uint64_t now) {
  uint32_t s = e->seq.load(std::memory_order_acquire);
  if ((s & 1) || !e->seq.compare_exchange_strong(s, s + 1, std::memory_order_acq_rel)) return false;
  const bool same = e->a0.load(std::memory_order_relaxed) == word(ip) && e->a1.load(std::memory_order_relaxed) == word(ip + 8);
  if (same) {
    e->mac.store(pack_mac(mac), std::memory_order_relaxed);
    e->confirmed.store(now, std::memory_order_relaxed);
  }
  e->seq.store(s + 2, std::memory_order_release);
  return same;
}

}  // namespace

bool Neighbor6Table::update(const uint8_t ip[16], const uint8_t mac[6], uint64_t now) noexcept {
  Entry* e = find(ip, true, now);
  return e && store_mac(e, ip, mac, now);
}

bool Neighbor6Table::refresh(const uint8_t ip[16], const uint8_t mac[6], uint64_t now) noexcept {
  Entry* e = find(ip, false, now);
  return e && store_mac(e, ip, mac, now);
}

bool Neighbor6Table::claim_request(const uint8_t ip[16], uint64_t now, uint64_t interval) noexcept {
  Entry* e = find(ip, true, now);
  if (!e) return false;
  uint64_t last = e->requested.load(std::memory_order_relaxed);
  if (last != 0 && now - last < interval) return false;
  return e->requested.compare_exchange_strong(last, now, std::memory_order_relaxed);
}

uint32_t Neighbor6Table::size() const noexcept {
  uint32_t n = 0;
  for (const Entry& e : e_)
    if (e.seq.load(std::memory_order_relaxed) != 0 && (e.mac.load(std::memory_order_relaxed) >> 63)) ++n;
  return n;
}

// ---- set-up ----

Shared6::~Shared6() {
  if (vip_table) rte_hash_free(vip_table);
  if (vip_addrs) rte_hash_free(vip_addrs);
}

bool init_v6(Shared& sh, Shared6& v6, const std::string& prefix, uint32_t entries, uint32_t neigh_entries,
             uint64_t reachable_tsc, const std::vector<std::array<uint8_t, 16>>& local_addrs, int socket,
             std::string* error) {
  if (local_addrs.size() > kMaxLocalAddrs6) {
    *error = "at most " + std::to_string(kMaxLocalAddrs6) + " IPv6 local addresses";
    return false;
  }
  rte_hash_parameters hp{};
  const std::string vips = prefix + "vips6", addrs = prefix + "vip_addrs6";
  hp.name = vips.c_str();
  hp.entries = entries;
  hp.key_len = sizeof(VipKey6);
  hp.hash_func = rte_hash_crc;
  hp.hash_func_init_val = kVipHashInit;
  hp.socket_id = socket;
  hp.extra_flag = RTE_HASH_EXTRA_FLAGS_RW_CONCURRENCY_LF | RTE_HASH_EXTRA_FLAGS_EXT_TABLE;
  v6.vip_table = rte_hash_create(&hp);
  hp.name = addrs.c_str();
  hp.key_len = 16;
  v6.vip_addrs = rte_hash_create(&hp);
  if (!v6.vip_table || !v6.vip_addrs) {
    *error = "cannot allocate the IPv6 VIP tables";
    return false;
  }
  v6.n_local_addrs = static_cast<uint32_t>(local_addrs.size());
  for (size_t i = 0; i < local_addrs.size(); ++i) std::memcpy(v6.local_addrs[i], local_addrs[i].data(), 16);
  for (uint8_t& l : v6.port_prefix) l = 64;
  v6.neigh.init(neigh_entries, reachable_tsc, 4 * reachable_tsc, 3 * sh.tsc_hz);
  sh.v6 = &v6;
  return true;
}

void init_worker6(Worker& w, Worker6& v6, uint32_t capacity) {
  v6.conns.init(capacity);
  const uint32_t nw = w.sh->n_workers ? w.sh->n_workers : 1;
  const uint32_t nl = w.sh->v6 ? w.sh->v6->n_local_addrs : 0;
  for (uint32_t a = 0; a < nl; ++a) {
    FnatPool6& fp = v6.fnat[a];
    fp.ports.assign(65536, 0);
    fp.top = 0;
    for (uint32_t port = 65535; port >= 1024; --port)
      if (port % nw == w.index) fp.ports[fp.top++] = static_cast<uint16_t>(port);
  }
  w.v6 = &v6;
}

void free_worker6_pending(Worker6& v6) noexcept {
  for (uint32_t i = 0; i < v6.n_pending; ++i) rte_pktmbuf_free(v6.pending[i].m);
  v6.n_pending = 0;
}

}  // namespace vipd::dp
