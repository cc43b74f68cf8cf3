// Thread: main (the control thread). vipd in `mode = nftables` (docs/modes.md):
// the same source and sync loop as the other modes, programming the kernel's
// nf_tables (table `ip vipd`) through libnftables; no EAL is started.
#pragma once

#include <atomic>

#include "controlplane/backends/nftables/ruleset.h"
#include "controlplane/config/options.h"
#include "controlplane/kube/source_factory.h"
#include "controlplane/sources/source.h"
#include "controlplane/sync/sync_loop.h"

namespace vipd {

cp::nft::RenderOptions nftables_render_options(const config::Options& opt);

// For cp::dry_run: prints the full-sync nft transaction of the table.
cp::DryRunPrinter nftables_dry_run_printer(const config::Options& opt);

// Runs until `stop` is set (cmd/kernel_mode.cc). Returns the process exit status.
int run_nftables_mode(const config::Options& opt, cp::Source& source, const cp::SyncOptions& so,
                      const std::atomic<bool>& stop);

}  // namespace vipd
