// Thread: test main thread. Tests for model/service_table.cc.
#include "model/service_table.h"

#include <gtest/gtest.h>

namespace vipd::cp {
namespace {

Ipv4 ip(const char* s) { return *parse_ipv4(s); }

VirtualService vs(const char* vip, uint16_t port, Protocol p, const std::string& name,
                  std::vector<RealServer> backends = {}) {
  VirtualService s;
  s.key = {ip(vip), port, p};
  s.name = name;
  s.backends = std::move(backends);
  return s;
}

void put(ServiceTable& t, VirtualService s) { t.services[s.key] = std::move(s); }

TEST(ServiceTable, Addresses) {
  EXPECT_EQ(ip("10.96.0.100"), 0x0a600064u);
  EXPECT_EQ(ipv4_to_string(0x0a600064u), "10.96.0.100");
  EXPECT_FALSE(parse_ipv4("10.96.0"));
  EXPECT_FALSE(parse_ipv4("10.96.0.256"));
  EXPECT_FALSE(parse_ipv4(""));
  EXPECT_FALSE(parse_ipv4(" 10.0.0.1"));
  EXPECT_EQ(to_string(ServiceKey{ip("10.96.0.100"), 8080, Protocol::kTcp}), "TCP 10.96.0.100:8080");
}

TEST(ServiceTable, AddressFamily) {
  EXPECT_EQ(address_family("10.96.0.100"), AddressFamily::kIpv4);
  EXPECT_EQ(address_family("fd00::1"), AddressFamily::kIpv6);
  EXPECT_EQ(address_family("::ffff:10.0.0.1"), AddressFamily::kIpv6);
  EXPECT_EQ(address_family("::"), AddressFamily::kIpv6);
  EXPECT_EQ(address_family(""), std::nullopt);
  EXPECT_EQ(address_family("10.96.0"), std::nullopt);
  EXPECT_EQ(address_family("fd00::1/64"), std::nullopt);
  EXPECT_EQ(address_family("[fd00::1]"), std::nullopt);
  EXPECT_EQ(address_family("example.com"), std::nullopt);
  EXPECT_TRUE(is_ipv6("2001:db8::5"));
  EXPECT_FALSE(is_ipv6("10.0.0.1"));
  EXPECT_FALSE(is_ipv6("fd00::1%eth0"));
}

TEST(ServiceTable, KeyOrderIsVipPortProtocol) {
  const ServiceKey a{ip("10.0.0.1"), 53, Protocol::kUdp};
  const ServiceKey b{ip("10.0.0.1"), 80, Protocol::kTcp};
  const ServiceKey c{ip("10.0.0.2"), 1, Protocol::kTcp};
  const ServiceKey d{ip("10.0.0.1"), 53, Protocol::kTcp};
  EXPECT_LT(d, a);
  EXPECT_LT(a, b);
  EXPECT_LT(b, c);
}

TEST(ServiceTable, NormalizeSortsAndDedupes) {
  ServiceTable t;
  put(t, vs("10.96.0.1", 80, Protocol::kTcp, "a",
            {{ip("10.0.0.3"), 80, 1, false}, {ip("10.0.0.1"), 81, 1, false},
             {ip("10.0.0.1"), 80, 1, false}, {ip("10.0.0.3"), 80, 0, true}}));
  t.normalize();
  const auto& b = t.services.begin()->second.backends;
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].port, 80);
  EXPECT_EQ(b[1].port, 81);
  EXPECT_EQ(b[2].ip, ip("10.0.0.3"));
}

TEST(ServiceTable, Diff) {
  ServiceTable prev, next;
  put(prev, vs("10.96.0.1", 80, Protocol::kTcp, "kept", {{ip("10.0.0.1"), 80, 1, false}}));
  put(prev, vs("10.96.0.2", 80, Protocol::kTcp, "changed", {{ip("10.0.0.1"), 80, 1, false}}));
  put(prev, vs("10.96.0.3", 80, Protocol::kTcp, "removed"));
  put(next, vs("10.96.0.1", 80, Protocol::kTcp, "kept", {{ip("10.0.0.1"), 80, 1, false}}));
  put(next, vs("10.96.0.2", 80, Protocol::kTcp, "changed", {{ip("10.0.0.1"), 80, 0, true}}));
  put(next, vs("10.96.0.2", 80, Protocol::kUdp, "added"));
  put(next, vs("10.96.0.4", 80, Protocol::kTcp, "added2"));
  const TableDiff d = TableDiff::compute(prev, next);
  ASSERT_EQ(d.added.size(), 2u);
  EXPECT_EQ(d.added[0]->name, "added");
  EXPECT_EQ(d.added[1]->name, "added2");
  ASSERT_EQ(d.changed.size(), 1u);
  EXPECT_EQ(d.changed[0]->name, "changed");
  ASSERT_EQ(d.removed.size(), 1u);
  EXPECT_EQ(d.removed[0], (ServiceKey{ip("10.96.0.3"), 80, Protocol::kTcp}));
  EXPECT_FALSE(d.empty());
  EXPECT_TRUE(TableDiff::compute(next, next).empty());
  EXPECT_EQ(TableDiff::compute(ServiceTable{}, next).added.size(), 4u);
  EXPECT_EQ(TableDiff::compute(next, ServiceTable{}).removed.size(), 4u);
  EXPECT_FALSE(prev.same_content(next));
  ServiceTable copy = next;
  copy.generation = 42;
  EXPECT_TRUE(copy.same_content(next));
}

