// Thread: any (observe() on the control thread, snapshot() on scrape threads;
// a mutex guards the buckets).
// Histograms of the sync loop, fed by SyncLoop's observer hook:
//  - programming latency: newest source change -> table published in the dataplane
//  - sync duration: load + build + apply of one sync
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "controlplane/sync/sync_loop.h"

namespace vipd::cp {

struct HistogramSnapshot {
  std::vector<double> bounds;      // upper bounds, ascending (+Inf implicit)
  std::vector<uint64_t> cumulative;  // per bound: observations <= bound
  uint64_t count = 0;
  double sum = 0;
};

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);  // sorted, unique
  void observe(double v);
  HistogramSnapshot snapshot() const;

 private:
  const std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative), last = +Inf
  uint64_t count_ = 0;
  double sum_ = 0;
};

// Bucket bounds in seconds: 0.5 ms .. 60 s.
const std::vector<double>& sync_latency_buckets();

class SyncMetrics {
 public:
  SyncMetrics();
  void observe(const SyncEvent& e);  // the SyncLoop observer

  HistogramSnapshot programming_latency() const { return programming_.snapshot(); }
  HistogramSnapshot sync_duration() const { return duration_.snapshot(); }

 private:
  Histogram programming_;
  Histogram duration_;
};

}  // namespace vipd::cp
