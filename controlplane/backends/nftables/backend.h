// Thread: control (apply() runs on the SyncLoop's thread; stats() from any
// thread). The nftables mode's Backend: keeps the desired state per entry
// (ruleset.h) and applies one libnftables transaction per sync.
//
// - Full sync (first apply, after a failure, periodically when the SyncLoop
//   asks): the table `ip vipd` is deleted and rebuilt in one transaction, so
//   nothing of an earlier run survives and traffic never meets a half table.
//   (ClientIP affinity entries start afresh then.)
// - Partial sync: only entries whose VirtualService changed are rendered again,
//   and only their chains, sets and map elements are in the transaction;
//   nothing is run when nothing differs. With the SyncLoop's TableDiff the
//   applied state is updated from the changed entries alone (apply_diff), so
//   neither the rendering nor the transaction grows with the table (the
//   kernel validates only the shard tables the transaction touched).
// - A failed transaction (nft's error text in the error line) leaves the kernel
//   as it was (all or nothing); the next apply is a full sync.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "model/backend.h"
#include "controlplane/backends/nftables/ruleset.h"

namespace vipd::cp::nft {

// Runs one nft transaction (a script of nft commands). Tests substitute a fake.
class Runner {
 public:
  virtual ~Runner() = default;
  virtual bool run(const std::string& script, std::string* error) = 0;
  // The tables the kernel holds, as `nft list tables` names them ("ip vipd-3");
  // a full sync deletes vipd's shard tables among them that it does not use.
  virtual bool list_tables(std::vector<std::string>* /*out*/, std::string* /*error*/) { return true; }
  // The last run() went as a libnftnl netlink batch (netlink_fast.h), not
  // through libnftables.
  virtual bool last_was_netlink() const { return false; }
};

// The kernel's tables ("ip vipd", "ip6 vipd-2", other families left out) from
// one NFT_MSG_GETTABLE netlink dump (libnftables' `list tables` would fetch
// every rule of every table first).
bool dump_tables(std::vector<std::string>* out, std::string* error);

// libnftables: one nft_ctx kept for the process (its cache survives between
// transactions), errors buffered. check_only: nft -c (evaluate, commit nothing).
// netlink_fast_path (not with check_only): a transaction parse_fast takes (a
// partial sync that rewrites service chains) goes as one libnftnl netlink
// batch instead, without libnftables' per-table cache setup.
std::unique_ptr<Runner> make_libnftables_runner(bool check_only = false, bool netlink_fast_path = true);

struct NftablesStats {
  uint64_t full_syncs = 0;
  uint64_t partial_syncs = 0;
  uint64_t noop_syncs = 0;
  uint64_t failures = 0;
  uint64_t netlink_syncs = 0;      // partial syncs sent as a libnftnl batch (netlink_fast.h)
  uint64_t entries_rendered = 0;   // last sync
  uint64_t chains_written = 0;     // last sync
  uint64_t chains_deleted = 0;     // last sync
  uint64_t chains_retired = 0;     // last sync: flushed, left for a bulk delete
  uint64_t retired_pending = 0;    // empty chains waiting for that delete
  uint64_t elements_changed = 0;   // last sync: added + deleted
  uint64_t transaction_bytes = 0;  // last sync
  uint64_t chains = 0;             // per-entry chains after the last successful sync
  double last_render_ms = 0;
  double last_transaction_ms = 0;
};

class NftablesBackend final : public Backend {
 public:
  explicit NftablesBackend(RenderOptions opts = {}, std::unique_ptr<Runner> runner = make_libnftables_runner());
  const char* name() const override { return "nftables"; }
  bool apply(const ServiceTable& next, const TableDiff& diff, bool full, std::string* error) override;
  NftablesStats stats() const;
  const std::string& last_transaction() const { return last_; }

 private:
  RenderOptions opts_;
  std::unique_ptr<Runner> runner_;
  Desired applied_;
  bool force_full_ = true;
  std::string last_;
  mutable std::mutex mu_;
  NftablesStats stats_;
};

}  // namespace vipd::cp::nft
