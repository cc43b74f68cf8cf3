// Thread: worker. The least-connection family, after the IPVS definitions:
//   overhead(d) = active(d) * 256 + inactive(d)
//   lc:  the destination with the least overhead
//   wlc: the least overhead(d) / weight(d)
//   sed: the least (active(d) + 1) / weight(d)   (shortest expected delay)
//   nq:  a destination with no active connection if there is one, else sed
// Destinations with weight 0 are never chosen; ties go to the first in table
// order. Divisions are compared as cross products (no floating point).
#include "dataplane/sched/sched.h"

namespace vipd::dp {
namespace {

inline int64_t active(const SchedCtx& ctx, const DestRef& d) {
  if (!ctx.counters) return 0;
  const int64_t a = ctx.counters[d.slot].active;
  return a > 0 ? a : 0;
}
inline int64_t inactive(const SchedCtx& ctx, const DestRef& d) {
  if (!ctx.counters) return 0;
  const int64_t a = ctx.counters[d.slot].inactive;
  return a > 0 ? a : 0;
}
inline int64_t overhead(const SchedCtx& ctx, const DestRef& d) {
  return active(ctx, d) * 256 + inactive(ctx, d);
}

// Picks the destination minimising cost(d) / weight(d) (weight 1 for lc).
template <typename Cost>
int32_t least(const Service& svc, bool weighted, Cost cost) {
  int32_t best = -1;
  int64_t best_cost = 0, best_w = 1;
  for (uint32_t i = 0; i < svc.n_dests; ++i) {
    const DestRef& d = svc.dests[i];
    if (d.weight == 0) continue;
    const int64_t c = cost(d);
    const int64_t w = weighted ? d.weight : 1;
    if (best < 0 || c * best_w < best_cost * w) {
      best = static_cast<int32_t>(i);
      best_cost = c;
      best_w = w;
    }
  }
  return best;
}

}  // namespace

int32_t sched_lc(const Service& svc, const SchedCtx& ctx) noexcept {
  return least(svc, false, [&](const DestRef& d) { return overhead(ctx, d); });
}

int32_t sched_wlc(const Service& svc, const SchedCtx& ctx) noexcept {
  return least(svc, true, [&](const DestRef& d) { return overhead(ctx, d); });
}

int32_t sched_sed(const Service& svc, const SchedCtx& ctx) noexcept {
  return least(svc, true, [&](const DestRef& d) { return active(ctx, d) + 1; });
}

int32_t sched_nq(const Service& svc, const SchedCtx& ctx) noexcept {
  for (uint32_t i = 0; i < svc.n_dests; ++i)
    if (svc.dests[i].weight > 0 && active(ctx, svc.dests[i]) == 0) return static_cast<int32_t>(i);
  return sched_sed(svc, ctx);
}

}  // namespace vipd::dp
