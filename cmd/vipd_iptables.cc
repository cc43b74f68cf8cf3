// Thread: main (the control thread); the admin, metrics and health servers run
// their own threads and only read the sync loop's status/table and the
// backend's stats() (both thread-safe). The runner: cmd/kernel_mode.cc.
#include "cmd/vipd_iptables.h"

#include <iostream>
#include <nlohmann/json.hpp>

#include "cmd/kernel_mode.h"
#include "controlplane/backends/iptables/iptables_backend.h"

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
          {"jump_rules_added", s.jump_rules_added}, {"last_restore_ms", s.last_restore_ms},
          {"ipv6_active", s.ipv6_active},       {"ipv6_nat_chains", s.ipv6_nat_chains},
          {"ipv6_payload_bytes", s.ipv6_payload_bytes}, {"ipv6_restores", s.ipv6_restores}};
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
    cp::ipt::Ruleset rules, rules6;
    std::string why;
    if (!cp::ipt::build_ruleset(t, ro, &rules, &why) ||
        !cp::ipt::build_ruleset(t, ro, cp::AddressFamily::kIpv6, &rules6, &why)) {
      err << "vipd: " << why << "\n";
      return false;
    }
    // The IPv4 payload, then the IPv6 one when the table has IPv6 entries.
    out << cp::ipt::dry_run_text(rules, rules6, ro);
    return true;
  };
}

int run_iptables_mode(const config::Options& opt, cp::Source& source, const cp::SyncOptions& so,
                      const std::atomic<bool>& stop) {
  cp::ipt::IptablesOptions io;
  io.render = iptables_render_options(opt);
  cp::ipt::IptablesBackend backend(io);
  cmd::KernelMode mode;
  mode.name = "iptables";
  mode.no_dataplane_note = kNoDataplane;
  mode.explain_hint =
      "explain needs the dpdk dataplane; in iptables mode the kernel picks the endpoint at random "
      "(inspect with: iptables-save -t nat | grep VIPD-)";
  mode.running_detail = io.render.masquerade_all ? "service traffic masqueraded" : "no masquerade";
  mode.stopping_detail = "iptables rules left in place";
  mode.programs_ipv6 = true;  // ip6tables-restore, the same layout
  mode.backend_json = [&backend] { return backend_json(backend.stats()); };
  // iptables picks endpoints at random, whatever the scheduler says.
  mode.scheduler = [](const cp::VirtualService&) { return std::string("random"); };
  return cmd::run_kernel_mode(opt, source, backend, so, mode, stop);
}

}  // namespace vipd
