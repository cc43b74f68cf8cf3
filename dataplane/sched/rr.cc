// Thread: worker. Round robin (IPVS "rr"): the next destination with a
// weight above 0, in table order, after the last one chosen.
#include "dataplane/sched/sched.h"

namespace vipd::dp {

int32_t sched_rr(const Service& svc, SchedState& st) noexcept {
  const uint32_t n = svc.n_dests;
  if (svc.n_weighted == 0 || n == 0) return -1;
  uint32_t idx = st.last >= n ? 0 : st.last + 1;
  for (uint32_t k = 0; k < n; ++k, ++idx) {
    if (idx >= n) idx = 0;
    if (svc.dests[idx].weight > 0) {
      st.last = idx;
      return static_cast<int32_t>(idx);
    }
  }
  return -1;
}

}  // namespace vipd::dp
