// Thread: control (status()/table(): any).
#include "controlplane/sync/sync_loop.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <exception>

#include "common/log.h"

namespace vipd::cp {
namespace {

int64_t now_unix_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

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

int ms_until(std::chrono::steady_clock::time_point t) {
  const auto d = std::chrono::duration_cast<std::chrono::milliseconds>(
      t - std::chrono::steady_clock::now());
  return static_cast<int>(std::max<int64_t>(0, d.count()));
}

}  // namespace

SyncLoop::SyncLoop(Source& source, Backend& backend, SyncOptions opts)
    : source_(source), backend_(backend), opts_(opts) {}

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
  for (const auto& e : r.errors) list.push_back(e.to_string());
  std::lock_guard<std::mutex> g(mu_);
  status_.source_errors = std::move(list);
}

void SyncLoop::beat() { heartbeat_ns_.store(now_unix_ns(), std::memory_order_relaxed); }

bool SyncLoop::sync_now() {
  beat();
  if (!source_.ready()) {  // e.g. the initial Kubernetes lists are not complete yet
    log_debug("sync: source not ready; nothing programmed");
    return true;
  }
  const auto t0 = Clock::now();
  const int64_t start_ns = now_unix_ns();
  LoadResult r = source_.load();
  report_source_issues(r, r.newest_change_unix_ns != 0);
  pending_change_ns_ = std::max(pending_change_ns_, r.newest_change_unix_ns);

  const bool changed = !built_ || !r.table.same_content(*built_);
  if (!changed && !need_full_) {
    pending_change_ns_ = 0;  // nothing to program: the dataplane is current
    log_debug("sync: no change (generation " + std::to_string(built_->generation) + ")");
    return true;
  }
  if (changed) {
    r.table.generation = (built_ ? built_->generation : 0) + 1;
    built_ = std::make_shared<const ServiceTable>(std::move(r.table));
  }
  const std::shared_ptr<const ServiceTable> next = built_;
  std::shared_ptr<const ServiceTable> prev = table();
  const bool full = need_full_ || !prev;
  const ServiceTable empty;
  const TableDiff diff = TableDiff::compute(full ? empty : *prev, *next);

  std::string err;
  bool ok = false;
  try {
    ok = backend_.apply(*next, diff, full, &err);
  } catch (const std::exception& e) {
    ok = false;
    err = std::string("exception: ") + e.what();
  } catch (...) {
    ok = false;
    err = "unknown exception";
  }
  const auto t1 = Clock::now();
  const int64_t end_ns = now_unix_ns();
  last_sync_end_ = t1;
  synced_once_ = true;

  if (!ok) {
    if (err.empty()) err = "unknown error";
    need_full_ = true;
    retry_pending_ = true;
    retry_at_ = t1 + std::chrono::milliseconds(opts_.retry_interval_ms);
    log_error("sync: generation " + std::to_string(next->generation) + " failed in " +
              backend_.name() + " backend: " + err + "; retrying with a full sync in " +
              fmt_seconds(opts_.retry_interval_ms) + " s");
    if (observer_)
      observer_(SyncEvent{false, full, next->generation,
                          std::chrono::duration<double>(t1 - t0).count(), -1});
    std::lock_guard<std::mutex> g(mu_);
    ++status_.sync_errors;
    status_.last_error = err;
    return false;
  }

  need_full_ = false;
  retry_pending_ = false;
  const int64_t change_ns = pending_change_ns_ ? pending_change_ns_ : start_ns;
  pending_change_ns_ = 0;
  const double took_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  const double latency_ms = std::max<int64_t>(0, end_ns - change_ns) / 1e6;
  log_info("sync: generation " + std::to_string(next->generation) + " applied (" +
           std::to_string(diff.added.size()) + " added, " + std::to_string(diff.changed.size()) +
           " changed, " + std::to_string(diff.removed.size()) + " removed) in " +
           fmt_ms(took_ms) + " ms; change-to-dataplane " + fmt_ms(latency_ms) + " ms" +
           (full ? " (full)" : ""));
  if (observer_) observer_(SyncEvent{true, full, next->generation, took_ms / 1e3, latency_ms / 1e3});
  std::lock_guard<std::mutex> g(mu_);
  applied_ = next;
  status_.generation = next->generation;
  ++status_.syncs;
  status_.last_sync_unix_ns = end_ns;
  status_.last_change_to_applied_ms = latency_ms;
  status_.last_error.clear();
  return true;
}

void SyncLoop::coalesce(const std::atomic<bool>& stop) {
  const auto start = Clock::now();
  const auto bound = start + std::chrono::milliseconds(opts_.max_coalesce_ms);
  while (!stop.load() && Clock::now() < bound) {
    beat();
    const int quiet = std::min<int>(static_cast<int>(opts_.quiet_ms), ms_until(bound));
    if (!source_.wait(quiet)) break;
  }
  if (opts_.min_interval_ms == 0 || !synced_once_) return;
  const auto earliest = last_sync_end_ + std::chrono::milliseconds(opts_.min_interval_ms);
  while (!stop.load() && Clock::now() < earliest) {
    beat();
    source_.wait(std::min<int>(ms_until(earliest), static_cast<int>(opts_.poll_ms)));
  }
}

void SyncLoop::run(const std::atomic<bool>& stop) {
  log_info("sync: watching " + source_.describe() + ", backend " + backend_.name());
  sync_now();
  while (!stop.load()) {
    int timeout = static_cast<int>(opts_.poll_ms);
    if (retry_pending_) timeout = std::min(timeout, ms_until(retry_at_));
    const bool changed = source_.wait(timeout);
    beat();
    if (stop.load()) break;
    if (changed) {
      coalesce(stop);
      if (stop.load()) break;
      sync_now();
    } else if (retry_pending_ && Clock::now() >= retry_at_) {
      sync_now();
    }
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
  return applied_;
}

}  // namespace vipd::cp
