// Thread: test main thread. Tests for controlplane/sync/pacer.cc on a fake
// clock: no sleeps, every time is set by the test.
#include "controlplane/sync/pacer.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace vipd::cp {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class PacerTest : public ::testing::Test {
 protected:
  Pacer make(PacerOptions o) { return Pacer(o, [this] { return now_; }); }
  void advance(Pacer::Clock::duration d) { now_ += d; }
  // A Pacer whose burst begins now.
  Pacer burst(uint32_t quiet_ms, uint32_t max_coalesce_ms) {
    PacerOptions o;
    o.quiet_ms = quiet_ms;
    o.max_coalesce_ms = max_coalesce_ms;
    Pacer p = make(o);
    p.begin_burst();
    return p;
  }
  Pacer::TimePoint now_ = Pacer::TimePoint{} + seconds(1000);
};

TEST_F(PacerTest, BurstEndsAtMaxCoalesceWaitingQuietEachTime) {
  Pacer p = burst(5, 20);
  EXPECT_EQ(p.burst_wait_ms(), 5);
  // Changes keep coming: each wait is quiet_ms, then what is left of the bound.
  advance(milliseconds(16));
  EXPECT_EQ(p.burst_wait_ms(), 4);
  advance(milliseconds(3));
  EXPECT_EQ(p.burst_wait_ms(), 1);
  advance(milliseconds(1));
  EXPECT_EQ(p.burst_wait_ms(), std::nullopt);
  // A new burst starts a new bound.
  p.begin_burst();
  EXPECT_EQ(p.burst_wait_ms(), 5);
}

TEST_F(PacerTest, QuietZeroPollsWithoutWaiting) {
  Pacer p = burst(0, 20);
  EXPECT_EQ(p.burst_wait_ms(), 0);
  advance(milliseconds(20));
  EXPECT_EQ(p.burst_wait_ms(), std::nullopt);
}

TEST_F(PacerTest, MaxCoalesceZeroMeansNoBurst) {
  Pacer p = burst(5, 0);
  EXPECT_EQ(p.burst_wait_ms(), std::nullopt);
}

TEST_F(PacerTest, MinIntervalHoldsTheNextSyncAfterEitherOutcome) {
  PacerOptions o;
  o.min_interval_ms = 100;
  Pacer p = make(o);
  EXPECT_EQ(p.hold_wait_ms(), std::nullopt) << "nothing ran yet";
  p.succeeded(now_, true);
  EXPECT_EQ(p.hold_wait_ms(), 100);
  advance(milliseconds(30));
  EXPECT_EQ(p.hold_wait_ms(), 70);
  advance(milliseconds(70));
  EXPECT_EQ(p.hold_wait_ms(), std::nullopt);
  // Measured from the end of the sync, failed ones included.
  p.failed(now_ - milliseconds(10));
  EXPECT_EQ(p.hold_wait_ms(), 90);
  advance(milliseconds(90));
  EXPECT_EQ(p.hold_wait_ms(), std::nullopt);
}

TEST_F(PacerTest, MinIntervalZeroNeverHolds) {
  Pacer p = make(PacerOptions{});
  p.succeeded(now_, true);
  EXPECT_EQ(p.hold_wait_ms(), std::nullopt);
}

TEST_F(PacerTest, PeriodicFullResyncAfterFullResyncSeconds) {
  PacerOptions o;
  o.full_resync_s = 300;
  Pacer p = make(o);
  EXPECT_FALSE(p.full_resync_due()) << "never before the first success";
  advance(seconds(1000));
  EXPECT_FALSE(p.full_resync_due());
  EXPECT_FALSE(p.due(false));
  p.succeeded(now_, true);
  advance(seconds(299));
  EXPECT_FALSE(p.due(false));
  // An incremental sync does not restart the period...
  p.succeeded(now_, false);
  advance(seconds(1));
  EXPECT_TRUE(p.full_resync_due());
  EXPECT_TRUE(p.due(false));
  // ...a full one does.
  p.succeeded(now_, true);
  EXPECT_FALSE(p.due(false));
  EXPECT_TRUE(p.due(true)) << "a requested resync is due at once";
}

TEST_F(PacerTest, FullResyncZeroMeansOnlyWhenNeeded) {
  PacerOptions o;
  o.full_resync_s = 0;
  Pacer p = make(o);
  p.succeeded(now_, true);
  advance(seconds(100000));
  EXPECT_FALSE(p.full_resync_due());
  EXPECT_FALSE(p.due(false));
}

