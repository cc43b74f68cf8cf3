// Thread: test main thread (KubeSource runs its reflector threads; the test
// drives the SyncLoop with sync_now() itself).
//
// KubeSource + SyncLoop against a scripted API server (fake_transport.h):
// what vipd applies after relists, 410s, dropped watches and changes that land
// between the pages of a list must equal what a fresh start builds from the
// API server's final state. Every step waits on a condition of the fake server
// (a held reconnect, a fired hook, a watch caught up to the current
// resourceVersion) with a 30 s deadline; nothing relies on sleeps.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <simdjson.h>

#include "controlplane/kube/kube_source.h"
#include "controlplane/sources/k8s_objects.h"
#include "controlplane/sync/sync_loop.h"
#include "fake_transport.h"

namespace vipd::cp::kube {
namespace {

using fake::FakeApi;
using fake::kServices;
using fake::kSlices;
using Services = std::map<ServiceKey, VirtualService>;

// A backend that keeps what it was given the way a real one does: a full
// sync replaces everything, an incremental one applies the diff.
class AppliedBackend : public Backend {
 public:
  const char* name() const override { return "applied"; }
  bool apply(const ServiceTable& next, const TableDiff& diff, bool full, std::string*) override {
    std::lock_guard<std::mutex> g(mu_);
    if (full) services_ = next.services;
    for (const ServiceKey& k : diff.removed) services_.erase(k);
    for (const VirtualService* vs : diff.added) services_.insert_or_assign(vs->key, *vs);
    for (const VirtualService* vs : diff.changed) services_.insert_or_assign(vs->key, *vs);
    return true;
  }
  Services services() const {
    std::lock_guard<std::mutex> g(mu_);
    return services_;
  }

 private:
  mutable std::mutex mu_;
  Services services_;
};

std::string svc_json(const std::string& name, const std::string& ip, int port) {
  return R"({"apiVersion":"v1","kind":"Service","metadata":{"name":")" + name +
         R"(","namespace":"default","resourceVersion":"@RV@"},"spec":{"type":"ClusterIP","clusterIP":")" + ip +
         R"(","ports":[{"name":"http","protocol":"TCP","port":)" + std::to_string(port) +
         R"(,"targetPort":8080}]}})";
}

std::string slice_json(const std::string& name, const std::string& service, const std::vector<std::string>& ips) {
  std::string eps;
  for (const auto& ip : ips) {
    if (!eps.empty()) eps += ",";
    eps += R"({"addresses":[")" + ip + R"("],"conditions":{"ready":true}})";
  }
  return R"({"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":")" + name +
         R"(","namespace":"default","resourceVersion":"@RV@","labels":{"kubernetes.io/service-name":")" +
         service + R"("}},"addressType":"IPv4","ports":[{"name":"http","protocol":"TCP","port":8080}],"endpoints":[)" +
         eps + "]}";
}

// What a fresh start builds from the API server's current objects. Decoded
// objects are remembered by their JSON (decoding is slow under sanitizers).
Services fresh_build(const FakeApi& api, const k8s::BuildOptions& opts) {
  static std::map<std::string, k8s::Service> known_services;
  static std::map<std::string, k8s::EndpointSlice> known_slices;
  simdjson::dom::parser parser;
  std::vector<k8s::Service> services;
  std::vector<k8s::EndpointSlice> slices;
  for (const auto& [key, json] : api.objects(kServices)) {
    if (auto k = known_services.find(json); k != known_services.end()) {
      services.push_back(k->second);
      continue;
    }
    simdjson::dom::element e = parser.parse(json);
    std::string why;
    if (auto v = decode_service(e, &why)) services.push_back(known_services[json] = std::move(*v));
    else ADD_FAILURE() << key << ": " << why;
  }
  for (const auto& [key, json] : api.objects(kSlices)) {
    if (auto k = known_slices.find(json); k != known_slices.end()) {
      slices.push_back(k->second);
      continue;
    }
    simdjson::dom::element e = parser.parse(json);
    std::string why;
    if (auto v = decode_endpoint_slice(e, &why)) slices.push_back(known_slices[json] = std::move(*v));
    else ADD_FAILURE() << key << ": " << why;
  }
  return k8s::build_service_table(services, slices, opts).table.services;
}

std::string describe(const VirtualService& vs) {
  std::string s = std::to_string(vs.backends.size()) + " backend(s)";
  for (const auto& b : vs.backends) s += " " + b.ip.to_string() + ":" + std::to_string(b.port);
  return s;
}

