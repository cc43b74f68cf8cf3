// Thread: test main thread (plus one SyncLoop::run thread where noted).
// Tests for controlplane/sync/sync_loop.cc with a fake Backend.
#include "controlplane/sync/sync_loop.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include "tests/unit/controlplane/test_util.h"

namespace vipd::cp {
namespace {

using ::testing::HasSubstr;
using vipd::testing::TempDir;
using Clock = std::chrono::steady_clock;

class FakeBackend : public Backend {
 public:
  struct Call {
    uint64_t generation;
    bool full;
    size_t added, changed, removed, services;
    Clock::time_point at;
  };
  const char* name() const override { return "fake"; }
  bool apply(const ServiceTable& next, const TableDiff& diff, bool full, std::string* error) override {
    std::lock_guard<std::mutex> g(mu_);
    calls_.push_back({next.generation, full, diff.added.size(), diff.changed.size(),
                      diff.removed.size(), next.services.size(), Clock::now()});
    if (throw_next_) {
      throw_next_ = false;
      throw std::runtime_error("kaboom");
    }
    if (fail_next_ > 0) {
      --fail_next_;
      *error = "netlink said no";
      return false;
    }
    return true;
  }
  std::vector<Call> calls() const {
    std::lock_guard<std::mutex> g(mu_);
    return calls_;
  }
  void fail_next(int n) {
    std::lock_guard<std::mutex> g(mu_);
    fail_next_ = n;
  }
  void throw_next() {
    std::lock_guard<std::mutex> g(mu_);
    throw_next_ = true;
  }

 private:
  mutable std::mutex mu_;
  std::vector<Call> calls_;
  int fail_next_ = 0;
  bool throw_next_ = false;
};

std::string service(const std::string& name, const std::string& vip) {
  return "apiVersion: v1\nkind: Service\nmetadata: {name: " + name + "}\nspec: {clusterIP: " + vip +
         ", ports: [{name: http, port: 80}]}\n";
}

std::string with_slice(const std::string& name, const std::string& vip, const std::string& ep) {
  return service(name, vip) + "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
         "metadata: {name: " + name + "-1, labels: {kubernetes.io/service-name: " + name + "}}\n"
         "addressType: IPv4\nports: [{name: http, port: 8080}]\nendpoints: [{addresses: [" + ep + "]}]\n";
}

// Polls `pred` until it holds or `ms` pass.
template <typename Pred>
bool eventually(Pred pred, int ms = 3000) {
  const auto end = Clock::now() + std::chrono::milliseconds(ms);
  while (Clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return pred();
}

TEST(SyncLoop, InitialSyncIsFull) {
  TempDir d;
  d.write("a.yaml", with_slice("a", "10.96.0.1", "10.0.0.1"));
  ManifestSource src(d.path(), Scheduler::kRr);
  FakeBackend be;
  SyncLoop loop(src, be);
  EXPECT_EQ(loop.table(), nullptr);
  EXPECT_TRUE(loop.sync_now());
  const auto calls = be.calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_TRUE(calls[0].full);
  EXPECT_EQ(calls[0].generation, 1u);
  EXPECT_EQ(calls[0].added, 1u);
  const auto st = loop.status();
  EXPECT_EQ(st.generation, 1u);
  EXPECT_EQ(st.syncs, 1u);
  EXPECT_EQ(st.sync_errors, 0u);
  EXPECT_GT(st.last_sync_unix_ns, 0);
  EXPECT_GE(st.last_change_to_applied_ms, 0.0);
  ASSERT_NE(loop.table(), nullptr);
  EXPECT_EQ(loop.table()->generation, 1u);
  EXPECT_EQ(loop.table()->services.size(), 1u);
}

TEST(SyncLoop, GenerationIncrementsOnlyOnChange) {
  TempDir d;
  d.write("a.yaml", with_slice("a", "10.96.0.1", "10.0.0.1"));
  ManifestSource src(d.path(), Scheduler::kRr);
  FakeBackend be;
  SyncLoop loop(src, be);
  ASSERT_TRUE(loop.sync_now());
  // Same content (even rewritten): nothing to apply.
  EXPECT_TRUE(loop.sync_now());
  d.write("a.yaml", with_slice("a", "10.96.0.1", "10.0.0.1"));
  d.write("notes.yaml", "# only a comment\n");
  EXPECT_TRUE(loop.sync_now());
  EXPECT_EQ(be.calls().size(), 1u);
  EXPECT_EQ(loop.status().generation, 1u);

  d.write("a.yaml", with_slice("a", "10.96.0.1", "10.0.0.2"));
  ASSERT_TRUE(loop.sync_now());
  d.write("b.yaml", service("b", "10.96.0.2"));
  ASSERT_TRUE(loop.sync_now());
  std::filesystem::remove(d.file("a.yaml"));
  ASSERT_TRUE(loop.sync_now());
  const auto c = be.calls();
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[1].generation, 2u);
  EXPECT_FALSE(c[1].full);
  EXPECT_EQ(c[1].changed, 1u);
  EXPECT_EQ(c[2].generation, 3u);
  EXPECT_EQ(c[2].added, 1u);
  EXPECT_EQ(c[2].changed + c[2].removed, 0u);
  EXPECT_EQ(c[3].generation, 4u);
  EXPECT_EQ(c[3].removed, 1u);
  EXPECT_EQ(c[3].services, 1u);
  EXPECT_EQ(loop.status().generation, 4u);
  EXPECT_EQ(loop.status().syncs, 4u);
}

TEST(SyncLoop, ApplyErrorKeepsLastTableAndRetriesFull) {
  TempDir d;
  d.write("a.yaml", with_slice("a", "10.96.0.1", "10.0.0.1"));
  d.write("b.yaml", service("b", "10.96.0.2"));
  ManifestSource src(d.path(), Scheduler::kRr);
  FakeBackend be;
  SyncLoop loop(src, be);
  ASSERT_TRUE(loop.sync_now());
  const auto first = loop.table();

  be.fail_next(1);
  d.write("a.yaml", with_slice("a", "10.96.0.1", "10.0.0.2"));
  EXPECT_FALSE(loop.sync_now());
  auto st = loop.status();
  EXPECT_EQ(st.sync_errors, 1u);
  EXPECT_EQ(st.last_error, "netlink said no");
  EXPECT_EQ(st.generation, 1u);
  EXPECT_EQ(loop.table(), first);

  // The retry needs no source change; it is a full sync of the same generation.
  EXPECT_TRUE(loop.sync_now());
  auto c = be.calls();
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[1].generation, 2u);
  EXPECT_FALSE(c[1].full);
  EXPECT_EQ(c[2].generation, 2u);
  EXPECT_TRUE(c[2].full);
  EXPECT_EQ(c[2].added, 2u);
  st = loop.status();
  EXPECT_EQ(st.generation, 2u);
  EXPECT_EQ(st.syncs, 2u);
  EXPECT_EQ(st.last_error, "");

