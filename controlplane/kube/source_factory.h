// Thread: control (start-up). Chooses and constructs the desired-state Source
// from the configuration: ManifestSource (--manifests-dir) or KubeSource
// (--kubeconfig / --in-cluster / --source kubernetes), and the dry-run printout.
#pragma once

#include <functional>
#include <memory>
#include <ostream>
#include <string>

#include "controlplane/config/options.h"
#include "controlplane/sources/k8s_objects.h"
#include "controlplane/sources/source.h"

namespace vipd::cp {

k8s::BuildOptions build_options(const config::Options& opt);

// Returns null and sets *error when the source cannot be set up (unreadable
// kubeconfig, not in a cluster). A KubeSource is started (its reflector
// threads run) before this returns.
std::unique_ptr<Source> make_source(const config::Options& opt, std::string* error);

// Prints a table in a mode's own form (iptables mode: its iptables-restore
// payload); returns false, having said why on `err`, when it cannot.
using DryRunPrinter = std::function<bool(const ServiceTable&, std::ostream& out, std::ostream& err)>;

// --dry-run: waits (KubeSource: up to `timeout_ms` for both initial lists),
// prints the table JSON (or, with `print`, what `print` makes of the table) on
// `out`, problems on `err`. Returns the exit status: 0, or 1 when the source
// had errors, never became ready, or `print` failed.
int dry_run(Source& source, std::ostream& out, std::ostream& err, int timeout_ms = 30000,
            const DryRunPrinter& print = {});

// Extra /v1/status fields for the source ("source": {...}).
std::string source_kind(const Source& source);

}  // namespace vipd::cp
