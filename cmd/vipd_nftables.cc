// Thread: main (the control thread); the admin, metrics and health servers run
// their own threads and only read the sync loop's status/table and the
// backend's stats() (both thread-safe). The runner: cmd/kernel_mode.cc.
#include "cmd/vipd_nftables.h"

#include <iostream>
#include <nlohmann/json.hpp>

#include "cmd/kernel_mode.h"
#include "controlplane/backends/nftables/backend.h"

namespace vipd {
namespace {

constexpr const char* kNoDataplane =
    "nftables mode: the kernel forwards, vipd has no dataplane counters (rules: nft list table ip vipd / ip6 vipd; "
    "connections: conntrack -L)";

nlohmann::json backend_json(const cp::nft::NftablesStats& s) {
  return {{"full_syncs", s.full_syncs},
          {"partial_syncs", s.partial_syncs},
          {"netlink_syncs", s.netlink_syncs},
          {"noop_syncs", s.noop_syncs},
          {"failures", s.failures},
          {"entries_rendered", s.entries_rendered},
          {"chains_written", s.chains_written},
          {"chains_deleted", s.chains_deleted},
          {"chains_retired", s.chains_retired},
          {"retired_pending", s.retired_pending},
          {"elements_changed", s.elements_changed},
          {"transaction_bytes", s.transaction_bytes},
          {"chains", s.chains},
          {"last_render_ms", s.last_render_ms},
          {"last_transaction_ms", s.last_transaction_ms}};
}

}  // namespace

cp::nft::RenderOptions nftables_render_options(const config::Options& opt) {
  cp::nft::RenderOptions r;
  r.masquerade_all = opt.forward_method == config::ForwardMethod::kFnat;
  return r;
}

cp::DryRunPrinter nftables_dry_run_printer(const config::Options& opt) {
  const cp::nft::RenderOptions ro = nftables_render_options(opt);
  return [ro](const cp::ServiceTable& t, std::ostream& out, std::ostream& err) {
    cp::nft::Desired d;
    std::string why;
    if (!cp::nft::build_desired(t, ro, {}, &d, nullptr, &why)) {
      err << "vipd: " << why << "\n";
      return false;
    }
    out << cp::nft::dry_run_text(d, ro);
    return true;
  };
}

int run_nftables_mode(const config::Options& opt, cp::Source& source, const cp::SyncOptions& so,
                      const std::atomic<bool>& stop) {
  cp::nft::NftablesBackend backend(nftables_render_options(opt));
  cmd::KernelMode mode;
  mode.name = "nftables";
  mode.no_dataplane_note = kNoDataplane;
  mode.explain_hint =
      "explain needs the dpdk dataplane; in nftables mode the kernel picks the endpoint at random "
      "(inspect with: nft list table ip vipd / ip6 vipd)";
  mode.running_detail = opt.forward_method == config::ForwardMethod::kFnat ? "service traffic masqueraded"
                                                                           : "no masquerade";
  mode.stopping_detail = "tables ip/ip6 vipd (and shard tables vipd-N) left in place";
  mode.backend_json = [&backend] { return backend_json(backend.stats()); };
  mode.scheduler = [](const cp::VirtualService&) { return std::string("random"); };
  mode.programs_ipv6 = true;  // IPv6 entries go to table ip6 vipd
  return cmd::run_kernel_mode(opt, source, backend, so, mode, stop);
}

}  // namespace vipd
