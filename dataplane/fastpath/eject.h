// Thread: any (workers write, the control thread reads; relaxed atomics, no
// locks). Passive outlier ejection (docs/scheduling.md, "Outlier ejection"):
// a backend whose new connections failed K times in a row, as the
// re-steering code sees it (resteer.h: an RST, an ICMP unreachable or no
// SYN-ACK in time), is left out of scheduling new connections for a while
// that grows with repeated ejections (base * ejections in a row, capped);
// its first SYN-ACK readmits it. One EjectState per destination slot, shared
// by all workers: concurrent updates may lose a failure or let two workers
// eject at once (one more than the share, for a moment); the arithmetic is
// the same either way. Established connections never look at it.
#pragma once

#include <atomic>
#include <cstdint>

namespace vipd::dp {

struct EjectParams {
  uint32_t k = 0;          // consecutive failures that eject (0 = off)
  uint64_t t_base = 0;     // ejection time per ejection in a row (TSC)
  uint64_t t_max = 0;      // the longest ejection (TSC)
  uint32_t max_pct = 50;   // most of a service's weighted backends ejected at once (%)
};

struct EjectState {
  std::atomic<uint32_t> fails{0};     // consecutive failed connections
  std::atomic<uint32_t> streak{0};    // ejections in a row (the time multiplier)
  std::atomic<uint64_t> until{0};     // TSC: ejected while now < until (0 = never was)
  std::atomic<uint64_t> since{0};     // TSC: when the last ejection began
  std::atomic<uint64_t> ejections{0};   // total (metric)
  std::atomic<uint64_t> readmissions{0};  // by a SYN-ACK before the time was up (metric)

  bool ejected(uint64_t now) const noexcept { return until.load(std::memory_order_relaxed) > now; }
  void reset() noexcept {
    fails.store(0, std::memory_order_relaxed);
    streak.store(0, std::memory_order_relaxed);
    until.store(0, std::memory_order_relaxed);
    since.store(0, std::memory_order_relaxed);
  }
};

// How long the n-th ejection in a row lasts (n >= 1).
inline uint64_t eject_time(const EjectParams& p, uint32_t n) noexcept {
  if (n == 0) n = 1;
  if (p.t_base && uint64_t{n} > p.t_max / p.t_base) return p.t_max;
  const uint64_t t = p.t_base * n;
  return t < p.t_max ? t : p.t_max;
}

// Whether one more of a service's `n_weighted` backends may be ejected while
// `n_ejected` are (at least one backend always stays).
inline bool eject_allowed(const EjectParams& p, uint32_t n_weighted, uint32_t n_ejected) noexcept {
  if (n_weighted < 2) return false;
  const uint64_t most = uint64_t{n_weighted} * p.max_pct / 100;
  return n_ejected + 1 <= most && n_ejected + 1 < n_weighted;
}

// A failed connection to the backend. `may_eject`: whether the service's
// share allows one more (eject_allowed). True when this ejected it.
inline bool eject_failure(EjectState& e, const EjectParams& p, uint64_t now, bool may_eject) noexcept {
  if (!p.k) return false;
  if (e.ejected(now)) return false;  // already out (a connection sent before)
  const uint32_t f = e.fails.fetch_add(1, std::memory_order_relaxed) + 1;
  if (f < p.k || !may_eject) return false;
  // Back to the multiplier's start once the backend went the longest
  // ejection time without one.
  uint32_t n = e.streak.load(std::memory_order_relaxed);
  const uint64_t since = e.since.load(std::memory_order_relaxed);
  if (n && now - since > p.t_max + eject_time(p, n)) n = 0;
  ++n;
  e.streak.store(n, std::memory_order_relaxed);
  e.since.store(now, std::memory_order_relaxed);
  e.until.store(now + eject_time(p, n), std::memory_order_relaxed);
  e.fails.store(0, std::memory_order_relaxed);
  e.ejections.fetch_add(1, std::memory_order_relaxed);
  return true;
}

// A connection through the backend got its SYN-ACK: the failure count starts
// over, and an ejected backend is readmitted (true).
inline bool eject_success(EjectState& e, uint64_t now) noexcept {
  if (e.fails.load(std::memory_order_relaxed)) e.fails.store(0, std::memory_order_relaxed);
  if (!e.ejected(now)) return false;
  e.until.store(now, std::memory_order_relaxed);
  e.readmissions.fetch_add(1, std::memory_order_relaxed);
  return true;
}

}  // namespace vipd::dp
