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
};

class IptablesBackend final : public Backend {
 public:
  explicit IptablesBackend(IptablesOptions opts = {});
  const char* name() const override { return "iptables"; }
  bool apply(const ServiceTable& next, const TableDiff& diff, bool full, std::string* error) override;

  IptablesStats stats() const;
  // The last payload handed to iptables-restore ("" before the first); control thread.
  const std::string& last_payload() const { return last_payload_; }

 private:
  bool ensure_jumps(std::string* error);

  IptablesOptions opts_;
  Ruleset applied_;         // what the kernel holds after the last successful sync
  bool have_applied_ = false;
  bool force_full_ = true;  // after a failure: the kernel's state is unknown
  std::string last_payload_;
  mutable std::mutex mu_;   // guards stats_
  IptablesStats stats_;
};

}  // namespace vipd::cp::ipt
