// Thread: main (control), plus worker_main on lcore 1 (QSBR reports).
//
// Benchmark 2 (docs/benchmarks.md, section 2), end to end through the code vipd runs:
//
//   vipd_bench sync   Kubernetes objects (Service + EndpointSlice structs, as the
//                     reflectors hold them) -> kube::DeltaBuilder (TableIndex) ->
//                     SyncLoop::sync_now -> Backend -> Publisher::apply, which
//                     returns after rte_rcu_qsbr_synchronize with the worker
//                     running (--worker running, the default): the change is
//                     then in force. --worker offline: a registered, offline
//                     QSBR thread, so the figures are the control plane's CPU
//                     path without waiting for a descheduled worker. Measured:
//                       initial  the first sync of S services x E endpoints
//                       change   one endpoint of one random EndpointSlice
//                                replaced (a pod replaced), from handing the
//                                object to the source to sync_now returning;
//                                p50/p90/p99/max over --changes
//                     Baseline in the same run: the same change applied by the
//                     whole-table path vipd used before (build_service_table over
//                     every object + TableDiff::compute), for --baseline-changes.
//                     What is left out: HTTP and JSON decoding of the one watch
//                     event (see `decode`, per object), and the reflector's lock.
//
//   vipd_bench decode A list of EndpointSlices as the API server sends it
//                     (~--mb MB of JSON), decoded exactly as Reflector::list
//                     decodes a page: simdjson parse, key, decode_endpoint_slice
//                     per item. Baseline: the simdjson parse alone.
#include <rte_cycles.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_rcu_qsbr.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "common/log.h"
#include "controlplane/kube/kube_source.h"
#include "controlplane/kube/watch_decoder.h"
#include "controlplane/sync/sync_loop.h"

namespace vipd::bench {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double us_between(uint64_t t0, uint64_t t1) {
  return static_cast<double>(t1 - t0) * 1e6 / static_cast<double>(tsc_hz());
}

void add_dist(Json& j, const std::string& name, const std::vector<double>& v) {
  j.num(name + "_p50_us", percentile(v, 50));
  j.num(name + "_p90_us", percentile(v, 90));
  j.num(name + "_p99_us", percentile(v, 99));
  j.num(name + "_max_us", v.empty() ? 0 : *std::max_element(v.begin(), v.end()));
}

std::string ip_text(uint32_t a) { return cp::ipv4_to_string(a); }

cp::k8s::Service make_service(uint32_t i) {
  cp::k8s::Service s;
  s.meta.namespace_ = "bench";
  s.meta.name = "svc-" + std::to_string(i);
  s.cluster_ip = ip_text(kVipBase + i);
  s.cluster_ips = {s.cluster_ip};
  s.ports = {{"http", "TCP", kVipPort, 0}};
  return s;
}

cp::k8s::EndpointSlice make_slice(uint32_t i, uint32_t eps, uint32_t* next_ip) {
  cp::k8s::EndpointSlice e;
  e.meta.namespace_ = "bench";
  e.meta.name = "svc-" + std::to_string(i) + "-abcde";
  e.meta.labels[cp::k8s::kServiceNameLabel] = "svc-" + std::to_string(i);
  e.address_type = "IPv4";
  for (uint32_t k = 0; k < eps; ++k) {
    cp::k8s::Endpoint ep;
    ep.addresses = {ip_text((*next_ip)++)};
    ep.node_name = "node-" + std::to_string(k % 8);
    e.endpoints.push_back(ep);
  }
  e.ports = {cp::k8s::EndpointPort{"http", "TCP", kDestPort}};
  return e;
}

std::string key_of(const cp::k8s::ObjectMeta& m) { return m.namespace_ + "/" + m.name; }

// The source the SyncLoop sees: KubeSource minus the reflector threads.
class BenchSource : public cp::Source {
 public:
  explicit BenchSource(cp::k8s::BuildOptions o) : delta_(std::move(o)) {}
  cp::LoadResult load() override {
    cp::LoadResult r = delta_.load(std::move(pending_), first_ ? &none_ : nullptr, first_ ? &none_ : nullptr);
    first_ = false;
    pending_ = {};
    return r;
  }
  bool wait(int) override { return false; }
  std::string describe() const override { return "bench objects"; }
  cp::kube::ObjectChanges& pending() { return pending_; }

