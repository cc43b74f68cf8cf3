// Thread: test main thread (the servers' threads read it; the tests do not
// change it while a server runs, except under mu).
// A StatsSource with hand-set snapshots for the metrics and health tests.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "observability/stats_source.h"

namespace vipd::cp::testing {

inline Ipv4 ip(const char* s) { return *parse_ipv4(s); }

class FakeStats : public StatsSource {
 public:
  std::vector<dp::WorkerSnapshot> workers() const override {
    std::lock_guard<std::mutex> g(mu);
    return workers_;
  }
  std::vector<dp::PortSnapshot> ports() const override { return ports_; }
  dp::DestSnapshot dest(const ServiceKey& k, const IpAddr& a, uint16_t p) const override {
    std::lock_guard<std::mutex> g(mu);
    ++dest_calls;
    auto it = dests_.find({k, a, p});
    return it == dests_.end() ? dp::DestSnapshot{} : it->second;
  }
  uint32_t neighbor_entries() const override { return 3; }
  std::shared_ptr<const ServiceTable> table() const override {
    std::lock_guard<std::mutex> g(mu);
    return table_;
  }
  SyncStatus sync_status() const override {
    std::lock_guard<std::mutex> g(mu);
    return status_;
  }

  // Test setup.
  void set_table(ServiceTable t) {
    std::lock_guard<std::mutex> g(mu);
    table_ = std::make_shared<const ServiceTable>(std::move(t));
  }
  // a: an IPv4 or IPv6 address.
  void set_dest(const ServiceKey& k, const char* a, uint16_t p, dp::DestSnapshot d) {
    std::lock_guard<std::mutex> g(mu);
    dests_[{k, *IpAddr::parse(a), p}] = d;
  }

  mutable std::mutex mu;
  mutable size_t dest_calls = 0;
  std::vector<dp::WorkerSnapshot> workers_;
  std::vector<dp::PortSnapshot> ports_;
  std::map<std::tuple<ServiceKey, IpAddr, uint16_t>, dp::DestSnapshot> dests_;
  std::shared_ptr<const ServiceTable> table_;
  SyncStatus status_;
};

// Two workers, one port, and the seed table: default/db:http with four
// backends, kube-system/dns:dns (UDP) with one, default/empty:http with none.
inline ServiceKey db_key() { return {ip("10.96.0.100"), 8080, Protocol::kTcp}; }
inline ServiceKey dns_key() { return {ip("10.96.0.10"), 53, Protocol::kUdp}; }
inline ServiceKey empty_key() { return {ip("10.96.0.101"), 80, Protocol::kTcp}; }

inline ServiceTable seed_table(bool with_pod4 = true) {
  ServiceTable t;
  t.generation = 3;
  VirtualService db;
  db.key = db_key();
  db.name = "default/db:http";
  for (const char* a : {"10.244.1.15", "10.244.2.88", "10.244.3.12", "10.244.3.44"}) {
    if (!with_pod4 && std::string(a) == "10.244.3.44") continue;
    db.backends.push_back({ip(a), 8080, 1, false});
  }
  VirtualService dns;
  dns.key = dns_key();
  dns.name = "kube-system/dns:dns";
  dns.backends.push_back({ip("10.244.1.15"), 9053, 0, true});
  VirtualService empty;
  empty.key = empty_key();
  empty.name = "default/empty:http";
  t.services[db.key] = db;
  t.services[dns.key] = dns;
  t.services[empty.key] = empty;
  return t;
}

inline void fill_seed(FakeStats& f) {
  f.set_table(seed_table());
  uint64_t n = 10;
  for (const char* a : {"10.244.1.15", "10.244.2.88", "10.244.3.12", "10.244.3.44"}) {
    f.set_dest(db_key(), a, 8080, dp::DestSnapshot{n, 5 * n, 4 * n, 500 * n, 4000 * n, 2, 1});
    n += 10;
  }
  // Ejected twice, out now (outlier ejection series).
  f.set_dest(dns_key(), "10.244.1.15", 9053, dp::DestSnapshot{7, 7, 7, 700, 900, 0, 3, 2, true});
  for (unsigned lcore : {1u, 2u}) {
    dp::WorkerSnapshot w;
    w.lcore = lcore;
    w.rx = 1000 * lcore;
    w.tx = 990 * lcore;
    w.drops = 10;
    w.new_flows = 50;
    w.active_flows = 20;
    w.redirects_out = 3;
    w.redirects_in = 4;
    w.polls = 100000;
    w.busy_polls = 250;
    w.conn_entries = 20;
    w.conn_capacity = 262144;
    w.drop_reasons = {{"no_service", 6}, {"ip_fragment", 4}, {"truncated", 0}};
    f.workers_.push_back(w);
  }
  dp::PortSnapshot p;
  p.device = "net_af_packet0,iface=c0";
  p.port_id = 0;
  p.ipackets = 5000;
  p.exception_ifname = "vipd-0";  // --exception-path tap
  p.exc_to_kernel = 7;
  p.exc_from_kernel = 8;
  p.exc_rate_limited = 9;
  f.ports_.push_back(p);
  f.status_.generation = 3;
  f.status_.syncs = 4;
  f.status_.sync_errors = 1;
  f.status_.last_sync_unix_ns = 1'700'000'000'000'000'000;
}

}  // namespace vipd::cp::testing