  // An exception is a failure too.
  be.throw_next();
  d.write("b.yaml", service("b", "10.96.0.3"));
  EXPECT_FALSE(loop.sync_now());
  EXPECT_THAT(loop.status().last_error, HasSubstr("kaboom"));
  EXPECT_TRUE(loop.sync_now());
  c = be.calls();
  EXPECT_TRUE(c.back().full);
  EXPECT_EQ(c.back().generation, 3u);
}

TEST(SyncLoop, SourceErrorsInStatus) {
  TempDir d;
  d.write("a.yaml", with_slice("a", "10.96.0.1", "10.0.0.1"));
  ManifestSource src(d.path(), Scheduler::kRr);
  FakeBackend be;
  SyncLoop loop(src, be);
  ASSERT_TRUE(loop.sync_now());
  EXPECT_TRUE(loop.status().source_errors.empty());
  d.write("a.yaml", "kind: [oops\n");
  ASSERT_TRUE(loop.sync_now());
  auto st = loop.status();
  ASSERT_EQ(st.source_errors.size(), 1u);
  EXPECT_THAT(st.source_errors[0], HasSubstr("a.yaml: YAML syntax error"));
  EXPECT_EQ(st.generation, 1u);  // the last good version stays; nothing changed
  EXPECT_EQ(be.calls().size(), 1u);
  d.write("a.yaml", with_slice("a", "10.96.0.1", "10.0.0.1"));
  ASSERT_TRUE(loop.sync_now());
  EXPECT_TRUE(loop.status().source_errors.empty());
}

// A tenant's externalIP on another namespace's ClusterIP: the loser is a
// source error and counted by how the conflict was settled (the metric
// vipd_service_conflicts{reason}).
TEST(SyncLoop, ConflictsCountedByReason) {
  TempDir d;
  d.write("dns.yaml", R"(apiVersion: v1
kind: Service
metadata: {name: kube-dns, namespace: kube-system}
spec: {clusterIP: 10.96.0.10, ports: [{name: dns, port: 53, protocol: UDP}]}
)");
  d.write("evil.yaml", R"(apiVersion: v1
kind: Service
metadata: {name: evil, namespace: aaa-tenant}
spec: {clusterIP: 10.96.7.7, externalIPs: [10.96.0.10], ports: [{name: dns, port: 53, protocol: UDP}]}
---
apiVersion: v1
kind: Service
metadata: {name: copy, namespace: aaa-tenant}
spec: {clusterIP: 10.96.7.7, ports: [{name: dns, port: 53, protocol: UDP}]}
)");
  ManifestSource src(d.path(), Scheduler::kRr);
  FakeBackend be;
  SyncLoop loop(src, be);
  ASSERT_TRUE(loop.sync_now());
  const auto st = loop.status();
  EXPECT_EQ(st.source_errors.size(), 2u);
  EXPECT_EQ(st.service_conflicts, (std::map<std::string, uint64_t>{{"order", 1}, {"precedence", 1}}));
  const auto t = loop.table();
  ASSERT_TRUE(t);
  EXPECT_EQ(t->services.at({*parse_ipv4("10.96.0.10"), 53, Protocol::kUdp}).name, "kube-system/kube-dns:dns");
}

TEST(SyncLoopRun, FollowsChangesRetriesAndStops) {
  TempDir d;
  d.write("a.yaml", with_slice("a", "10.96.0.1", "10.0.0.1"));
  ManifestSource src(d.path(), Scheduler::kRr);
  FakeBackend be;
  SyncOptions opts;
  opts.retry_interval_ms = 50;
  SyncLoop loop(src, be, opts);
  std::atomic<bool> stop{false};
  std::thread t([&] { loop.run(stop); });

  ASSERT_TRUE(eventually([&] { return loop.status().generation == 1; }));
  // A burst of writes is coalesced and ends in one state.
  for (int i = 2; i <= 6; ++i) d.write("s" + std::to_string(i) + ".yaml", service("s" + std::to_string(i), "10.96.1." + std::to_string(i)));
  ASSERT_TRUE(eventually([&] {
    auto tbl = loop.table();
    return tbl && tbl->services.size() == 6;
  }));
  const auto st = loop.status();
  EXPECT_GE(st.generation, 2u);
  EXPECT_LE(st.generation, 6u);
  EXPECT_GE(st.last_change_to_applied_ms, 0.0);
  EXPECT_LT(st.last_change_to_applied_ms, 3000.0);

  // A failed apply is retried by the loop with a full sync.
  be.fail_next(2);
  const auto before = be.calls().size();
  d.write("a.yaml", with_slice("a", "10.96.0.1", "10.0.0.9"));
  ASSERT_TRUE(eventually([&] { return loop.status().sync_errors == 2 && loop.status().last_error.empty(); }));
  const auto c = be.calls();
  ASSERT_EQ(c.size(), before + 3);
  EXPECT_FALSE(c[before].full);
  EXPECT_TRUE(c[before + 1].full);
  EXPECT_TRUE(c[before + 2].full);
  EXPECT_EQ(c[before + 2].generation, c[before].generation);

  const auto t0 = Clock::now();
  stop = true;
  t.join();
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(1));
}

