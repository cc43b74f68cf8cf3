// Thread: the owner's (SyncLoop: control thread). When the SyncLoop may sync,
// must sync, and how long it may block waiting for its source; after the model
// of kube-proxy's BoundedFrequencyRunner:
//  - run requests (source changes) are coalesced: a burst ends after quiet_ms
//    without a change or max_coalesce_ms after it began, whichever comes first;
//  - at least min_interval_ms between the end of one sync and the next;
//  - a full sync at least every full_resync_s (0: only when needed);
//  - after a failed sync, a retry after a delay that starts at
//    retry_interval_ms and doubles up to retry_max_ms; the wait is drawn from
//    [delay/2, delay] (jitter); a success resets it.
// The Pacer decides nothing about content (what a sync loads or applies) and
// does no waiting itself: it answers from its clock, which tests replace.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>

namespace vipd::cp {

struct PacerOptions {
  uint32_t min_interval_ms = 0;       // at least this long between two syncs
  // A burst of changes ends after this much quiet (0: sync at once; changes
  // that arrive during a sync are taken by the next one)...
  uint32_t quiet_ms = 0;
  uint32_t max_coalesce_ms = 20;      // ...or after this long, whichever comes first
  uint32_t retry_interval_ms = 1000;  // first full-sync retry after a failed apply...
  uint32_t retry_max_ms = 30000;      // ...doubling (with jitter) up to this
  uint32_t full_resync_s = 300;       // a full sync at least this often; 0 = only when needed
};

class Pacer {
 public:
  using Clock = std::chrono::steady_clock;
  using TimePoint = Clock::time_point;
  // The clock the Pacer reads; the steady clock unless a test gives its own.
  using NowFn = std::function<TimePoint()>;

  explicit Pacer(PacerOptions opts, NowFn now = {});

  TimePoint now() const { return now_(); }

  // --- Coalescing a burst of changes.
  // A change arrived: a burst begins now.
  void begin_burst();
  // How long to wait for the burst's next change (min(quiet_ms, time left of
  // max_coalesce_ms)); nullopt when the burst is over (max_coalesce_ms passed).
  std::optional<int> burst_wait_ms() const;
  // After a burst: how long the next sync must still wait for min_interval_ms
  // since the end of the last sync (may be 0 just before it passes); nullopt
  // when it may run now (also before the first sync and with min_interval_ms 0).
  std::optional<int> hold_wait_ms() const;

  // --- Between changes.
  // How long the owner may block for a change: `poll_ms`, less when a retry
  // falls due sooner.
  int idle_wait_ms(int poll_ms) const;
  // Whether a sync is due without a change: the pending retry's time has
  // come, or, with no retry pending, a periodic full resync is due or
  // `resync_requested`.
  bool due(bool resync_requested) const;
  // A periodic full resync is due: full_resync_s passed since the last
  // successful full sync (never before the first success).
  bool full_resync_due() const;
  bool retry_pending() const { return retry_pending_; }

  // --- Outcomes: `end` is when the sync (its apply attempt) ended.
  void succeeded(TimePoint end, bool full);
  // Schedules the retry; returns its wait in ms.
  uint32_t failed(TimePoint end);
  // Something else failed (a backend tick): retry now, the delay unchanged.
  void retry_now();
  uint32_t retry_delay_ms() const { return retry_delay_ms_; }  // the backoff delay; 0 after a success

 private:
  PacerOptions opts_;
  NowFn now_;
  TimePoint burst_end_{};
  bool ran_once_ = false;        // a sync attempt ended (min interval applies)
  bool succeeded_once_ = false;  // a sync succeeded (periodic resync applies)
  TimePoint last_end_{};
  TimePoint last_full_{};
  bool retry_pending_ = false;
  uint32_t retry_delay_ms_ = 0;
  TimePoint retry_at_{};
  uint64_t rng_state_ = 0x9e3779b97f4a7c15ull;  // retry jitter (xorshift64)
};

}  // namespace vipd::cp
