// Thread: main (see header).
#include "bench/bench_util.h"

#include <malloc.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_hash.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_rcu_qsbr.h>
#include <rte_memory.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace vipd::bench {

Args::Args(int argc, char** argv, int first) {
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0) continue;
    a = a.substr(2);
    auto eq = a.find('=');
    if (eq != std::string::npos) {
      kv_[a.substr(0, eq)] = a.substr(eq + 1);
    } else if (i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0) {
      kv_[a] = argv[++i];
    } else {
      kv_[a] = std::string(1, '1');
    }
  }
}

std::string Args::str(const std::string& k, const std::string& def) const {
  auto it = kv_.find(k);
  return it == kv_.end() ? def : it->second;
}

uint64_t Args::num(const std::string& k, uint64_t def) const {
  auto it = kv_.find(k);
  if (it == kv_.end()) return def;
  // accept 1k / 100k / 1M suffixes
  const std::string& s = it->second;
  double v = std::strtod(s.c_str(), nullptr);
  if (!s.empty()) {
    char c = s.back();
    if (c == 'k' || c == 'K') v *= 1e3;
    if (c == 'm' || c == 'M') v *= 1e6;
  }
  return static_cast<uint64_t>(v);
}

namespace {
bool g_eal = false;

// EAL pins lcore 0 to a CPU: use CPUs this process may run on.
std::string lcore_map(unsigned n) {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
  if (cpus.empty()) cpus.push_back(0);
  std::string s;
  for (unsigned i = 0; i < n; ++i) {
    if (i) s += ",";
    s += std::to_string(i) + "@" + std::to_string(cpus[i % cpus.size()]);
  }
  return s;
}
}  // namespace

bool eal_start(const EalOptions& o, std::string* err) {
  std::vector<std::string> args{"vipd_bench", "--no-pci", "--no-telemetry", "--log-level=*:error",
                                "--file-prefix", "vipdbench" + std::to_string(getpid()),
                                "--lcores", lcore_map(o.lcores), "--vdev", "net_ring0"};
  if (o.hugepages) {
    args.insert(args.end(), {"--huge-unlink", "-m", std::to_string(o.mem_mb)});
    if (!o.huge_dir.empty()) args.insert(args.end(), {"--huge-dir", o.huge_dir});
  } else {
    args.insert(args.end(), {"--no-huge", "--no-shconf", "-m", std::to_string(o.mem_mb)});
  }
  std::vector<char*> av;
  for (auto& a : args) av.push_back(a.data());
  av.push_back(nullptr);
  if (rte_eal_init(static_cast<int>(args.size()), av.data()) < 0) {
    std::string line;
    for (auto& a : args) line += " " + a;
    *err = std::string("rte_eal_init failed: ") + rte_strerror(rte_errno) + " (args:" + line + ")";
    return false;
  }
  g_eal = true;
  return true;
}

void eal_stop() {
  if (g_eal) rte_eal_cleanup();
  g_eal = false;
}

uint64_t tsc_hz() { return rte_get_tsc_hz(); }

namespace {
int populate(const rte_memseg_list* msl, const rte_memseg* ms, size_t len, void* arg) {
  if (msl->external) return 0;
  auto* total = static_cast<size_t*>(arg);
  auto* p = static_cast<uint8_t*>(ms->addr);
  if (madvise(p, len, MADV_POPULATE_WRITE) != 0) {
    // Older kernels: touch every page, writing back what is there.
    for (size_t off = 0; off < len; off += 4096) {
      volatile uint8_t* b = p + off;
      *b = *b;
    }
  }
  *total += len;
  return 0;
}
}  // namespace

size_t prefault_dpdk_memory() {
  size_t total = 0;
  rte_memseg_contig_walk(populate, &total);
  return total;
}

