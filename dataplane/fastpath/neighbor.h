// Thread: any worker (lock-free, shared by all workers); init by control.
// IPv4 neighbour (ARP) cache: open addressing over a fixed array. A slot's IP
// is claimed once with a CAS; the MAC and timestamps are single 64-bit atomic
// words, so readers never see a torn entry and nobody takes a lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>

namespace vipd::dp {

enum class NeighState { kMissing, kReachable, kStale };

class NeighborTable {
 public:
  static constexpr uint32_t kProbe = 32;

  // capacity: rounded up to a power of two. `mem` must hold bytes_for(capacity)
  // zeroed bytes.
  static size_t bytes_for(uint32_t capacity);
  void init(void* mem, uint32_t capacity, uint64_t reachable_tsc, uint64_t expire_tsc);

  // kReachable: confirmed within reachable time; kStale: older but not yet
  // expired (still usable; the caller should refresh); kMissing otherwise.
  NeighState lookup(uint32_t ip, uint8_t mac[6], uint64_t now) const noexcept;

  // Learns or refreshes ip -> mac (from ARP). False if the table is full.
  bool update(uint32_t ip, const uint8_t mac[6], uint64_t now) noexcept;

  // True if the caller should send an ARP request for ip now (at most one
  // request per `interval` per address across all workers).
  bool claim_request(uint32_t ip, uint64_t now, uint64_t interval) noexcept;

  uint32_t size() const noexcept;

 private:
  struct Entry {
    std::atomic<uint32_t> ip;
    uint32_t pad;
    std::atomic<uint64_t> mac;  // 48 bits MAC, bit 63 = valid
    std::atomic<uint64_t> confirmed;
    std::atomic<uint64_t> requested;
  };
  Entry* find(uint32_t ip, bool create) noexcept;
  const Entry* find(uint32_t ip) const noexcept;

  Entry* e_ = nullptr;
  uint32_t mask_ = 0;
  uint64_t reachable_ = 0;
  uint64_t expire_ = 0;
};

}  // namespace vipd::dp
