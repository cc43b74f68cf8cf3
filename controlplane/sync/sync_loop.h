// Thread: run() and sync_now() on the control thread only; status() and table()
// from any thread. The proxier loop: wait for source changes, coalesce bursts,
// build the next ServiceTable, diff it against the last applied one and hand it
// to the Backend. A failed apply keeps the last applied table and is retried as
// a full sync.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "model/backend.h"
#include "model/service_table.h"
#include "controlplane/sources/manifest_source.h"
#include "controlplane/sources/source.h"
#include "controlplane/sync/pacer.h"

namespace vipd::cp {

// Pacing (PacerOptions: min interval, coalescing, retry backoff, periodic
// full resync), and how often run() looks at its stop flag.
struct SyncOptions : PacerOptions {
  uint32_t poll_ms = 100;
};

struct SyncStatus {
  uint64_t generation = 0;  // of the last applied table (0: nothing applied yet)
  uint64_t syncs = 0;       // successful applies
  uint64_t sync_errors = 0; // failed applies
  uint64_t full_syncs = 0;  // successful applies that were full syncs
  // Full syncs that repaired a divergence: the source's incremental view
  // differed from its state rebuilt from scratch, or (periodic resync) the
  // dataplane differed from the source at a key it had not reported changed.
  uint64_t resync_repairs = 0;
  int64_t last_sync_unix_ns = 0;          // end of the last successful apply
  double last_change_to_applied_ms = 0;   // newest source change -> end of apply
  std::string last_error;                 // of the last failed apply; cleared on success
  uint32_t next_retry_ms = 0;             // delay of the pending retry; 0 when none
  std::vector<std::string> source_errors; // current source problems, "FILE: OBJECT: REASON"
  // Of those, the entries that lost a key conflict, by how it was settled
  // (SourceError::conflict: "precedence", "order").
  std::map<std::string, uint64_t> service_conflicts;
  int64_t last_loop_unix_ns = 0;          // heartbeat: the loop last looked at its source
};

// One apply attempt, as reported to the observer (set_observer).
struct SyncEvent {
  bool ok = false;
  bool full = false;
  uint64_t generation = 0;
  double duration_s = 0;            // load + build + apply
  double change_to_applied_s = -1;  // newest source change -> end of apply; -1 when !ok
};

class SyncLoop {
 public:
  using Status = SyncStatus;

  // `source` may be any Source (ManifestSource, KubeSource); nothing is
  // programmed while !source.ready().
  SyncLoop(Source& source, Backend& backend, SyncOptions opts = {});
  SyncLoop(const SyncLoop&) = delete;
  SyncLoop& operator=(const SyncLoop&) = delete;

  // Initial load + full apply, then follows changes until `stop` is set.
  void run(const std::atomic<bool>& stop);

  // One cycle: load the source, number the table, apply when its content
  // changed or a full sync is pending. Returns false when the apply failed.
  bool sync_now();

  Status status() const;
  // Makes the next sync a periodic full resync now, whatever
  // --sync-full-resync-s says (tests; any thread).
  void request_full_resync() { resync_requested_.store(true); }
  // Called on the control thread after every apply attempt (not for syncs that
  // found nothing to program). Set before run(); used by the metrics.
  void set_observer(std::function<void(const SyncEvent&)> fn) { observer_ = std::move(fn); }
  // The last applied table; null before the first apply. A snapshot: it is copied
  // once per generation, on the first call that asks for it, so readers (admin
  // API, metrics) cost the sync path nothing until they ask.
  std::shared_ptr<const ServiceTable> table() const;

 private:
  using Clock = Pacer::Clock;

  void coalesce(const std::atomic<bool>& stop);
  void maybe_tick();  // Backend::tick() when its interval has passed
  void report_source_issues(const LoadResult& r, bool source_changed);

  Source& source_;
  Backend& backend_;
  SyncOptions opts_;
  Pacer pacer_;  // when to sync; control thread only

  // Control thread only.
  ServiceTable desired_;  // last table of a full-form source (delta sources keep their own)
  bool need_full_ = true;
  Clock::time_point next_tick_{};
  std::function<void(const SyncEvent&)> observer_;
  std::atomic<int64_t> heartbeat_ns_{0};  // Status::last_loop_unix_ns
  std::atomic<bool> resync_requested_{false};
  void beat();
  int64_t pending_change_ns_ = 0;  // newest change not yet in the dataplane
  std::set<std::string> logged_errors_;
  std::set<std::string> logged_notes_;

  // Written by the control thread under mu_; read by it without the lock.
  mutable std::mutex mu_;  // guards status_, applied_, snapshot_
  Status status_;
  ServiceTable applied_;  // what the backend holds now (generation = status_.generation)
  bool applied_once_ = false;
  mutable std::shared_ptr<const ServiceTable> snapshot_;  // copy of applied_ for readers
};

}  // namespace vipd::cp
