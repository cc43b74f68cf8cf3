// Thread: test main thread.
// MetricsCollector: metric names follow the Prometheus conventions, every
// family has exactly its documented label set, values are the summed
// snapshots, the cardinality options work, and (where promtool is installed)
// `promtool check metrics` has nothing to say about a scrape.
#include "observability/collector.h"

#include <gtest/gtest.h>
#include <prometheus/text_serializer.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "common/text.h"
#include "tests/unit/metrics/fake_stats.h"

namespace vipd::cp {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;
using testing::FakeStats;

std::vector<std::string> split_labels(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string x; std::getline(in, x, ',');)
    if (!x.empty()) out.push_back(x);
  return out;
}

const FamilyInfo* info(const std::string& name) {
  for (const auto& f : metric_families())
    if (name == f.name) return &f;
  return nullptr;
}

const MetricFamily* find(const std::vector<MetricFamily>& fams, const std::string& name) {
  for (const auto& f : fams)
    if (f.name == name) return &f;
  return nullptr;
}

std::string label(const ClientMetric& m, const std::string& name) {
  for (const auto& l : m.label)
    if (l.name == name) return l.value;
  return "<none>";
}

// Value of the one sample of `name` whose labels include all of `want`.
double value(const std::vector<MetricFamily>& fams, const std::string& name,
             const std::map<std::string, std::string>& want = {}) {
  const MetricFamily* f = find(fams, name);
  if (!f) {
    ADD_FAILURE() << "no family " << name;
    return -1;
  }
  const ClientMetric* hit = nullptr;
  for (const auto& m : f->metric) {
    bool ok = true;
    for (const auto& [k, v] : want) ok = ok && label(m, k) == v;
    if (!ok) continue;
    if (hit) ADD_FAILURE() << name << ": more than one sample matches";
    hit = &m;
  }
  if (!hit) {
    ADD_FAILURE() << name << ": no sample matches";
    return -1;
  }
  return f->type == MetricType::Counter ? hit->counter.value : hit->gauge.value;
}

// Labels plus one more.
std::map<std::string, std::string> with(std::map<std::string, std::string> m, const std::string& k,
                                        const std::string& v) {
  m[k] = v;
  return m;
}

size_t samples(const std::vector<MetricFamily>& fams, const std::string& name) {
  const MetricFamily* f = find(fams, name);
  return f ? f->metric.size() : 0;
}

std::string serialize(const std::vector<MetricFamily>& fams) {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, fams);
  return out.str();
}

class CollectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::fill_seed(stats_);
    sync_.observe(SyncEvent{true, true, 1, 0.002, 0.003});
    sync_.observe(SyncEvent{false, true, 2, 0.5, -1});
  }
  std::vector<MetricFamily> collect(CollectorOptions o = {}) {
    o.start_time_unix_ns = 1'700'000'000'000'000'000;
    MetricsCollector c(stats_, &sync_, o);
    return c.Collect();
  }
  FakeStats stats_;
  SyncMetrics sync_;
};

TEST(MetricFamilies, NamesFollowPrometheusConventions) {
  const std::regex name_re("^vipd_[a-z][a-z0-9_]*$");
  const std::regex label_re("^[a-z][a-z0-9_]*$");
  std::set<std::string> seen;
  for (const auto& f : metric_families()) {
    const std::string n = f.name;
    SCOPED_TRACE(n);
    EXPECT_TRUE(std::regex_match(n, name_re));
    EXPECT_TRUE(seen.insert(n).second) << "duplicate family";
    const std::string type = f.type;
    auto ends = [&](const std::string& suf) {
      return n.size() > suf.size() && n.compare(n.size() - suf.size(), suf.size(), suf) == 0;
    };
    if (type == "counter") {
      EXPECT_TRUE(ends("_total"));
    } else {
      EXPECT_FALSE(ends("_total"));
    }
    if (type == "histogram") {
      EXPECT_TRUE(ends("_seconds"));
    }
    for (const char* bad : {"_count", "_sum", "_bucket"}) EXPECT_FALSE(ends(bad));
    // Base units only.
    for (const char* unit : {"milli", "micro", "nano", "_ms", "_us", "_ns", "minutes", "hours", "kilo", "mega"})
      EXPECT_EQ(n.find(unit), std::string::npos) << unit;
    EXPECT_FALSE(std::string(f.help).empty());
    for (const auto& l : split_labels(f.labels)) {
      EXPECT_TRUE(std::regex_match(l, label_re)) << l;
      EXPECT_NE(l, "le");
      EXPECT_NE(l.rfind("__", 0), 0u);
    }
  }
}

