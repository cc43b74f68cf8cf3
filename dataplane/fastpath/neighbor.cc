// Thread: any worker.
#include "dataplane/fastpath/neighbor.h"

namespace vipd::dp {
namespace {
constexpr uint64_t kValid = uint64_t{1} << 63;
inline uint32_t hash_ip(uint32_t ip) { return (ip * 2654435761u) ^ (ip >> 16); }
inline uint64_t pack(const uint8_t m[6]) {
  uint64_t v = 0;
  for (int i = 0; i < 6; ++i) v = (v << 8) | m[i];
  return v | kValid;
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

void NeighborTable::init(void* mem, uint32_t capacity, uint64_t reachable_tsc, uint64_t expire_tsc) {
  uint32_t c = 1;
  while (c < capacity) c <<= 1;
  e_ = static_cast<Entry*>(mem);
  mask_ = c - 1;
  reachable_ = reachable_tsc;
  expire_ = expire_tsc;
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

NeighborTable::Entry* NeighborTable::find(uint32_t ip, bool create) noexcept {
  uint32_t h = hash_ip(ip);
  for (uint32_t i = 0; i < kProbe; ++i) {
    Entry& e = e_[(h + i) & mask_];
    uint32_t k = e.ip.load(std::memory_order_acquire);
    if (k == ip) return &e;
    if (k == 0) {
      if (!create) return nullptr;
      uint32_t expected = 0;
      if (e.ip.compare_exchange_strong(expected, ip, std::memory_order_acq_rel)) return &e;
      if (expected == ip) return &e;  // another worker claimed it for the same ip
    }
  }
  return nullptr;
}

NeighState NeighborTable::lookup(uint32_t ip, uint8_t mac[6], uint64_t now) const noexcept {
  if (ip == 0) return NeighState::kMissing;
  const Entry* e = find(ip);
  if (!e) return NeighState::kMissing;
  uint64_t m = e->mac.load(std::memory_order_acquire);
  if (!(m & kValid)) return NeighState::kMissing;
  uint64_t age = now - e->confirmed.load(std::memory_order_relaxed);
  if (age > expire_) return NeighState::kMissing;
  unpack(m, mac);
  return age > reachable_ ? NeighState::kStale : NeighState::kReachable;
}

bool NeighborTable::update(uint32_t ip, const uint8_t mac[6], uint64_t now) noexcept {
  if (ip == 0) return false;
  Entry* e = find(ip, true);
  if (!e) return false;
  e->confirmed.store(now, std::memory_order_relaxed);
  e->mac.store(pack(mac), std::memory_order_release);
  return true;
}

bool NeighborTable::claim_request(uint32_t ip, uint64_t now, uint64_t interval) noexcept {
  Entry* e = find(ip, true);
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
