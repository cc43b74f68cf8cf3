// Thread: any.
#include "observability/sync_metrics.h"

#include <algorithm>
#include <cmath>

namespace vipd::cp {

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  if (std::isnan(v)) return;
  const size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  std::lock_guard<std::mutex> g(mu_);
  ++counts_[i];
  ++count_;
  sum_ += v;
}

HistogramSnapshot Histogram::snapshot() const {
  HistogramSnapshot s;
  s.bounds = bounds_;
  std::lock_guard<std::mutex> g(mu_);
  uint64_t acc = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    acc += counts_[i];
    s.cumulative.push_back(acc);
  }
  s.count = count_;
  s.sum = sum_;
  return s;
}

const std::vector<double>& sync_latency_buckets() {
  static const std::vector<double> kBounds = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                              0.1,    0.25,  0.5,    1,     2.5,  5,     10,
                                              30,     60};
  return kBounds;
}

SyncMetrics::SyncMetrics() : programming_(sync_latency_buckets()), duration_(sync_latency_buckets()) {}

void SyncMetrics::observe(const SyncEvent& e) {
  duration_.observe(std::max(0.0, e.duration_s));
  if (e.ok && e.change_to_applied_s >= 0) programming_.observe(e.change_to_applied_s);
}

}  // namespace vipd::cp