TEST_F(CollectorTest, EveryFamilyPresentWithItsDocumentedLabels) {
  const auto fams = collect();
  std::set<std::string> got;
  for (const auto& f : fams) {
    SCOPED_TRACE(f.name);
    got.insert(f.name);
    const FamilyInfo* fi = info(f.name);
    ASSERT_NE(fi, nullptr) << "undocumented family";
    const std::string t = fi->type;
    EXPECT_EQ(f.type, t == "counter" ? MetricType::Counter
                      : t == "gauge" ? MetricType::Gauge
                                     : MetricType::Histogram);
    EXPECT_EQ(f.help, fi->help);
    const auto want = split_labels(fi->labels);
    std::set<std::vector<std::string>> distinct;
    for (const auto& m : f.metric) {
      std::vector<std::string> names, values;
      for (const auto& l : m.label) {
        names.push_back(l.name);
        values.push_back(l.value);
      }
      EXPECT_EQ(names, want);
      EXPECT_TRUE(distinct.insert(values).second) << "duplicate label set";
    }
  }
  for (const auto& f : metric_families()) EXPECT_TRUE(got.count(f.name)) << f.name << " missing";
}

TEST_F(CollectorTest, ValuesAreTheSnapshots) {
  const auto fams = collect();
  const std::map<std::string, std::string> db = {
      {"service", "default/db:http"}, {"protocol", "TCP"}, {"vip", "10.96.0.100:8080"}};
  EXPECT_EQ(value(fams, "vipd_service_connections_total", db), 100);
  EXPECT_EQ(value(fams, "vipd_service_packets_total", with(db, "direction", "in")), 500);
  EXPECT_EQ(value(fams, "vipd_service_packets_total", with(db, "direction", "out")), 400);
  EXPECT_EQ(value(fams, "vipd_service_bytes_total", with(db, "direction", "out")), 400000);
  EXPECT_EQ(value(fams, "vipd_service_active_connections", db), 8);
  EXPECT_EQ(value(fams, "vipd_service_inactive_connections", db), 4);
  EXPECT_EQ(value(fams, "vipd_service_backends", db), 4);
  const auto b2 = with(db, "backend", "10.244.2.88:8080");
  EXPECT_EQ(value(fams, "vipd_backend_connections_total", b2), 20);
  EXPECT_EQ(value(fams, "vipd_backend_packets_total", with(b2, "direction", "in")), 100);
  EXPECT_EQ(value(fams, "vipd_backend_bytes_total", with(b2, "direction", "in")), 10000);
  EXPECT_EQ(value(fams, "vipd_backend_weight", b2), 1);
  EXPECT_EQ(value(fams, "vipd_backend_weight", {{"backend", "10.244.1.15:9053"}}), 0);
  EXPECT_EQ(value(fams, "vipd_service_backends", {{"service", "default/empty:http"}}), 0);
  EXPECT_EQ(value(fams, "vipd_service_connections_total", {{"service", "kube-system/dns:dns"}}), 7);
  EXPECT_EQ(value(fams, "vipd_service_connections_total", {{"protocol", "UDP"}}), 7);

  EXPECT_EQ(value(fams, "vipd_worker_rx_packets_total", {{"worker", "2"}}), 2000);
  EXPECT_EQ(value(fams, "vipd_worker_dropped_packets_total", {{"worker", "1"}, {"reason", "no_service"}}), 6);
  EXPECT_EQ(samples(fams, "vipd_worker_dropped_packets_total"), 6u);  // every reason, zero or not
  EXPECT_EQ(value(fams, "vipd_worker_redirected_packets_total", {{"worker", "1"}, {"direction", "in"}}), 4);
  EXPECT_EQ(value(fams, "vipd_worker_busy_polls_total", {{"worker", "1"}}), 250);
  EXPECT_EQ(value(fams, "vipd_conn_table_capacity", {{"worker", "1"}}), 262144);
  EXPECT_EQ(value(fams, "vipd_port_rx_packets_total", {{"device", "net_af_packet0,iface=c0"}}), 5000);
  EXPECT_EQ(value(fams, "vipd_exception_packets_total", {{"interface", "vipd-0"}, {"direction", "to_kernel"}}), 7);
  EXPECT_EQ(value(fams, "vipd_exception_packets_total", {{"interface", "vipd-0"}, {"direction", "from_kernel"}}), 8);
  EXPECT_EQ(value(fams, "vipd_exception_drops_total", {{"interface", "vipd-0"}, {"reason", "rate_limited"}}), 9);
  EXPECT_EQ(value(fams, "vipd_exception_drops_total", {{"interface", "vipd-0"}, {"reason", "kernel_full"}}), 0);
  EXPECT_EQ(value(fams, "vipd_neighbor_entries"), 3);
  EXPECT_EQ(value(fams, "vipd_services"), 3);
  EXPECT_EQ(value(fams, "vipd_backends"), 5);
  EXPECT_EQ(value(fams, "vipd_table_generation"), 3);
  EXPECT_EQ(value(fams, "vipd_syncs_total"), 4);
  EXPECT_EQ(value(fams, "vipd_sync_errors_total"), 1);
  EXPECT_DOUBLE_EQ(value(fams, "vipd_sync_last_success_timestamp_seconds"), 1.7e9);
  EXPECT_DOUBLE_EQ(value(fams, "vipd_start_time_seconds"), 1.7e9);
  EXPECT_EQ(value(fams, "vipd_build_info", {{"version", VIPD_TEST_VERSION}}), 1);
  EXPECT_EQ(value(fams, "vipd_source_watch_restarts_total", {{"resource", "services"}}), 0);
  EXPECT_EQ(value(fams, "vipd_source_relists_total", {{"resource", "endpointslices"}, {"reason", "gone"}}), 0);
  EXPECT_EQ(value(fams, "vipd_source_relists_total", {{"resource", "services"}, {"reason", "malformed"}}), 0);
  EXPECT_EQ(samples(fams, "vipd_source_relists_total"), 4u);  // both resources, both reasons
  EXPECT_EQ(value(fams, "vipd_source_resync_repairs_total"), 0);
  EXPECT_EQ(value(fams, "vipd_metrics_omitted_services"), 0);
  EXPECT_EQ(value(fams, "vipd_metrics_omitted_backends"), 0);
}

