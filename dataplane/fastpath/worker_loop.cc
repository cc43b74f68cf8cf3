// Thread: worker. The poll loop (worker_main) and the housekeeping it runs
// between bursts: the explain mailbox and the paced expiry sweep. No
// allocation, no locks, no exceptions, no logging.
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_hash.h>
#include <rte_rcu_qsbr.h>
#include <rte_ring.h>

#include <cstring>

#include "dataplane/fastpath/worker.h"
#include "dataplane/fastpath/worker_internal.h"

namespace vipd::dp {

void explain_service(Worker& w, const Service& svc, const SchedCtx& ctx, const TemplateKey& tkey,
                     ExplainAnswer& a) noexcept {
  a.service_found = 1;
  a.sched = static_cast<uint8_t>(svc.sched);
  a.drop_when_empty = svc.drop_when_empty;
  a.n_dests = svc.n_dests;
  a.n_weighted = svc.n_weighted;
  SchedState copy = w.sched[svc.id];  // predict without moving the real state
  int32_t idx = svc.n_weighted ? sched_pick(svc, copy, ctx) : -1;
  if (svc.persistence_s) {
    // A live template decides for new connections (read only: explain
    // changes nothing).
    const Template* t = w.tmpls.lookup(tkey);
    const int32_t ti = t ? template_dest(w, svc, *t) : -1;
    if (ti >= 0) {
      idx = ti;
      a.tmpl_found = 1;
      a.tmpl_expires_in_tsc = t->expires - w.now;
    }
  }
  a.next_idx = idx;
  if (idx >= 0) a.next_port = svc.dests[idx].port;
}

namespace {

void explain4(Worker& w, const ExplainQuery& q, ExplainAnswer& a) noexcept {
  const Shared& sh = *w.sh;
  const VipKey key{q.dst, q.dport, q.proto, 0};
  void* data = nullptr;
  const Service* svc = nullptr;
  if (rte_hash_lookup_data(sh.vip_table, &key, &data) >= 0) svc = static_cast<const Service*>(data);
  a.vip_address = is_vip_addr(sh, q.dst);
  bool reply = false;
  const Conn* c = w.conns.lookup(make_key(q.src, q.sport, q.dst, q.dport, q.proto), &reply);
  if (c) {
    explain_conn(w, *c, reply, dest_alive(w, *c), a);
    a.conn_dest_ip = c->daddr;
    a.conn_local_ip = c->laddr;
  }
  if (svc) {
    explain_service(w, *svc, SchedCtx{w.dest_counters, q.src, q.dst}, TemplateKey{q.dst, q.src, q.dport, q.proto, 0},
                    a);
    if (a.next_idx >= 0) a.next_ip = svc->dests[a.next_idx].ip;
  }
}

}  // namespace

void serve_mailbox(Worker& w) noexcept {
  Mailbox& mb = w.mailbox;
  const uint64_t req = mb.req.load(std::memory_order_acquire);
  if (req == mb.done.load(std::memory_order_relaxed)) return;
  const ExplainQuery q = mb.q;
  ExplainAnswer a{};
  a.next_idx = -1;
  if (q.v6) explain6(w, q, a);
  else explain4(w, q, a);
  mb.a = a;
  mb.done.store(req, std::memory_order_release);
}

uint32_t explain_owner(const Shared& sh, const ExplainQuery& q) noexcept {
  const uint32_t n = sh.n_workers;
  const bool fnat = sh.forward == Forward::kFnat;
  if (!q.v6) {
    // process_one: full-NAT replies (to a local address) by local port; in
    // nat mode a packet to neither a port nor a VIP address (a reply routed
    // through vipd) by its destination, the client; the rest by its source.
    if (fnat && local_addr_index(sh, q.dst) >= 0) return q.dport % n;
    if (!fnat && !is_port_ip(sh, q.dst) && !is_vip_addr(sh, q.dst)) return flow_owner(q.dst, q.dport, n);
    return flow_owner(q.src, q.sport, n);
  }
  // forward6: the same choice over the IPv6 tables (none: the client side).
  const Shared6* v6 = sh.v6;
  if (!v6) return flow_owner(fold6(q.src6), q.sport, n);
  bool to_local = false, to_port = false;
  for (uint32_t i = 0; i < v6->n_local_addrs; ++i)
    to_local = to_local || std::memcmp(v6->local_addrs[i], q.dst6, 16) == 0;
  for (uint16_t i = 0; i < sh.n_ports; ++i)
    to_port = to_port || (sh.ports[i].has_ip6 && std::memcmp(sh.ports[i].ip6, q.dst6, 16) == 0);
  Addr6Key k;
  std::memcpy(k.a, q.dst6, 16);
  const bool to_vip = rte_hash_lookup(v6->vip_addrs, &k) >= 0;
  if (fnat && to_local) return q.dport % n;
  if (!fnat && !to_port && !to_vip) return flow_owner(fold6(q.dst6), q.dport, n);
  return flow_owner(fold6(q.src6), q.sport, n);
}

void sweep_conns(Worker& w, uint32_t budget) noexcept {
  const uint64_t now = w.now;
  const Shared& sh = *w.sh;
  w.conns.sweep(budget, [&](Conn& c) {
    // A connection whose destination was removed is kept for a short grace
    // period, so that its next packet still finds it and the client gets a
    // RST (expire_nodest_conn) instead of silence; then it is reclaimed.
    if (!dest_alive(w, c) && c.expires > now + sh.t_dead) c.expires = now + sh.t_dead;
    if (c.expires > now) return false;
    release(w, c);
    return true;
  });
}

uint32_t sweep_conns_paced(Worker& w) noexcept {
  const uint32_t cap = w.conns.slots();  // entries: the sweep visits them all
  if (cap == 0) return 0;
  const uint64_t period = w.sh->tsc_hz * kSweepPeriodS;
  uint64_t per_entry = period / cap;  // TSC ticks per entry visited
  if (per_entry == 0) per_entry = 1;
  if (w.sweep_last == 0 || w.now < w.sweep_last) {
    w.sweep_last = w.now;  // first call, or the clock went back (a test)
    return 0;
  }
  const uint64_t owed = (w.now - w.sweep_last) / per_entry;
  if (owed == 0) return 0;
  // A slice is bounded (latency of this poll) but grows with the table, so
  // that a worker that polls rarely (--worker-idle-sleep-us) still covers a
  // large table within seconds.
  const uint32_t max_slice = cap / 64 > kSweepMaxSlice ? cap / 64 : kSweepMaxSlice;
  const uint32_t n = owed > max_slice ? max_slice : static_cast<uint32_t>(owed);
  sweep_conns(w, n);
  // The IPv6 table in step: the same share of its entries.
  if (w.v6) {
    const uint64_t n6 = (uint64_t{n} * w.v6->conns.capacity() + cap - 1) / cap;
    sweep_conns6(w, static_cast<uint32_t>(n6));
  }
  // Credit what was done; more than one period behind: forget the rest.
  w.sweep_last += n * per_entry;
  if (w.now - w.sweep_last > period) w.sweep_last = w.now - period;
  return n;
}

int worker_main(void* arg) {
  Worker& w = *static_cast<Worker*>(arg);
  Shared& sh = *w.sh;
  rte_rcu_qsbr_thread_register(sh.qsbr, w.index);
  rte_rcu_qsbr_thread_online(sh.qsbr, w.index);
  rte_mbuf* pkts[kRxBurst];
  while (!sh.stop.load(std::memory_order_relaxed)) {
    w.now = rte_rdtsc();
    uint32_t got = 0;
    for (uint16_t i = 0; i < sh.n_ports; ++i) {
      uint16_t n = rte_eth_rx_burst(sh.ports[i].port_id, static_cast<uint16_t>(w.index), pkts, kRxBurst);
      if (n) {
        bump(w.counters.rx, n);
        got += n;
        process_burst(w, pkts, n, false);
      }
    }
    if (sh.n_workers > 1) {
      unsigned n = rte_ring_sc_dequeue_burst(sh.rings[w.index], reinterpret_cast<void**>(pkts), kRxBurst, nullptr);
      if (n) {
        bump(w.counters.redirects_in, n);
        got += n;
        process_burst(w, pkts, static_cast<uint16_t>(n), true);
      }
    }
    if (w.n_peer_frames) serve_peer_frames(w);  // handed over by a peer gateway
    if (w.index == 0 && sh.n_handover_peers && w.now >= w.peers_arp_next) {  // their MACs known in advance
      resolve_peers(w);
      w.peers_arp_next = w.now + sh.arp_retry;
    }
    // IPv4 and IPv6 packets waiting for their next hop (ARP, NDP).
    if (w.n_pending || (w.v6 && w.v6->n_pending)) service_pending(w);
    if (w.index == 0 && sh.exc_from_kernel) send_from_kernel(w);
    serve_mailbox(w);
    if (w.syn.head()) resteer_timers(w, 64);
    flush_tx(w);
    sweep_conns_paced(w);
    w.tmpls.sweep(w.now, 16);
    rte_rcu_qsbr_quiescent(sh.qsbr, w.index);
    bump(w.counters.polls);
    if (got) {
      bump(w.counters.busy_polls);
    } else if (sh.idle_sleep_us) {
      rte_delay_us_sleep(sh.idle_sleep_us);
    }
  }
  flush_tx(w);
  rte_rcu_qsbr_thread_offline(sh.qsbr, w.index);
  rte_rcu_qsbr_thread_unregister(sh.qsbr, w.index);
  return 0;
}

}  // namespace vipd::dp
