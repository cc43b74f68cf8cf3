// Builds the fast-path Shared structure the way DpdkDataplane::init does
// (lock-free rte_hash VIP tables, QSBR, destination slots, neighbour table),
// with small sizes and unique object names, and frees it afterwards. Also a
// helper to build ServiceTable entries. Needs EAL.
#pragma once

#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_hash.h>
#include <rte_malloc.h>
#include <rte_rcu_qsbr.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "model/service_table.h"
#include "dataplane/fastpath/worker.h"
#include "tests/unit/dataplane/test_util.h"

namespace vipd::dp::test {

struct SharedHolder {
  Shared sh;
  void* neigh_mem = nullptr;

  SharedHolder() = default;
  SharedHolder(const SharedHolder&) = delete;
  SharedHolder& operator=(const SharedHolder&) = delete;

  // vip_entries: size of both VIP hashes (DpdkDataplane uses max(max_services, 64)).
  bool init(uint32_t max_services, uint32_t max_dests, uint32_t n_workers, std::string* err,
            uint32_t vip_entries = 0) {
    const int sock = 0;
    sh.n_workers = n_workers;
    sh.max_services = max_services;
    sh.max_dests = max_dests;
    sh.tsc_hz = rte_get_tsc_hz();
    sh.t_syn = 60 * sh.tsc_hz;
    sh.t_est = 900 * sh.tsc_hz;
    sh.t_fin = 120 * sh.tsc_hz;
    sh.t_close = 10 * sh.tsc_hz;
    sh.t_udp = 300 * sh.tsc_hz;
    sh.t_dead = 60 * sh.tsc_hz;
    sh.t_time_wait = 120 * sh.tsc_hz;
    sh.t_close_wait = 60 * sh.tsc_hz;
    sh.t_last_ack = 30 * sh.tsc_hz;
    sh.arp_retry = sh.tsc_hz / 5;
    sh.arp_give_up = sh.tsc_hz;
    create_vip_tables(sh, uniq("t_"), vip_entries ? vip_entries : std::max<uint32_t>(max_services, 64), sock);
    const size_t qsz = rte_rcu_qsbr_get_memsize(n_workers);
    sh.qsbr = static_cast<rte_rcu_qsbr*>(rte_zmalloc("t_qsbr", qsz, RTE_CACHE_LINE_SIZE));
    sh.dest_slots = static_cast<DestSlot*>(rte_zmalloc("t_slots", sizeof(DestSlot) * max_dests, 64));
    constexpr uint32_t kNeigh = 1024;
    neigh_mem = rte_zmalloc("t_neigh", NeighborTable::bytes_for(kNeigh), 64);
    if (!sh.vip_table || !sh.vip_addrs || !sh.qsbr || !sh.dest_slots || !neigh_mem) {
      *err = std::string("cannot allocate shared tables: ") + rte_strerror(rte_errno);
      return false;
    }
    if (rte_rcu_qsbr_init(sh.qsbr, n_workers) != 0) {
      *err = "rte_rcu_qsbr_init failed";
      return false;
    }
    sh.neigh.init(neigh_mem, kNeigh, 60 * sh.tsc_hz, 240 * sh.tsc_hz);
    return true;
  }

  ~SharedHolder() {
    if (sh.vip_table) rte_hash_free(sh.vip_table);
    if (sh.vip_addrs) rte_hash_free(sh.vip_addrs);
    rte_free(sh.qsbr);
    rte_free(sh.dest_slots);
    rte_free(neigh_mem);
  }
};

inline const Service* find_service(const Shared& sh, uint32_t vip, uint16_t port, uint8_t proto) {
  const VipKey k{vip, port, proto, 0};
  void* d = nullptr;
  if (rte_hash_lookup_data(sh.vip_table, &k, &d) < 0) return nullptr;
  return static_cast<const Service*>(d);
}

inline bool is_vip_address(const Shared& sh, uint32_t vip) { return rte_hash_lookup(sh.vip_addrs, &vip) >= 0; }

inline cp::RealServer rs(const cp::IpAddr& ip, uint16_t port, uint32_t weight = 1) {
  cp::RealServer r;
  r.ip = ip;
  r.port = port;
  r.weight = weight;
  return r;
}

inline cp::VirtualService vsvc(const cp::IpAddr& vip, uint16_t port, cp::Protocol proto, std::vector<cp::RealServer> b,
                               cp::Scheduler sched = cp::Scheduler::kRr) {
  cp::VirtualService v;
  v.key.vip = vip;
  v.key.port = port;
  v.key.protocol = proto;
  v.name = "test/" + std::to_string(port);
  v.scheduler = sched;
  std::sort(b.begin(), b.end(), [](const cp::RealServer& x, const cp::RealServer& y) {
    return std::tie(x.ip, x.port) < std::tie(y.ip, y.port);
  });
  v.backends = std::move(b);
  return v;
}

inline void put(cp::ServiceTable& t, const cp::VirtualService& v) { t.services[v.key] = v; }

}  // namespace vipd::dp::test
