// Thread: worker. Locality-based schedulers (IPVS lblc / lblcr), keyed on the
// destination address. In vipd the destination address of a new flow is the
// service's VIP, so each worker keeps one assignment (lblc) or one server set
// (lblcr, over the first 64 destinations) per service, in its SchedState.
//   lblc:  keep the assigned destination unless it has weight 0 or is
//          overloaded (active > weight while some destination has
//          active * 2 < weight); then reassign with wlc.
//   lblcr: choose the least loaded (wlc) member of the set; if it is
//          overloaded, add the wlc choice over all destinations to the set.
// Set members with weight 0 are dropped from the set.
#include "dataplane/sched/sched.h"

namespace vipd::dp {
namespace {

inline int64_t act(const SchedCtx& ctx, const DestRef& d) {
  if (!ctx.counters) return 0;
  const int64_t a = ctx.counters[d.slot].active;
  return a > 0 ? a : 0;
}

bool overloaded(const Service& svc, const SchedCtx& ctx, uint32_t i) {
  const DestRef& d = svc.dests[i];
  if (act(ctx, d) <= static_cast<int64_t>(d.weight)) return false;
  for (uint32_t k = 0; k < svc.n_dests; ++k) {
    const DestRef& o = svc.dests[k];
    if (o.weight > 0 && act(ctx, o) * 2 < static_cast<int64_t>(o.weight)) return true;
  }
  return false;
}

}  // namespace

int32_t sched_lblc(const Service& svc, SchedState& st, const SchedCtx& ctx) noexcept {
  if (st.lblc > 0 && st.lblc <= svc.n_dests) {
    const uint32_t i = st.lblc - 1;
    if (svc.dests[i].weight > 0 && !overloaded(svc, ctx, i)) return static_cast<int32_t>(i);
  }
  const int32_t pick = sched_wlc(svc, ctx);
  st.lblc = pick >= 0 ? static_cast<uint32_t>(pick) + 1 : 0;
  return pick;
}

int32_t sched_lblcr(const Service& svc, SchedState& st, const SchedCtx& ctx) noexcept {
  const uint32_t n = svc.n_dests < 64 ? svc.n_dests : 64;
  int32_t best = -1;
  int64_t best_c = 0, best_w = 1;
  for (uint32_t i = 0; i < n; ++i) {
    if (!(st.lblcr_set & (uint64_t{1} << i))) continue;
    const DestRef& d = svc.dests[i];
    if (d.weight == 0) {
      st.lblcr_set &= ~(uint64_t{1} << i);
      continue;
    }
    const int64_t c = act(ctx, d);
    if (best < 0 || c * best_w < best_c * d.weight) {
      best = static_cast<int32_t>(i);
      best_c = c;
      best_w = d.weight;
    }
  }
  if (best >= 0 && !overloaded(svc, ctx, static_cast<uint32_t>(best))) return best;
  const int32_t pick = sched_wlc(svc, ctx);
  if (pick >= 0 && static_cast<uint32_t>(pick) < 64) st.lblcr_set |= uint64_t{1} << pick;
  return pick;
}

}  // namespace vipd::dp
