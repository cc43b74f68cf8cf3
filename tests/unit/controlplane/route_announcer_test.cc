// Which VIPs are announced (controlplane/host/route_announcer.h), and the
// backend wrapper: announcements follow only successful applies. The
// netlink side is covered by tests/integration/exception_test.sh.
#include <gtest/gtest.h>

#include "controlplane/host/route_announcer.h"

namespace vipd::cp::host {
namespace {

VirtualService svc(IpAddr vip, uint16_t port, std::vector<RealServer> b) {
  VirtualService s;
  s.key = ServiceKey{vip, port, Protocol::kTcp};
  s.backends = std::move(b);
  return s;
}

TEST(AnnouncedVips, OnlyAddressesWithABackendTakingNewFlows) {
  ServiceTable t;
  const Ipv4 a = 0x0a600001, b = 0x0a600002, c = 0x0a600003, d = 0x0a600004;
  for (auto s : {svc(a, 80, {{1, 80, 1, false}}),        // ready
                 svc(b, 80, {}),                           // no endpoints
                 svc(c, 80, {{1, 80, 0, true}}),           // only a terminating (weight 0) one
                 svc(d, 80, {}), svc(d, 443, {{2, 443, 3, false}})})  // one of two ports served
    t.services[s.key] = s;
  EXPECT_EQ(announced_vips(t, true, false), (std::set<IpAddr>{a, d}));
  EXPECT_EQ(announced_vips(t, false, false), (std::set<IpAddr>{a, b, c, d}));
  EXPECT_TRUE(announced_vips(ServiceTable{}, true, false).empty());
}

TEST(AnnouncedVips, NothingWhileDraining) {
  ServiceTable t;
  const Ipv4 a = 0x0a600001, b = 0x0a600002;
  for (auto s : {svc(a, 80, {{1, 80, 1, false}}), svc(b, 80, {})}) t.services[s.key] = s;
  EXPECT_TRUE(announced_vips(t, true, true).empty());
  EXPECT_TRUE(announced_vips(t, false, true).empty());
  EXPECT_EQ(announced_vips(t, false, false), (std::set<IpAddr>{a, b}));
}

IpAddr v6(const char* s) { return *IpAddr::parse(s); }

TEST(AnnouncedVips, Ipv6UnderTheSameRules) {
  ServiceTable t;
  const IpAddr a = 0x0a600001, a6 = v6("fd00:96::100"), b6 = v6("fd00:96::101"), c6 = v6("fd00:96::102");
  const IpAddr pod6 = v6("fd00:244::5");
  for (auto s : {svc(a, 80, {{1, 80, 1, false}}),
                 svc(a6, 8080, {{pod6, 8080, 1, false}}),   // ready
                 svc(b6, 8080, {}),                         // no endpoints
                 svc(c6, 8080, {{pod6, 8080, 0, true}})})   // only a terminating one
    t.services[s.key] = s;
  EXPECT_EQ(announced_vips(t, true, false), (std::set<IpAddr>{a, a6}));
  EXPECT_EQ(announced_vips(t, false, false), (std::set<IpAddr>{a, a6, b6, c6}));
  EXPECT_TRUE(announced_vips(t, false, true).empty());
  // IPv6 not enabled on the interface: IPv4 only.
  EXPECT_EQ(announced_vips(t, false, false, false), (std::set<IpAddr>{a}));
}

TEST(EnableIpv6Routes, MissingInterfaceIsAnError) {
  std::string err;
  EXPECT_FALSE(enable_ipv6_routes("vipd-none-xx", &err));
  EXPECT_NE(err.find("/proc/sys/net/ipv6/conf/vipd-none-xx/"), std::string::npos) << err;
}

class FakeBackend : public Backend {
 public:
  const char* name() const override { return "fake"; }
  bool apply(const ServiceTable&, const TableDiff&, bool, std::string* error) override {
    if (fail) *error = "refused";
    return !fail;
  }
  bool fail = false;
};

TEST(AnnouncingBackend, NothingAnnouncedWhenTheApplyFails) {
  FakeBackend inner;
  inner.fail = true;
  // An interface that does not exist: any netlink call would fail, so a
  // successful result proves none was made.
  RouteAnnouncer ann("vipd-none-xx", 100);
  AnnouncingBackend be(inner, ann, true);
  ServiceTable t;
  t.services[ServiceKey{0x0a600001, 80, Protocol::kTcp}] = svc(0x0a600001, 80, {{1, 80, 1, false}});
  std::string err;
  EXPECT_FALSE(be.apply(t, TableDiff{}, true, &err));
  EXPECT_EQ(err, "refused");
  EXPECT_TRUE(ann.announced().empty());
  // Applied, nothing to announce: no netlink call either.
  inner.fail = false;
  EXPECT_TRUE(be.apply(ServiceTable{}, TableDiff{}, true, &err)) << err;
  // Applied with a VIP to announce: the missing interface is an error (retried).
  EXPECT_FALSE(be.apply(t, TableDiff{}, true, &err));
  EXPECT_NE(err.find("vipd-none-xx"), std::string::npos) << err;
  EXPECT_TRUE(ann.announced().empty());
}

TEST(AnnouncingBackend, DrainingKeepsRoutesWithdrawnUntilCancelled) {
  FakeBackend inner;
  // A missing interface again: a call that succeeds made no netlink request.
  RouteAnnouncer ann("vipd-none-xx", 100);
  AnnouncingBackend be(inner, ann, true);
  ServiceTable t;
  t.services[ServiceKey{0x0a600001, 80, Protocol::kTcp}] = svc(0x0a600001, 80, {{1, 80, 1, false}});
  std::string err;
  EXPECT_TRUE(be.set_draining(true, &err)) << err;
  // Draining: a table with a ready VIP is applied and nothing is announced.
  EXPECT_TRUE(be.apply(t, TableDiff{}, true, &err)) << err;
  EXPECT_TRUE(ann.announced().empty());
  EXPECT_EQ(be.announced_count(), 0u);
  // Cancelled: the last applied table's VIP is announced at once (here: the
  // missing interface is the error, so the attempt was made).
  EXPECT_FALSE(be.set_draining(false, &err));
  EXPECT_NE(err.find("10.96.0.1/32"), std::string::npos) << err;
  // Draining again with nothing in place: no call, no error.
  err.clear();
  EXPECT_TRUE(be.withdraw_all(&err)) << err;
  EXPECT_TRUE(be.apply(t, TableDiff{}, false, &err)) << err;
}

TEST(AnnouncingBackend, Ipv6VipsAreAnnouncedAndDrainedAlike) {
  FakeBackend inner;
  RouteAnnouncer ann("vipd-none-xx", 100);  // missing: a success made no netlink call
  ServiceTable t;
  const IpAddr a6 = v6("fd00:96::100");
  t.services[ServiceKey{a6, 8080, Protocol::kTcp}] = svc(a6, 8080, {{v6("fd00:244::5"), 8080, 1, false}});
  std::string err;
  {
    // Without IPv6 on the interface an IPv6-only table has nothing to announce.
    AnnouncingBackend be(inner, ann, true, false);
    EXPECT_TRUE(be.apply(t, TableDiff{}, true, &err)) << err;
    EXPECT_EQ(be.announced_count(), 0u);
  }
  AnnouncingBackend be(inner, ann, true);
  // The IPv6 VIP is attempted as a /128 route (the missing interface fails it).
  EXPECT_FALSE(be.apply(t, TableDiff{}, true, &err));
  EXPECT_NE(err.find("fd00:96::100/128 table 100 dev vipd-none-xx"), std::string::npos) << err;
  // Draining: applied without an attempt; cancelled: attempted again.
  err.clear();
  EXPECT_TRUE(be.set_draining(true, &err)) << err;
  EXPECT_TRUE(be.apply(t, TableDiff{}, true, &err)) << err;
  EXPECT_FALSE(be.set_draining(false, &err));
  EXPECT_NE(err.find("fd00:96::100/128"), std::string::npos) << err;
}

}  // namespace
}  // namespace vipd::cp::host
