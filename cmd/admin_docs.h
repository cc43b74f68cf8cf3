// Thread: admin server threads (the documents), main (the set-up helpers).
// What every mode of the daemon (cmd/vipd.cc for dpdk, cmd/vipd_iptables.cc,
// cmd/vipd_ipvs.cc) serves and sets up the same way: the admin API documents
// (each mode adds its own fields), the source's statistics, the metrics
// options, and the StatsSource of the kernel modes.
#pragma once

#include <unistd.h>

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "common/privileges.h"
#include "controlplane/config/options.h"
#include "controlplane/kube/kube_source.h"
#include "observability/observability.h"
#include "observability/stats_source.h"
#include "model/service_table.h"
#include "controlplane/sync/sync_loop.h"

namespace vipd::cmd {

// /v1/table: the applied table as the dry-run JSON, with its generation.
inline nlohmann::ordered_json table_doc(const cp::SyncLoop& sync) {
  auto t = sync.table();
  nlohmann::ordered_json j;
  j["generation"] = t ? t->generation : 0;
  j["table"] = nlohmann::ordered_json::parse(cp::to_dry_run_json(t ? *t : cp::ServiceTable{}));
  return j;
}

// /v1/status "privileges": who the process runs as now, and how many of its
// threads still hold uid 0 or a capability (read from /proc/self/task, so a
// thread the drop missed shows up here).
inline nlohmann::json privileges_doc(const config::Options& opt) {
  std::string err;
  const auto threads = thread_credentials(&err);
  size_t privileged = 0, no_new_privs = 0;
  for (const auto& t : threads) {
    if (t.privileged()) ++privileged;
    if (t.no_new_privs == 1) ++no_new_privs;
  }
  nlohmann::json j{{"user", opt.user.empty() ? std::string("root") : opt.user},
                   {"uid", static_cast<uint64_t>(geteuid())},
                   {"threads", threads.size()},
                   {"privileged_threads", privileged},
                   {"no_new_privs_threads", no_new_privs}};
  if (!err.empty()) j["error"] = err;
  return j;
}

// /v1/status "kubernetes_api": the API server and how the connection is
// protected; null for the manifests source.
inline nlohmann::json kube_api_doc(const cp::Source* source) {
  const auto* kube = dynamic_cast<const cp::kube::KubeSource*>(source);
  if (!kube) return nullptr;
  const cp::kube::ClientConfig& c = kube->client_config();
  return nlohmann::json{{"server", c.server},
                        {"tls_verify", !cp::kube::plain_http(c.server) && !c.insecure},
                        {"insecure_skip_tls_verify", c.insecure},
                        {"plain_http", cp::kube::plain_http(c.server)},
                        {"token_in_clear", cp::kube::plain_http(c.server) && cp::kube::has_token(c)}};
}

// /v1/status: mode and sync state; `config` holds the options every mode has
// (the caller adds its own: workers, ports, ...).
inline nlohmann::json status_doc(const cp::SyncLoop& sync, const config::Options& opt, const char* fwd,
                                 const cp::Source* source = nullptr) {
  const auto s = sync.status();
  return nlohmann::json{{"mode", config::mode_name(opt.mode)},
                        {"forward_method", fwd},
                        {"generation", s.generation},
                        {"syncs", s.syncs},
                        {"full_syncs", s.full_syncs},
                        {"resync_repairs", s.resync_repairs},
                        {"sync_errors", s.sync_errors},
                        {"next_retry_ms", s.next_retry_ms},
                        {"last_sync_unix_ns", s.last_sync_unix_ns},
                        {"last_change_to_applied_ms", s.last_change_to_applied_ms},
                        {"last_error", s.last_error},
                        {"source_errors", s.source_errors},
                        {"privileges", privileges_doc(opt)},
                        {"kubernetes_api", kube_api_doc(source)},
                        {"config", {{"config_file", opt.config_file},
                                    {"manifests_dir", opt.manifests_dir},
                                    {"admin_socket", opt.admin_socket},
                                    {"metrics_address", opt.metrics_address},
                                    {"health_address", opt.health_address}}}};
}

// Watch restarts and relists by resource for the metrics (the first watch and
// list are not counted); empty (the default statistics) for other sources.
inline std::function<std::vector<cp::SourceResourceStats>()> source_stats_fn(const cp::Source& source) {
  const auto* kube = dynamic_cast<const cp::kube::KubeSource*>(&source);
  if (!kube) return {};
  return [kube] {
    const cp::kube::KubeSourceStats k = kube->stats();
    auto one = [](const char* resource, const cp::kube::ReflectorStats& r) {
      return cp::SourceResourceStats{resource, r.watches ? r.watches - 1 : 0, r.lists ? r.lists - 1 : 0,
                                     r.relists_gone, r.relists_malformed};
    };
    return std::vector<cp::SourceResourceStats>{one("endpointslices", k.endpointslices), one("services", k.services)};
  };
}

inline cp::ObservabilityOptions observability_options(const config::Options& opt) {
  cp::ObservabilityOptions oo;
  oo.metrics_address = opt.metrics_address;
  oo.health_address = opt.health_address;
  oo.collector.per_backend = opt.metrics_per_backend;
  oo.collector.max_backend_series = opt.metrics_max_backend_series;
  oo.collector.max_service_series = opt.metrics_max_service_series;
  return oo;
}

// The StatsSource of the kernel modes (iptables, ipvs): no workers, ports or
// per-destination counters (the kernel has them), the sync loop's table and
// status, and the source's statistics.
class KernelStatsSource final : public cp::StatsSource {
 public:
  KernelStatsSource(const cp::SyncLoop& sync, const cp::Source& source)
      : sync_(sync), source_stats_(source_stats_fn(source)) {}
  std::vector<dp::WorkerSnapshot> workers() const override { return {}; }
  std::vector<dp::PortSnapshot> ports() const override { return {}; }
  dp::DestSnapshot dest(const cp::ServiceKey&, const cp::IpAddr&, uint16_t) const override { return {}; }
  uint32_t neighbor_entries() const override { return 0; }
  std::shared_ptr<const cp::ServiceTable> table() const override { return sync_.table(); }
  cp::SyncStatus sync_status() const override { return sync_.status(); }
  std::vector<cp::SourceResourceStats> source_stats() const override {
    return source_stats_ ? source_stats_() : cp::default_source_stats();
  }

 private:
  const cp::SyncLoop& sync_;
  std::function<std::vector<cp::SourceResourceStats>()> source_stats_;
};

}  // namespace vipd::cmd