TEST_F(CollectorTest, Histograms) {
  const auto fams = collect();
  const MetricFamily* p = find(fams, "vipd_network_programming_duration_seconds");
  ASSERT_NE(p, nullptr);
  ASSERT_EQ(p->metric.size(), 1u);
  const auto& h = p->metric[0].histogram;
  EXPECT_EQ(h.sample_count, 1u);  // the failed sync has no programming latency
  EXPECT_DOUBLE_EQ(h.sample_sum, 0.003);
  for (const auto& b : h.bucket) EXPECT_EQ(b.cumulative_count, b.upper_bound >= 0.003 ? 1u : 0u) << b.upper_bound;
  EXPECT_TRUE(std::isinf(h.bucket.back().upper_bound));
  const MetricFamily* d = find(fams, "vipd_sync_duration_seconds");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->metric[0].histogram.sample_count, 2u);
}

TEST_F(CollectorTest, PerBackendSeriesCanBeSwitchedOff) {
  CollectorOptions o;
  o.per_backend = false;
  const auto fams = collect(o);
  for (const auto& f : fams) EXPECT_NE(f.name.rfind("vipd_backend_", 0), 0u) << f.name;
  EXPECT_EQ(value(fams, "vipd_service_connections_total", {{"service", "default/db:http"}}), 100);
  EXPECT_EQ(value(fams, "vipd_metrics_omitted_backends"), 0);
}

