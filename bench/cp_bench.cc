// Thread: main (control), plus worker_main on lcore 1 with --worker running.
//
// Benchmark 2: control plane -> dataplane. With S services of E endpoints
// loaded (default 10k x 10 = 100k endpoints):
//   initial   TableDiff::compute(empty, table) + Publisher::apply(full) of the
//             whole list (what SyncLoop does on its first sync)
//   change    one endpoint of one random service replaced (an EndpointSlice
//             update): TableDiff::compute(prev, next) + Publisher::apply(diff),
//             which returns only after rte_rcu_qsbr_synchronize, i.e. once
//             every worker has passed a quiescent state — the new table is in
//             force when apply returns. p50/p90/p99/max over --changes.
//   extra     what SyncLoop also does per change and is O(services):
//             ServiceTable::same_content (every sync) and the cost of one
//             ServiceTable copy (a lower bound of rebuilding the table).
// --worker running: the real worker_main polls the (empty) net_ring0 port on
// lcore 1 and reports quiescent states; --worker offline: the QSBR has one
// registered thread that is offline (synchronize returns at once).
#include <rte_cycles.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_rcu_qsbr.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <tuple>
#include <vector>

#include "bench/bench_util.h"

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#else
#define RUNNING_ON_VALGRIND 0
#define CALLGRIND_TOGGLE_COLLECT
#define CALLGRIND_DUMP_STATS_AT(x)
#endif

// Under valgrind --tool=callgrind --collect-atstart=no: counts the
// instructions of one part and dumps them under its name (one dump per call;
// scripts/bench/callgrind_summary.py --cp adds them up per name).
#define CG_PART(name, ...)                           \
  do {                                               \
    if (RUNNING_ON_VALGRIND) CALLGRIND_TOGGLE_COLLECT; \
    __VA_ARGS__;                                     \
    if (RUNNING_ON_VALGRIND) {                       \
      CALLGRIND_TOGGLE_COLLECT;                      \
      CALLGRIND_DUMP_STATS_AT(name);                 \
    }                                                \
  } while (0)