TEST(ServiceTable, DiffSeesEveryField) {
  ServiceTable a;
  put(a, vs("10.96.0.1", 80, Protocol::kTcp, "x"));
  for (int field = 0; field < 6; ++field) {
    ServiceTable b = a;
    auto& s = b.services.begin()->second;
    if (field == 0) s.name = "y";
    if (field == 1) s.scheduler = Scheduler::kWrr;
    if (field == 2) s.persistence_timeout_s = 10;
    if (field == 3) s.when_empty = WhenEmpty::kDrop;
    if (field == 4) s.kind = ServiceKind::kNodePort;
    if (field == 5) s.proxy_protocol = ProxyProtocol::kV2;
    EXPECT_EQ(TableDiff::compute(a, b).changed.size(), 1u) << field;
  }
}

TEST(ServiceTable, DryRunJson) {
  ServiceTable t;
  EXPECT_EQ(to_dry_run_json(t), R"({"services":[]})");
  put(t, vs("10.96.0.100", 8080, Protocol::kTcp, "default/db:http", {{ip("10.244.1.15"), 8080, 1, false}}));
  put(t, vs("10.96.0.10", 53, Protocol::kUdp, "kube-system/kube-dns:dns",
            {{ip("10.244.0.2"), 53, 0, true}}));
  t.services.at({ip("10.96.0.10"), 53, Protocol::kUdp}).persistence_timeout_s = 10800;
  t.services.at({ip("10.96.0.100"), 8080, Protocol::kTcp}).proxy_protocol = ProxyProtocol::kV1;
  EXPECT_EQ(to_dry_run_json(t),
            R"({"services":[{"name":"kube-system/kube-dns:dns","protocol":"UDP","vip":"10.96.0.10",)"
            R"("port":53,"kind":"ClusterIP","scheduler":"rr","persistence_timeout_s":10800,)"
            R"("when_empty":"reject","proxy_protocol":"",)"
            R"("backends":[{"ip":"10.244.0.2","port":53,"weight":0,"terminating":true}]},)"
            R"({"name":"default/db:http","protocol":"TCP","vip":"10.96.0.100","port":8080,"kind":"ClusterIP",)"
            R"("scheduler":"rr","persistence_timeout_s":0,"when_empty":"reject","proxy_protocol":"v1",)"
            R"("backends":[{"ip":"10.244.1.15","port":8080,"weight":1,"terminating":false}]}]})");
}

TEST(ServiceTable, DryRunJsonIpv6AfterIpv4) {
  ServiceTable t;
  VirtualService v6;
  v6.key = {*IpAddr::parse("FD00:0:0:0::10"), 80, Protocol::kTcp};
  v6.name = "default/web:http";
  v6.backends = {{*IpAddr::parse("fd00:10:244:2::7"), 8080, 1, false},
                 {*IpAddr::parse("fd00:10:244:1::5"), 8080, 1, false}};
  v6.source_ranges = {"2001:db8::/32"};
  put(t, v6);
  put(t, vs("10.96.0.100", 80, Protocol::kTcp, "default/web:http", {{ip("10.244.1.5"), 8080, 1, false}}));
  t.normalize();
  EXPECT_EQ(to_dry_run_json(t),
            R"({"services":[{"name":"default/web:http","protocol":"TCP","vip":"10.96.0.100","port":80,)"
            R"("kind":"ClusterIP","scheduler":"rr","persistence_timeout_s":0,"when_empty":"reject","proxy_protocol":"",)"
            R"("backends":[{"ip":"10.244.1.5","port":8080,"weight":1,"terminating":false}]},)"
            R"({"name":"default/web:http","protocol":"TCP","vip":"fd00::10","port":80,)"
            R"("kind":"ClusterIP","scheduler":"rr","persistence_timeout_s":0,"when_empty":"reject","proxy_protocol":"",)"
            R"("source_ranges":["2001:db8::/32"],)"
            R"("backends":[{"ip":"fd00:10:244:1::5","port":8080,"weight":1,"terminating":false},)"
            R"({"ip":"fd00:10:244:2::7","port":8080,"weight":1,"terminating":false}]}]})");
  EXPECT_EQ(to_string(v6.key), "TCP [fd00::10]:80");
  EXPECT_EQ(host_port(IpAddr(0x0a000001u), 53), "10.0.0.1:53");
}

}  // namespace
}  // namespace vipd::cp
