// Thread: control.
#include "observability/observability.h"

#include <prometheus/text_serializer.h>

#include <exception>
#include <sstream>

#include "common/clock.h"
#include "common/log.h"

namespace vipd::cp {

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
    std::string why;
    const int fd = listen_tcp(host, port, &metrics_port_, &why);
    if (fd < 0) {
      *err = "metrics address " + opts_.metrics_address + ": bind failed: " + why;
      return false;
    }
    BoundedHttpOptions o;
    o.listener = "metrics";
    o.write_timeout_ms = 10000;  // a large scrape to a slow (remote) reader
    metrics_ = std::make_unique<BoundedHttpServer>(o, [this](const HttpRequest& req) {
      HttpResponse res;
      if (req.path != "/metrics") {
        res.status = 404;
        res.body = R"({"error":"not found","paths":["/metrics"]})" "\n";
        return res;
      }
      std::ostringstream out;
      prometheus::TextSerializer().Serialize(out, collector_->Collect());
      res.content_type = "text/plain; version=0.0.4; charset=utf-8";
      res.body = std::move(out).str();
      return res;
    });
    if (!metrics_->start(fd, &why)) {
      metrics_.reset();
      *err = "metrics address " + opts_.metrics_address + ": " + why;
      return false;
    }
    log_info("metrics: serving /metrics on " + host + ":" + std::to_string(metrics_port_));
  }
  if (!opts_.health_address.empty()) {
    health_ = std::make_unique<HealthServer>(
        opts_.health_address, [this] { return healthz(); }, [this] { return livez(); });
    if (!health_->start(err)) {
      health_.reset();
      metrics_.reset();
      return false;
    }
  }
  return true;
}

int Observability::metrics_port() const { return metrics_ ? metrics_port_ : 0; }

void Observability::stop() {
  if (health_) {
    health_->stop();
    health_.reset();
  }
  if (metrics_) {
    metrics_->stop();
    metrics_.reset();
  }
}

}  // namespace vipd::cp