::testing::AssertionResult same(const Services& got, const Services& want) {
  if (got == want) return ::testing::AssertionSuccess();
  auto r = ::testing::AssertionFailure();
  r << "applied " << got.size() << " service(s), a fresh build has " << want.size() << ";";
  int shown = 0;
  for (const auto& [k, vs] : want) {
    auto g = got.find(k);
    if (g == got.end()) r << "\n  missing " << to_string(k);
    else if (!(g->second == vs))
      r << "\n  differs " << to_string(k) << ": applied " << describe(g->second) << ", fresh " << describe(vs);
    else continue;
    if (++shown == 8) return r;
  }
  for (const auto& [k, vs] : got)
    if (!want.count(k) && shown++ < 8) r << "\n  extra " << to_string(k);
  return r;
}

class Harness {
 public:
  explicit Harness(uint32_t page_size) {
    opts_.qps = 1e6;
    opts_.backoff_initial_ms = 1;
    opts_.backoff_max_ms = 16;
    opts_.list_page_size = page_size;
  }
  ~Harness() {
    sync_.reset();
    if (src_) src_->stop();
  }

  void start() {
    ClientConfig cfg;
    cfg.server = "fake://api";
    cfg.origin = "scripted";
    src_ = std::make_unique<KubeSource>(cfg, opts_, std::make_unique<fake::FakeTransport>(api));
    SyncOptions so;
    so.full_resync_s = 0;  // full resyncs only when a test asks for one
    sync_ = std::make_unique<SyncLoop>(*src_, backend, so);
    src_->start();
  }

  // Both reflectors have every event up to the API server's current
  // resourceVersion; one sync; what it applied equals a fresh build.
  // `timeout`: 30 s; more for thousands of objects (slow under sanitizers).
  ::testing::AssertionResult settle(std::chrono::seconds timeout = std::chrono::seconds(30)) {
    if (!api->disarm_hook(timeout)) return ::testing::AssertionFailure() << "a hook did not finish in time";
    if (!api->wait_caught_up(timeout))
      return ::testing::AssertionFailure() << "the reflectors did not catch up within " << timeout.count() << " s";
    if (!src_->ready()) return ::testing::AssertionFailure() << "caught up but not ready";
    if (!sync_->sync_now()) return ::testing::AssertionFailure() << "sync failed";
    return same(backend.services(), fresh_build(*api, opts_.build));
  }

  std::shared_ptr<FakeApi> api = std::make_shared<FakeApi>();
  AppliedBackend backend;
  KubeSource& source() { return *src_; }
  SyncLoop& sync() { return *sync_; }
  KubeSourceOptions& options() { return opts_; }

 private:
  KubeSourceOptions opts_;
  std::unique_ptr<KubeSource> src_;
  std::unique_ptr<SyncLoop> sync_;
};

std::string ip_of(int i) {
  return "10.97." + std::to_string(i / 250) + "." + std::to_string(i % 250 + 1);
}

// The scenario of a lost change: 1,201 Services and EndpointSlices (3 pages of
// 500); the API server compacts and drops the watches; before vipd
// reconnects... it relists, and one EndpointSlice (default/db-a, two endpoints
// -> one) changes between the first and the second page of that relist. The
// API server variants: later pages report the current resourceVersion (the
// one that lost the change: vipd watched from after it), later pages served
// live instead of from the first page's snapshot, both, neither. The first
// runs with 1,201 objects of each kind (3 pages of 500), the others with 13
// (3 pages of 5), which is as many pages for a fraction of the time.
TEST(KubeRelist, ChangeBetweenPagesOfARelistIsNotLost) {
  struct Variant {
    const char* name;
    FakeApi::Faults faults;
    int objects;  // of each kind, db-a included
    uint32_t page;
  };
  const Variant variants[] = {
      {"later pages report the current resourceVersion", {true, false, false}, 1201, 500},
      {"later pages served live", {false, true, false}, 13, 5},
      {"both", {true, true, false}, 13, 5},
      {"a consistent server", {false, false, false}, 13, 5},
  };
  for (const Variant& v : variants) {
    SCOPED_TRACE(v.name);
    const auto deadline = std::chrono::seconds(v.objects > 100 ? 120 : 30);
    Harness h(v.page);
    h.api->set_faults(v.faults);
    h.api->put(kServices, "default/db-a", svc_json("db-a", "10.96.0.10", 5432));
    h.api->put(kSlices, "default/db-a", slice_json("db-a", "db-a", {"10.244.1.1", "10.244.1.2"}));
    for (int i = 0; i < v.objects - 1; ++i) {
      char name[32];
      std::snprintf(name, sizeof name, "svc-%04d", i);
      h.api->put(kServices, std::string("default/") + name, svc_json(name, ip_of(i), 80));
      h.api->put(kSlices, std::string("default/") + name,
                 slice_json(name, name, {"10.245." + std::to_string(i / 250) + "." + std::to_string(i % 250 + 1)}));
    }
    h.start();
    ASSERT_TRUE(h.settle(deadline));
    ASSERT_EQ(h.source().stats().endpointslices.list_pages, 3u);

    // The API server compacts and drops the watches; vipd's reconnects wait.
    h.api->hold(true);
    h.api->drop_watches();
    ASSERT_TRUE(h.api->wait_held(deadline));
    h.api->compact();
    h.api->after_page(kSlices, 1, [&] {
      h.api->put(kSlices, "default/db-a", slice_json("db-a", "db-a", {"10.244.1.1"}));
    });
    const int lists_before = h.api->lists_started(kSlices);
    h.api->hold(false);  // reconnect: 410 -> relist, the change lands after page 1
    ASSERT_TRUE(h.api->wait_hook_fired(deadline));
    EXPECT_GT(h.api->lists_started(kSlices), lists_before);
    ASSERT_TRUE(h.settle(deadline));

    const Services applied = h.backend.services();
    ServiceKey db{};
    for (const auto& [k, vs] : applied)
      if (vs.name.find("db-a") != std::string::npos) db = k;
    ASSERT_TRUE(applied.count(db)) << "db-a is not in the applied table";
    EXPECT_EQ(applied.at(db).backends.size(), 1u) << describe(applied.at(db));
    const KubeSourceStats st = h.source().stats();
    EXPECT_GE(st.endpointslices.relists_gone, 1u);
    EXPECT_GE(st.services.relists_gone, 1u);
    EXPECT_GE(st.endpointslices.list_pages, 6u);  // two lists of 3 pages at least
    EXPECT_EQ(h.sync().status().resync_repairs, 0u);
  }
}

