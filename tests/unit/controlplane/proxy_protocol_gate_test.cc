// ProxyProtocolGate: the modes that cannot send the PROXY protocol header
// program services without it and warn once per change of the set that asks.
#include "controlplane/sync/proxy_protocol_gate.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace vipd::cp {
namespace {

using ::testing::HasSubstr;

std::vector<std::string> g_warnings;
void record(const std::string& line) { g_warnings.push_back(line); }

// Remembers what it was asked to program.
class FakeBackend : public Backend {
 public:
  const char* name() const override { return "fake"; }
  bool apply(const ServiceTable& next, const TableDiff& diff, bool, std::string*) override {
    got.clear();
    for (const auto& [key, svc] : next.services) got.push_back(svc.proxy_protocol);
    diff_ok = true;
    for (const VirtualService* v : diff.added)
      diff_ok = diff_ok && next.services.count(v->key) && &next.services.at(v->key) == v;
    for (const VirtualService* v : diff.changed)
      diff_ok = diff_ok && next.services.count(v->key) && &next.services.at(v->key) == v;
    removed = diff.removed.size();
    return true;
  }
  std::vector<ProxyProtocol> got;
  bool diff_ok = false;
  size_t removed = 0;
};

VirtualService svc(uint16_t port, const char* name, ProxyProtocol pp) {
  VirtualService v;
  v.key = ServiceKey{0x0a600001, port, Protocol::kTcp};
  v.name = name;
  v.proxy_protocol = pp;
  return v;
}

bool apply(Backend& b, const ServiceTable& prev, const ServiceTable& next) {
  std::string err;
  return b.apply(next, TableDiff::compute(prev, next), false, &err);
}

TEST(ProxyProtocolGate, StripsTheHeaderAndWarnsOncePerChange) {
  g_warnings.clear();
  FakeBackend inner;
  ProxyProtocolGate gate(inner, "ipvs mode", &record);
  ServiceTable empty, t1;
  t1.services[{0x0a600001, 80, Protocol::kTcp}] = svc(80, "ns/a:http", ProxyProtocol::kV1);
  t1.services[{0x0a600001, 81, Protocol::kTcp}] = svc(81, "ns/b", ProxyProtocol::kNone);
  ASSERT_TRUE(apply(gate, empty, t1));
  EXPECT_EQ(inner.got, (std::vector<ProxyProtocol>{ProxyProtocol::kNone, ProxyProtocol::kNone}));
  EXPECT_TRUE(inner.diff_ok);
  ASSERT_EQ(g_warnings.size(), 1u);
  EXPECT_THAT(g_warnings[0], HasSubstr("PROXY protocol ignored for 1 service(s) (ns/a:http): ipvs mode cannot"));
  // The same set again (a periodic sync): no second line.
  ASSERT_TRUE(apply(gate, t1, t1));
  EXPECT_EQ(g_warnings.size(), 1u);
  // Another service asks too: one new line naming both.
  ServiceTable t2 = t1;
  t2.services.at({0x0a600001, 81, Protocol::kTcp}).proxy_protocol = ProxyProtocol::kV2;
  ASSERT_TRUE(apply(gate, t1, t2));
  EXPECT_TRUE(inner.diff_ok);
  ASSERT_EQ(g_warnings.size(), 2u);
  EXPECT_THAT(g_warnings[1], HasSubstr("2 service(s) (ns/a:http, ns/b)"));
  // None asks any more: passed through untouched, no line.
  ServiceTable t3;
  t3.services[{0x0a600001, 82, Protocol::kTcp}] = svc(82, "ns/c", ProxyProtocol::kNone);
  ASSERT_TRUE(apply(gate, t2, t3));
  EXPECT_EQ(inner.removed, 2u);
  EXPECT_EQ(g_warnings.size(), 2u);
  // Asking again after that is a change: warned again.
  ASSERT_TRUE(apply(gate, t3, t1));
  EXPECT_EQ(g_warnings.size(), 3u);
}

TEST(ProxyProtocolGate, WarningListsAtMostFiveNames) {
  std::vector<std::string> names;
  for (int i = 0; i < 7; ++i) names.push_back("ns/s" + std::to_string(i));
  const std::string w = proxy_protocol_warning(names, "dpdk nat mode");
  EXPECT_THAT(w, HasSubstr("7 service(s) (ns/s0, ns/s1, ns/s2, ns/s3, ns/s4, ... (2 more)): dpdk nat mode"));
  EXPECT_THAT(w, HasSubstr("--forward-method fnat"));
}

}  // namespace
}  // namespace vipd::cp