namespace vipd::bench {

namespace {

double us_since(uint64_t t0, uint64_t t1) {
  return static_cast<double>(t1 - t0) * 1e6 / static_cast<double>(tsc_hz());
}

void add_dist(Json& j, const std::string& name, const std::vector<double>& v) {
  j.num(name + "_p50_us", percentile(v, 50));
  j.num(name + "_p90_us", percentile(v, 90));
  j.num(name + "_p99_us", percentile(v, 99));
  j.num(name + "_max_us", v.empty() ? 0 : *std::max_element(v.begin(), v.end()));
}

}  // namespace

int run_cp(const Args& a) {
  const uint32_t services = static_cast<uint32_t>(a.num("services", 10000));
  const uint32_t eps = static_cast<uint32_t>(a.num("endpoints", 10));
  const unsigned changes = static_cast<unsigned>(a.num("changes", 1000));
  const bool running = a.str("worker", "running") == "running";

  BenchDataplane d;
  if (!start_cp_dataplane(a, services, eps, running, &d)) return 2;
  std::string err;

  Json j;
  j.str("bench", "cp").integer("services", services).integer("endpoints_per_service", eps);
  j.integer("changes", changes).str("worker", running ? "running" : "offline");

  // ---- initial list ----
  const int64_t libc0 = libc_heap_used();
  cp::ServiceTable prev = make_table(services, eps, cp::Protocol::kTcp);
  const int64_t libc_table = libc_heap_used() - libc0;
  const int64_t heap0 = dpdk_heap_used();
  const int64_t libc1 = libc_heap_used();
  {
    const cp::ServiceTable empty;
    const uint64_t t0 = rte_rdtsc();
    cp::TableDiff diff;
    CG_PART("initial_compute", diff = cp::TableDiff::compute(empty, prev));
    const uint64_t t1 = rte_rdtsc();
    bool ok = false;
    CG_PART("initial_apply", ok = d.pub->apply(prev, diff, true, &err));
    if (!ok) {
      fprintf(stderr, "vipd_bench: initial apply: %s\n", err.c_str());
      return 2;
    }
    const uint64_t t2 = rte_rdtsc();
    j.num("initial_compute_ms", us_since(t0, t1) / 1e3);
    j.num("initial_apply_ms", us_since(t1, t2) / 1e3);
    j.num("initial_total_ms", us_since(t0, t2) / 1e3);
  }
  j.integer("cp_table_bytes", libc_table);
  j.integer("cp_publisher_bytes", libc_heap_used() - libc1);
  j.integer("dp_services_bytes", dpdk_heap_used() - heap0);
  j.num("dp_bytes_per_service", static_cast<double>(dpdk_heap_used() - heap0) / services);
  j.num("dp_bytes_per_endpoint", static_cast<double>(dpdk_heap_used() - heap0) / (services * eps));

  // ---- one-endpoint changes ----
  cp::ServiceTable next = prev;
  Rng rng(12345);
  uint32_t fresh_ip = kDestBase + services * eps;  // never used before
  std::vector<double> compute_us, apply_us, total_us, same_us;
  std::vector<cp::ServiceKey> keys;
  for (auto& [k, v] : prev.services) keys.push_back(k);
  for (unsigned c = 0; c < changes; ++c) {
    const cp::ServiceKey& k = keys[rng.below(static_cast<uint32_t>(keys.size()))];
    cp::VirtualService& vs = next.services.at(k);
    vs.backends[rng.below(eps)].ip = fresh_ip++;  // a pod replaced by a new one
    std::sort(vs.backends.begin(), vs.backends.end(),
              [](const cp::RealServer& x, const cp::RealServer& y) { return std::tie(x.ip, x.port) < std::tie(y.ip, y.port); });
    next.generation = prev.generation + 1;
    const uint64_t s0 = rte_rdtsc();
    bool same = true;
    CG_PART("same_content", same = prev.same_content(next));
    const uint64_t t0 = rte_rdtsc();
    cp::TableDiff diff;
    CG_PART("change_compute", diff = cp::TableDiff::compute(prev, next));
    const uint64_t t1 = rte_rdtsc();
    bool ok = false;
    if (!same && diff.changed.size() == 1) CG_PART("change_apply", ok = d.pub->apply(next, diff, false, &err));
    if (!ok) {
      fprintf(stderr, "vipd_bench: change %u failed: %s\n", c, err.c_str());
      return 2;
    }
    const uint64_t t2 = rte_rdtsc();
    same_us.push_back(us_since(s0, t0));
    compute_us.push_back(us_since(t0, t1));
    apply_us.push_back(us_since(t1, t2));
    total_us.push_back(us_since(t0, t2));
    prev.services.at(k) = vs;  // prev catches up (untimed)
    prev.generation = next.generation;
  }
  add_dist(j, "change_total", total_us);
  add_dist(j, "change_compute", compute_us);
  add_dist(j, "change_apply", apply_us);
  add_dist(j, "change_same_content", same_us);

  // ---- a full resync with nothing changed (SyncLoop's retry path) ----
  {
    const cp::ServiceTable empty;
    const uint64_t t0 = rte_rdtsc();
    cp::TableDiff diff = cp::TableDiff::compute(empty, next);
    if (!d.pub->apply(next, diff, true, &err)) {
      fprintf(stderr, "vipd_bench: resync: %s\n", err.c_str());
      return 2;
    }
    j.num("full_resync_unchanged_ms", us_since(t0, rte_rdtsc()) / 1e3);
  }
  // ---- table copy (lower bound of rebuilding the ServiceTable) ----
  {
    std::vector<double> v;
    for (int i = 0; i < 10; ++i) {
      const uint64_t t0 = rte_rdtsc();
      cp::ServiceTable copy = next;
      const uint64_t t1 = rte_rdtsc();
      v.push_back(us_since(t0, t1) / 1e3);
      if (copy.services.size() != next.services.size()) return 2;
    }
    j.num("table_copy_ms", median(v));
  }

  stop_cp_dataplane(&d, running);
  printf("%s\n", j.dump().c_str());
  fflush(stdout);
  return 0;
}

}  // namespace vipd::bench
