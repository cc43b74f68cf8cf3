// Thread: control (apply() runs on the SyncLoop's thread; stats() from any
// thread). The iptables mode's Backend: renders each ServiceTable into vipd's
// VIPD- chains (ruleset.h) and applies one `iptables-restore --noflush -w N`
// payload per sync.
//
// - Full sync (first apply, after a failure, or when the SyncLoop asks): reads the
//   kernel's VIPD- chains (iptables-save), rewrites every chain of the new rule
//   set, deletes VIPD- chains that are no longer wanted, then makes sure the
//   jumps from the builtin chains exist (iptables -C, -I when missing). Nothing
//   is flushed beforehand: a restarted vipd replaces the old rules in one
//   iptables-restore transaction per table, so traffic is never left without
//   rules.
// - Partial sync: only chains whose rules changed are rewritten; stale chains
//   are flushed and deleted; nothing is run when no chain changed.
// - A failed command makes apply() return false with the command's stderr in
//   the error line; the next apply is a full sync.
// - IPv6: the same, with ip6tables-restore / ip6tables-save / ip6tables and the
//   IPv6 rule set (build_ruleset with AddressFamily::kIpv6), as a second run in
//   the same sync after the IPv4 one, with its own applied state. The IPv6 side
//   is engaged once the table has IPv6 entries, or when a full sync finds VIPD-
//   chains in ip6tables-save's output (left by an earlier run: they are
//   replaced or deleted); until then no ip6tables command but the full syncs'
//   ip6tables-save runs, so IPv4-only use on a host without ip6tables (or
//   without ip6table_nat) is unchanged. A failed ip6tables command fails the
//   sync like an IPv4 one (the IPv4 rules are in place by then).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "model/backend.h"
#include "controlplane/backends/iptables/ruleset.h"

namespace vipd::cp::ipt {

struct IptablesOptions {
  RenderOptions render;
  std::string restore_cmd = "iptables-restore";
  std::string save_cmd = "iptables-save";
  std::string iptables_cmd = "iptables";
  std::string restore6_cmd = "ip6tables-restore";
  std::string save6_cmd = "ip6tables-save";
  std::string ip6tables_cmd = "ip6tables";
  unsigned lock_wait_s = 5;           // -w: wait for the xtables lock
  int command_timeout_ms = 30000;     // a command still running after this is killed
  // iptables-restore gets this much more per MiB of payload: a full load of
  // 10k services is about 20 MiB, and nf_tables' iptables-restore needed more
  // than 120 s for it on the benchmark VM (docs/benchmarks.md, 3a).
  int restore_timeout_ms_per_mib = 10000;
};

// The time limit of one iptables-restore run with a payload of `bytes`.
int restore_timeout_ms(const IptablesOptions& o, size_t bytes);

struct IptablesStats {
  uint64_t full_syncs = 0;
  uint64_t partial_syncs = 0;
  uint64_t noop_syncs = 0;            // nothing differed: no command run
  uint64_t failures = 0;
  uint64_t chains_written = 0;        // last sync
  uint64_t chains_deleted = 0;        // last sync
  uint64_t payload_bytes = 0;         // last sync
  uint64_t nat_chains = 0;            // after the last successful sync
  uint64_t jump_rules_added = 0;      // total
  double last_restore_ms = 0;
  // IPv6 (ip6tables): whether it is engaged, its nat chains after the last
  // successful sync, the last sync's ip6tables-restore payload (0: none run).
  bool ipv6_active = false;
  uint64_t ipv6_nat_chains = 0;
  uint64_t ipv6_payload_bytes = 0;
  uint64_t ipv6_restores = 0;         // total ip6tables-restore runs
};

class IptablesBackend final : public Backend {
 public:
  explicit IptablesBackend(IptablesOptions opts = {});
  const char* name() const override { return "iptables"; }
  bool apply(const ServiceTable& next, const TableDiff& diff, bool full, std::string* error) override;

  IptablesStats stats() const;
  // The last payload handed to iptables-restore ("" before the first); control thread.
  const std::string& last_payload() const { return v4_.last_payload; }
  // The same for ip6tables-restore.
  const std::string& last_payload6() const { return v6_.last_payload; }

 private:
  // One family's commands and what its tables hold.
  struct FamilyState {
    AddressFamily family;
    std::string restore_cmd, save_cmd, iptables_cmd;
    Ruleset applied;          // what the kernel holds after the last successful sync
    bool have_applied = false;
    bool force_full = true;   // after a failure: the kernel's state is unknown
    bool active = false;      // IPv6: engaged (IPv4: always)
    std::string last_payload;
  };
  struct FamilyResult {
    bool ran = false;         // a restore payload was applied
    bool full = false;
    Payload payload;
    double ms = 0;
  };
  bool sync_family(FamilyState& fs, const ServiceTable& next, bool full, FamilyResult* res, std::string* error);
  bool ensure_jumps(const FamilyState& fs, std::string* error);

  IptablesOptions opts_;
  FamilyState v4_;
  FamilyState v6_;
  mutable std::mutex mu_;   // guards stats_
  IptablesStats stats_;
};

}  // namespace vipd::cp::ipt