bool BenchDataplane::init(const DpOptions& o, std::string* err) {
  using namespace vipd::dp;
  const int sock = 0;
  pool = rte_pktmbuf_pool_create("bench_mbufs", o.mbufs, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE, sock);
  if (!pool) {
    *err = std::string("mbuf pool: ") + rte_strerror(rte_errno);
    return false;
  }
  if (rte_eth_dev_get_port_by_name("net_ring0", &port_id) != 0) {
    *err = "no net_ring0 ethdev";
    return false;
  }
  rte_eth_conf conf{};
  int rc = rte_eth_dev_configure(port_id, 1, 1, &conf);
  if (rc == 0) rc = rte_eth_rx_queue_setup(port_id, 0, 1024, sock, nullptr, pool);
  if (rc == 0) rc = rte_eth_tx_queue_setup(port_id, 0, 1024, sock, nullptr);
  if (rc == 0) rc = rte_eth_dev_start(port_id);
  if (rc != 0) {
    *err = std::string("net_ring0 setup: ") + rte_strerror(-rc);
    return false;
  }

  // Shared, as DpdkDataplane::init builds it.
  sh.n_workers = 1;
  sh.max_services = o.max_services;
  sh.max_dests = o.max_dests;
  sh.forward = o.fnat ? Forward::kFnat : Forward::kNat;
  sh.n_local_addrs = o.fnat ? o.n_local_addrs : 0;
  for (uint32_t i = 0; i < sh.n_local_addrs; ++i) sh.local_addrs[i] = kLocalBase + i;
  sh.tsc_hz = rte_get_tsc_hz();
  sh.t_syn = 60 * sh.tsc_hz;
  const DataplaneSettings defaults;  // the daemon's timeouts
  sh.t_est = uint64_t{defaults.tcp_established_timeout_s} * sh.tsc_hz;
  sh.t_fin = uint64_t{defaults.tcp_fin_timeout_s} * sh.tsc_hz;
  sh.t_close = 10 * sh.tsc_hz;
  sh.t_udp = uint64_t{defaults.udp_timeout_s} * sh.tsc_hz;
  sh.t_dead = 60 * sh.tsc_hz;
  sh.arp_retry = sh.tsc_hz / 5;
  sh.arp_give_up = sh.tsc_hz;
  sh.idle_sleep_us = defaults.idle_sleep_us;
  sh.resteer_attempts = o.resteer_attempts;  // re-steering on by default, as in the daemon
  sh.t_resteer = uint64_t{defaults.resteer_timeout_ms} * sh.tsc_hz / 1000;

  create_vip_tables(sh, "bench_", std::max<uint32_t>(o.max_services, 64), sock);
  sh.qsbr = static_cast<rte_rcu_qsbr*>(rte_zmalloc("bench_qsbr", rte_rcu_qsbr_get_memsize(1), RTE_CACHE_LINE_SIZE));
  sh.dest_slots = static_cast<DestSlot*>(rte_zmalloc("bench_slots", sizeof(DestSlot) * o.max_dests, 64));
  constexpr uint32_t kNeigh = 8192;
  neigh_mem = rte_zmalloc("bench_neigh", NeighborTable::bytes_for(kNeigh), 64);
  if (!sh.vip_table || !sh.vip_addrs || !sh.qsbr || !sh.dest_slots || !neigh_mem) {
    *err = std::string("shared tables: ") + rte_strerror(rte_errno) + " (raise --mem)";
    return false;
  }
  rte_rcu_qsbr_init(sh.qsbr, 1);
  // Neighbours stay reachable for an hour: a benchmark must never park
  // packets on ARP. The gateway is the next hop of every endpoint.
  sh.neigh.init(neigh_mem, kNeigh, 3600 * sh.tsc_hz, 4 * 3600 * sh.tsc_hz);
  sh.neigh.update(kGateway, kGwMac, rte_rdtsc());

  PortInfo& p = sh.ports[0];
  p.port_id = port_id;
  rte_ether_addr mac{};
  rte_eth_macaddr_get(port_id, &mac);
  std::memcpy(p.mac, mac.addr_bytes, 6);
  p.ip = kPortIp;
  p.mask = 0xffffff00u;
  p.gateway = kGateway;
  sh.n_ports = 1;

  w = std::make_unique<dp::Worker>();
  w->index = 0;
  w->lcore = 1;
  w->sh = &sh;
  w->pool = pool;
  int64_t h0 = dpdk_heap_used();
  if (!w->conns.init("bench_conns", o.conn_capacity, sock, err, sh.local_addrs, sh.n_local_addrs)) return false;
  if (!w->syn.init("bench_syn", defaults.resteer_pool, sock, err)) return false;
  conn_table_bytes = dpdk_heap_used() - h0;
  h0 = dpdk_heap_used();
  w->sched = static_cast<SchedState*>(rte_zmalloc("bench_sched", sizeof(SchedState) * o.max_services, 64));
  w->dest_counters = static_cast<DestCounters*>(rte_zmalloc("bench_dctr", sizeof(DestCounters) * o.max_dests, 64));
  if (!w->sched || !w->dest_counters) {
    *err = "worker state: out of memory (raise --mem)";
    return false;
  }
  sh.dest_counters[0] = w->dest_counters;
  if (o.fnat && o.rss_queues > 1) {
    uint16_t reta[128];
    for (uint32_t e = 0; e < 128; ++e) reta[e] = static_cast<uint16_t>(e % o.rss_queues);
    if (!rss_steer_init(sh.rss, kRssKey, 40, reta, 128, o.rss_queues, true, true)) {
      *err = "rss steering: bad queue count";
      return false;
    }
  }
  for (uint32_t a = 0; a < sh.n_local_addrs; ++a) {
    if (!fnat_pool_init(w->fnat[a], &sh.rss, 0, 1, sh.local_addrs[a], "bench_fnat")) {
      *err = "fnat pools: out of memory";
      return false;
    }
  }
  worker_state_bytes = dpdk_heap_used() - h0;
  pub = std::make_unique<dp::Publisher>(sh);
  return true;
}

