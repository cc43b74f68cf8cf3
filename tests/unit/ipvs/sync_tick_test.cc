// Thread: test main thread (and the SyncLoop thread it starts). Tests for the
// Backend tick hook in controlplane/sync/sync_loop.cc that the ipvs mode's
// graceful termination relies on: tick() runs periodically without any source
// change, never before the first apply, and a failed tick leads to a full sync.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "model/backend.h"
#include "controlplane/sync/sync_loop.h"

namespace vipd::cp {
namespace {

class StaticSource final : public Source {
 public:
  LoadResult load() override {
    LoadResult r;
    VirtualService vs;
    vs.key = {0x0a600064, 8080, Protocol::kTcp};
    vs.backends = {{0x0af4010f, 8080, 1, false}};
    r.table.services[vs.key] = vs;
    return r;
  }
  bool wait(int timeout_ms) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(timeout_ms, 20)));
    return false;
  }
  std::string describe() const override { return "static"; }
};

class TickingBackend final : public Backend {
 public:
  const char* name() const override { return "ticking"; }
  bool apply(const ServiceTable&, const TableDiff&, bool full, std::string* error) override {
    ++applies;
    if (full) ++full_applies;
    if (fail_apply.load()) {
      *error = "no";
      return false;
    }
    return true;
  }
  uint32_t tick_interval_ms() const override { return interval; }
  bool tick(std::string* error) override {
    ++ticks;
    if (fail_tick.exchange(false)) {
      *error = "drain check failed";
      return false;
    }
    return true;
  }
  uint32_t interval = 30;
  std::atomic<int> applies{0}, full_applies{0}, ticks{0};
  std::atomic<bool> fail_tick{false}, fail_apply{false};
};

void run_for(SyncLoop& loop, int ms) {
  std::atomic<bool> stop{false};
  std::thread t([&] { loop.run(stop); });
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  stop = true;
  t.join();
}

SyncOptions fast() {
  SyncOptions o;
  o.poll_ms = 10;
  o.retry_interval_ms = 10;
  o.full_resync_s = 0;
  return o;
}

TEST(SyncTick, TicksPeriodicallyWithoutSourceChanges) {
  StaticSource src;
  TickingBackend be;
  SyncLoop loop(src, be, fast());
  run_for(loop, 600);
  EXPECT_EQ(be.applies.load(), 1);
  EXPECT_GE(be.ticks.load(), 3);   // ~20 expected at 30 ms (slack for loaded machines)
  EXPECT_LE(be.ticks.load(), 25);  // but not once per 10 ms poll (~60)
}

TEST(SyncTick, NeverTicksWhenTheIntervalIsZeroOrBeforeTheFirstApply) {
  StaticSource src;
  TickingBackend be;
  be.interval = 0;
  SyncLoop loop(src, be, fast());
  run_for(loop, 150);
  EXPECT_EQ(be.ticks.load(), 0);

  TickingBackend failing;
  failing.fail_apply = true;
  SyncLoop loop2(src, failing, fast());
  run_for(loop2, 150);
  EXPECT_GE(failing.applies.load(), 2);  // retried
  EXPECT_EQ(failing.ticks.load(), 0);
}

TEST(SyncTick, AFailedTickSchedulesAFullSync) {
  StaticSource src;
  TickingBackend be;
  be.fail_tick = true;
  SyncLoop loop(src, be, fast());
  run_for(loop, 300);
  EXPECT_EQ(be.full_applies.load(), 2);  // the first apply and the one after the failed tick
  EXPECT_EQ(loop.status().sync_errors, 1u);
  EXPECT_GE(be.ticks.load(), 2);
}

}  // namespace
}  // namespace vipd::cp
