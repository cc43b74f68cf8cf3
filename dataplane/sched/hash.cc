// Thread: worker. Hashing schedulers: sh (source address), dh (destination
// address) over a 256-bucket table, and mh (Maglev) over its lookup table.
// The tables are built off the fast path by the publisher
// (publish/tables_build.h) and hold indexes into svc.dests; only destinations
// with a weight above 0 appear in them.
#include "dataplane/sched/sched.h"

namespace vipd::dp {
namespace {
inline int32_t lookup(const Service& svc, uint32_t key) {
  if (svc.n_weighted == 0 || !svc.table || svc.table_size == 0) return -1;
  const uint16_t idx = svc.table[addr_hash(key) % svc.table_size];
  return idx < svc.n_dests && svc.dests[idx].weight > 0 ? static_cast<int32_t>(idx) : -1;
}
}  // namespace

int32_t sched_sh(const Service& svc, const SchedCtx& ctx) noexcept { return lookup(svc, ctx.src); }
int32_t sched_dh(const Service& svc, const SchedCtx& ctx) noexcept { return lookup(svc, ctx.dst); }
int32_t sched_mh(const Service& svc, const SchedCtx& ctx) noexcept { return lookup(svc, ctx.src); }

}  // namespace vipd::dp
