#include "cmd/kernel_mode.h"

#include <unistd.h>

#include "cmd/admin_docs.h"
#include "common/log.h"
#include "controlplane/sync/family_gate.h"
#include "controlplane/sync/proxy_protocol_gate.h"
#include "observability/admin_server.h"
#include "observability/observability.h"

namespace vipd::cmd {

nlohmann::json kernel_services_json(const cp::SyncLoop& sync, const KernelMode& mode, const char* fwd) {
  auto table = sync.table();
  nlohmann::json services = nlohmann::json::array();
  if (table) {
    for (const auto& [key, svc] : table->services) {
      nlohmann::json backends = nlohmann::json::array();
      for (const auto& b : svc.backends)
        backends.push_back({{"ip", b.ip.to_string()}, {"port", b.port}, {"weight", b.weight},
                            {"terminating", b.terminating}});
      if (mode.extra_backends) mode.extra_backends(key, svc, backends);
      services.push_back({{"name", svc.name}, {"protocol", cp::name(key.protocol)},
                          {"vip", key.vip.to_string()}, {"port", key.port},
                          {"scheduler", mode.scheduler(svc)},
                          {"persistence_timeout_s", svc.persistence_timeout_s},
                          {"when_empty", cp::name(svc.when_empty)}, {"backends", backends}});
    }
  }
  return {{"generation", table ? table->generation : 0}, {"forward_method", fwd}, {"mode", mode.name},
          {"stats_available", false}, {"note", mode.no_dataplane_note}, {"services", services}};
}

int run_kernel_mode(const config::Options& opt, cp::Source& source, cp::Backend& backend,
                    const cp::SyncOptions& so, const KernelMode& mode, const std::atomic<bool>& stop) {
  if (::geteuid() != 0)
    log_warn("vipd: " + mode.name + " mode needs CAP_NET_ADMIN (normally root); syncs will fail until it has it");
  // IPv6 entries reach only a backend that programs them (iptables, ipvs); a
  // kernel mode that does not warns and skips them.
  cp::FamilyGate family_gate(backend, mode.name + " mode");
  cp::Backend& inner = mode.programs_ipv6 ? backend : static_cast<cp::Backend&>(family_gate);
  // The kernel cannot insert the PROXY protocol header: warn, program without it.
  cp::ProxyProtocolGate gate(inner, mode.name + " mode");
  cp::SyncLoop sync(source, gate, so);
  const char* fwd = cp::name(opt.forward_method);

  KernelStatsSource stats_source(sync, source);
  cp::Observability observability(stats_source, observability_options(opt));
  sync.set_observer(observability.sync_observer());

  cp::AdminServer admin(opt.admin_socket);
  admin.handle_query("/v1/explain", [&mode](const cp::AdminServer::Query&) -> nlohmann::ordered_json {
    throw cp::AdminServer::HttpError(501, mode.explain_hint);
  });
  admin.handle("/v1/stats", [&] {
    return nlohmann::json{{"mode", mode.name},
                          {"workers", nlohmann::json::array()},
                          {"ports", nlohmann::json::array()},
                          {"neighbors", 0},
                          {"stats_available", false},
                          {"note", mode.no_dataplane_note},
                          {mode.name, mode.backend_json()}};
  });
  admin.handle("/v1/services", [&] { return kernel_services_json(sync, mode, fwd); });
  admin.handle_ordered("/v1/table", [&] { return table_doc(sync); });
  admin.handle("/v1/status", [&] {
    nlohmann::json j = status_doc(sync, opt, fwd, &source);
    j[mode.name] = mode.backend_json();
    j["config"]["workers"] = nlohmann::json::array();
    j["config"]["ports"] = 0;
    j["config"].update(mode.extra_config);
    return j;
  });
  std::string err;
  if (!admin.start(&err)) {
    log_error(err);
    return 1;
  }
  log_info("vipd: running in " + mode.name + " mode (" + fwd + ": " + mode.running_detail + ", admin socket " +
           opt.admin_socket + "); the kernel forwards, no DPDK");
  if (!observability.start(&err)) {
    log_error(err);
    admin.stop();
    return 1;
  }
  sync.run(stop);
  // What the backend programmed stays (like kube-proxy): traffic keeps flowing
  // while vipd is down, and the next start re-syncs without flushing first.
  log_info("vipd: stopping (" + mode.stopping_detail + ")");
  observability.stop();
  admin.stop();
  return 0;
}

}  // namespace vipd::cmd
