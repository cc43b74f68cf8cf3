// Thread: control (construction, start, stop); the servers run their own threads.
// Observability: vipd's Prometheus /metrics (default 127.0.0.1:10249, text
// format from prometheus-cpp's serializer) and health endpoints /healthz, /livez
// (default 127.0.0.1:10256), fed by one StatsSource. Both listeners are
// BoundedHttpServers (bounded connections, header/write deadlines), so slow
// clients cannot delay a scrape or a probe. See docs/metrics.md.
//
//   cp::Observability obs(stats, opts);
//   sync.set_observer(obs.sync_observer());   // programming-latency histogram
//   if (!obs.start(&err)) ...                 // binds both (an empty address: off)
//   ...
//   obs.stop();
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "observability/bounded_http.h"
#include "observability/collector.h"
#include "observability/health.h"
#include "observability/stats_source.h"
#include "observability/sync_metrics.h"

namespace vipd::cp {

struct ObservabilityOptions {
  std::string metrics_address = "127.0.0.1:10249";  // "" = no /metrics
  std::string health_address = "127.0.0.1:10256";   // "" = no /healthz, /livez
  CollectorOptions collector;
  HealthOptions health;
};

class Observability {
 public:
  Observability(const StatsSource& src, ObservabilityOptions opts);
  ~Observability();  // stop()
  Observability(const Observability&) = delete;
  Observability& operator=(const Observability&) = delete;

  // For SyncLoop::set_observer.
  std::function<void(const SyncEvent&)> sync_observer();

  // Starts the enabled servers. On failure nothing keeps running and *error
  // is one line ("metrics address 127.0.0.1:10249: bind failed: Address already in use").
  bool start(std::string* error);
  void stop();  // idempotent

  HealthResult healthz();
  HealthResult livez();
  const std::shared_ptr<MetricsCollector>& collector() const { return collector_; }
  SyncMetrics& sync_metrics() { return sync_metrics_; }
  int health_port() const { return health_ ? health_->port() : 0; }
  int metrics_port() const;  // the bound port of /metrics (0: off)

 private:
  const StatsSource& src_;
  const ObservabilityOptions opts_;
  SyncMetrics sync_metrics_;
  std::shared_ptr<MetricsCollector> collector_;
  HealthChecker checker_;
  std::unique_ptr<BoundedHttpServer> metrics_;
  int metrics_port_ = 0;
  std::unique_ptr<HealthServer> health_;
};

}  // namespace vipd::cp
