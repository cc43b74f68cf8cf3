// FamilyGate: the modes that do not program IPv6 yet get the table without its
// IPv6 entries (and IPv6 backends), and one warning per change of the counts.
#include "controlplane/sync/family_gate.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace vipd::cp {
namespace {

using ::testing::HasSubstr;

std::vector<std::string> g_warnings;
void record(const std::string& line) { g_warnings.push_back(line); }

// Remembers what it was asked to program; checks the diff points into `next`.
class FakeBackend : public Backend {
 public:
  const char* name() const override { return "fake"; }
  bool apply(const ServiceTable& next, const TableDiff& diff, bool, std::string*) override {
    keys.clear();
    backends.clear();
    for (const auto& [key, svc] : next.services) {
      keys.push_back(to_string(key));
      for (const auto& b : svc.backends) backends.push_back(host_port(b.ip, b.port));
    }
    diff_ok = true;
    for (const VirtualService* v : diff.added)
      diff_ok = diff_ok && next.services.count(v->key) && &next.services.at(v->key) == v;
    for (const VirtualService* v : diff.changed)
      diff_ok = diff_ok && next.services.count(v->key) && &next.services.at(v->key) == v;
    added = diff.added.size();
    changed = diff.changed.size();
    removed.clear();
    for (const auto& k : diff.removed) removed.push_back(to_string(k));
    return true;
  }
  std::vector<std::string> keys, backends, removed;
  size_t added = 0, changed = 0;
  bool diff_ok = false;
};

IpAddr v6(const char* s) { return *IpAddr::parse(s); }

VirtualService svc(IpAddr vip, uint16_t port, std::vector<RealServer> b) {
  VirtualService v;
  v.key = ServiceKey{vip, port, Protocol::kTcp};
  v.name = "default/web";
  v.backends = std::move(b);
  return v;
}

ServiceTable table(std::vector<VirtualService> v) {
  ServiceTable t;
  for (auto& s : v) t.services[s.key] = s;
  return t;
}

struct Gate : ::testing::Test {
  void SetUp() override { g_warnings.clear(); }
  FakeBackend inner;
  FamilyGate gate{inner, "iptables mode", &record};
  ServiceTable prev;
  bool apply(const ServiceTable& next) {
    std::string err;
    const bool ok = gate.apply(next, TableDiff::compute(prev, next), false, &err);
    prev = next;
    return ok;
  }
};

TEST_F(Gate, Ipv4OnlyPassesThroughWithoutWarning) {
  ASSERT_TRUE(apply(table({svc(0x0a600001u, 80, {{0x0a000001u, 8080}})})));
  EXPECT_EQ(inner.keys, (std::vector<std::string>{"TCP 10.96.0.1:80"}));
  EXPECT_EQ(inner.backends, (std::vector<std::string>{"10.0.0.1:8080"}));
  EXPECT_TRUE(inner.diff_ok);
  EXPECT_TRUE(g_warnings.empty());
}

TEST_F(Gate, DropsIpv6EntriesAndBackendsWarnsOncePerChange) {
  const auto t1 = table({svc(0x0a600001u, 80, {{0x0a000001u, 8080}, {v6("fd00::5"), 8080}}),
                         svc(v6("fd00::10"), 80, {{v6("fd00::5"), 8080}})});
  ASSERT_TRUE(apply(t1));
  EXPECT_EQ(inner.keys, (std::vector<std::string>{"TCP 10.96.0.1:80"}));
  EXPECT_EQ(inner.backends, (std::vector<std::string>{"10.0.0.1:8080"}));
  EXPECT_EQ(inner.added, 1u);
  EXPECT_TRUE(inner.diff_ok);
  ASSERT_EQ(g_warnings.size(), 1u);
  EXPECT_THAT(g_warnings[0], HasSubstr("IPv6 not programmed by iptables mode yet"));
  EXPECT_THAT(g_warnings[0], HasSubstr("1 IPv6 service entry and 1 IPv6 backend(s)"));
  EXPECT_EQ(gate.skipped().services, 1u);

  // Same counts: no new line, even when the IPv6 entry changes.
  auto t2 = t1;
  t2.services.begin()->second.persistence_timeout_s = 10;
  std::prev(t2.services.end())->second.backends[0].port = 9090;
  ASSERT_TRUE(apply(t2));
  EXPECT_EQ(g_warnings.size(), 1u);
  EXPECT_EQ(inner.changed, 1u);  // only the IPv4 entry
  EXPECT_TRUE(inner.diff_ok);

  // A second IPv6 entry: the counts change, one more line.
  auto t3 = t2;
  const auto extra = svc(v6("fd00::11"), 443, {});
  t3.services[extra.key] = extra;
  ASSERT_TRUE(apply(t3));
  ASSERT_EQ(g_warnings.size(), 2u);
  EXPECT_THAT(g_warnings[1], HasSubstr("2 IPv6 service entries"));
  EXPECT_EQ(inner.added, 0u);

  // IPv6 gone: the removals of IPv6 keys never reach the inner backend.
  ASSERT_TRUE(apply(table({svc(0x0a600001u, 80, {{0x0a000001u, 8080}})})));
  EXPECT_TRUE(inner.removed.empty());
  EXPECT_EQ(inner.keys, (std::vector<std::string>{"TCP 10.96.0.1:80"}));
  EXPECT_EQ(g_warnings.size(), 2u);  // nothing skipped: no line

  // Back again: warned again (the counts changed from zero).
  ASSERT_TRUE(apply(t1));
  EXPECT_EQ(g_warnings.size(), 3u);
}

TEST(FamilyGateHelpers, DropIpv6KeepsGeneration) {
  ServiceTable t = table({svc(v6("fd00::1"), 53, {})});
  t.generation = 7;
  ServiceTable out;
  const FamilySkip s = drop_ipv6(t, &out);
  EXPECT_EQ(s.services, 1u);
  EXPECT_EQ(s.backends, 0u);
  EXPECT_EQ(out.generation, 7u);
  EXPECT_TRUE(out.services.empty());
  EXPECT_THAT(ipv6_skip_warning(s, "dpdk fnat mode"), HasSubstr("by dpdk fnat mode yet: 1 IPv6 service entry"));
}

}  // namespace
}  // namespace vipd::cp