TEST(SyncLoopRun, MinInterval) {
  TempDir d;
  d.write("a.yaml", service("a", "10.96.0.1"));
  ManifestSource src(d.path(), Scheduler::kRr);
  FakeBackend be;
  SyncOptions opts;
  opts.min_interval_ms = 300;
  SyncLoop loop(src, be, opts);
  std::atomic<bool> stop{false};
  std::thread t([&] { loop.run(stop); });
  ASSERT_TRUE(eventually([&] { return be.calls().size() == 1; }));
  d.write("b.yaml", service("b", "10.96.0.2"));
  ASSERT_TRUE(eventually([&] { return be.calls().size() == 2; }));
  const auto c = be.calls();
  EXPECT_GE(c[1].at - c[0].at, std::chrono::milliseconds(290));
  stop = true;
  t.join();
}

// A source in delta form (as KubeSource): it owns its table and names the keys it
// touched.
class FakeDeltaSource : public Source {
 public:
  LoadResult load() override {
    LoadResult r;
    r.delta = true;
    r.current = &table_;
    r.touched = std::move(touched_);
    touched_.clear();
    r.issues_unchanged = loads_++ > 0;
    return r;
  }
  bool wait(int) override { return false; }
  std::string describe() const override { return "fake delta source"; }
  void set(uint32_t vip, uint32_t backend_ip, bool report = true) {
    VirtualService vs;
    vs.key = ServiceKey{vip, 80, Protocol::kTcp};
    vs.name = "ns/s" + std::to_string(vip);
    vs.backends = {RealServer{backend_ip, 8080, 1, false}};
    table_.services[vs.key] = vs;
    if (report) touched_.push_back(vs.key);
  }
  void erase(uint32_t vip) {
    const ServiceKey k{vip, 80, Protocol::kTcp};
    table_.services.erase(k);
    touched_.push_back(k);
  }

 private:
  ServiceTable table_;
  std::vector<ServiceKey> touched_;
  int loads_ = 0;
};