 private:
  cp::kube::DeltaBuilder delta_;
  cp::kube::ObjectChanges pending_;
  std::vector<cp::SourceError> none_;
  bool first_ = true;
};

class PublisherBackend : public cp::Backend {
 public:
  explicit PublisherBackend(dp::Publisher& p) : p_(p) {}
  const char* name() const override { return "dpdk"; }
  bool apply(const cp::ServiceTable& next, const cp::TableDiff& diff, bool full, std::string* error) override {
    return p_.apply(next, diff, full, error);
  }

 private:
  dp::Publisher& p_;
};

}  // namespace

int run_sync(const Args& a) {
  const uint32_t services = static_cast<uint32_t>(a.num("services", 10000));
  const uint32_t eps = static_cast<uint32_t>(a.num("endpoints", 10));
  const unsigned changes = static_cast<unsigned>(a.num("changes", 1000));
  const unsigned base_changes = static_cast<unsigned>(a.num("baseline-changes", 20));
  const bool running = a.str("worker", "running") == "running";
  set_log_level(LogSeverity::kWarn);  // one info line per sync would be timed too

  BenchDataplane d;
  if (!start_cp_dataplane(a, services, eps, running, &d)) return 2;
  std::string err;

  Json j;
  j.str("bench", "sync").integer("services", services).integer("endpoints_per_service", eps);
  j.integer("changes", changes).str("worker", running ? "running" : "offline");

  cp::k8s::BuildOptions bo;
  bo.node_name = "node-0";
  BenchSource src(bo);
  PublisherBackend backend(*d.pub);
  cp::SyncOptions so;
  so.full_resync_s = 0;
  cp::SyncLoop loop(src, backend, so);

  std::vector<cp::k8s::Service> svcs;
  std::vector<cp::k8s::EndpointSlice> slices;
  uint32_t next_ip = kDestBase;
  for (uint32_t i = 0; i < services; ++i) {
    svcs.push_back(make_service(i));
    slices.push_back(make_slice(i, eps, &next_ip));
  }
  for (const auto& s : svcs) src.pending().services[key_of(s.meta)] = s;
  for (const auto& e : slices) src.pending().slices[key_of(e.meta)] = e;
  {
    const uint64_t t0 = rte_rdtsc();
    if (!loop.sync_now() || loop.status().generation != 1) {
      fprintf(stderr, "vipd_bench: initial sync failed: %s\n", loop.status().last_error.c_str());
      return 2;
    }
    j.num("initial_sync_ms", us_between(t0, rte_rdtsc()) / 1e3);
  }
  if (d.pub->services() != services) {
    fprintf(stderr, "vipd_bench: %zu services published, expected %u\n", d.pub->services(), services);
    return 2;
  }

  Rng rng(4242);
  auto mutate = [&](uint32_t* which) {
    const uint32_t i = rng.below(services);
    slices[i].endpoints[rng.below(eps)].addresses = {ip_text(next_ip++)};
    *which = i;
  };
  std::vector<double> total;
  for (unsigned c = 0; c < changes; ++c) {
    uint32_t i = 0;
    mutate(&i);
    const uint64_t before = loop.status().generation;
    const uint64_t t0 = rte_rdtsc();
    src.pending().slices[key_of(slices[i].meta)] = slices[i];
    const bool ok = loop.sync_now();
    const uint64_t t1 = rte_rdtsc();
    if (!ok || loop.status().generation != before + 1) {
      fprintf(stderr, "vipd_bench: change %u was not applied\n", c);
      return 2;
    }
    total.push_back(us_between(t0, t1));
  }
  add_dist(j, "change", total);

  // Baseline: the whole-table path (every object rebuilt, whole-table diff).
  std::vector<double> base;
  cp::ServiceTable prev = cp::k8s::build_service_table(svcs, slices, bo).table;
  for (unsigned c = 0; c < base_changes; ++c) {
    uint32_t i = 0;
    mutate(&i);
    const uint64_t t0 = rte_rdtsc();
    cp::ServiceTable next = cp::k8s::build_service_table(svcs, slices, bo).table;
    const cp::TableDiff diff = cp::TableDiff::compute(prev, next);
    const bool ok = diff.changed.size() == 1 && d.pub->apply(next, diff, false, &err);
    const uint64_t t1 = rte_rdtsc();
    if (!ok) {
      fprintf(stderr, "vipd_bench: baseline change %u failed %s\n", c, err.c_str());
      return 2;
    }
    base.push_back(us_between(t0, t1));
    prev = std::move(next);
  }
  j.integer("baseline_changes", base_changes);
  add_dist(j, "baseline_change", base);
  j.num("speedup_p50", percentile(base, 50) / std::max(1e-9, percentile(total, 50)));

  // A reader asking for the table (admin API, scrape) pays one copy per generation.
  {
    const uint64_t t0 = rte_rdtsc();
    auto t = loop.table();
    j.num("table_snapshot_ms", us_between(t0, rte_rdtsc()) / 1e3);
    if (!t || t->services.size() != services) return 2;
  }

  stop_cp_dataplane(&d, running);
  printf("%s\n", j.dump().c_str());
  fflush(stdout);
  return 0;
}

