// Thread: test main thread.
// Health logic: when /healthz and /livez answer 200 or 503, and why.
#include "observability/health.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace vipd::cp {
namespace {

constexpr int64_t kS = 1'000'000'000;
constexpr int64_t kT0 = 1'700'000'000 * kS;

SyncStatus good_status(int64_t now) {
  SyncStatus s;
  s.generation = 2;
  s.syncs = 2;
  s.last_sync_unix_ns = now - 30 * kS;  // a sync long ago is fine: nothing changed since
  s.last_loop_unix_ns = now - kS / 10;
  return s;
}

std::vector<dp::WorkerSnapshot> workers(uint64_t polls1, uint64_t polls2) {
  std::vector<dp::WorkerSnapshot> w(2);
  w[0].lcore = 1;
  w[0].polls = polls1;
  w[1].lcore = 2;
  w[1].polls = polls2;
  return w;
}

std::string reasons(const HealthResult& r) { return r.body["reasons"].dump(); }

TEST(Health, HealthyWhenSyncedFreshAndWorkersPoll) {
  HealthChecker h({}, kT0 - 100 * kS);
  auto r = h.healthz(good_status(kT0), workers(10, 10), kT0);
  EXPECT_EQ(r.status, 200) << r.body.dump();
  EXPECT_EQ(r.body["status"], "ok");
  EXPECT_TRUE(r.body["reasons"].empty());
  EXPECT_EQ(r.body["generation"], 2);
  EXPECT_EQ(r.body["lastUpdated"], "2023-11-14T22:12:50.000Z");
  EXPECT_EQ(r.body["currentTime"], "2023-11-14T22:13:20.000Z");
  EXPECT_DOUBLE_EQ(r.body["last_sync_age_s"].get<double>(), 30.0);
  auto l = h.livez(good_status(kT0), workers(10, 10), kT0);
  EXPECT_EQ(l.status, 200);
  EXPECT_EQ(l.body["status"], "ok");
}

TEST(Health, NotHealthyBeforeTheFirstSync) {
  HealthChecker h({}, kT0);
  SyncStatus s;
  s.last_loop_unix_ns = kT0;
  auto r = h.healthz(s, {}, kT0);
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.body["status"], "unhealthy");
  EXPECT_NE(reasons(r).find("no table applied yet"), std::string::npos) << reasons(r);
  EXPECT_EQ(r.body["lastUpdated"], "");
  EXPECT_TRUE(r.body["last_sync_age_s"].is_null());
  // The process is alive all the same.
  EXPECT_EQ(h.livez(s, {}, kT0).status, 200);
}

TEST(Health, NotHealthyWhileTheLastSyncFailed) {
  HealthChecker h({}, kT0);
  SyncStatus s = good_status(kT0);
  s.last_error = "dataplane: out of destination slots";
  s.sync_errors = 1;
  auto r = h.healthz(s, {}, kT0);
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(reasons(r).find("last sync failed (retrying): dataplane: out of destination slots"),
            std::string::npos)
      << reasons(r);
  s.last_error.clear();  // the retry worked
  EXPECT_EQ(h.healthz(s, {}, kT0).status, 200);
}

TEST(Health, SourceErrorsAreWarningsOnly) {
  HealthChecker h({}, kT0);
  SyncStatus s = good_status(kT0);
  s.source_errors = {"bad.yaml: YAML syntax error at line 3, column 1: ..."};
  auto r = h.healthz(s, {}, kT0);
  EXPECT_EQ(r.status, 200);
  ASSERT_EQ(r.body["warnings"].size(), 1u);
}

TEST(Health, StaleWhenTheSyncLoopStopsLookingAtItsSource) {
  HealthChecker h({}, kT0 - 100 * kS);
  SyncStatus s = good_status(kT0);
  s.last_loop_unix_ns = kT0 - 11 * kS;  // fresh_s = 10
  auto r = h.healthz(s, {}, kT0);
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(reasons(r).find("has not checked its source for 11.0 s (limit 10.0 s)"), std::string::npos)
      << reasons(r);
  EXPECT_EQ(h.livez(s, {}, kT0).status, 200);  // live_s = 60
  s.last_loop_unix_ns = kT0 - 61 * kS;
  auto l = h.livez(s, {}, kT0);
  EXPECT_EQ(l.status, 503);
  EXPECT_NE(reasons(l).find("the sync loop has not run for 61.0 s"), std::string::npos) << reasons(l);
  s.last_loop_unix_ns = kT0 - 10 * kS;  // exactly at the limit: still fresh
  EXPECT_EQ(h.healthz(s, {}, kT0).status, 200);
}

TEST(Health, BeforeTheFirstHeartbeatTheStartTimeCounts) {
  SyncStatus s = good_status(kT0);
  s.last_loop_unix_ns = 0;
  HealthChecker young({}, kT0 - 5 * kS);
  EXPECT_EQ(young.livez(s, {}, kT0).status, 200);
  HealthChecker old({}, kT0 - 70 * kS);
  EXPECT_EQ(old.livez(s, {}, kT0).status, 503);
}

TEST(Health, AStuckWorkerIsReported) {
  HealthChecker h({}, kT0);
  auto at = [](int64_t dt_s) { return kT0 + dt_s * kS; };
  EXPECT_EQ(h.healthz(good_status(at(0)), workers(100, 200), at(0)).status, 200);  // first look: recorded
  EXPECT_EQ(h.livez(good_status(at(5)), workers(100, 900), at(5)).status, 200);    // 5 s still: ok
  auto r = h.healthz(good_status(at(11)), workers(100, 1500), at(11));             // lcore 1 stuck 11 s
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.body["reasons"].size(), 1u) << reasons(r);
  EXPECT_NE(reasons(r).find("worker lcore 1 has not completed a poll round for 11.0 s"), std::string::npos)
      << reasons(r);
  EXPECT_EQ(h.livez(good_status(at(12)), workers(100, 1600), at(12)).status, 503);
  // It moves again.
  EXPECT_EQ(h.healthz(good_status(at(13)), workers(101, 1700), at(13)).status, 200);
}

TEST(Health, OptionsChangeTheLimits) {
  HealthOptions o;
  o.fresh_s = 2;
  HealthChecker h(o, kT0);
  SyncStatus s = good_status(kT0);
  s.last_loop_unix_ns = kT0 - 3 * kS;
  EXPECT_EQ(h.healthz(s, {}, kT0).status, 503);
}

TEST(Health, Rfc3339) {
  EXPECT_EQ(rfc3339(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(rfc3339(kT0 + 123'456'789), "2023-11-14T22:13:20.123Z");
}

TEST(Health, SplitHostPort) {
  std::string h;
  int p = 0;
  EXPECT_TRUE(split_host_port("127.0.0.1:10256", &h, &p));
  EXPECT_EQ(h, "127.0.0.1");
  EXPECT_EQ(p, 10256);
  EXPECT_TRUE(split_host_port("0.0.0.0:0", &h, &p));
  EXPECT_FALSE(split_host_port("localhost:80", &h, &p));
  EXPECT_FALSE(split_host_port("127.0.0.1", &h, &p));
  EXPECT_FALSE(split_host_port("127.0.0.1:65536", &h, &p));
  EXPECT_FALSE(split_host_port("127.0.0.1:x", &h, &p));
}

}  // namespace
}  // namespace vipd::cp