TEST(SyncLoop, DeltaSourceIsDiffedOnlyOnTheKeysItTouched) {
  FakeDeltaSource src;
  for (uint32_t v = 1; v <= 100; ++v) src.set(v, 1000 + v);
  FakeBackend be;
  SyncLoop loop(src, be);
  ASSERT_TRUE(loop.sync_now());
  ASSERT_EQ(be.calls().back().added, 100u);
  EXPECT_TRUE(be.calls().back().full);

  src.set(7, 9999);
  src.erase(8);
  src.set(500, 1);
  ASSERT_TRUE(loop.sync_now());
  auto c = be.calls().back();
  EXPECT_FALSE(c.full);
  EXPECT_EQ(c.changed, 1u);
  EXPECT_EQ(c.removed, 1u);
  EXPECT_EQ(c.added, 1u);
  EXPECT_EQ(c.generation, 2u);
  ASSERT_NE(loop.table(), nullptr);
  EXPECT_EQ(loop.table()->services.size(), 100u);
  EXPECT_EQ(loop.table()->services.at(ServiceKey{7, 80, Protocol::kTcp}).backends[0].ip, 9999u);

  // A change the source does not report is not looked for (that is the point:
  // the work follows the touched keys, not the table size)...
  src.set(9, 4242, /*report=*/false);
  ASSERT_TRUE(loop.sync_now());
  EXPECT_EQ(be.calls().size(), 2u);
  // ...but a full sync (after a failure) compares everything and repairs it.
  be.fail_next(1);
  src.set(10, 4343);
  EXPECT_FALSE(loop.sync_now());
  ASSERT_TRUE(loop.sync_now());
  c = be.calls().back();
  EXPECT_TRUE(c.full);
  EXPECT_EQ(loop.table()->services.at(ServiceKey{9, 80, Protocol::kTcp}).backends[0].ip, 4242u);
  EXPECT_EQ(loop.table()->services.at(ServiceKey{10, 80, Protocol::kTcp}).backends[0].ip, 4343u);
}

TEST(SyncLoop, TableSnapshotIsSharedUntilTheNextGeneration) {
  FakeDeltaSource src;
  src.set(1, 11);
  FakeBackend be;
  SyncLoop loop(src, be);
  ASSERT_TRUE(loop.sync_now());
  const auto a = loop.table();
  EXPECT_EQ(loop.table(), a);  // no copy per call
  src.set(1, 12);
  ASSERT_TRUE(loop.sync_now());
  const auto b = loop.table();
  EXPECT_NE(b, a);
  EXPECT_EQ(b->generation, 2u);
  EXPECT_EQ(a->services.begin()->second.backends[0].ip, 11u);  // the old snapshot is unchanged
  EXPECT_EQ(b->services.begin()->second.backends[0].ip, 12u);
}

TEST(SyncLoop, RetryDelayDoublesWithJitterUpToTheMaximum) {
  FakeDeltaSource src;
  src.set(1, 11);
  FakeBackend be;
  SyncOptions opts;
  opts.retry_interval_ms = 1000;
  opts.retry_max_ms = 8000;
  SyncLoop loop(src, be, opts);
  be.fail_next(6);
  uint32_t expect_max = 1000;
  for (int i = 0; i < 6; ++i) {
    EXPECT_FALSE(loop.sync_now());
    const uint32_t d = loop.status().next_retry_ms;
    EXPECT_GE(d, expect_max / 2) << "attempt " << i;
    EXPECT_LE(d, expect_max) << "attempt " << i;
    expect_max = std::min<uint32_t>(expect_max * 2, 8000);
  }
  ASSERT_TRUE(loop.sync_now());
  EXPECT_EQ(loop.status().next_retry_ms, 0u);
  // After a success the backoff starts again from the first delay.
  be.fail_next(1);
  src.set(1, 12);
  EXPECT_FALSE(loop.sync_now());
  EXPECT_LE(loop.status().next_retry_ms, 1000u);
}

TEST(SyncLoopRun, PeriodicFullResync) {
  FakeDeltaSource src;
  src.set(1, 11);
  FakeBackend be;
  SyncOptions opts;
  opts.full_resync_s = 1;
  opts.poll_ms = 20;
  SyncLoop loop(src, be, opts);
  std::atomic<bool> stop{false};
  std::thread t([&] { loop.run(stop); });
  ASSERT_TRUE(eventually([&] { return be.calls().size() >= 3; }, 5000));
  stop = true;
  t.join();
  const auto c = be.calls();
  for (const auto& call : c) EXPECT_TRUE(call.full);
  EXPECT_EQ(c.back().generation, 1u);  // nothing changed: the generation stays
  EXPECT_GE(c[1].at - c[0].at, std::chrono::milliseconds(990));
  EXPECT_GE(loop.status().full_syncs, 3u);
}

}  // namespace
}  // namespace vipd::cp