TEST_F(PacerTest, RetryIsDueAtItsTimeAndShortensTheIdleWait) {
  PacerOptions o;
  o.retry_interval_ms = 1000;
  Pacer p = make(o);
  EXPECT_EQ(p.idle_wait_ms(100), 100);
  const uint32_t wait = p.failed(now_);
  ASSERT_TRUE(p.retry_pending());
  EXPECT_GE(wait, 500u);
  EXPECT_LE(wait, 1000u);
  EXPECT_EQ(p.idle_wait_ms(100), 100);
  EXPECT_EQ(p.idle_wait_ms(5000), static_cast<int>(wait));
  advance(milliseconds(wait - 1));
  EXPECT_FALSE(p.due(false));
  EXPECT_EQ(p.idle_wait_ms(100), 1);
  advance(milliseconds(1));
  EXPECT_TRUE(p.due(false));
  EXPECT_EQ(p.idle_wait_ms(100), 0);
}

TEST_F(PacerTest, PendingRetryDefersPeriodicAndRequestedResyncs) {
  PacerOptions o;
  o.full_resync_s = 1;
  o.retry_interval_ms = 10000;
  Pacer p = make(o);
  p.succeeded(now_, true);
  p.failed(now_);
  advance(seconds(2));
  EXPECT_TRUE(p.full_resync_due());
  EXPECT_FALSE(p.due(true)) << "the retry (itself a full sync) comes first";
}

TEST_F(PacerTest, BackoffDoublesToTheCapAndResetsOnSuccess) {
  PacerOptions o;
  o.retry_interval_ms = 1000;
  o.retry_max_ms = 8000;
  Pacer p = make(o);
  const uint32_t expect[] = {1000, 2000, 4000, 8000, 8000, 8000};
  for (uint32_t d : expect) {
    const uint32_t wait = p.failed(now_);
    EXPECT_EQ(p.retry_delay_ms(), d);
    EXPECT_GE(wait, d / 2);
    EXPECT_LE(wait, d);
  }
  p.succeeded(now_, true);
  EXPECT_FALSE(p.retry_pending());
  EXPECT_EQ(p.retry_delay_ms(), 0u);
  p.failed(now_);
  EXPECT_EQ(p.retry_delay_ms(), 1000u);
}

// The backoff delays of `n` failures in a row.
std::vector<uint32_t> delays(uint32_t retry_interval_ms, uint32_t retry_max_ms, int n) {
  PacerOptions o;
  o.retry_interval_ms = retry_interval_ms;
  o.retry_max_ms = retry_max_ms;
  Pacer p(o, [] { return Pacer::TimePoint{}; });
  std::vector<uint32_t> out;
  for (int i = 0; i < n; ++i) {
    p.failed(Pacer::TimePoint{});
    out.push_back(p.retry_delay_ms());
  }
  return out;
}

TEST_F(PacerTest, BackoffCapIsNeverBelowTheFirstDelay) {
  EXPECT_EQ(delays(5000, 1000, 3), (std::vector<uint32_t>{5000, 5000, 5000}));
}

TEST_F(PacerTest, RetryIntervalZeroStillBacksOff) {
  EXPECT_EQ(delays(0, 4, 4), (std::vector<uint32_t>{1, 2, 4, 4}));
}

TEST_F(PacerTest, JitterStaysInHalfToFullDelayAndVaries) {
  PacerOptions o;
  o.retry_interval_ms = 1000;
  o.retry_max_ms = 1000;
  Pacer p = make(o);
  std::set<uint32_t> seen;
  for (int i = 0; i < 200; ++i) {
    const uint32_t wait = p.failed(now_);
    ASSERT_GE(wait, 500u);
    ASSERT_LE(wait, 1000u);
    seen.insert(wait);
  }
  EXPECT_GT(seen.size(), 50u);
  // The same sequence each run (a fixed seed): tests and logs are reproducible.
  Pacer q = make(o);
  Pacer r = make(o);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(q.failed(now_), r.failed(now_));
}

TEST_F(PacerTest, RetryNowIsDueAtOnceAndKeepsTheDelay) {
  PacerOptions o;
  o.retry_interval_ms = 1000;
  Pacer p = make(o);
  p.succeeded(now_, true);
  p.retry_now();  // e.g. a backend tick failed
  EXPECT_TRUE(p.retry_pending());
  EXPECT_TRUE(p.due(false));
  EXPECT_EQ(p.idle_wait_ms(100), 0);
  EXPECT_EQ(p.retry_delay_ms(), 0u);
  p.failed(now_);
  p.failed(now_);
  EXPECT_EQ(p.retry_delay_ms(), 2000u);
  p.retry_now();
  EXPECT_TRUE(p.due(false));
  EXPECT_EQ(p.retry_delay_ms(), 2000u);
  p.failed(now_);
  EXPECT_EQ(p.retry_delay_ms(), 4000u);
}

TEST_F(PacerTest, RealClockByDefault) {
  Pacer p(PacerOptions{});
  const auto before = Pacer::Clock::now();
  const auto t = p.now();
  EXPECT_GE(t, before);
  EXPECT_LE(t, Pacer::Clock::now());
}

}  // namespace
}  // namespace vipd::cp
