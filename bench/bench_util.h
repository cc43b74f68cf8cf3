// Thread: the benchmark's main thread (and, for `cp`, one worker lcore).
// Helpers shared by the vipd_bench subcommands: EAL start-up, a fast-path
// Shared/Worker set up the way DpdkDataplane::init does (but with sizes and a
// pre-seeded neighbour that a benchmark needs), synthetic ServiceTables,
// statistics, memory probes and a tiny JSON writer.
//
// Safety: everything stays in-process. The only port is the net_ring0 vdev
// (an rte_ring looped back onto itself); no packet leaves the process.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/dataplane_settings.h"
#include "model/service_table.h"
#include "dataplane/fastpath/worker.h"
#include "dataplane/publish/publisher.h"

struct rte_mempool;

namespace vipd::bench {

// ---- command line -------------------------------------------------------
class Args {
 public:
  Args(int argc, char** argv, int first);
  std::string str(const std::string& k, const std::string& def) const;
  uint64_t num(const std::string& k, uint64_t def) const;
  bool flag(const std::string& k) const { return kv_.count(k) != 0; }

 private:
  std::map<std::string, std::string> kv_;
};

// ---- EAL ----------------------------------------------------------------
struct EalOptions {
  bool hugepages = false;   // false: --no-huge (anonymous memory)
  std::string huge_dir;     // hugetlbfs mount (with hugepages)
  unsigned mem_mb = 1024;   // -m (no-huge) or --socket-mem (hugepages)
  unsigned lcores = 1;      // 1 or 2 (main + one worker lcore)
};
// Starts EAL with one net_ring0 vdev (loopback) and no PCI. False + *err.
bool eal_start(const EalOptions& o, std::string* err);
void eal_stop();
// Faults in every page of DPDK's memory (--no-huge memory is otherwise
// faulted on first touch, which a benchmark would time). Returns bytes.
size_t prefault_dpdk_memory();

// ---- fast-path objects --------------------------------------------------
// The sizes start at the daemon's defaults (model/dataplane_settings.h).
struct DpOptions {
  uint32_t max_services = DataplaneSettings{}.max_services;
  uint32_t max_dests = DataplaneSettings{}.max_dests;
  uint32_t conn_capacity = DataplaneSettings{}.conn_table_size;  // per worker
  bool fnat = true;
  uint32_t n_local_addrs = 16;      // fnat: 16 x 64512 ports per worker
  uint32_t mbufs = DataplaneSettings{}.mbuf_count;
  uint32_t resteer_attempts = DataplaneSettings{}.resteer_attempts;  // 0: re-steering off
  // fnat: > 1 turns RSS steering on (dataplane/fastpath/rss_steer.h) as for
  // worker 0 of this many queues (a 128-entry round-robin redirection table,
  // vipd's key); the bench still runs one worker.
  uint32_t rss_queues = 0;
};

// How benchmark 1 (pipeline) sizes the tables for `flows` established flows
// and services x backends destinations; memfloor sizes its regions the same.
// Connections: the daemon's default table (262144 per worker), or room for
// the flows plus the new-connection rounds.
inline uint64_t pipeline_conn_capacity(uint64_t flows) {
  return std::max<uint64_t>(DataplaneSettings{}.conn_table_size, flows + flows / 4);
}
inline uint64_t pipeline_dests(uint64_t services, uint64_t backends) {
  return std::max<uint64_t>(DataplaneSettings{}.max_dests, services * backends);
}
// Full-NAT local addresses (16 x 64512 ports, and a port index of 4 MiB).
constexpr uint32_t kPipelineLocalAddrs = 16;

// Addresses of the synthetic topology (host order).
constexpr uint32_t ip4(uint32_t a, uint32_t b, uint32_t c, uint32_t d) { return a << 24 | b << 16 | c << 8 | d; }
constexpr uint32_t kPortIp = ip4(10, 0, 0, 1);       // port 0, /24
constexpr uint32_t kGateway = ip4(10, 0, 0, 254);    // next hop for everything else
constexpr uint32_t kLocalBase = ip4(10, 0, 0, 100);  // fnat local addresses .100...
constexpr uint32_t kVipBase = ip4(10, 96, 0, 0);     // service i: kVipBase + i, port 80
constexpr uint32_t kDestBase = ip4(10, 128, 0, 0);   // endpoint k: kDestBase + k, port 8080
constexpr uint32_t kClientBase = ip4(172, 16, 0, 0); // established clients
constexpr uint32_t kNewClientBase = ip4(172, 24, 0, 0);  // new-connection clients
constexpr uint16_t kVipPort = 80, kDestPort = 8080;
constexpr uint8_t kGwMac[6] = {0x02, 0x00, 0x00, 0x00, 0x0f, 0xfe};
constexpr uint8_t kPeerMac[6] = {0x02, 0x00, 0x00, 0x00, 0x0c, 0x01};

// Shared + one Worker (index 0) + Publisher, one port (net_ring0, queue 0).
struct BenchDataplane {
  dp::Shared sh;
  std::unique_ptr<dp::Worker> w;
  std::unique_ptr<dp::Publisher> pub;
  rte_mempool* pool = nullptr;
  uint16_t port_id = 0;
  void* neigh_mem = nullptr;
  int64_t conn_table_bytes = 0;   // DPDK heap bytes taken by ConnTable::init
  int64_t worker_state_bytes = 0; // sched state + dest counters + fnat pools

  bool init(const DpOptions& o, std::string* err);
  ~BenchDataplane();
};

// The control-plane benchmarks' set-up (cp, sync): EAL (--hugepages /
// --huge-dir, --mem), `d` sized for `services` x `eps` (the daemon's defaults
// at least), and either the real worker polling on the second lcore (running;
// the QSBR waits for it) or a registered, offline QSBR thread (the control
// plane's CPU path alone). Prints why and returns false on failure.
bool start_cp_dataplane(const Args& a, uint32_t services, uint32_t eps, bool running, BenchDataplane* d);
// Stops the worker started by start_cp_dataplane (running).
void stop_cp_dataplane(BenchDataplane* d, bool running);

// ---- synthetic service tables -------------------------------------------
// n services (VIP kVipBase+i, port 80, proto), b endpoints each (unique
// addresses from kDestBase), scheduler rr.
cp::ServiceTable make_table(uint32_t n, uint32_t b, cp::Protocol proto);

// ---- statistics ---------------------------------------------------------
double percentile(std::vector<double> v, double p);  // p in [0,100]
double median(std::vector<double> v);

// ---- memory -------------------------------------------------------------
int64_t dpdk_heap_used();     // bytes allocated from rte_malloc heaps (socket 0)
int64_t libc_heap_used();     // mallinfo2().uordblks + hblkhd
int64_t rss_kb(const char* field = "VmRSS:");  // from /proc/self/status

// ---- JSON output --------------------------------------------------------
// Accumulates "key": value pairs of one flat object, printed as one line.
class Json {
 public:
  Json& num(const std::string& k, double v);
  Json& integer(const std::string& k, int64_t v);
  Json& str(const std::string& k, const std::string& v);
  Json& raw(const std::string& k, const std::string& json);
  std::string dump() const { return "{" + body_ + "}"; }

 private:
  void key(const std::string& k);
  std::string body_;
};

uint64_t tsc_hz();

// xorshift64*: a fast deterministic generator for flow selection.
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed ? seed : 0x9e3779b97f4a7c15ull) {}
  uint64_t next() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 0x2545f4914f6cdd1dull;
  }
  uint32_t below(uint32_t n) { return static_cast<uint32_t>((next() >> 32) * n >> 32); }
};

}  // namespace vipd::bench
