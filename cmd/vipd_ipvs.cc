// Thread: main (the control thread); the admin, metrics and health servers run
// their own threads and only read the sync loop's status/table and the
// backend's stats()/draining() (all thread-safe). The kernel (netlink) is only
// touched by the sync loop's thread.
#include "cmd/vipd_ipvs.h"

#include <unistd.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "cmd/admin_docs.h"
#include "common/log.h"
#include "controlplane/backends/ipvs/ipvs_backend.h"
#include "controlplane/backends/ipvs/netlink_ipvs.h"
#include "controlplane/backends/ipvs/vip_link.h"
#include "controlplane/kube/kube_source.h"
#include "controlplane/metrics/admin_server.h"
#include "controlplane/metrics/observability.h"
#include "controlplane/metrics/stats_source.h"

namespace vipd {
namespace {

constexpr const char* kNoDataplane =
    "ipvs mode: the kernel forwards, vipd has no dataplane counters (per service and real server: "
    "ipvsadm -Ln --stats; connections: ipvsadm -Lnc)";

nlohmann::json backend_json(const cp::ipvs::IpvsBackendStats& s, const std::string& iface) {
  return {{"interface", iface},
          {"full_syncs", s.full_syncs},
          {"partial_syncs", s.partial_syncs},
          {"failures", s.failures},
          {"netlink_ops", s.netlink_ops},
          {"last_sync_ops", s.last_sync_ops},
          {"last_sync_ms", s.last_sync_ms},
          {"services", s.services},
          {"real_servers", s.dests},
          {"draining", s.draining},
          {"drained_deleted", s.dests_drained},
          {"stale_services_deleted", s.stale_services_deleted},
          {"foreign_services", s.foreign_services},
          {"vips_bound", s.vips_bound},
          {"rules_applied", s.rules_applied},
          {"jump_rules_added", s.jump_rules_added},
          {"sysctl_errors", s.sysctl_errors},
          {"sysctl_error", s.sysctl_error}};
}

// /v1/services as in the other modes (vipctl list), without traffic counters;
// real servers being drained (weight 0 in the kernel, gone from the table) are
// listed with "draining": true.
nlohmann::json services_json(const cp::SyncLoop& sync, const cp::ipvs::IpvsBackend& backend, const char* fwd) {
  auto table = sync.table();
  const auto draining = backend.draining();
  nlohmann::json services = nlohmann::json::array();
  if (table) {
    for (const auto& [key, svc] : table->services) {
      nlohmann::json backends = nlohmann::json::array();
      for (const auto& b : svc.backends)
        backends.push_back({{"ip", cp::ipv4_to_string(b.ip)}, {"port", b.port}, {"weight", b.weight},
                            {"terminating", b.terminating}});
      for (const auto& d : draining) {
        if (!(d.key == key)) continue;
        bool listed = false;
        for (const auto& b : svc.backends) listed = listed || (b.ip == d.ip && b.port == d.port);
        if (!listed)
          backends.push_back({{"ip", cp::ipv4_to_string(d.ip)}, {"port", d.port}, {"weight", 0},
                              {"terminating", true}, {"draining", true}, {"active_conns", d.active_conns},
                              {"inactive_conns", d.inactive_conns}});
      }
      services.push_back({{"name", svc.name}, {"protocol", cp::protocol_name(key.protocol)},
                          {"vip", cp::ipv4_to_string(key.vip)}, {"port", key.port},
                          {"scheduler", svc.scheduler.empty() ? "rr" : svc.scheduler},
                          {"persistence_timeout_s", svc.persistence_timeout_s},
                          {"when_empty", cp::when_empty_name(svc.when_empty)}, {"backends", backends}});
    }
  }
  return {{"generation", table ? table->generation : 0}, {"forward_method", fwd}, {"mode", "ipvs"},
          {"stats_available", false}, {"note", kNoDataplane}, {"services", services}};
}

cp::ipvs::RulesOptions rules_options(const config::Options& opt) {
  cp::ipvs::RulesOptions r;
  r.masquerade_all = opt.forward_method == config::ForwardMethod::kFnat;
  return r;
}

}  // namespace

cp::DryRunPrinter ipvs_dry_run_printer(const config::Options& opt) {
  const cp::ipvs::RulesOptions ro = rules_options(opt);
  const std::string iface = opt.ipvs_interface;
  return [ro, iface](const cp::ServiceTable& t, std::ostream& out, std::ostream&) {
    out << cp::ipvs::dry_run_text(cp::ipvs::build_desired(t), ro, iface);
    return true;
  };
}

int run_ipvs_mode(const config::Options& opt, cp::Source& source, const cp::SyncOptions& so,
                  const std::atomic<bool>& stop) {
  if (::geteuid() != 0)
    log_warn("vipd: ipvs mode needs CAP_NET_ADMIN (normally root); syncs will fail until it has it");
  cp::ipvs::NetlinkIpvs kernel;
  cp::ipvs::NetlinkVipInterface iface(opt.ipvs_interface);
  if (int e = kernel.open())
    log_warn("vipd: " + cp::ipvs::describe_op("open", "IPVS generic netlink", e) +
             "; syncs fail (and are retried) until it works");
  cp::ipvs::IpvsBackendOptions bo;
  bo.rules = rules_options(opt);
  cp::ipvs::IpvsBackend backend(kernel, iface, bo);
  cp::SyncLoop sync(source, backend, so);
  const char* fwd = config::forward_method_name(opt.forward_method);

  cmd::KernelStatsSource stats_source(sync, source);
  cp::Observability observability(stats_source, cmd::observability_options(opt));
  sync.set_observer(observability.sync_observer());

  const std::string iface_name = opt.ipvs_interface;
  cp::AdminServer admin(opt.admin_socket);
  admin.handle_query("/v1/explain", [](const cp::AdminServer::Query&) -> nlohmann::ordered_json {
    throw cp::AdminServer::HttpError(
        501, "explain needs the dpdk dataplane; in ipvs mode the kernel's scheduler picks the real server "
             "(inspect with: ipvsadm -Ln, connections: ipvsadm -Lnc)");
  });
  admin.handle("/v1/stats", [&] {
    return nlohmann::json{{"mode", "ipvs"},
                          {"workers", nlohmann::json::array()},
                          {"ports", nlohmann::json::array()},
                          {"neighbors", 0},
                          {"stats_available", false},
                          {"note", kNoDataplane},
                          {"ipvs", backend_json(backend.stats(), iface_name)}};
  });
  admin.handle("/v1/services", [&] { return services_json(sync, backend, fwd); });
  admin.handle_ordered("/v1/table", [&] { return cmd::table_doc(sync); });
  admin.handle("/v1/status", [&] {
    nlohmann::json j = cmd::status_doc(sync, opt, fwd);
    j["ipvs"] = backend_json(backend.stats(), iface_name);
    j["config"]["workers"] = nlohmann::json::array();
    j["config"]["ports"] = 0;
    j["config"]["ipvs_interface"] = iface_name;
    return j;
  });
  std::string err;
  if (!admin.start(&err)) {
    log_error(err);
    return 1;
  }
  log_info("vipd: running in ipvs mode (" + std::string(fwd) + ": " +
           (bo.rules.masquerade_all ? "service traffic masqueraded" : "no masquerade") + ", VIPs on " +
           iface_name + ", admin socket " + opt.admin_socket + "); the kernel forwards, no DPDK");
  if (!observability.start(&err)) {
    log_error(err);
    admin.stop();
    return 1;
  }
  sync.run(stop);
  // Services, addresses and rules stay (like kube-proxy): traffic keeps flowing
  // while vipd is down; the next start reconciles them from the kernel's dump.
  log_info("vipd: stopping (IPVS services, " + iface_name + " and rules left in place)");
  observability.stop();
  admin.stop();
  return 0;
}

}  // namespace vipd
