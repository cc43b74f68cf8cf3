// Thread: worker. sched_next (sched.h): the next destination for a
// re-steered connection.
#include "dataplane/sched/sched.h"

namespace vipd::dp {
namespace {

inline bool usable(const Service& svc, uint32_t i, const uint32_t* tried, uint32_t n_tried) {
  if (i >= svc.n_dests || svc.dests[i].weight == 0) return false;
  for (uint32_t k = 0; k < n_tried; ++k)
    if (tried[k] == svc.dests[i].slot) return false;
  return true;
}

// The first usable destination from `start` on, in dests order.
int32_t scan(const Service& svc, uint32_t start, const uint32_t* tried, uint32_t n_tried) {
  for (uint32_t k = 0; k < svc.n_dests; ++k) {
    const uint32_t i = (start + k) % svc.n_dests;
    if (usable(svc, i, tried, n_tried)) return static_cast<int32_t>(i);
  }
  return -1;
}

// How many table probes a hashing scheduler makes before the scan.
constexpr uint32_t kProbes = 64;

}  // namespace

int32_t sched_next(const Service& svc, SchedState& st, const SchedCtx& ctx, const uint32_t* tried,
                   uint32_t n_tried) noexcept {
  if (svc.n_weighted == 0 || svc.n_dests == 0) return -1;
  const bool hashing = svc.sched == Sched::kSh || svc.sched == Sched::kDh || svc.sched == Sched::kMh;
  if (hashing) {
    const uint32_t h = addr_hash(svc.sched == Sched::kDh ? ctx.dst : ctx.src);
    if (svc.table && svc.table_size) {
      // Probe sequence h + k * step (step odd and drawn from the key: a
      // different walk per key, so one dead backend's flows spread out).
      uint32_t step = addr_hash(h ^ 0x5bd1e995u) | 1;
      if (step % svc.table_size == 0) step = 1;
      uint64_t pos = h % svc.table_size;
      for (uint32_t k = 0; k < kProbes; ++k) {
        pos = (pos + step) % svc.table_size;
        const uint16_t i = svc.table[pos];
        if (usable(svc, i, tried, n_tried)) return i;
      }
    }
    return scan(svc, h % svc.n_dests, tried, n_tried);
  }
  // Other schedulers: their own choice, while it is something not tried
  // (rr moves on each time; lc and friends may insist: then the scan).
  for (uint32_t k = 0; k < svc.n_weighted && k < 8; ++k) {
    const int32_t i = sched_pick(svc, st, ctx);
    if (i < 0) return -1;
    if (usable(svc, static_cast<uint32_t>(i), tried, n_tried)) return i;
  }
  return scan(svc, st.last == UINT32_MAX ? 0 : st.last + 1, tried, n_tried);
}

}  // namespace vipd::dp
