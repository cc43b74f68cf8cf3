// Thread: control (status()/table(): any).
#include "controlplane/sync/sync_loop.h"

#include <algorithm>
#include <cstdio>
#include <exception>

#include "common/clock.h"
#include "common/log.h"

namespace vipd::cp {
namespace {

std::string fmt_ms(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", ms);
  return buf;
}

std::string fmt_seconds(uint32_t ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", ms / 1000.0);
  return buf;
}

// The diff for the keys a delta source touched: applied -> next.
TableDiff diff_touched(const ServiceTable& applied, const ServiceTable& next,
                       const std::vector<ServiceKey>& touched) {
  TableDiff d;
  for (const ServiceKey& k : touched) {
    const auto n = next.services.find(k);
    const auto p = applied.services.find(k);
    if (n == next.services.end()) {
      if (p != applied.services.end()) d.removed.push_back(k);
    } else if (p == applied.services.end()) {
      d.added.push_back(&n->second);
    } else if (!(p->second == n->second)) {
      d.changed.push_back(&n->second);
    }
  }
  return d;
}

}  // namespace

SyncLoop::SyncLoop(Source& source, Backend& backend, SyncOptions opts)
    : source_(source), backend_(backend), opts_(opts), pacer_(opts) {}

void SyncLoop::report_source_issues(const LoadResult& r, bool source_changed) {
  std::set<std::string> errors, notes;
  for (const auto& e : r.errors) errors.insert(e.to_string());
  for (const auto& n : r.notes) notes.insert(n.to_string());
  // Errors are repeated after each change (so an edit that is still broken is
  // answered), but not on retries without a change.
  for (const auto& e : errors)
    if (source_changed || !logged_errors_.count(e)) log_warn("source: " + e);
  for (const auto& n : notes)
    if (!logged_notes_.count(n)) log_info("source: " + n);
  if (errors.empty() && !logged_errors_.empty()) log_info("source: all errors resolved");
  logged_errors_ = std::move(errors);
  logged_notes_ = std::move(notes);
  std::vector<std::string> list;
  std::map<std::string, uint64_t> conflicts;
  for (const auto& e : r.errors) {
    list.push_back(e.to_string());
    if (!e.conflict.empty()) ++conflicts[e.conflict];
  }
  std::lock_guard<std::mutex> g(mu_);
  status_.source_errors = std::move(list);
  status_.service_conflicts = std::move(conflicts);
}

void SyncLoop::beat() { heartbeat_ns_.store(now_unix_ns(), std::memory_order_relaxed); }

bool SyncLoop::sync_now() {
  beat();
  if (!source_.ready()) {  // e.g. the initial Kubernetes lists are not complete yet
    log_debug("sync: source not ready; nothing programmed");
    return true;
  }
  const auto t0 = pacer_.now();
  const int64_t start_ns = now_unix_ns();
  const bool forced = resync_requested_.exchange(false);
  const bool periodic = !need_full_ && (forced || pacer_.full_resync_due());
  const bool full = need_full_ || periodic || !applied_once_;
  // A full sync takes the source's state rebuilt from scratch (load_full), so
  // that it also repairs what an incremental path may have lost.
  LoadResult r = full ? source_.load_full() : source_.load();
  if (!r.issues_unchanged) report_source_issues(r, r.newest_change_unix_ns != 0);
  pending_change_ns_ = std::max(pending_change_ns_, r.newest_change_unix_ns);
  if (!r.delta) desired_ = std::move(r.table);
  ServiceTable& next = r.delta && r.current ? *r.current : desired_;

  // What differs from the dataplane: for a delta source only the keys it
  // touched are looked at (O(change)); otherwise, and for full syncs, all.
  const TableDiff diff = !full && r.delta && r.current ? diff_touched(applied_, next, r.touched)
                                                       : TableDiff::compute(applied_, next);
  const bool changed = !diff.empty() || !applied_once_;
  // A full sync repairs a divergence when the source's incremental view
  // differed from its rebuild (r.diverged), or, on a periodic resync (the
  // previous apply succeeded), when the dataplane differs from the source at
  // a key the source did not report as changed.
  size_t diverged = full ? r.diverged : 0;
  if (periodic) {
    if (r.delta) {
      const std::set<ServiceKey> touched(r.touched.begin(), r.touched.end());
      for (const VirtualService* vs : diff.added) diverged += !touched.count(vs->key);
      for (const VirtualService* vs : diff.changed) diverged += !touched.count(vs->key);
      for (const ServiceKey& k : diff.removed) diverged += !touched.count(k);
    }
  }
  const bool repair = diverged > 0;
  if (!changed && !full) {
    pending_change_ns_ = 0;  // nothing to program: the dataplane is current
    log_debug("sync: no change (generation " + std::to_string(status_.generation) + ")");
    return true;
  }
  const uint64_t generation = status_.generation + (changed ? 1 : 0);
  next.generation = generation;
  const ServiceTable empty;
  // A full sync hands the backend every service as added (Backend contract).
  const TableDiff everything = full ? TableDiff::compute(empty, next) : TableDiff{};
  const TableDiff& to_apply = full ? everything : diff;

  std::string err;
  bool ok = false;
  try {
    ok = backend_.apply(next, to_apply, full, &err);
  } catch (const std::exception& e) {
    ok = false;
    err = std::string("exception: ") + e.what();
  } catch (...) {
    ok = false;
    err = "unknown exception";
  }
  const auto t1 = pacer_.now();
  const int64_t end_ns = now_unix_ns();

  if (!ok) {
    if (err.empty()) err = "unknown error";
    need_full_ = true;
    const uint32_t wait_ms = pacer_.failed(t1);  // backoff with jitter
    log_error("sync: generation " + std::to_string(generation) + " failed in " + backend_.name() +
              " backend: " + err + "; retrying with a full sync in " + fmt_seconds(wait_ms) + " s");
    if (observer_)
      observer_(SyncEvent{false, full, generation, std::chrono::duration<double>(t1 - t0).count(), -1});
    std::lock_guard<std::mutex> g(mu_);
    ++status_.sync_errors;
    status_.last_error = err;
    status_.next_retry_ms = wait_ms;
    return false;
  }

  need_full_ = false;
  pacer_.succeeded(t1, full);
  const int64_t change_ns = pending_change_ns_ ? pending_change_ns_ : start_ns;
  pending_change_ns_ = 0;
  const double took_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  const double latency_ms = std::max<int64_t>(0, end_ns - change_ns) / 1e6;
  const std::string counts = std::to_string(diff.added.size()) + " added, " +
                             std::to_string(diff.changed.size()) + " changed, " +
                             std::to_string(diff.removed.size()) + " removed";
  const std::string line = "sync: generation " + std::to_string(generation) + " applied (" + counts +
                           (full ? "; full sync, " + std::to_string(next.services.size()) + " in table" : "") +
                           (periodic ? ", periodic" : "") + ") in " + fmt_ms(took_ms) +
                           " ms; change-to-dataplane " + fmt_ms(latency_ms) + " ms";
  // A periodic resync that found nothing to change is routine: debug only.
  if (periodic && !changed) log_debug(line);
  else if (repair)
    log_warn(line + "; this full sync repaired " + std::to_string(diverged) +
             " service key(s) where the applied table had diverged from the source's objects");
  else log_info(line);
  if (observer_) observer_(SyncEvent{true, full, generation, took_ms / 1e3, latency_ms / 1e3});
  std::lock_guard<std::mutex> g(mu_);
  // The backend now holds `next`: bring the record of it up to date, touching
  // only what changed unless this was a full sync.
  if (full) {
    if (changed || !applied_once_) applied_.services = next.services;
  } else {
    for (const ServiceKey& k : diff.removed) applied_.services.erase(k);
    for (const VirtualService* vs : diff.added) applied_.services.insert_or_assign(vs->key, *vs);
    for (const VirtualService* vs : diff.changed) applied_.services.insert_or_assign(vs->key, *vs);
  }
  applied_.generation = generation;
  applied_once_ = true;
  status_.generation = generation;
  ++status_.syncs;
  if (full) ++status_.full_syncs;
  if (repair) ++status_.resync_repairs;
  status_.last_sync_unix_ns = end_ns;
  status_.last_change_to_applied_ms = latency_ms;
  status_.last_error.clear();
  status_.next_retry_ms = 0;
  return true;
}

void SyncLoop::coalesce(const std::atomic<bool>& stop) {
  pacer_.begin_burst();
  while (!stop.load()) {
    const std::optional<int> quiet = pacer_.burst_wait_ms();
    if (!quiet) break;
    beat();
    if (!source_.wait(*quiet)) break;
  }
  // Changes that arrive while min_interval_ms holds the sync back join it.
  while (!stop.load()) {
    const std::optional<int> hold = pacer_.hold_wait_ms();
    if (!hold) break;
    beat();
    source_.wait(std::min<int>(*hold, static_cast<int>(opts_.poll_ms)));
  }
}

void SyncLoop::maybe_tick() {
  const uint32_t every = backend_.tick_interval_ms();
  if (every == 0 || !applied_once_ || pacer_.retry_pending() || need_full_) return;
  const auto now = pacer_.now();
  if (now < next_tick_) return;
  next_tick_ = now + std::chrono::milliseconds(every);
  std::string err;
  bool ok = false;
  try {
    ok = backend_.tick(&err);
  } catch (const std::exception& e) {
    err = std::string("exception: ") + e.what();
  } catch (...) {
    err = "unknown exception";
  }
  if (ok) return;
  if (err.empty()) err = "unknown error";
  log_error(std::string("sync: ") + backend_.name() + " backend: " + err + "; scheduling a full sync");
  need_full_ = true;
  pacer_.retry_now();
  std::lock_guard<std::mutex> g(mu_);
  ++status_.sync_errors;
  status_.last_error = err;
}

void SyncLoop::run(const std::atomic<bool>& stop) {
  log_info("sync: watching " + source_.describe() + ", backend " + backend_.name());
  sync_now();
  while (!stop.load()) {
    const bool changed = source_.wait(pacer_.idle_wait_ms(static_cast<int>(opts_.poll_ms)));
    beat();
    if (stop.load()) break;
    if (changed) {
      coalesce(stop);
      if (stop.load()) break;
      sync_now();
    } else if (pacer_.due(resync_requested_.load())) {
      sync_now();
    }
    maybe_tick();
  }
  log_info("sync: stopped");
}

SyncLoop::Status SyncLoop::status() const {
  std::lock_guard<std::mutex> g(mu_);
  Status s = status_;
  s.last_loop_unix_ns = heartbeat_ns_.load(std::memory_order_relaxed);
  return s;
}

std::shared_ptr<const ServiceTable> SyncLoop::table() const {
  std::lock_guard<std::mutex> g(mu_);
  if (!applied_once_) return nullptr;
  if (!snapshot_ || snapshot_->generation != applied_.generation)
    snapshot_ = std::make_shared<const ServiceTable>(applied_);
  return snapshot_;
}

}  // namespace vipd::cp
