// Thread: any worker (lock-free, shared by all workers); init by control.
// IPv4 neighbour (ARP) cache: open addressing over a fixed array. A slot's IP
// is claimed with a CAS; the MAC and timestamps are single 64-bit atomic
// words, so readers never see a torn entry and nobody takes a lock.
// Slots are never emptied (no tombstones), but a dead one is reused in place:
// an entry whose MAC expired (or was never learned) and whose last ARP request
// is older than the unresolved time is taken over, with a CAS on its IP, by
// the next address that needs a slot in its probe range. So a flood of
// spoofed sources (each one an ARP request, an entry that never resolves)
// fills the table only for that long, not for good. Readers check the IP
// again after reading the MAC, and the MAC word carries a 15-bit tag of the
// address it was learned for, so a reused slot does not hand out the previous
// address's MAC (even one a slow writer stores late).
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
  // zeroed bytes. unresolved_tsc: how long after its last ARP request an entry
  // without a valid MAC keeps its slot (0: expire_tsc).
  static size_t bytes_for(uint32_t capacity);
  void init(void* mem, uint32_t capacity, uint64_t reachable_tsc, uint64_t expire_tsc,
            uint64_t unresolved_tsc = 0);

  // kReachable: confirmed within reachable time; kStale: older but not yet
  // expired (still usable; the caller should refresh); kMissing otherwise.
  NeighState lookup(uint32_t ip, uint8_t mac[6], uint64_t now) const noexcept;

  // Learns or refreshes ip -> mac (from ARP). False if the table is full.
  bool update(uint32_t ip, const uint8_t mac[6], uint64_t now) noexcept;
  // Refreshes ip -> mac only if ip already has an entry (ARP traffic that was
  // not meant for us must not create entries). False if it has none.
  bool refresh(uint32_t ip, const uint8_t mac[6], uint64_t now) noexcept;

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
  Entry* find_or_claim(uint32_t ip, uint64_t now) noexcept;
  const Entry* find(uint32_t ip) const noexcept;
  bool reusable(const Entry& e, uint64_t now) const noexcept;
  static void store(Entry& e, uint32_t ip, const uint8_t mac[6], uint64_t now) noexcept;

  Entry* e_ = nullptr;
  uint32_t mask_ = 0;
  uint64_t reachable_ = 0;
  uint64_t expire_ = 0;
  uint64_t unresolved_ = 0;
};

}  // namespace vipd::dp