TEST_F(CollectorTest, BackendSeriesAreCapped) {
  CollectorOptions o;
  o.max_backend_series = 2;
  const auto fams = collect(o);
  // Table order: 10.96.0.10:53 (dns) first, then 10.96.0.100:8080 (db).
  ASSERT_EQ(samples(fams, "vipd_backend_connections_total"), 2u);
  EXPECT_EQ(value(fams, "vipd_backend_connections_total", {{"backend", "10.244.1.15:9053"}}), 7);
  EXPECT_EQ(value(fams, "vipd_backend_connections_total", {{"backend", "10.244.1.15:8080"}}), 10);
  EXPECT_EQ(value(fams, "vipd_metrics_omitted_backends"), 3);
  // Service series are complete.
  EXPECT_EQ(value(fams, "vipd_service_connections_total", {{"service", "default/db:http"}}), 100);
}

TEST_F(CollectorTest, ServiceSeriesAreCappedAndCostNothingPastTheCap) {
  CollectorOptions o;
  o.max_service_series = 1;
  stats_.dest_calls = 0;
  const auto fams = collect(o);
  EXPECT_EQ(samples(fams, "vipd_service_connections_total"), 1u);
  EXPECT_EQ(value(fams, "vipd_service_connections_total", {{"service", "kube-system/dns:dns"}}), 7);
  EXPECT_EQ(samples(fams, "vipd_backend_connections_total"), 1u);
  EXPECT_EQ(value(fams, "vipd_metrics_omitted_services"), 2);
  EXPECT_EQ(value(fams, "vipd_metrics_omitted_backends"), 4);
  EXPECT_EQ(stats_.dest_calls, 1u);  // only the exported service's backend was read
  EXPECT_EQ(value(fams, "vipd_services"), 3);  // the totals still count everything
}

TEST_F(CollectorTest, ServiceCountersDoNotGoDownWhenABackendIsRemoved) {
  MetricsCollector c(stats_, &sync_, {});
  const std::map<std::string, std::string> db = {{"service", "default/db:http"}};
  EXPECT_EQ(value(c.Collect(), "vipd_service_connections_total", db), 100);
  stats_.set_table(testing::seed_table(/*with_pod4=*/false));  // pod4 (40 conns) removed
  auto fams = c.Collect();
  EXPECT_EQ(value(fams, "vipd_service_connections_total", db), 100);
  EXPECT_EQ(value(fams, "vipd_service_backends", db), 3);
  EXPECT_EQ(samples(fams, "vipd_backend_connections_total"), 4u);  // 3 db + 1 dns
  stats_.set_dest(testing::db_key(), "10.244.1.15", 8080, dp::DestSnapshot{15, 75, 60, 7500, 60000, 0, 0});
  EXPECT_EQ(value(c.Collect(), "vipd_service_connections_total", db), 105);
  // A service that disappears and comes back starts from its backends' counters.
  stats_.set_table(ServiceTable{});
  EXPECT_EQ(samples(c.Collect(), "vipd_service_connections_total"), 0u);
  stats_.set_table(testing::seed_table(false));
  EXPECT_EQ(value(c.Collect(), "vipd_service_connections_total", db), 65);
}

