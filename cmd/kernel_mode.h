// Thread: main (the control thread); the admin, metrics and health servers run
// their own threads and only call the KernelMode callbacks, which must read
// thread-safe state (the backend's stats, the sync loop's table).
// What the kernel modes (cmd/vipd_iptables.cc, cmd/vipd_ipvs.cc) share: the
// sync loop on their backend, the admin API without dataplane counters,
// /metrics and /healthz, and the start and stop lines.
#pragma once

#include <atomic>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "model/backend.h"
#include "controlplane/config/options.h"
#include "model/service_table.h"
#include "controlplane/sources/source.h"
#include "controlplane/sync/sync_loop.h"

namespace vipd::cmd {

struct KernelMode {
  std::string name;               // "iptables" | "ipvs": the mode, and the key of the backend's object
  std::string no_dataplane_note;  // why /v1/stats has no counters, and what to run instead
  std::string explain_hint;       // the 501 answer of /v1/explain
  std::string running_detail;     // appended to the "running in ... mode (fwd: " start line
  std::string stopping_detail;    // "vipd: stopping (...)": what stays in the kernel
  std::function<nlohmann::json()> backend_json;  // /v1/stats and /v1/status ["name"]
  // /v1/services: the scheduler shown for a service (the kernel's, not always the table's).
  std::function<std::string(const cp::VirtualService&)> scheduler;
  // /v1/services: backends the kernel still has although the table dropped them (optional).
  std::function<void(const cp::ServiceKey&, const cp::VirtualService&, nlohmann::json& backends)> extra_backends;
  nlohmann::json extra_config = nlohmann::json::object();  // merged into /v1/status "config"
  // The backend programs IPv6 entries itself (iptables: ip6tables; ipvs: AF_INET6
  // services and ip6tables); otherwise a
  // FamilyGate drops them before it with a warning.
  bool programs_ipv6 = false;
};

// /v1/services in a kernel mode (vipctl list): the table's services and
// backends, without traffic counters.
nlohmann::json kernel_services_json(const cp::SyncLoop& sync, const KernelMode& mode, const char* fwd);

// Runs until `stop` is set. Returns the process exit status.
int run_kernel_mode(const config::Options& opt, cp::Source& source, cp::Backend& backend,
                    const cp::SyncOptions& so, const KernelMode& mode, const std::atomic<bool>& stop);

}  // namespace vipd::cmd