int run_decode(const Args& a) {
  const double mb = static_cast<double>(a.num("mb", 50));
  const uint32_t eps = static_cast<uint32_t>(a.num("endpoints", 10));
  const unsigned reps = static_cast<unsigned>(a.num("reps", 3));
  // One list body of EndpointSlices in the API server's JSON form.
  std::string body = R"({"kind":"EndpointSliceList","apiVersion":"discovery.k8s.io/v1","metadata":{"resourceVersion":"12345"},"items":[)";
  uint32_t n = 0, ip = kDestBase;
  while (body.size() < mb * 1e6) {
    if (n) body += ",";
    body += R"({"metadata":{"name":"svc-)" + std::to_string(n) + R"(-abcde","namespace":"bench","uid":"0b7c2f3e-0000-4000-8000-)" +
            std::to_string(100000000000 + n) + R"(","resourceVersion":")" + std::to_string(1000 + n) +
            R"(","labels":{"kubernetes.io/service-name":"svc-)" + std::to_string(n) +
            R"(","endpointslice.kubernetes.io/managed-by":"endpointslice-controller.k8s.io"}},"addressType":"IPv4","endpoints":[)";
    for (uint32_t k = 0; k < eps; ++k) {
      ++ip;
      body += std::string(k ? "," : "") + R"({"addresses":[")" + ip_text(ip) +
              R"("],"conditions":{"ready":true,"serving":true,"terminating":false},"nodeName":"node-)" +
              std::to_string(k % 8) + R"(","zone":"zone-a","targetRef":{"kind":"Pod","namespace":"bench","name":"pod-)" +
              std::to_string(ip) + R"("}})";
    }
    body += R"(],"ports":[{"name":"http","protocol":"TCP","port":8080}]})";
    ++n;
  }
  body += "]}";
  Json j;
  j.str("bench", "decode").integer("bytes", static_cast<int64_t>(body.size())).integer("slices", n);
  j.integer("endpoints_per_slice", eps);
  j.str("simdjson_implementation", simdjson::get_active_implementation()->name());

  simdjson::dom::parser parser;
  std::vector<double> parse_s, decode_s;
  size_t decoded = 0;
  for (unsigned r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    simdjson::dom::element doc;
    if (parser.parse(body).get(doc)) return 2;
    simdjson::dom::array items;
    if (doc["items"].get(items)) return 2;
    size_t count = 0;
    for (simdjson::dom::element it : items) count += it.is_object();
    parse_s.push_back(seconds_since(t0));
    if (count != n) return 2;

    t0 = std::chrono::steady_clock::now();
    simdjson::dom::element doc2;
    if (parser.parse(body).get(doc2)) return 2;
    simdjson::dom::array items2;
    if (doc2["items"].get(items2)) return 2;
    decoded = 0;
    for (simdjson::dom::element it : items2) {
      const std::string key = cp::kube::key_of(it);
      std::string why;
      auto v = cp::kube::decode_endpoint_slice(it, &why);
      if (!v || key.empty()) {
        fprintf(stderr, "vipd_bench: decode failed: %s\n", why.c_str());
        return 2;
      }
      decoded += v->endpoints.size();
    }
    decode_s.push_back(seconds_since(t0));
  }
  if (decoded != static_cast<size_t>(n) * eps) return 2;
  const double mbytes = static_cast<double>(body.size()) / 1e6;
  j.num("parse_only_s", median(parse_s)).num("decode_s", median(decode_s));
  j.num("parse_only_mb_s", mbytes / median(parse_s)).num("decode_mb_s", mbytes / median(decode_s));
  j.num("decode_vs_parse", median(decode_s) / median(parse_s));
  j.integer("rss_kb", rss_kb());
  printf("%s\n", j.dump().c_str());
  fflush(stdout);
  return 0;
}

}  // namespace vipd::bench
