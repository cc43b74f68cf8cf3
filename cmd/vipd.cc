// Thread: main (the control thread). The vipd daemon: parse configuration,
// dry-run or start the dataplane, then run the sync loop until SIGINT/SIGTERM.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <mutex>
#include <thread>

#include "cmd/admin_docs.h"
#include "cmd/vipd_iptables.h"
#include "cmd/vipd_ipvs.h"
#include "cmd/vipd_nftables.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/privileges.h"
#include "dataplane/runtime/dpdk_backend.h"
#include "controlplane/config/options.h"
#include "observability/admin_server.h"
#include "observability/explain.h"
#include "observability/observability.h"
#include "controlplane/kube/kube_source.h"
#include "controlplane/kube/source_factory.h"
#include "controlplane/sources/manifest_source.h"
#include "controlplane/sync/family_gate.h"
#include "controlplane/sync/proxy_protocol_gate.h"
#include "controlplane/sync/sync_loop.h"
#include "dataplane/runtime/dataplane.h"
#include "controlplane/host/iface_addr.h"
#include "controlplane/host/route_announcer.h"

namespace {

std::atomic<bool> g_stop{false};
std::atomic<int> g_signals{0};  // SIGTERM/SIGINT received (a second one ends --drain-on-sigterm's wait)

void on_signal(int) {
  g_stop.store(true);
  g_signals.fetch_add(1);
}

vipd::LogSeverity severity(vipd::config::LogLevel l) {
  switch (l) {
    case vipd::config::LogLevel::kDebug: return vipd::LogSeverity::kDebug;
    case vipd::config::LogLevel::kWarn: return vipd::LogSeverity::kWarn;
    case vipd::config::LogLevel::kError: return vipd::LogSeverity::kError;
    default: return vipd::LogSeverity::kInfo;
  }
}

nlohmann::json stats_json(const vipd::dp::Dataplane& dp) {
  nlohmann::json workers = nlohmann::json::array();
  for (const auto& w : dp.workers()) {
    nlohmann::json reasons = nlohmann::json::object();
    for (const auto& [name, v] : w.drop_reasons) reasons[name] = v;
    workers.push_back({{"lcore", w.lcore},
                       {"rx", w.rx},
                       {"tx", w.tx},
                       {"drops", w.drops},
                       {"new_flows", w.new_flows},
                       {"active_flows", w.active_flows},
                       {"redirects", w.redirects_out},
                       {"redirects_in", w.redirects_in},
                       {"reply_redirects", w.reply_redirects},
                       {"fnat_unsteered", w.fnat_unsteered},
                       {"polls", w.polls},
                       {"busy_polls", w.busy_polls},
                       {"rst_sent", w.rst_sent},
                       {"icmp_unreach_sent", w.icmp_unreach_sent},
                       {"arp_replies", w.arp_replies},
                       {"arp_requests", w.arp_requests},
                       {"proxy_headers", w.proxy_headers},
                       {"proxy_header_retransmits", w.proxy_header_retransmits},
                       {"resteers", {{"rst", w.resteers[0]}, {"icmp", w.resteers[1]},
                                     {"timeout", w.resteers[2]}, {"retransmit", w.resteers[3]}}},
                       {"resteer_pool_full", w.resteer_pool_full},
                       {"resteer_gave_up", w.resteer_gave_up},
                       {"handover", {{"sent", w.handovers}, {"matched", w.handover_matched},
                                     {"not_held", w.handover_not_held}, {"rate_limited", w.handover_rate_limited},
                                     {"not_peer", w.handover_not_peer}, {"no_mbuf", w.handover_no_mbuf}}},
                       {"conn_entries", w.conn_entries},
                       {"conn_capacity", w.conn_capacity},
                       {"drop_reasons", reasons}});
  }
  nlohmann::json ports = nlohmann::json::array();
  for (const auto& p : dp.ports()) {
    nlohmann::json j = {{"port_id", p.port_id}, {"device", p.device}, {"mac", p.mac},
                        {"ipackets", p.ipackets}, {"opackets", p.opackets}, {"ierrors", p.ierrors},
                        {"oerrors", p.oerrors}, {"imissed", p.imissed}};
    if (!p.exception_ifname.empty())
      j["exception"] = {{"interface", p.exception_ifname}, {"to_kernel", p.exc_to_kernel},
                        {"from_kernel", p.exc_from_kernel}, {"rate_limited", p.exc_rate_limited},
                        {"kernel_full", p.exc_kernel_full}, {"from_kernel_full", p.exc_from_kernel_full}};
    ports.push_back(std::move(j));
  }
  return {{"workers", workers}, {"ports", ports}, {"neighbors", dp.neighbor_entries()}};
}

// proxy_protocol: what the dataplane sends ("" in nat mode, which cannot).
nlohmann::json services_json(const vipd::cp::SyncLoop& sync, const vipd::dp::Dataplane& dp,
                             const char* fwd, bool fnat) {
  auto table = sync.table();
  nlohmann::json services = nlohmann::json::array();
  auto stats = [](const vipd::dp::DestSnapshot& s) {
    return nlohmann::json{{"conns", s.conns}, {"inpkts", s.inpkts}, {"outpkts", s.outpkts},
                          {"inbytes", s.inbytes}, {"outbytes", s.outbytes}};
  };
  if (table) {
    for (const auto& [key, svc] : table->services) {
      vipd::dp::DestSnapshot total;
      nlohmann::json backends = nlohmann::json::array();
      for (const auto& b : svc.backends) {
        auto d = dp.dest_at(key, b.ip, b.port);
        total.conns += d.conns;
        total.inpkts += d.inpkts;
        total.outpkts += d.outpkts;
        total.inbytes += d.inbytes;
        total.outbytes += d.outbytes;
        backends.push_back({{"ip", b.ip.to_string()}, {"port", b.port},
                            {"weight", b.weight}, {"terminating", b.terminating},
                            {"active_conns", std::max<int64_t>(d.active, 0)},
                            {"inactive_conns", std::max<int64_t>(d.inactive, 0)},
                            {"ejected", d.ejected}, {"ejections", d.ejections},
                            {"stats", stats(d)}});
      }
      services.push_back({{"name", svc.name}, {"protocol", vipd::cp::name(key.protocol)},
                          {"vip", key.vip.to_string()}, {"port", key.port},
                          {"scheduler", vipd::cp::name(svc.scheduler)},
                          {"persistence_timeout_s", svc.persistence_timeout_s},
                          {"when_empty", vipd::cp::name(svc.when_empty)},
                          {"proxy_protocol", fnat ? vipd::cp::name(svc.proxy_protocol) : ""},
                          {"stats", stats(total)}, {"backends", backends}});
    }
  }
  return {{"generation", table ? table->generation : 0}, {"forward_method", fwd},
          {"services", services}};
}

// A mode's dry-run payload skips IPv6 entries as its syncs do (FamilyGate), and
// says so on stderr (for a mode that does not program IPv6; none at present).
[[maybe_unused]] vipd::cp::DryRunPrinter ipv4_only(vipd::cp::DryRunPrinter print, std::string mode) {
  return [print = std::move(print), mode = std::move(mode)](const vipd::cp::ServiceTable& t, std::ostream& out,
                                                            std::ostream& err) {
    vipd::cp::ServiceTable v4;
    const vipd::cp::FamilySkip skip = vipd::cp::drop_ipv6(t, &v4);
    if (skip.services || skip.backends) err << vipd::cp::ipv6_skip_warning(skip, mode) << "\n";
    return print(v4, out, err);
  };
}

// dpdk mode's dry-run: the JSON form of the table, and in nat mode, which
// cannot send the PROXY protocol header, the warning line the sync would log
// (ProxyProtocolGate) on stderr.
vipd::cp::DryRunPrinter dpdk_dry_run_printer(const vipd::config::Options& opt) {
  const bool fnat = opt.forward_method == vipd::config::ForwardMethod::kFnat;
  return [fnat](const vipd::cp::ServiceTable& t, std::ostream& out, std::ostream& err) {
    const std::vector<std::string> names = fnat ? std::vector<std::string>{} : vipd::cp::proxy_protocol_services(t);
    if (!names.empty()) err << vipd::cp::proxy_protocol_warning(names, "dpdk nat mode") << "\n";
    out << vipd::cp::to_dry_run_json(t) << "\n";
    return true;
  };
}

}  // namespace

