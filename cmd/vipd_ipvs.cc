// Thread: main (the control thread); the admin, metrics and health servers run
// their own threads and only read the sync loop's status/table and the
// backend's stats()/draining() (all thread-safe). The kernel (netlink) is only
// touched by the sync loop's thread. The runner: cmd/kernel_mode.cc.
#include "cmd/vipd_ipvs.h"

#include <iostream>
#include <nlohmann/json.hpp>

#include "cmd/kernel_mode.h"
#include "common/log.h"
#include "controlplane/backends/ipvs/ipvs_backend.h"
#include "controlplane/backends/ipvs/netlink_ipvs.h"
#include "controlplane/backends/ipvs/vip_link.h"

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
          {"ipv6_services", s.ipv6_services},
          {"ipv6_rules", s.ipv6_rules},
          {"cross_family_skipped", s.cross_family_skipped},
          {"rules_applied", s.rules_applied},
          {"jump_rules_added", s.jump_rules_added},
          {"sysctl_errors", s.sysctl_errors},
          {"sysctl_error", s.sysctl_error}};
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
  cp::ipvs::NetlinkIpvs kernel;
  cp::ipvs::NetlinkVipInterface iface(opt.ipvs_interface);
  if (int e = kernel.open())
    log_warn("vipd: " + cp::ipvs::describe_op("open", "IPVS generic netlink", e) +
             "; syncs fail (and are retried) until it works");
  cp::ipvs::IpvsBackendOptions bo;
  bo.rules = rules_options(opt);
  cp::ipvs::IpvsBackend backend(kernel, iface, bo);
  const std::string iface_name = opt.ipvs_interface;
  cmd::KernelMode mode;
  mode.name = "ipvs";
  mode.no_dataplane_note = kNoDataplane;
  mode.explain_hint =
      "explain needs the dpdk dataplane; in ipvs mode the kernel's scheduler picks the real server "
      "(inspect with: ipvsadm -Ln, connections: ipvsadm -Lnc)";
  mode.running_detail = std::string(bo.rules.masquerade_all ? "service traffic masqueraded" : "no masquerade") +
                        ", VIPs on " + iface_name;
  mode.stopping_detail = "IPVS services, " + iface_name + " and rules left in place";
  mode.backend_json = [&backend, iface_name] { return backend_json(backend.stats(), iface_name); };
  mode.scheduler = [](const cp::VirtualService& svc) { return std::string(cp::name(svc.scheduler)); };
  // Real servers being drained (weight 0 in the kernel, gone from the table)
  // are listed with "draining": true.
  mode.extra_backends = [&backend](const cp::ServiceKey& key, const cp::VirtualService& svc, nlohmann::json& backends) {
    for (const auto& d : backend.draining()) {
      if (!(d.key == key)) continue;
      bool listed = false;
      for (const auto& b : svc.backends) listed = listed || (b.ip == d.ip && b.port == d.port);
      if (!listed)
        backends.push_back({{"ip", d.ip.to_string()}, {"port", d.port}, {"weight", 0},
                            {"terminating", true}, {"draining", true}, {"active_conns", d.active_conns},
                            {"inactive_conns", d.inactive_conns}});
    }
  };
  mode.extra_config = {{"ipvs_interface", iface_name}};
  mode.programs_ipv6 = true;  // AF_INET6 services, /128 VIPs, ip6tables chains
  return cmd::run_kernel_mode(opt, source, backend, so, mode, stop);
}

}  // namespace vipd
