// Thread: admin server threads. Admin API documents that every mode of the
// daemon serves the same way (cmd/vipd.cc for dpdk, cmd/vipd_iptables.cc for
// iptables); each mode adds its own fields to them.
#pragma once

#include <nlohmann/json.hpp>

#include "controlplane/config/options.h"
#include "controlplane/model/service_table.h"
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

// /v1/status: mode and sync state; `config` holds the options every mode has
// (the caller adds its own: workers, ports, ...).
inline nlohmann::json status_doc(const cp::SyncLoop& sync, const config::Options& opt, const char* fwd) {
  const auto s = sync.status();
  return nlohmann::json{{"mode", config::mode_name(opt.mode)},
                        {"forward_method", fwd},
                        {"generation", s.generation},
                        {"syncs", s.syncs},
                        {"full_syncs", s.full_syncs},
                        {"sync_errors", s.sync_errors},
                        {"next_retry_ms", s.next_retry_ms},
                        {"last_sync_unix_ns", s.last_sync_unix_ns},
                        {"last_change_to_applied_ms", s.last_change_to_applied_ms},
                        {"last_error", s.last_error},
                        {"source_errors", s.source_errors},
                        {"config", {{"config_file", opt.config_file},
                                    {"manifests_dir", opt.manifests_dir},
                                    {"admin_socket", opt.admin_socket},
                                    {"metrics_address", opt.metrics_address},
                                    {"health_address", opt.health_address}}}};
}

}  // namespace vipd::cmd