// IPv6 backends: the same per-backend series as IPv4, the dataplane's
// counters of each IPv6 destination, the address label in RFC 5952 form
// inside brackets; the service totals add them up.
TEST_F(CollectorTest, Ipv6BackendsHaveTheirOwnSeries) {
  ServiceTable t;
  VirtualService v;
  v.key = ServiceKey{*IpAddr::parse("fd00:0:0:0:0:0:0:10"), 80, Protocol::kTcp};
  v.name = "default/web:http";
  v.backends = {{*IpAddr::parse("fd00:244::1"), 8080, 1, false}, {*IpAddr::parse("FD00:244:0::2"), 8080, 3, false}};
  t.services[v.key] = v;
  stats_.set_table(t);
  stats_.set_dest(v.key, "fd00:244::1", 8080, dp::DestSnapshot{5, 50, 40, 5000, 40000, 2, 1});
  stats_.set_dest(v.key, "fd00:244::2", 8080, dp::DestSnapshot{7, 70, 60, 7000, 60000, 3, 0, 1, true});
  stats_.dest_calls = 0;
  const auto fams = collect();
  EXPECT_EQ(stats_.dest_calls, 2u);
  const std::map<std::string, std::string> web = {{"service", "default/web:http"}, {"vip", "[fd00::10]:80"}};
  const std::map<std::string, std::string> b1 = {{"vip", "[fd00::10]:80"}, {"backend", "[fd00:244::1]:8080"}};
  const std::map<std::string, std::string> b2 = {{"backend", "[fd00:244::2]:8080"}};
  EXPECT_EQ(value(fams, "vipd_backend_connections_total", b1), 5);
  EXPECT_EQ(value(fams, "vipd_backend_packets_total", with(b1, "direction", "in")), 50);
  EXPECT_EQ(value(fams, "vipd_backend_packets_total", with(b1, "direction", "out")), 40);
  EXPECT_EQ(value(fams, "vipd_backend_bytes_total", with(b1, "direction", "in")), 5000);
  EXPECT_EQ(value(fams, "vipd_backend_bytes_total", with(b1, "direction", "out")), 40000);
  EXPECT_EQ(value(fams, "vipd_backend_active_connections", b1), 2);
  EXPECT_EQ(value(fams, "vipd_backend_inactive_connections", b1), 1);
  EXPECT_EQ(value(fams, "vipd_backend_connections_total", b2), 7);
  EXPECT_EQ(value(fams, "vipd_backend_weight", b2), 3);
  EXPECT_EQ(value(fams, "vipd_backend_ejections_total", b2), 1);
  EXPECT_EQ(value(fams, "vipd_service_connections_total", web), 12);
  EXPECT_EQ(value(fams, "vipd_service_packets_total", with(web, "direction", "in")), 120);
  EXPECT_EQ(value(fams, "vipd_service_active_connections", web), 5);
  EXPECT_EQ(value(fams, "vipd_service_backends", web), 2);
  const std::string text = serialize(fams);
  EXPECT_NE(text.find("vipd_backend_connections_total{service=\"default/web:http\",protocol=\"TCP\","
                      "vip=\"[fd00::10]:80\",backend=\"[fd00:244::2]:8080\"} 7"),
            std::string::npos)
      << text.substr(0, 2000);
}

TEST_F(CollectorTest, NoTableYet) {
  FakeStats empty;
  MetricsCollector c(empty, nullptr, {});
  const auto fams = c.Collect();
  EXPECT_EQ(value(fams, "vipd_services"), 0);
  EXPECT_EQ(value(fams, "vipd_table_generation"), 0);
  EXPECT_EQ(find(fams, "vipd_service_connections_total"), nullptr);
  EXPECT_EQ(find(fams, "vipd_network_programming_duration_seconds"), nullptr);
}

