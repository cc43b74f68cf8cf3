// Thread: control.
#include "controlplane/metrics/observability.h"

#include <prometheus/exposer.h>

#include <ctime>
#include <exception>

#include "common/log.h"

namespace vipd::cp {
namespace {

int64_t now_unix_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

Observability::Observability(const StatsSource& src, ObservabilityOptions opts)
    : src_(src),
      opts_([&] {
        if (opts.collector.start_time_unix_ns == 0) opts.collector.start_time_unix_ns = now_unix_ns();
        return std::move(opts);
      }()),
      collector_(std::make_shared<MetricsCollector>(src_, &sync_metrics_, opts_.collector)),
      checker_(opts_.health, opts_.collector.start_time_unix_ns) {}

Observability::~Observability() { stop(); }

std::function<void(const SyncEvent&)> Observability::sync_observer() {
  return [this](const SyncEvent& e) { sync_metrics_.observe(e); };
}

HealthResult Observability::healthz() { return checker_.healthz(src_.sync_status(), src_.workers(), now_unix_ns()); }
HealthResult Observability::livez() { return checker_.livez(src_.sync_status(), src_.workers(), now_unix_ns()); }

bool Observability::start(std::string* error) {
  std::string local;
  std::string* err = error ? error : &local;
  if (!opts_.metrics_address.empty()) {
    std::string host;
    int port = 0;
    if (!split_host_port(opts_.metrics_address, &host, &port)) {
      *err = "metrics address " + opts_.metrics_address + ": expected IPv4:PORT";
      return false;
    }
    try {
      // civetweb (inside prometheus-cpp) says only "possible problem binding
      // to port"; ask the kernel for the reason instead.
      exposer_ = std::make_unique<prometheus::Exposer>(opts_.metrics_address, 2);
      exposer_->RegisterCollectable(collector_);
    } catch (const std::exception& e) {
      exposer_.reset();
      *err = "metrics address " + opts_.metrics_address + ": bind failed: " + diagnose_tcp_bind(host, port);
      return false;
    }
    log_info("metrics: serving /metrics on " + opts_.metrics_address);
  }
  if (!opts_.health_address.empty()) {
    health_ = std::make_unique<HealthServer>(
        opts_.health_address, [this] { return healthz(); }, [this] { return livez(); });
    if (!health_->start(err)) {
      health_.reset();
      exposer_.reset();
      return false;
    }
  }
  return true;
}

int Observability::metrics_port() const {
  if (!exposer_) return 0;
  const auto ports = exposer_->GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

void Observability::stop() {
  if (health_) {
    health_->stop();
    health_.reset();
  }
  exposer_.reset();
}

}  // namespace vipd::cp
