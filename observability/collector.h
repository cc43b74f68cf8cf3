// Thread: Collect() runs on the /metrics server's thread (one scrape at a time: a
// mutex serializes them); it only reads StatsSource snapshots.
// MetricsCollector: the prometheus::Collectable behind vipd's /metrics. Every
// metric family is built at scrape time from snapshots: the per-worker
// counters are summed here, never on the packet path. The families, labels and
// meanings are listed in docs/metrics.md (kept in sync with kFamilies in
// collector.cc).
//
// Cardinality: per-service series are exported for at most
// `max_service_series` services, per-backend series for at most
// `max_backend_series` backends (and not at all when `per_backend` is false),
// in table order (VIP, port, protocol; backends by IP, port), so the exported
// set is stable between scrapes. What was left out is counted in
// vipd_metrics_omitted_services / vipd_metrics_omitted_backends. Services past
// the cap cost nothing at scrape time (their counters are not read).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include "observability/stats_source.h"
#include "observability/sync_metrics.h"

namespace vipd::cp {

struct CollectorOptions {
  bool per_backend = true;             // --metrics-per-backend
  uint32_t max_backend_series = 10000; // --metrics-max-backend-series (backends with series)
  uint32_t max_service_series = 10000; // --metrics-max-service-series (services with series)
  std::string version;                 // vipd_build_info{version}; "" = this build's
  int64_t start_time_unix_ns = 0;      // vipd_start_time_seconds (0: not exported)
};

// Name, type and label names of one family (for docs and tests).
struct FamilyInfo {
  const char* name;
  const char* type;  // "counter" | "gauge" | "histogram"
  const char* labels;  // comma-separated label names, "" for none
  const char* help;
};
// Every family the collector can produce, in output order.
const std::vector<FamilyInfo>& metric_families();

class MetricsCollector : public prometheus::Collectable {
 public:
  // `sync` may be null (no histograms).
  MetricsCollector(const StatsSource& src, const SyncMetrics* sync, CollectorOptions opts);

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  struct Totals {
    uint64_t conns = 0, inpkts = 0, outpkts = 0, inbytes = 0, outbytes = 0;
    void add(const Totals& o);
  };
  // Per exported service: the backends' counters at the last scrape, and the
  // counters of backends removed since the service appeared, so that the
  // service's counters never go down when a backend goes away.
  struct ServiceState {
    std::vector<std::pair<std::pair<IpAddr, uint16_t>, Totals>> last;  // by (ip, port), sorted
    Totals retired;
  };

  const StatsSource& src_;
  const SyncMetrics* sync_;
  const CollectorOptions opts_;
  mutable std::mutex mu_;  // one scrape at a time; guards state_
  mutable std::map<ServiceKey, ServiceState> state_;
};

}  // namespace vipd::cp
