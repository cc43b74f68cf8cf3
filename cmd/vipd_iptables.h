// Thread: main (the control thread). vipd in `mode = iptables` (docs/modes.md):
// the same source and sync loop as dpdk mode, programming the kernel's netfilter
// through iptables-restore instead of a DPDK dataplane (no EAL is started).
#pragma once

#include <atomic>

#include "controlplane/backends/iptables/ruleset.h"
#include "controlplane/config/options.h"
#include "controlplane/kube/source_factory.h"
#include "controlplane/sources/source.h"
#include "controlplane/sync/sync_loop.h"

namespace vipd {

cp::ipt::RenderOptions iptables_render_options(const config::Options& opt);

// For cp::dry_run: prints the full iptables-restore payload of the table.
cp::DryRunPrinter iptables_dry_run_printer(const config::Options& opt);

// Runs until `stop` is set: SyncLoop + IptablesBackend, admin socket (/v1/status,
// /v1/services, /v1/table, /v1/stats without dataplane counters), Prometheus
// /metrics and /healthz, /livez. Returns the process exit status.
int run_iptables_mode(const config::Options& opt, cp::Source& source, const cp::SyncOptions& so,
                      const std::atomic<bool>& stop);

}  // namespace vipd
