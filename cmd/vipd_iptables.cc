// Thread: main (the control thread); the admin, metrics and health servers run
// their own threads and only read the sync loop's status/table and the
// backend's stats() (both thread-safe).
#include "cmd/vipd_iptables.h"

#include <unistd.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "cmd/admin_docs.h"
#include "common/log.h"
#include "controlplane/backends/iptables/iptables_backend.h"
#include "controlplane/kube/kube_source.h"
#include "controlplane/metrics/admin_server.h"
#include "controlplane/metrics/observability.h"
#include "controlplane/metrics/stats_source.h"

namespace vipd {
namespace {

constexpr const char* kNoDataplane =
    "iptables mode: the kernel forwards, vipd has no dataplane counters (per-rule packet counts: "
    "iptables -t nat -L VIPD-SERVICES -v -n -x; connections: conntrack -L)";

nlohmann::json backend_json(const cp::ipt::IptablesStats& s) {
  return {{"full_syncs", s.full_syncs},         {"partial_syncs", s.partial_syncs},
          {"noop_syncs", s.noop_syncs},         {"failures", s.failures},
          {"chains_written", s.chains_written}, {"chains_deleted", s.chains_deleted},
          {"payload_bytes", s.payload_bytes},   {"nat_chains", s.nat_chains},
          {"jump_rules_added", s.jump_rules_added}, {"last_restore_ms", s.last_restore_ms}};
}

// /v1/services as in dpdk mode (vipctl list), without the traffic counters.
nlohmann::json services_json(const cp::SyncLoop& sync, const char* fwd) {
  auto table = sync.table();
  nlohmann::json services = nlohmann::json::array();
  if (table) {
    for (const auto& [key, svc] : table->services) {
      nlohmann::json backends = nlohmann::json::array();
      for (const auto& b : svc.backends)
        backends.push_back({{"ip", cp::ipv4_to_string(b.ip)}, {"port", b.port}, {"weight", b.weight},
                            {"terminating", b.terminating}});
      services.push_back({{"name", svc.name}, {"protocol", cp::protocol_name(key.protocol)},
                          {"vip", cp::ipv4_to_string(key.vip)}, {"port", key.port},
                          // iptables picks endpoints at random, whatever the scheduler says.
                          {"scheduler", "random"}, {"persistence_timeout_s", svc.persistence_timeout_s},
                          {"when_empty", cp::when_empty_name(svc.when_empty)}, {"backends", backends}});
    }
  }
  return {{"generation", table ? table->generation : 0}, {"forward_method", fwd}, {"mode", "iptables"},
          {"stats_available", false}, {"note", kNoDataplane}, {"services", services}};
}

}  // namespace

cp::ipt::RenderOptions iptables_render_options(const config::Options& opt) {
  cp::ipt::RenderOptions r;
  r.masquerade_all = opt.forward_method == config::ForwardMethod::kFnat;
  return r;
}

cp::DryRunPrinter iptables_dry_run_printer(const config::Options& opt) {
  const cp::ipt::RenderOptions ro = iptables_render_options(opt);
  return [ro](const cp::ServiceTable& t, std::ostream& out, std::ostream& err) {
    cp::ipt::Ruleset rules;
    std::string why;
    if (!cp::ipt::build_ruleset(t, ro, &rules, &why)) {
      err << "vipd: " << why << "\n";
      return false;
    }
    out << cp::ipt::dry_run_text(rules, ro);
    return true;
  };
}

int run_iptables_mode(const config::Options& opt, cp::Source& source, const cp::SyncOptions& so,
                      const std::atomic<bool>& stop) {
  if (::geteuid() != 0)
    log_warn("vipd: iptables mode needs CAP_NET_ADMIN (normally root); syncs will fail until it has it");
  cp::ipt::IptablesOptions io;
  io.render = iptables_render_options(opt);
  cp::ipt::IptablesBackend backend(io);
  cp::SyncLoop sync(source, backend, so);
  const char* fwd = config::forward_method_name(opt.forward_method);

  cmd::KernelStatsSource stats_source(sync, source);
  cp::Observability observability(stats_source, cmd::observability_options(opt));
  sync.set_observer(observability.sync_observer());

  cp::AdminServer admin(opt.admin_socket);
  admin.handle_query("/v1/explain", [](const cp::AdminServer::Query&) -> nlohmann::ordered_json {
    throw cp::AdminServer::HttpError(
        501, "explain needs the dpdk dataplane; in iptables mode the kernel picks the endpoint at random "
             "(inspect with: iptables-save -t nat | grep VIPD-)");
  });
  admin.handle("/v1/stats", [&] {
    return nlohmann::json{{"mode", "iptables"},
                          {"workers", nlohmann::json::array()},
                          {"ports", nlohmann::json::array()},
                          {"neighbors", 0},
                          {"stats_available", false},
                          {"note", kNoDataplane},
                          {"iptables", backend_json(backend.stats())}};
  });
  admin.handle("/v1/services", [&] { return services_json(sync, fwd); });
  admin.handle_ordered("/v1/table", [&] { return cmd::table_doc(sync); });
  admin.handle("/v1/status", [&] {
    nlohmann::json j = cmd::status_doc(sync, opt, fwd);
    j["iptables"] = backend_json(backend.stats());
    j["config"]["workers"] = nlohmann::json::array();
    j["config"]["ports"] = 0;
    return j;
  });
  std::string err;
  if (!admin.start(&err)) {
    log_error(err);
    return 1;
  }
  log_info("vipd: running in iptables mode (" + std::string(fwd) + ": " +
           (io.render.masquerade_all ? "service traffic masqueraded" : "no masquerade") + ", admin socket " +
           opt.admin_socket + "); the kernel forwards, no DPDK");
  if (!observability.start(&err)) {
    log_error(err);
    admin.stop();
    return 1;
  }
  sync.run(stop);
  // The rules stay in place (like kube-proxy): traffic keeps flowing while vipd
  // is down, and the next start re-syncs them without flushing first.
  log_info("vipd: stopping (iptables rules left in place)");
  observability.stop();
  admin.stop();
  return 0;
}

}  // namespace vipd
