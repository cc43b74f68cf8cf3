// Thread: main (the control thread's path: IptablesBackend::apply).
//
// Benchmark 3a: kernel-mode sync time (iptables mode, and with --backend
// nftables the nftables mode: the same driver, the same tables and changes). With S services of E endpoints
// (bench_util's make_table, rr) the real IptablesBackend renders the rule set
// and runs the real iptables-save / iptables-restore --noflush / iptables:
//   initial   the first apply (a full sync into an empty namespace: save, one
//             restore of every chain, the jump rules)
//   full      --full-reps further full syncs of the same table (what a resync
//             or the first sync after an error costs: every chain rewritten)
//   partial   --changes single-endpoint changes (one endpoint of one random
//             service replaced): a partial sync rewrites the changed
//             service's chains only
// nftables only: --forward nat (the nat-mode form: endpoint chains with
// hairpin marks), --affinity S (ClientIP affinity: endpoint chains and
// affinity sets), --baseline N (N one-element commits that are not vipd's
// syncs, against the same ruleset: the cost of any commit at this size).
// Times are wall-clock around apply() (rendering + the commands), with the
// backend's own restore time and payload size beside them (nftables: the
// libnftables transaction time and its size; "restore" keys keep their names so
// the report reads both modes alike).
//
// Safety: refuses to run unless in a namespace made with `ip netns add`. scripts/bench.sh runs
// it under `ip netns exec` in a namespace it creates and deletes, so every
// rule lives and dies there.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "common/log.h"
#include "controlplane/backends/iptables/iptables_backend.h"
#include "controlplane/backends/nftables/backend.h"
#include "controlplane/backends/nftables/netlink_fast.h"

namespace vipd::bench {

namespace {

// True when this process runs in a network namespace made with `ip netns add`
// (one of the bind mounts under /run/netns), i.e. not in the machine's own
// namespace. (/proc/1/ns/net cannot always be read in a container, so the
// check is positive: a named namespace, or refuse.)
bool in_named_netns() {
  struct stat self {};
  if (stat("/proc/self/ns/net", &self) != 0) return false;
  DIR* d = opendir("/run/netns");
  if (!d) return false;
  bool found = false;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    struct stat ns {};
    const std::string path = std::string("/run/netns/") + e->d_name;
    if (stat(path.c_str(), &ns) == 0 && ns.st_ino == self.st_ino && ns.st_dev == self.st_dev) found = true;
  }
  closedir(d);
  return found;
}

// CPU time of this process (user + system: the kernel's work in its syscalls,
// the commit included) in ms; beside the wall time, which CPU contention inflates.
double cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void add_dist(Json& j, const std::string& name, const std::vector<double>& v) {
  j.num(name + "_p50_ms", median(v));
  j.num(name + "_p90_ms", percentile(v, 90));
  j.num(name + "_p99_ms", percentile(v, 99));
  j.num(name + "_max_ms", v.empty() ? 0 : *std::max_element(v.begin(), v.end()));
  j.integer(name + "_n", static_cast<int64_t>(v.size()));
}

}  // namespace