// A divergence between the reflector caches and the applied table (here made
// on purpose: the pending change is thrown away, as a lost change would be)
// is repaired by the next periodic full resync, which rebuilds from the caches,
// and counted.
TEST(KubeRelist, PeriodicResyncRepairsADivergence) {
  Harness h(2);
  for (int i = 0; i < 5; ++i) {
    const std::string n = "web-" + std::to_string(i);
    h.api->put(kServices, "default/" + n, svc_json(n, ip_of(i), 80));
    h.api->put(kSlices, "default/" + n, slice_json(n, n, {"10.244.0.1", "10.244.0.2"}));
  }
  h.start();
  ASSERT_TRUE(h.settle());

  h.api->put(kSlices, "default/web-3", slice_json("web-3", "web-3", {"10.244.0.9"}));
  ASSERT_TRUE(h.api->wait_caught_up());
  h.source().discard_pending_changes_for_test();
  ASSERT_TRUE(h.sync().sync_now());
  const Services want = fresh_build(*h.api, h.options().build);
  ASSERT_FALSE(same(h.backend.services(), want)) << "the test did not make a divergence";
  EXPECT_EQ(h.sync().status().resync_repairs, 0u);

  h.sync().request_full_resync();
  ASSERT_TRUE(h.sync().sync_now());
  EXPECT_TRUE(same(h.backend.services(), want));
  EXPECT_EQ(h.sync().status().resync_repairs, 1u);
  ASSERT_NE(h.sync().table(), nullptr);
  EXPECT_TRUE(same(h.sync().table()->services, want));

  // Nothing diverges any more: another resync repairs nothing.
  h.sync().request_full_resync();
  ASSERT_TRUE(h.sync().sync_now());
  EXPECT_TRUE(same(h.backend.services(), want));
  EXPECT_EQ(h.sync().status().resync_repairs, 1u);
  EXPECT_EQ(h.sync().status().full_syncs, 3u);  // the first sync and two resyncs
}

