// Thread: main (the control thread). vipd in `mode = ipvs` (docs/modes.md): the
// same source and sync loop as the other modes, programming the kernel's IPVS
// over generic netlink (controlplane/backends/ipvs) instead of a DPDK dataplane
// (no EAL is started). VIPs are bound to a dummy interface (--ipvs-interface).
#pragma once

#include <atomic>

#include "controlplane/config/options.h"
#include "controlplane/kube/source_factory.h"
#include "controlplane/sources/source.h"
#include "controlplane/sync/sync_loop.h"

namespace vipd {

// For cp::dry_run: prints the desired IPVS state (ipvsadm -Ln form), the dummy
// interface's addresses, the sysctls and the iptables payload (then the
// ip6tables one when the table has IPv6 entries).
cp::DryRunPrinter ipvs_dry_run_printer(const config::Options& opt);

// Runs until `stop` is set: SyncLoop + IpvsBackend (with its graceful-termination
// tick), admin socket (/v1/status with an "ipvs" object, /v1/services,
// /v1/table, /v1/stats without dataplane counters), Prometheus /metrics and
// /healthz, /livez. Returns the process exit status.
int run_ipvs_mode(const config::Options& opt, cp::Source& source, const cp::SyncOptions& so,
                  const std::atomic<bool>& stop);

}  // namespace vipd
