// Thread: control (the single writer of the fast-path tables).
// Turns ServiceTable changes into fast-path objects: builds a new immutable
// Service per changed service, swaps it into the lock-free VIP rte_hash, and
// frees old objects, hash positions and destination slots only after every
// worker went through a quiescent state (rte_rcu_qsbr).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "model/service_table.h"
#include "dataplane/fastpath/worker.h"

namespace vipd::dp {

class Publisher {
 public:
  explicit Publisher(Shared& sh);
  ~Publisher();
  Publisher(const Publisher&) = delete;
  Publisher& operator=(const Publisher&) = delete;

  bool apply(const cp::ServiceTable& next, const cp::TableDiff& diff, bool full, std::string* error);

  // Called (on the applying thread) for each destination slot that becomes free:
  // after the grace period, once its generation is bumped and before any later
  // apply can hand it to a new destination. The dataplane snapshots the slot's
  // cumulative counters there, so a reused slot starts its counts from zero.
  void set_slot_released(std::function<void(uint32_t slot)> fn) { slot_released_ = std::move(fn); }

  // Destination slot of (service, ip, port); -1 if not published.
  int64_t dest_slot(const cp::ServiceKey& k, const cp::IpAddr& ip, uint16_t port) const;
  // One more than the highest slot ever handed out (slots above it were never
  // used: scans of per-slot state stop there).
  uint32_t slot_high_water() const { return slot_high_water_; }
  // "name (TCP 10.96.0.100:8080) -> 10.244.4.7:8080" for a slot in use,
  // "" for a free one. O(services): for rare events (log lines) only.
  std::string slot_owner(uint32_t slot) const;
  size_t services() const { return recs_.size(); }

 private:
  // A service's destination slots, sorted by (ip, port), unique: a sorted
  // vector (one allocation per service) instead of a std::map (a node
  // allocation, a rebalance and out-of-line comparisons per destination).
  struct DestSlot {
    cp::IpAddr ip;
    uint16_t port = 0;
    uint32_t slot = 0;
  };
  using SlotList = std::vector<DestSlot>;
  // Marks an entry of the previous list that a destination took over (upsert).
  static constexpr uint32_t kSlotTaken = UINT32_MAX;
  static bool dest_before(const DestSlot& e, const cp::IpAddr& ip, uint16_t port) {
    if (!(e.ip == ip)) return e.ip < ip;
    return e.port < port;
  }
  // The entry of (ip, port) in a sorted list, or nullptr.
  static DestSlot* find_slot(SlotList& l, const cp::IpAddr& ip, uint16_t port);
  static const DestSlot* find_slot(const SlotList& l, const cp::IpAddr& ip, uint16_t port) {
    return find_slot(const_cast<SlotList&>(l), ip, port);
  }
  struct Rec {
    Service* obj = nullptr;
    uint32_t id = 0;
    SlotList slots;
    cp::VirtualService spec;
  };
  struct Deferred {
    std::vector<void*> objs;
    std::vector<int32_t> vip_positions;
    std::vector<int32_t> addr_positions;
    std::vector<int32_t> vip6_positions, addr6_positions;  // the IPv6 tables (Shared6)
    std::vector<uint32_t> dead_slots;  // bump generation, then free
    std::vector<uint32_t> ids;
    bool empty() const {
      return objs.empty() && vip_positions.empty() && addr_positions.empty() && dead_slots.empty() &&
             ids.empty() && vip6_positions.empty() && addr6_positions.empty();
    }
  };

  bool upsert(const cp::VirtualService& vs, Deferred& d, std::string* error);
  void remove(const cp::ServiceKey& k, Deferred& d);
  void vip_ref(const cp::IpAddr& vip, int delta, Deferred& d);
  // Adds/replaces or deletes a service's key in the VIP table of its family.
  bool vip_put(const cp::ServiceKey& k, Service* obj);
  void vip_del(const cp::ServiceKey& k, Deferred& d);
  void reclaim(Deferred& d);

  Shared& sh_;
  std::map<cp::ServiceKey, Rec> recs_;
  std::vector<uint32_t> free_ids_;
  std::function<void(uint32_t)> slot_released_;
  std::deque<uint32_t> free_slots_;  // FIFO: a slot is reused as late as possible
  std::map<cp::IpAddr, uint32_t> vip_refs_;
  uint32_t slot_high_water_ = 0;
};

}  // namespace vipd::dp