TEST_F(CollectorTest, TextFormatLooksRight) {
  const std::string text = serialize(collect());
  EXPECT_NE(text.find("# TYPE vipd_backend_connections_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("vipd_backend_connections_total{service=\"default/db:http\",protocol=\"TCP\","
                      "vip=\"10.96.0.100:8080\",backend=\"10.244.3.44:8080\"} 40"),
            std::string::npos)
      << text.substr(0, 2000);
  EXPECT_NE(text.find("vipd_network_programming_duration_seconds_bucket{le=\"+Inf\"} 1"), std::string::npos);
  // +Inf once per histogram (the serializer must not add a second one).
  size_t n = 0;
  for (size_t at = text.find("le=\"+Inf\""); at != std::string::npos; at = text.find("le=\"+Inf\"", at + 1)) ++n;
  EXPECT_EQ(n, 2u);
}

// Names that are not UTF-8 (and ones with quotes, backslashes, newlines):
// Prometheus refuses a whole scrape with one invalid byte in it, so the
// exposition must stay valid UTF-8 and one sample per line.
TEST_F(CollectorTest, LabelValuesAreAlwaysValidUtf8) {
  ServiceTable t = testing::seed_table();
  t.services.at(testing::db_key()).name = "default/\xff\xfe" "bad\xc3:http";
  t.services.at(testing::dns_key()).name = "kube-system/q\"uo\\te\nnl:dns";
  stats_.set_table(t);
  const auto fams = collect();
  const std::string text = serialize(fams);
  EXPECT_TRUE(is_valid_utf8(text));
  EXPECT_EQ(value(fams, "vipd_service_backends", {{"service", "default/\xef\xbf\xbd\xef\xbf\xbd" "bad\xef\xbf\xbd:http"}}),
            4);
  EXPECT_NE(text.find("service=\"default/\xef\xbf\xbd\xef\xbf\xbd" "bad\xef\xbf\xbd:http\""), std::string::npos);
  EXPECT_NE(text.find("service=\"kube-system/q\\\"uo\\\\te\\nnl:dns\""), std::string::npos);
  for (size_t at = 0, next; at < text.size(); at = next + 1) {
    next = text.find('\n', at);
    ASSERT_NE(next, std::string::npos);
    const std::string line = text.substr(at, next - at);
    EXPECT_TRUE(line.empty() || line[0] == '#' || line.rfind("vipd_", 0) == 0) << line;
  }
}

TEST_F(CollectorTest, ServiceConflictsByReason) {
  auto fams = collect();
  EXPECT_EQ(value(fams, "vipd_service_conflicts", {{"reason", "precedence"}}), 0);
  EXPECT_EQ(value(fams, "vipd_service_conflicts", {{"reason", "order"}}), 0);
  stats_.status_.service_conflicts = {{"precedence", 2}, {"order", 1}};
  fams = collect();
  EXPECT_EQ(value(fams, "vipd_service_conflicts", {{"reason", "precedence"}}), 2);
  EXPECT_EQ(value(fams, "vipd_service_conflicts", {{"reason", "order"}}), 1);
}

// The scale: 100,000 services with 1,000,000 backends. With the
// default caps a scrape reads only the exported services' backends and
// produces a bounded number of series.
TEST(CollectorScale, HundredThousandServicesMillionBackends) {
  FakeStats stats;
  ServiceTable t;
  for (uint32_t i = 0; i < 100000; ++i) {
    VirtualService v;
    v.key = ServiceKey{testing::ip("10.96.0.0") + i, 80, Protocol::kTcp};
    v.name = "ns/svc-" + std::to_string(i) + ":http";
    for (uint32_t b = 0; b < 10; ++b) v.backends.push_back({testing::ip("10.0.0.0") + i * 10 + b, 8080, 1, false});
    t.services[v.key] = std::move(v);
  }
  stats.set_table(std::move(t));
  MetricsCollector c(stats, nullptr, {});
  const auto t0 = std::chrono::steady_clock::now();
  const auto fams = c.Collect();
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  size_t series = 0;
  for (const auto& f : fams) series += f.metric.size();
  std::printf("    100k services, 1M backends: %zu series, %zu destination reads, %.3f s\n", series,
              stats.dest_calls, took);
  EXPECT_EQ(stats.dest_calls, 100000u);  // 10,000 services x 10 backends
  EXPECT_EQ(samples(fams, "vipd_service_connections_total"), 10000u);
  EXPECT_EQ(samples(fams, "vipd_backend_connections_total"), 10000u);
  EXPECT_LT(series, 170000u);
  EXPECT_EQ(value(fams, "vipd_metrics_omitted_services"), 90000);
  EXPECT_EQ(value(fams, "vipd_metrics_omitted_backends"), 990000);
  EXPECT_EQ(value(fams, "vipd_backends"), 1000000);
}

std::string find_promtool() {
  if (const char* e = std::getenv("PROMTOOL")) return e;
  for (const char* p : {"/usr/bin/promtool", "/usr/local/bin/promtool"})
    if (::access(p, X_OK) == 0) return p;
  return "";
}

TEST_F(CollectorTest, PromtoolCheckMetricsIsSilent) {
  const std::string promtool = find_promtool();
  if (promtool.empty()) GTEST_SKIP() << "promtool not installed (Debian package prometheus)";
  char path[] = "/tmp/vipd-metrics-test.XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  {
    std::ofstream out(path);
    out << serialize(collect());
  }
  const std::string cmd = promtool + " check metrics < " + path + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string output;
  char buf[512];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) output.append(buf, n);
  const int rc = ::pclose(p);
  ::unlink(path);
  EXPECT_EQ(rc, 0) << output;
  EXPECT_EQ(output, "");
}

}  // namespace
}  // namespace vipd::cp
