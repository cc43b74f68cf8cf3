// Thread: control (apply() and tick() run on the SyncLoop's thread; stats() and
// draining() from any thread). The ipvs mode's Backend (docs/modes.md): programs
// each ServiceTable into the kernel's IPVS through an IpvsKernel, binds VIPs to a
// dummy interface (VipInterface), sets the sysctls of docs/contract.md C15 and
// keeps two iptables chains (ipvs_desired.h: masquerade, REJECT/DROP for
// services without endpoints).
//
// - Full sync (first apply, after any failure, when the SyncLoop asks): the
//   kernel's state is read back (GET_SERVICE/GET_DEST dumps, the interface's
//   addresses) and reconciled with the table: missing services and real
//   servers are created, wrong parameters and weights fixed, stale services
//   deleted, stale addresses unbound. A kernel service counts as vipd's when
//   its VIP is bound to the dummy interface or vipd programmed it in this run;
//   others (another tool's) are left alone.
// - Partial sync: only the services in the TableDiff are reconciled, against
//   vipd's record of what the kernel holds (no dump).
// - Graceful termination: a real server that leaves the table (or drops to
//   weight 0) gets weight 0 and stays while it has connections; tick() (every
//   tick_interval_ms) reads the draining services' real servers and deletes
//   those whose ActiveConn + InActConn is 0. UDP real servers are deleted at
//   once. A returning real server gets its weight back.
// - IPv6: IPv6 entries become AF_INET6 virtual services with IPv6 real servers,
//   their VIPs are bound /128 (nodad) on the same interface, and their rules go
//   through ip6tables-restore into the same two chains of ip6tables (REJECT
//   --reject-with icmp6-port-unreachable). The ip6tables side is engaged while
//   the table has IPv6 entries, once it had them in this run, or when a full
//   sync finds vipd's chain in ip6tables (left by an earlier run: emptied);
//   until then IPv4-only use runs no ip6tables command but that check, so a
//   host without ip6tables is unchanged. With IPv6 entries vipd also sets
//   net.ipv6.conf.all.forwarding = 1 (required_sysctls6()).
// - Any error (EEXIST, ESRCH, ENOENT, EPERM, IPVS missing, ...) ends the apply
//   with one line (kernel_error_text) and false: the SyncLoop retries with a
//   full sync. Nothing here throws on a bad kernel answer.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "model/backend.h"
#include "controlplane/backends/iptables/runner.h"
#include "controlplane/backends/ipvs/ipvs_desired.h"
#include "controlplane/backends/ipvs/ipvs_kernel.h"

namespace vipd::cp::ipvs {

using CommandRunner = std::function<ipt::RunResult(const std::vector<std::string>& argv, const std::string& input)>;

struct IpvsBackendOptions {
  RulesOptions rules;
  std::string proc_sys = "/proc/sys";  // where the sysctls are written
  bool set_sysctls = true;
  bool manage_iptables = true;         // masquerade + REJECT chains
  std::string restore_cmd = "iptables-restore";
  std::string iptables_cmd = "iptables";
  std::string restore6_cmd = "ip6tables-restore";
  std::string ip6tables_cmd = "ip6tables";
  unsigned lock_wait_s = 5;
  int command_timeout_ms = 30000;
  uint32_t tick_interval_ms = 1000;    // graceful-termination check; 0 = never
  CommandRunner run;                   // default: ipt::run_command
};

struct IpvsBackendStats {
  uint64_t full_syncs = 0;
  uint64_t partial_syncs = 0;
  uint64_t failures = 0;
  uint64_t netlink_ops = 0;            // NEW/SET/DEL requests, total
  uint64_t last_sync_ops = 0;          // ... in the last apply
  uint64_t stale_services_deleted = 0; // by full syncs (total)
  uint64_t dests_drained = 0;          // deleted after draining (total)
  uint64_t foreign_services = 0;       // in the last dump: not vipd's, left alone
  uint64_t services = 0;               // in the kernel, vipd's, after the last apply
  uint64_t dests = 0;
  uint64_t draining = 0;               // real servers at weight 0 waiting for 0 connections
  uint64_t vips_bound = 0;
  uint64_t ipv6_services = 0;          // of `services`: AF_INET6 ones
  bool ipv6_rules = false;             // the ip6tables side is engaged
  uint64_t cross_family_skipped = 0;   // backends not of their VIP's family (last apply)
  uint64_t rules_applied = 0;          // iptables-restore / ip6tables-restore runs
  uint64_t jump_rules_added = 0;
  uint64_t sysctl_errors = 0;          // in the last full sync
  std::string sysctl_error;            // the first of them
  double last_sync_ms = 0;
};

// A real server vipd is draining (for /v1/services).
struct DrainingDest {
  ServiceKey key;
  IpAddr ip;
  uint16_t port = 0;
  uint32_t active_conns = 0, inactive_conns = 0;  // at the last check
};

class IpvsBackend final : public Backend {
 public:
  IpvsBackend(IpvsKernel& kernel, VipInterface& iface, IpvsBackendOptions opts = {});
  const char* name() const override { return "ipvs"; }
  bool apply(const ServiceTable& next, const TableDiff& diff, bool full, std::string* error) override;
  uint32_t tick_interval_ms() const override { return opts_.tick_interval_ms; }
  bool tick(std::string* error) override;

  IpvsBackendStats stats() const;
  std::vector<DrainingDest> draining() const;

 private:
  struct DestKey {
    IpAddr ip;
    uint16_t port;
    auto operator<=>(const DestKey&) const = default;
  };
  struct KService {  // what vipd believes the kernel holds
    IpvsService service;
    std::map<DestKey, IpvsDest> dests;
  };

  bool full_sync(std::string* error);
  bool partial_sync(const TableDiff& diff, std::string* error);
  bool reconcile(const ServiceKey& key, std::string* error);
  bool reconcile_dests(const DesiredService& want, KService& have, std::string* error);
  bool bind_wanted(std::string* error);
  bool unbind_unwanted(std::string* error);
  bool apply_rules(bool full, std::string* error);
  bool apply_family_rules(AddressFamily f, bool full, std::string* error);
  bool ip6tables_has_chain();
  bool ensure_jumps(AddressFamily f, std::string* error);
  void set_sysctls();
  bool wanted_dest(const ServiceKey& key, const DestKey& d) const;
  int op(int err) { ++ops_; return err; }
  void publish_stats(bool ok, bool full, double ms);

  IpvsKernel& kernel_;
  VipInterface& iface_;
  IpvsBackendOptions opts_;

  Desired desired_;                         // of the last apply (successful or not)
  std::map<ServiceKey, KService> kstate_;   // vipd's services in the kernel
  std::set<IpAddr> bound_;                  // addresses on the dummy interface
  std::string applied_rules_;               // last payload iptables-restore accepted
  std::string applied_rules6_;              // ... ip6tables-restore
  bool v6_rules_ = false;                   // the ip6tables side is engaged
  size_t cross_family_warned_ = 0;
  bool force_full_ = true;
  uint64_t ops_ = 0;
  uint64_t stale_deleted_ = 0, drained_ = 0, foreign_ = 0, rules_applied_ = 0, jumps_added_ = 0;
  uint64_t sysctl_errors_ = 0;
  std::string sysctl_error_;
  std::set<std::string> warned_;            // sysctl warnings already logged

  mutable std::mutex mu_;                   // guards stats_, draining_
  IpvsBackendStats stats_;
  std::vector<DrainingDest> draining_;
};

}  // namespace vipd::cp::ipvs