// An API server that answers every watch with 410: vipd relists, but backs off
// between relists, the delay growing up to --api-backoff-max-ms; once a watch
// is accepted again the delay is back to the initial one.
TEST(KubeRelist, RepeatedGoneBacksOff) {
  Harness h(100);
  h.options().backoff_initial_ms = 1;
  h.options().backoff_max_ms = 16;
  h.api->put(kServices, "default/a", svc_json("a", "10.96.0.1", 80));
  h.api->put(kSlices, "default/a", slice_json("a", "a", {"10.244.0.1"}));
  h.api->set_faults({false, false, true});
  h.start();
  // 1 -> 2 -> 4 -> 8 -> 16: after six relists in a row the delay is at its cap.
  ASSERT_TRUE(h.api->wait_until([&] {
    const auto s = h.source().stats();
    return s.endpointslices.relists_gone >= 6 && s.services.relists_gone >= 6;
  })) << "no relists";
  KubeSourceStats st = h.source().stats();
  EXPECT_EQ(st.endpointslices.retry_delay_ms, 16u);
  EXPECT_EQ(st.services.retry_delay_ms, 16u);
  EXPECT_GE(st.endpointslices.gone, 6u);

  h.api->set_faults({});
  ASSERT_TRUE(h.api->wait_caught_up());
  // An event for each resource: the open watches deliver it, which resets the delay.
  h.api->put(kServices, "default/a", svc_json("a", "10.96.0.1", 81));
  h.api->put(kSlices, "default/a", slice_json("a", "a", {"10.244.0.2"}));
  ASSERT_TRUE(h.settle());
  ASSERT_TRUE(h.api->wait_until([&] {
    const auto s = h.source().stats();
    return s.endpointslices.retry_delay_ms == 1 && s.services.retry_delay_ms == 1;
  })) << "the delay was not reset";
}

// The property: for random sequences of object changes, dropped watches,
// compactions (410), failed requests, undecodable streams, changes between
// list pages and API servers that do not pin list snapshots, the table vipd
// applies equals a fresh build of the API server's final state, at every
// settle point; and a full resync never finds anything to repair.
TEST(KubeRelist, RandomHistoriesEndAsAFreshBuild) {
  const uint32_t kSeeds = 16;
  const int kOps = 80;
  for (uint32_t seed = 1; seed <= kSeeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
    auto chance = [&](int percent) { return pick(100) < percent; };
    Harness h(3);
    auto random_change = [&] {
      if (chance(50)) {
        const std::string n = "s" + std::to_string(pick(8));
        if (chance(20)) h.api->erase(kServices, "default/" + n);
        else h.api->put(kServices, "default/" + n, svc_json(n, "10.96.0." + std::to_string(1 + pick(4)),
                                                            chance(50) ? 80 : 443));
      } else {
        const std::string n = "e" + std::to_string(pick(10));
        if (chance(20)) {
          h.api->erase(kSlices, "default/" + n);
        } else {
          std::vector<std::string> ips;
          for (int i = pick(4); i > 0; --i) ips.push_back("10.244.0." + std::to_string(1 + pick(6)));
          h.api->put(kSlices, "default/" + n, slice_json(n, "s" + std::to_string(pick(8)), ips));
        }
      }
    };
    for (int i = 0; i < 12; ++i) random_change();
    h.start();
    ASSERT_TRUE(h.settle());
    for (int op = 0; op < kOps; ++op) {
      const int p = pick(100);
      if (p < 55) {
        random_change();
      } else if (p < 60) {
        h.api->drop_watches();
      } else if (p < 65) {
        h.api->compact();
      } else if (p < 68) {
        h.api->fail_next(1 + pick(2));
      } else if (p < 70) {
        h.api->garbage_next_watch();
      } else if (p < 74) {
        h.api->set_faults({chance(50), chance(50), false});
      } else if (p < 78) {
        // A change between the pages of the next list of a resource.
        h.api->after_page(chance(50) ? kServices : kSlices, 1 + pick(2), random_change);
      } else if (p < 84) {
        ASSERT_TRUE(h.sync().sync_now());
      } else if (p < 87) {
        h.sync().request_full_resync();
        ASSERT_TRUE(h.sync().sync_now());
      } else if (p < 94) {
        // Changes while vipd is disconnected, with a compaction: 410 on reconnect.
        h.api->hold(true);
        h.api->drop_watches();
        ASSERT_TRUE(h.api->wait_held());
        for (int i = 1 + pick(3); i > 0; --i) random_change();
        h.api->compact();
        if (chance(50)) h.api->set_faults({chance(50), chance(50), false});
        const fake::Res hooked = chance(50) ? kServices : kSlices;
        if (chance(70)) h.api->after_page(hooked, 1 + pick(2), random_change);
        h.api->hold(false);
        if (chance(50)) {
          ASSERT_TRUE(h.api->wait_hook_or_caught_up(hooked));
          ASSERT_TRUE(h.settle()) << "after op " << op << " (a reconnect after a compaction)";
        }
      } else {
        ASSERT_TRUE(h.settle()) << "after op " << op;
      }
    }
    ASSERT_TRUE(h.settle()) << "at the end";
    h.sync().request_full_resync();
    ASSERT_TRUE(h.sync().sync_now());
    EXPECT_TRUE(same(h.backend.services(), fresh_build(*h.api, h.options().build)));
    EXPECT_EQ(h.sync().status().resync_repairs, 0u) << "a full resync found a divergence";
  }
}

}  // namespace
}  // namespace vipd::cp::kube