int run_ipt(const Args& a) {
  if (!in_named_netns()) {
    fprintf(stderr, "vipd_bench ipt: refusing to run outside a namespace made with `ip netns add` "
                    "(run it under `ip netns exec NS`, as scripts/bench.sh does)\n");
    return 2;
  }
  const uint32_t services = static_cast<uint32_t>(a.num("services", 1000));
  const uint32_t eps = static_cast<uint32_t>(a.num("endpoints", 4));
  const unsigned changes = static_cast<unsigned>(a.num("changes", 20));
  const unsigned full_reps = static_cast<unsigned>(a.num("full-reps", 3));
  // --iptables legacy: iptables-legacy-restore & co. instead of the system's
  // iptables (here the nf_tables one).
  const std::string variant = a.str("iptables", "default");
  const std::string backend = a.str("backend", "iptables");
  set_log_level(LogSeverity::kWarn);

  cp::ipt::IptablesOptions o;
  o.command_timeout_ms = static_cast<int>(a.num("timeout-s", 300) * 1000);
  o.restore_timeout_ms_per_mib = 0;  // --timeout-s bounds every command, whatever the payload
  o.lock_wait_s = 30;
  if (variant == "legacy") {
    o.restore_cmd = "iptables-legacy-restore";
    o.save_cmd = "iptables-legacy-save";
    o.iptables_cmd = "iptables-legacy";
  }
  // The sync statistics both backends report, under the iptables names.
  struct Last {
    double restore_ms = 0;
    double render_ms = 0;  // nftables: build_desired + the transaction's text (iptables: not reported)
    uint64_t bytes = 0, chains_written = 0, chains = 0, full = 0, partial = 0, failures = 0;
  };
  std::unique_ptr<cp::Backend> owned;
  cp::nft::NftablesBackend* nft_backend = nullptr;
  std::function<Last()> last;
  // nftables: --forward nat renders the nat-mode form (endpoint chains with
  // hairpin marks) instead of the compact fnat one; --affinity S gives every
  // service ClientIP affinity of S seconds (endpoint chains and affinity sets).
  const std::string forward = a.str("forward", "fnat");
  const uint32_t affinity_s = static_cast<uint32_t>(a.num("affinity", 0));
  // --baseline N (nftables): after the changes, N one-element transactions
  // that are not vipd's syncs: add, then delete, one address of the
  // cluster-ips set (no verdict, so no chain validation) through the same
  // libnftnl batch, against the same ruleset: what any nftables user pays for
  // a commit with this many chains.
  const unsigned baseline = static_cast<unsigned>(a.num("baseline", 0));
  if (backend == "nftables") {
    cp::nft::RenderOptions ro;
    ro.masquerade_all = forward != "nat";
    ro.shard_size = static_cast<uint32_t>(a.num("shard-size", ro.shard_size));  // services per table
    // --netlink-batch 0: every partial sync through libnftables (the path before
    // the libnftnl batch, netlink_fast.h), for a before/after in one build
    const bool batch = a.num("netlink-batch", 1) != 0;
    auto* nb = new cp::nft::NftablesBackend(ro, cp::nft::make_libnftables_runner(false, batch));
    nft_backend = nb;
    owned.reset(nb);
    last = [nb] {
      const auto s = nb->stats();
      return Last{s.last_transaction_ms, s.last_render_ms, s.transaction_bytes, s.chains_written, s.chains,
                  s.full_syncs, s.partial_syncs, s.failures};
    };
  } else {
    auto* ib = new cp::ipt::IptablesBackend(o);
    owned.reset(ib);
    last = [ib] {
      const auto s = ib->stats();
      return Last{s.last_restore_ms, 0, s.payload_bytes, s.chains_written, s.nat_chains, s.full_syncs,
                  s.partial_syncs, s.failures};
    };
  }
  cp::Backend& be = *owned;
  cp::ServiceTable table = make_table(services, eps, cp::Protocol::kTcp);
  for (auto& [k, v] : table.services) v.persistence_timeout_s = affinity_s;
  std::string err;
  Json j;
  j.str("bench", "ipt").str("backend", backend).integer("services", services).integer("endpoints", eps)
      .str("variant", backend != "nftables" ? variant
                      : affinity_s ? "nftables affinity" : forward == "nat" ? "nftables nat" : "nftables");
  if (backend == "nftables") j.str("forward", forward).integer("affinity_s", affinity_s);

  auto t0 = std::chrono::steady_clock::now();
  if (!be.apply(table, cp::TableDiff::compute(cp::ServiceTable{}, table), true, &err)) {
    fprintf(stderr, "vipd_bench ipt: initial sync failed: %s\n", err.c_str());
    // Still a result: how long it ran before failing (e.g. the command timeout).
    std::string why = err.substr(0, 120);
    for (char& c : why)
      if (c == '\n' || c == '\r' || c == '\t') c = ' ';
    j.num("initial_ms", ms_since(t0)).str("failed", "initial sync: " + why);
    printf("%s\n", j.dump().c_str());
    return 3;
  }
  j.num("initial_ms", ms_since(t0));
  Last st = last();
  j.num("initial_restore_ms", st.restore_ms);
  j.integer("full_payload_bytes", static_cast<int64_t>(st.bytes));
  j.integer("full_chains_written", static_cast<int64_t>(st.chains_written));
  j.integer("nat_chains", static_cast<int64_t>(st.chains));

  std::vector<double> full_ms, full_restore_ms;
  for (unsigned r = 0; r < full_reps; ++r) {
    t0 = std::chrono::steady_clock::now();
    if (!be.apply(table, cp::TableDiff{}, true, &err)) {
      fprintf(stderr, "vipd_bench ipt: full sync failed: %s\n", err.c_str());
      return 2;
    }
    full_ms.push_back(ms_since(t0));
    full_restore_ms.push_back(last().restore_ms);
  }
  add_dist(j, "full", full_ms);
  j.num("full_restore_p50_ms", median(full_restore_ms));

  // One address added to or deleted from the cluster-ips set as a libnftnl
  // batch of its own (--baseline), timed into *ms / *cpu when given.
  cp::nft::NetlinkBatchSender base_sender;
  std::vector<double> between_ms, between_cpu_ms;
  auto baseline_commit = [&](const std::string& addr, bool add, std::vector<double>* ms, std::vector<double>* cpu) {
    std::vector<cp::nft::FastCmd> cmds;
    if (!cp::nft::parse_fast(std::string(add ? "add" : "delete") + " element ip " + cp::nft::kTable +
                                 " cluster-ips { " + addr + " }\n", &cmds)) {
      fprintf(stderr, "vipd_bench ipt: baseline: parse failed\n");
      return false;
    }
    const double c0 = cpu_ms();
    const auto w0 = std::chrono::steady_clock::now();
    if (!base_sender.send(cmds, &err)) {
      fprintf(stderr, "vipd_bench ipt: baseline element commit failed: %s\n", err.c_str());
      return false;
    }
    if (ms) ms->push_back(ms_since(w0));
    if (cpu) cpu->push_back(cpu_ms() - c0);
    return true;
  };
  Rng rng(0x1b7);
  uint32_t next_ip = kDestBase + services * eps + 1;
  std::vector<double> part_ms, part_restore_ms, part_render_ms, part_cpu_ms;
  uint64_t part_bytes = 0, part_chains = 0;
  for (unsigned c = 0; c < changes; ++c) {
    cp::ServiceTable next = table;
    next.generation = table.generation + 1;
    auto it = next.services.begin();
    std::advance(it, rng.below(services));
    auto& b = it->second.backends;
    b[rng.below(static_cast<uint32_t>(b.size()))].ip = next_ip++;  // a pod replaced
    next.normalize();
    const cp::TableDiff diff = cp::TableDiff::compute(table, next);
    // --baseline: one such element commit just before each change too, in
    // the cache state the change meets (the driver's table copy evicts the
    // kernel's chains from the cache; back-to-back commits below do not)
    const std::string between = "198.19." + std::to_string((c >> 8) & 255) + "." + std::to_string(c & 255);
    if (nft_backend && baseline && !baseline_commit(between, true, &between_ms, &between_cpu_ms)) return 2;
    const double c0 = cpu_ms();
    t0 = std::chrono::steady_clock::now();
    if (!be.apply(next, diff, false, &err)) {
      fprintf(stderr, "vipd_bench ipt: partial sync failed: %s\n", err.c_str());
      return 2;
    }
    part_ms.push_back(ms_since(t0));
    part_cpu_ms.push_back(cpu_ms() - c0);
    if (nft_backend && baseline && !baseline_commit(between, false, nullptr, nullptr)) return 2;
    st = last();
    part_restore_ms.push_back(st.restore_ms);
    part_render_ms.push_back(st.render_ms);
    part_bytes += st.bytes;
    part_chains += st.chains_written;
    table = std::move(next);
  }
  add_dist(j, "partial", part_ms);
  j.num("partial_restore_p50_ms", median(part_restore_ms));
  j.num("partial_cpu_p50_ms", median(part_cpu_ms));
  if (backend == "nftables") j.num("partial_render_p50_ms", median(part_render_ms));
  j.integer("partial_payload_bytes", changes ? static_cast<int64_t>(part_bytes / changes) : 0);
  j.integer("partial_chains_written", changes ? static_cast<int64_t>(part_chains / changes) : 0);
  st = last();
  j.integer("full_syncs", static_cast<int64_t>(st.full));
  j.integer("partial_syncs", static_cast<int64_t>(st.partial));
  j.integer("failures", static_cast<int64_t>(st.failures));
  if (nft_backend) j.integer("netlink_batch_syncs", static_cast<int64_t>(nft_backend->stats().netlink_syncs));
  if (nft_backend && baseline) {
    // back to back, after the changes
    std::vector<double> add_ms, del_ms, add_cpu_ms;
    for (unsigned i = 0; i < baseline; ++i) {
      const std::string addr = "198.18." + std::to_string((i >> 8) & 255) + "." + std::to_string(i & 255);
      if (!baseline_commit(addr, true, &add_ms, &add_cpu_ms) || !baseline_commit(addr, false, &del_ms, nullptr)) return 2;
    }
    add_dist(j, "baseline_add", add_ms);
    j.num("baseline_add_cpu_p50_ms", median(add_cpu_ms));
    j.num("baseline_delete_p50_ms", median(del_ms));
    j.num("baseline_between_p50_ms", median(between_ms));
    j.num("baseline_between_cpu_p50_ms", median(between_cpu_ms));
  }
  printf("%s\n", j.dump().c_str());
  fflush(stdout);
  return 0;
}

}  // namespace vipd::bench
