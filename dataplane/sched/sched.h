// Thread: worker. IPVS schedulers over an immutable Service. Scheduler state
// is per worker and per service id (no sharing between workers); it resets
// itself when the service object was republished. Connection counts used by
// the lc family are this worker's own (see docs/scheduling.md).
#pragma once

#include <cstdint>

#include "dataplane/fastpath/tables.h"

namespace vipd::dp {

struct SchedState {
  const Service* svc = nullptr;  // the object this state was built for
  uint32_t last = UINT32_MAX;    // index of the last chosen destination
  int32_t cw = 0;                // wrr current weight
  uint32_t lblc = 0;             // lblc: assigned destination + 1 (0 = none)
  uint64_t lblcr_set = 0;        // lblcr: bit i = dests[i] is in the set (first 64)
};

// What a scheduler may look at besides the service: this worker's connection
// counts per destination slot, and the packet's addresses (host order).
struct SchedCtx {
  const DestCounters* counters = nullptr;  // indexed by DestRef::slot; null = all zero
  uint32_t src = 0;
  uint32_t dst = 0;
};

// Each returns the index into svc.dests of the chosen destination, or -1 when
// no destination has a weight above 0.
int32_t sched_rr(const Service& svc, SchedState& st) noexcept;
int32_t sched_wrr(const Service& svc, SchedState& st) noexcept;
int32_t sched_lc(const Service& svc, const SchedCtx& ctx) noexcept;
int32_t sched_wlc(const Service& svc, const SchedCtx& ctx) noexcept;
int32_t sched_sed(const Service& svc, const SchedCtx& ctx) noexcept;
int32_t sched_nq(const Service& svc, const SchedCtx& ctx) noexcept;
int32_t sched_sh(const Service& svc, const SchedCtx& ctx) noexcept;  // source hashing
int32_t sched_dh(const Service& svc, const SchedCtx& ctx) noexcept;  // destination hashing
int32_t sched_lblc(const Service& svc, SchedState& st, const SchedCtx& ctx) noexcept;
int32_t sched_lblcr(const Service& svc, SchedState& st, const SchedCtx& ctx) noexcept;
int32_t sched_mh(const Service& svc, const SchedCtx& ctx) noexcept;  // Maglev on source address

// Hash of an IPv4 address used by sh, dh and mh lookups (deterministic).
inline uint32_t addr_hash(uint32_t a) noexcept {
  uint32_t h = a * 0x9e3779b1u;
  h ^= h >> 15;
  h *= 0x85ebca77u;
  h ^= h >> 13;
  return h;
}

// Re-steering (fastpath/resteer.h): the destination to try next for a new
// connection whose SYN already went to the destinations whose slots are
// tried[0 .. n_tried), or -1 when every destination with a weight above 0
// was tried. sh, dh and mh walk the service's own lookup table in an order
// drawn from the key alone (the source address, dh: the destination), so
// that every gateway with the same table re-steers a flow the same way; the
// other schedulers pick as for a new connection, skipping what was tried.
int32_t sched_next(const Service& svc, SchedState& st, const SchedCtx& ctx, const uint32_t* tried,
                   uint32_t n_tried) noexcept;

// rr, inline where the destination after the last one has a weight (as
// sched_rr would pick it), else sched_rr itself.
inline int32_t sched_rr_next(const Service& svc, SchedState& st) noexcept {
  const uint32_t n = svc.n_dests;
  uint32_t idx = st.last + 1;  // the first after a reset (UINT32_MAX): 0
  if (idx >= n) idx = 0;
  if (idx < n && svc.n_weighted && svc.dests[idx].weight > 0) [[likely]] {
    st.last = idx;
    return static_cast<int32_t>(idx);
  }
  return sched_rr(svc, st);
}

inline int32_t sched_pick(const Service& svc, SchedState& st, const SchedCtx& ctx = SchedCtx{}) noexcept {
  if (st.svc != &svc) {
    st = SchedState{};
    st.svc = &svc;
  }
  if (svc.sched == Sched::kRr) [[likely]] return sched_rr_next(svc, st);  // the default
  switch (svc.sched) {
    case Sched::kRr: return sched_rr(svc, st);
    case Sched::kWrr: return sched_wrr(svc, st);
    case Sched::kLc: return sched_lc(svc, ctx);
    case Sched::kWlc: return sched_wlc(svc, ctx);
    case Sched::kSed: return sched_sed(svc, ctx);
    case Sched::kNq: return sched_nq(svc, ctx);
    case Sched::kSh: return sched_sh(svc, ctx);
    case Sched::kDh: return sched_dh(svc, ctx);
    case Sched::kLblc: return sched_lblc(svc, st, ctx);
    case Sched::kLblcr: return sched_lblcr(svc, st, ctx);
    case Sched::kMh: return sched_mh(svc, ctx);
  }
  return sched_rr(svc, st);
}

}  // namespace vipd::dp
