// Thread: worker. IPVS schedulers over an immutable Service. Scheduler state
// is per worker and per service id (no sharing between workers); it resets
// itself when the service object was republished.
#pragma once

#include <cstdint>

#include "dataplane/fastpath/tables.h"

namespace vipd::dp {

struct SchedState {
  const Service* svc = nullptr;  // the object this state was built for
  uint32_t last = UINT32_MAX;    // index of the last chosen destination
  int32_t cw = 0;                // wrr current weight
};

// Each returns the index into svc.dests of the chosen destination, or -1 when
// no destination has a weight above 0.
int32_t sched_rr(const Service& svc, SchedState& st) noexcept;
int32_t sched_wrr(const Service& svc, SchedState& st) noexcept;

inline int32_t sched_pick(const Service& svc, SchedState& st) noexcept {
  if (st.svc != &svc) {
    st.svc = &svc;
    st.last = UINT32_MAX;
    st.cw = 0;
  }
  return svc.sched == Sched::kWrr ? sched_wrr(svc, st) : sched_rr(svc, st);
}

}  // namespace vipd::dp
