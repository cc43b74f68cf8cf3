// Thread: worker. Weighted round robin (IPVS "wrr"): interleaved by current
// weight cw, which steps down by gcd(weights) each round and restarts at the
// maximum weight; destination i is chosen in a round when weight_i >= cw.
// Over max_weight/gcd rounds each destination is chosen weight_i/gcd times.
#include "dataplane/sched/sched.h"

namespace vipd::dp {

int32_t sched_wrr(const Service& svc, SchedState& st) noexcept {
  const uint32_t n = svc.n_dests;
  if (svc.n_weighted == 0 || n == 0 || svc.max_weight <= 0) return -1;
  uint32_t i = st.last >= n ? n - 1 : st.last;
  if (st.cw > svc.max_weight) st.cw = svc.max_weight;  // never loop down from a stale cw
  // Bounded: at most n * (max/gcd + 1) steps find a destination.
  const uint64_t bound = uint64_t{n} * (static_cast<uint64_t>(svc.max_weight / svc.gcd_weight) + 1);
  for (uint64_t step = 0; step <= bound; ++step) {
    i = (i + 1) % n;
    if (i == 0) {
      st.cw -= svc.gcd_weight;
      if (st.cw <= 0) st.cw = svc.max_weight;
    }
    if (static_cast<int64_t>(svc.dests[i].weight) >= st.cw) {
      st.last = i;
      return static_cast<int32_t>(i);
    }
  }
  return -1;
}

}  // namespace vipd::dp