BenchDataplane::~BenchDataplane() {
  // Objects live until rte_eal_cleanup; only stop the port.
  if (pool) rte_eth_dev_stop(port_id);
}

bool start_cp_dataplane(const Args& a, uint32_t services, uint32_t eps, bool running, BenchDataplane* d) {
  EalOptions eo;
  eo.hugepages = a.flag("hugepages") || a.flag("huge-dir");
  eo.huge_dir = a.str("huge-dir", "");
  eo.mem_mb = static_cast<unsigned>(a.num("mem", 1024));
  eo.lcores = running ? 2 : 1;
  std::string err;
  if (!eal_start(eo, &err)) {
    fprintf(stderr, "vipd_bench: %s\n", err.c_str());
    return false;
  }
  DpOptions o;  // the daemon's defaults (model/dataplane_settings.h)
  o.max_services = std::max<uint32_t>(o.max_services, services);
  o.max_dests = std::max<uint32_t>(o.max_dests, services * eps + 1024);
  o.conn_capacity = 4096;
  o.n_local_addrs = 1;
  if (!d->init(o, &err)) {
    fprintf(stderr, "vipd_bench: %s\n", err.c_str());
    return false;
  }
  if (running) {
    if (rte_eal_remote_launch(dp::worker_main, d->w.get(), rte_get_next_lcore(-1, 1, 0)) != 0) {
      fprintf(stderr, "vipd_bench: cannot launch the worker lcore\n");
      return false;
    }
    // Wait until the worker is online (its first quiescent state).
    while (rte_rcu_qsbr_check(d->sh.qsbr, rte_rcu_qsbr_start(d->sh.qsbr), false) == 0) rte_pause();
  } else {
    rte_rcu_qsbr_thread_register(d->sh.qsbr, 0);  // registered, never online
  }
  return true;
}

void stop_cp_dataplane(BenchDataplane* d, bool running) {
  if (!running) return;
  d->sh.stop.store(true);
  rte_eal_mp_wait_lcore();
}

cp::ServiceTable make_table(uint32_t n, uint32_t b, cp::Protocol proto) {
  cp::ServiceTable t;
  t.generation = 1;
  uint32_t ep = 0;
  for (uint32_t i = 0; i < n; ++i) {
    cp::VirtualService v;
    v.key.vip = kVipBase + i;
    v.key.port = kVipPort;
    v.key.protocol = proto;
    v.name = "bench/svc-" + std::to_string(i);
    v.scheduler = cp::Scheduler::kRr;
    for (uint32_t j = 0; j < b; ++j) {
      cp::RealServer r;
      r.ip = kDestBase + ep++;
      r.port = kDestPort;
      r.weight = 1;
      v.backends.push_back(r);
    }
    t.services.emplace(v.key, std::move(v));
  }
  return t;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double rank = p / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (rank - static_cast<double>(lo));
}

double median(std::vector<double> v) { return percentile(std::move(v), 50); }

int64_t dpdk_heap_used() {
  rte_malloc_socket_stats st{};
  if (rte_malloc_get_socket_stats(0, &st) != 0) return 0;
  return static_cast<int64_t>(st.heap_allocsz_bytes);
}

int64_t libc_heap_used() {
  struct mallinfo2 mi = mallinfo2();
  return static_cast<int64_t>(mi.uordblks + mi.hblkhd);
}

int64_t rss_kb(const char* field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const size_t n = std::strlen(field);
  while (std::getline(f, line))
    if (line.compare(0, n, field) == 0) return std::strtoll(line.c_str() + n, nullptr, 10);
  return -1;
}

void Json::key(const std::string& k) {
  if (!body_.empty()) body_ += ",";
  body_ += "\"" + k + "\":";
}

Json& Json::num(const std::string& k, double v) {
  key(k);
  char b[64];
  if (std::isfinite(v)) {
    snprintf(b, sizeof b, "%.6g", v);
  } else {
    snprintf(b, sizeof b, "null");
  }
  body_ += b;
  return *this;
}

Json& Json::integer(const std::string& k, int64_t v) {
  key(k);
  body_ += std::to_string(v);
  return *this;
}

Json& Json::str(const std::string& k, const std::string& v) {
  key(k);
  body_ += "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') body_ += '\\';
    body_ += c;
  }
  body_ += "\"";
  return *this;
}

Json& Json::raw(const std::string& k, const std::string& json) {
  key(k);
  body_ += json;
  return *this;
}

}  // namespace vipd::bench
