// Thread: worker. What worker.cc (the per-packet path) and worker_loop.cc
// (the poll loop and its housekeeping: mailbox, expiry sweep) share; not for
// other users of the fast path.
#pragma once

#include <rte_hash.h>

#include <cstdint>

#include "dataplane/fastpath/worker.h"

namespace vipd::dp {

// Whether an IPv4 address (host order) is a VIP of some Service.
inline bool is_vip_addr(const Shared& sh, uint32_t ip) { return rte_hash_lookup(sh.vip_addrs, &ip) >= 0; }

// Whether a connection's destination is still the one it was scheduled to
// (its slot's generation did not move: see DestSlot).
inline bool dest_alive(const Worker& w, const Conn& c) { return dest_gen(w, c.dest_slot) == c.dest_gen; }

// Releases what a connection holds (call before ConnTable::remove): its
// destination's active/inactive count, its full-NAT local port, the worker's
// active-flow count.
void release(Worker& w, Conn& c) noexcept;

// Persistence: the index in svc.dests that template t still decides for, or
// -1 when it is expired, its destination was removed, or
// (expire_quiescent_template) its destination is quiesced. Reads only.
int32_t template_dest(const Worker& w, const Service& svc, const Template& t) noexcept;

}  // namespace vipd::dp
