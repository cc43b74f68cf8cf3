// Thread: any worker.
#include "dataplane/fastpath/neighbor.h"

namespace vipd::dp {
namespace {
// The MAC word: bit 63 valid, bits 48..62 a tag of the address it was learned
// for, bits 0..47 the MAC. The tag lets a reader reject a MAC that a slow
// writer stored for the slot's previous address after the slot was reused.
constexpr uint64_t kValid = uint64_t{1} << 63;
inline uint32_t hash_ip(uint32_t ip) { return (ip * 2654435761u) ^ (ip >> 16); }
inline uint64_t tag_of(uint32_t ip) { return uint64_t{(ip * 0x9e3779b1u) >> 17} << 48; }
constexpr uint64_t kTagMask = uint64_t{0x7fff} << 48;
inline uint64_t pack(const uint8_t m[6], uint32_t ip) {
  uint64_t v = 0;
  for (int i = 0; i < 6; ++i) v = (v << 8) | m[i];
  return v | tag_of(ip) | kValid;
}
inline void unpack(uint64_t v, uint8_t m[6]) {
  for (int i = 5; i >= 0; --i) {
    m[i] = static_cast<uint8_t>(v);
    v >>= 8;
  }
}
}  // namespace

size_t NeighborTable::bytes_for(uint32_t capacity) {
  uint32_t c = 1;
  while (c < capacity) c <<= 1;
  return sizeof(Entry) * c;
}

void NeighborTable::init(void* mem, uint32_t capacity, uint64_t reachable_tsc, uint64_t expire_tsc,
                         uint64_t unresolved_tsc) {
  uint32_t c = 1;
  while (c < capacity) c <<= 1;
  e_ = static_cast<Entry*>(mem);
  mask_ = c - 1;
  reachable_ = reachable_tsc;
  expire_ = expire_tsc;
  unresolved_ = unresolved_tsc ? unresolved_tsc : expire_tsc;
}

// Dead: no usable MAC (expired, or never learned although a request went out)
// and no ARP request within the unresolved time. An entry just claimed by
// another worker (no MAC, no request yet) is not dead. Signed ages: another
// worker's `now` may be a little ahead of ours.
bool NeighborTable::reusable(const Entry& e, uint64_t now) const noexcept {
  const uint64_t m = e.mac.load(std::memory_order_relaxed);
  const uint64_t r = e.requested.load(std::memory_order_relaxed);
  const bool no_mac = (m & kValid)
                          ? static_cast<int64_t>(now - e.confirmed.load(std::memory_order_relaxed)) >
                                static_cast<int64_t>(expire_)
                          : r != 0;
  return no_mac && (r == 0 || static_cast<int64_t>(now - r) > static_cast<int64_t>(unresolved_));
}

void NeighborTable::store(Entry& e, uint32_t ip, const uint8_t mac[6], uint64_t now) noexcept {
  e.confirmed.store(now, std::memory_order_release);
  e.mac.store(pack(mac, ip), std::memory_order_release);
}

const NeighborTable::Entry* NeighborTable::find(uint32_t ip) const noexcept {
  uint32_t h = hash_ip(ip);
  for (uint32_t i = 0; i < kProbe; ++i) {
    const Entry& e = e_[(h + i) & mask_];
    uint32_t k = e.ip.load(std::memory_order_acquire);
    if (k == ip) return &e;
    if (k == 0) return nullptr;
  }
  return nullptr;
}

// The entry of ip, or a new one: the first empty slot of its probe range, or
// else the first dead one there (reused in place). nullptr if neither exists.
NeighborTable::Entry* NeighborTable::find_or_claim(uint32_t ip, uint64_t now) noexcept {
  const uint32_t h = hash_ip(ip);
  Entry* dead = nullptr;
  uint32_t dead_ip = 0;
  for (uint32_t i = 0; i < kProbe; ++i) {
    Entry& e = e_[(h + i) & mask_];
    uint32_t k = e.ip.load(std::memory_order_acquire);
    if (k == ip) return &e;
    if (k == 0) {
      uint32_t expected = 0;
      if (e.ip.compare_exchange_strong(expected, ip, std::memory_order_acq_rel)) return &e;
      if (expected == ip) return &e;  // another worker claimed it for the same ip
      k = expected;
    }
    if (!dead && reusable(e, now)) {
      dead = &e;
      dead_ip = k;
    }
  }
  if (!dead) return nullptr;
  // The old address is dead: clear its state first (a racing refresh of it is
  // lost, which costs one ARP request), then take the slot over.
  dead->mac.store(0, std::memory_order_relaxed);
  dead->requested.store(0, std::memory_order_relaxed);
  dead->confirmed.store(0, std::memory_order_relaxed);
  uint32_t expected = dead_ip;
  if (dead->ip.compare_exchange_strong(expected, ip, std::memory_order_acq_rel) || expected == ip) return dead;
  return nullptr;  // another worker took it first; the caller retries at its next packet
}

NeighState NeighborTable::lookup(uint32_t ip, uint8_t mac[6], uint64_t now) const noexcept {
  if (ip == 0) return NeighState::kMissing;
  const Entry* e = find(ip);
  if (!e) return NeighState::kMissing;
  uint64_t m = e->mac.load(std::memory_order_acquire);
  if (!(m & kValid) || (m & kTagMask) != tag_of(ip)) return NeighState::kMissing;
  uint64_t age = now - e->confirmed.load(std::memory_order_acquire);
  // The slot may have been reused for another address since find(): its new
  // owner's MAC was stored after the CAS on ip, so having read it (acquire)
  // we see the new ip here.
  if (e->ip.load(std::memory_order_acquire) != ip) return NeighState::kMissing;
  if (age > expire_) return NeighState::kMissing;
  unpack(m, mac);
  return age > reachable_ ? NeighState::kStale : NeighState::kReachable;
}

bool NeighborTable::update(uint32_t ip, const uint8_t mac[6], uint64_t now) noexcept {
  if (ip == 0) return false;
  Entry* e = find_or_claim(ip, now);
  if (!e) return false;
  store(*e, ip, mac, now);
  return true;
}

bool NeighborTable::refresh(uint32_t ip, const uint8_t mac[6], uint64_t now) noexcept {
  if (ip == 0) return false;
  Entry* e = const_cast<Entry*>(find(ip));
  if (!e) return false;
  store(*e, ip, mac, now);
  return true;
}

bool NeighborTable::claim_request(uint32_t ip, uint64_t now, uint64_t interval) noexcept {
  Entry* e = find_or_claim(ip, now);
  if (!e) return false;
  uint64_t last = e->requested.load(std::memory_order_relaxed);
  if (last != 0 && now - last < interval) return false;
  return e->requested.compare_exchange_strong(last, now, std::memory_order_relaxed);
}

uint32_t NeighborTable::size() const noexcept {
  uint32_t n = 0;
  for (uint32_t i = 0; i <= mask_; ++i)
    if (e_[i].ip.load(std::memory_order_relaxed) != 0) ++n;
  return n;
}

}  // namespace vipd::dp