// The sync loop's options (the same in every mode).
static vipd::cp::SyncOptions sync_options(const vipd::config::Options& opt) {
  vipd::cp::SyncOptions so;
  so.min_interval_ms = opt.sync_min_interval_ms;
  so.full_resync_s = opt.sync_full_resync_s;
  so.retry_max_ms = opt.sync_retry_max_ms;
  // Editors and `cp` write a manifest in several steps: let a burst of inotify
  // events settle. API events are complete objects: sync at once.
  if (opt.source == vipd::config::SourceKind::kManifests) so.quiet_ms = 5;
  return so;
}

// True when DPDK maps all of its memory at start (--no-huge, --legacy-mem),
// so that it never needs root to grow it later.
bool eal_memory_is_fixed(const std::vector<std::string>& eal_args) {
  for (const auto& a : eal_args)
    if (a == "--no-huge" || a == "--legacy-mem") return true;
  return false;
}

// The drop itself (which checks every thread), then what the new user must
// still be able to do: read what the source opens again while it runs (the
// manifests directory; the API token, CA and client certificate and key
// files). false (after one log line) means the caller must exit: the process
// may be half dropped.
bool drop_privileges(const vipd::UserIdentity& user, const vipd::cp::Source& source) {
  using namespace vipd;
  std::string why;
  size_t threads = 0;
  if (!drop_to(user, &why, &threads)) {
    log_error("vipd: --user: " + why);
    return false;
  }
  for (const cp::Source::RuntimeFile& f : source.runtime_files()) {
    if (::access(f.path.c_str(), f.directory ? R_OK | X_OK : R_OK) != 0) {
      log_error("vipd: --user " + user.name + ": cannot read " + f.what + " " + f.path + ": " +
                std::strerror(errno) + " (make it readable by that user, or leave --user out)");
      return false;
    }
  }
  log_info("vipd: dropped privileges: now " + user.name + " (uid " + std::to_string(user.uid) + ", gid " +
           std::to_string(user.gid) + "), no capabilities in any of " + std::to_string(threads) + " threads");
  return true;
}

int main(int argc, char** argv) {
  using namespace vipd;
  std::optional<config::Options> parsed;
  try {
    parsed = config::parse(argc, argv, std::cout);
  } catch (const config::ConfigError& e) {
    std::cerr << e.what() << "\n";
    return 2;
  }
  if (!parsed) return 0;  // --help / --version
  const config::Options& opt = *parsed;
  set_log_level(severity(opt.log_level));

  // --user: resolve the user now (a typo is a config error before anything
  // starts) and set no_new_privs before any thread exists (the source's, DPDK's), so that
  // every thread inherits it (common/privileges.h).
  std::optional<UserIdentity> drop_user;
  if (!opt.user.empty() && !opt.dry_run) {
    std::string why;
    drop_user = lookup_user(opt.user, &why);
    if (!drop_user) {
      std::cerr << "config: --user '" << opt.user << "': " << why << "\n";
      return 2;
    }
    if (!prepare_drop(&why)) {
      log_error("vipd: --user: " + why);
      return 1;
    }
    if (!eal_memory_is_fixed(opt.dataplane.eal_args))
      log_warn("vipd: --user " + opt.user +
               ": DPDK maps more hugepage memory only while root; add --legacy-mem (or --no-huge) to "
               "--eal-args so that all of it is mapped at start (docs/security.md)");
  }

  // Desired state: a manifests directory or the Kubernetes API (docs/kubernetes.md).
  std::string source_err;
  std::unique_ptr<cp::Source> source_ptr = cp::make_source(opt, &source_err);
  if (!source_ptr) {
    log_error("vipd: " + source_err);
    return 1;
  }
  cp::Source& source = *source_ptr;
  if (opt.dry_run) {
    // iptables mode prints the iptables-restore payload it would apply (then the ip6tables-restore one).
    if (opt.mode == config::Mode::kIptables)
      return cp::dry_run(source, std::cout, std::cerr, 30000, iptables_dry_run_printer(opt));
    // nftables mode prints the full-sync nft transaction (nft -c -f accepts it).
    if (opt.mode == config::Mode::kNftables)
      return cp::dry_run(source, std::cout, std::cerr, 30000,
                         nftables_dry_run_printer(opt));
    // ipvs mode prints the IPVS state (ipvsadm -Ln form), addresses and rules.
    if (opt.mode == config::Mode::kIpvs)
      return cp::dry_run(source, std::cout, std::cerr, 30000, ipvs_dry_run_printer(opt));
    return cp::dry_run(source, std::cout, std::cerr, 30000, dpdk_dry_run_printer(opt));
  }
  if (opt.mode == config::Mode::kIptables) {
    // No DPDK, no EAL: the kernel forwards (cmd/vipd_iptables.cc, docs/modes.md).
    struct sigaction sa{};
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    return run_iptables_mode(opt, source, sync_options(opt), g_stop);
  }
  if (opt.mode == config::Mode::kNftables) {
    // No DPDK: the kernel's nf_tables forwards (cmd/vipd_nftables.cc, docs/modes.md).
    struct sigaction sa{};
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    return run_nftables_mode(opt, source, sync_options(opt), g_stop);
  }
  if (opt.mode == config::Mode::kIpvs) {
    // No DPDK either: the kernel's IPVS forwards (cmd/vipd_ipvs.cc, docs/modes.md).
    struct sigaction sa{};
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    return run_ipvs_mode(opt, source, sync_options(opt), g_stop);
  }
  if (opt.mode != config::Mode::kDpdk) {
    std::cerr << "config: --mode '" << config::mode_name(opt.mode)
              << "': not implemented\n";
    return 2;
  }

  dp::DataplaneConfig dc{opt.dataplane};
  for (const auto& p : opt.ports)
    dc.ports.push_back(dp::PortSpec{p.device, p.is_pci, p.ip, p.prefix_len, p.gateway.value_or(0)});
  dc.fnat = opt.forward_method == config::ForwardMethod::kFnat;
  dc.local_addrs = opt.fnat_local_addrs;
  dc.handover_peers = opt.handover_peers;

  std::string err;
  auto dataplane = dp::Dataplane::create(dc, &err);
  if (!dataplane) {
    log_error(err);
    return 1;
  }
  // Exception path (docs/gateway.md): each tap interface gets its port's address.
  for (const auto& p : dataplane->ports()) {
    if (p.exception_ifname.empty()) continue;
    if (!cp::host::add_iface_address(p.exception_ifname, p.ip, p.prefix_len, &err)) {
      log_error(err);
      return 1;
    }
    log_info("vipd: exception path: " + p.exception_ifname + " has " + cp::ipv4_to_string(p.ip) + "/" +
             std::to_string(p.prefix_len) + " and mac " + p.mac);
  }
  if (!dataplane->start(&err)) {
    log_error(err);
    return 1;
  }

  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  cp::DpdkBackend dpdk_backend(*dataplane);
  // IPv6 entries go to the dataplane when it forwards IPv6 (a port with
  // --port-ipv6; fnat: --fnat-local-addrs6); otherwise the FamilyGate warns and
  // skips them.
  cp::FamilyGate family_gate(dpdk_backend, dc.fnat ? "dpdk fnat mode" : "dpdk nat mode");
  cp::Backend& family_backend =
      dataplane->forwards_ipv6() ? static_cast<cp::Backend&>(dpdk_backend) : static_cast<cp::Backend&>(family_gate);
  // Only full NAT can insert the PROXY protocol header (docs/scheduling.md).
  cp::ProxyProtocolGate nat_gate(family_backend, "dpdk nat mode");
  cp::Backend& fwd_backend = dc.fnat ? family_backend : nat_gate;
  // VIP announcement (docs/gateway.md): routes follow each applied table.
  std::unique_ptr<cp::host::RouteAnnouncer> announcer;
  std::unique_ptr<cp::host::AnnouncingBackend> announcing;
  if (opt.announce_table) {
    announcer = std::make_unique<cp::host::RouteAnnouncer>(dataplane->ports().front().exception_ifname,
                                                           opt.announce_table);
    // IPv6 VIPs as /128 routes: the interface must take IPv6 routes (it is
    // switched to IPv6 without addresses); if it cannot, IPv4 VIPs only.
    bool with_v6 = cp::host::enable_ipv6_routes(announcer->ifname(), &err);
    if (!with_v6) log_warn("vipd: " + err + ": IPv6 VIPs are not announced");
    announcing = std::make_unique<cp::host::AnnouncingBackend>(fwd_backend, *announcer,
                                                               opt.announce_require_endpoints, with_v6);
    log_info("vipd: announcing VIPs as /32" + std::string(with_v6 ? " and /128" : "") + " routes in table " +
             std::to_string(opt.announce_table) + " on " + announcer->ifname());
  }
  cp::Backend& backend = announcing ? static_cast<cp::Backend&>(*announcing) : fwd_backend;
  cp::SyncLoop sync(source, backend, sync_options(opt));
  const char* fwd = cp::name(opt.forward_method);

  // Prometheus /metrics and /healthz, /livez (docs/metrics.md).
  cp::DataplaneStatsSource stats_source(*dataplane, sync);
  if (auto fn = cmd::source_stats_fn(source)) stats_source.set_source_stats(std::move(fn));
  cp::Observability observability(stats_source, cmd::observability_options(opt));
  sync.set_observer(observability.sync_observer());

  // Draining (docs/gateway.md, "Draining"): the announced routes are withdrawn
  // and stay so; the dataplane goes on forwarding what still arrives.
  std::mutex drain_mu;           // serialises drain changes (admin thread, main thread at shutdown)
  std::atomic<bool> draining{false};
  std::atomic<int64_t> drain_since_ns{0};
  std::atomic<bool> stopping{false};  // --drain-on-sigterm's drain runs: no cancel
  auto connections = [&] {
    uint64_t n = 0;
    for (const auto& w : dataplane->workers()) n += w.active_flows;
    return n;
  };
  auto set_drain = [&](bool on, std::string* why) {
    std::lock_guard<std::mutex> lk(drain_mu);
    if (on != draining.load()) {
      drain_since_ns.store(on ? vipd::now_unix_ns() : 0);
      draining.store(on);
      log_info(on ? "vipd: draining: announced routes withdrawn, forwarding goes on ("
                        + std::to_string(connections()) + " connection(s))"
                  : std::string("vipd: drain cancelled: VIPs announced again"));
    }
    return announcing ? announcing->set_draining(on, why) : true;
  };
  auto drain_doc = [&] {
    nlohmann::json j;
    j["draining"] = draining.load();
    j["since_unix_ns"] = drain_since_ns.load();
    j["connections"] = connections();
    j["announced_vips"] = announcing ? announcing->announced_count() : 0;
    j["announce_table"] = opt.announce_table;
    j["stopping"] = stopping.load();
    return j;
  };
  stats_source.set_drain_stats([&] {
    return cp::DrainStats{announcing ? announcing->announced_count() : 0, draining.load()};
  });

  cp::AdminServer admin(opt.admin_socket);
  // GET /v1/drain: the state; ?action=start drains, ?action=cancel re-announces
  // (the admin socket is local and guarded by its file mode, docs/vipctl.md).
  admin.handle_query("/v1/drain", [&](const cp::AdminServer::Query& q) {
    const auto it = q.find("action");
    const std::string action = it == q.end() ? "" : it->second;
    if (action != "" && action != "start" && action != "cancel")
      throw cp::AdminServer::HttpError(400, "action '" + action + "': expected start or cancel");
    if (action == "cancel" && stopping.load())
      throw cp::AdminServer::HttpError(409, "vipd is stopping (--drain-on-sigterm): the drain cannot be cancelled");
    if (!action.empty()) {
      std::string why;
      if (!set_drain(action == "start", &why))
        throw cp::AdminServer::HttpError(500, std::string(action == "start" ? "draining" : "drain cancelled") +
                                                  ", but the routes could not all be changed: " + why);
    }
    return nlohmann::ordered_json::parse(drain_doc().dump());
  });
  admin.handle_query("/v1/explain", [&](const cp::AdminServer::Query& q) {
    std::string why;
    auto eq = cp::parse_explain_query(q, &why);
    if (!eq) throw cp::AdminServer::HttpError(400, why);
    auto r = dataplane->explain(static_cast<uint8_t>(eq->protocol), eq->src, eq->sport, eq->dst, eq->dport);
    if (!r.answered)
      throw cp::AdminServer::HttpError(503, "worker lcore " + std::to_string(r.worker_lcore) +
                                                " did not answer within 200 ms");
    auto t = sync.table();
    return cp::explain_json(*eq, r, t.get(), opt.forward_method == config::ForwardMethod::kFnat);
  });
  admin.handle("/v1/stats", [&] { return stats_json(*dataplane); });
  admin.handle("/v1/services", [&] { return services_json(sync, *dataplane, fwd, dc.fnat); });
  admin.handle_ordered("/v1/table", [&] { return vipd::cmd::table_doc(sync); });
  admin.handle("/v1/status", [&] {
    nlohmann::json j = vipd::cmd::status_doc(sync, opt, fwd, &source);
    j["config"]["workers"] = opt.dataplane.worker_lcores;
    j["config"]["ports"] = opt.ports.size();
    j["config"]["conn_table_size"] = opt.dataplane.conn_table_size;
    j["config"]["exception_path"] = opt.dataplane.exception_path == vipd::ExceptionPath::kTap ? "tap" : "none";
    j["drain"] = drain_doc();
    if (announcer) {
      // Read on the admin thread while the sync thread may change it: a copy
      // under no lock would race, so only the table and interface are shown
      // here; the routes are in the table itself (ip route show table N).
      j["announce"] = {{"table", announcer->table()}, {"interface", announcer->ifname()}};
    }
    return j;
  });
  if (!admin.start(&err)) {
    log_error(err);
    dataplane->stop();
    return 1;
  }
  log_info("vipd: running (" + std::string(fwd) + ", " + std::to_string(opt.dataplane.worker_lcores.size()) +
           " worker(s), admin socket " + opt.admin_socket + ")");
  if (!observability.start(&err)) {
    log_error(err);
    admin.stop();
    dataplane->stop();
    return 1;
  }
  if (drop_user) {
    if (!drop_privileges(*drop_user, source)) {
      observability.stop();
      admin.stop();
      dataplane->stop();
      return 1;
    }
  } else {
    log_info("vipd: running as root: every thread keeps root's capabilities (--user NAME drops them once started)");
  }
  sync.run(g_stop);
  if (opt.drain_on_sigterm > 0) {
    // --drain-on-sigterm: withdraw, then wait for the connections to end. The
    // table no longer follows the source meanwhile (the sync loop has ended).
    stopping.store(true);
    const int signals_at = g_signals.load();
    std::string why;
    if (!set_drain(true, &why)) log_warn("vipd: drain: " + why);
    const auto t0 = std::chrono::steady_clock::now();
    const auto deadline = t0 + std::chrono::seconds(opt.drain_on_sigterm);
    auto next_log = t0;
    for (;;) {
      const uint64_t n = connections();
      const auto now = std::chrono::steady_clock::now();
      if (n == 0) {
        log_info("vipd: drained: no connection left");
        break;
      }
      if (now >= deadline) {
        log_warn("vipd: drain timeout after " + std::to_string(opt.drain_on_sigterm) + " s: " + std::to_string(n) +
                 " connection(s) left");
        break;
      }
      if (g_signals.load() != signals_at) {
        log_warn("vipd: second signal: stopping with " + std::to_string(n) + " connection(s) left");
        break;
      }
      if (now >= next_log) {
        const auto left = std::chrono::ceil<std::chrono::seconds>(deadline - now).count();
        log_info("vipd: draining before stopping: " + std::to_string(n) + " connection(s) left, up to " +
                 std::to_string(left) + " s more");
        next_log = now + std::chrono::seconds(1);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  log_info("vipd: stopping");
  stopping.store(true);
  if (announcing) {
    std::string why;
    std::lock_guard<std::mutex> lk(drain_mu);
    if (!announcing->withdraw_all(&why)) log_warn("vipd: " + why);
  }
  observability.stop();
  admin.stop();
  dataplane->stop();
  return 0;
}
