// Thread: test main thread. TableIndex (controlplane/sources/k8s_index.h) must
// give exactly what the whole-table build gives over the same objects, after
// every single change, and report exactly the keys that changed. A seeded random
// walk over a small universe (so that keys collide, slices move between
// services, endpoints flip conditions) checks it thousands of times.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "controlplane/sources/k8s_index.h"

namespace vipd::cp::k8s {
namespace {

using Name = std::pair<std::string, std::string>;

std::vector<std::string> issue_lines(const std::vector<ObjectError>& v) {
  std::vector<std::string> out;
  for (const auto& e : v) out.push_back(e.origin + "|" + e.object + "|" + e.reason);
  std::sort(out.begin(), out.end());
  return out;
}

class Walk {
 public:
  explicit Walk(uint32_t seed) : rng_(seed) {}

  template <typename T>
  const T& pick(const std::vector<T>& v) { return v[rng_() % v.size()]; }
  bool chance(int percent) { return static_cast<int>(rng_() % 100) < percent; }

  Service random_service() {
    Service s;
    s.meta.namespace_ = pick(ns_);
    s.meta.name = pick(names_);
    s.type = pick<std::string>({"ClusterIP", "ClusterIP", "NodePort", "LoadBalancer", "ExternalName"});
    s.cluster_ip = chance(5) ? "None" : pick(vips_);
    s.cluster_ips = {s.cluster_ip};
    if (s.cluster_ip != "None" && chance(25)) {  // dual-stack, either family first
      s.cluster_ips.push_back(pick(vips6_));
      if (chance(50)) std::swap(s.cluster_ips[0], s.cluster_ips[1]);
      s.cluster_ip = s.cluster_ips[0];
    } else if (s.cluster_ip != "None" && chance(10)) {  // IPv6 only
      s.cluster_ip = pick(vips6_);
      s.cluster_ips = {s.cluster_ip};
    }
    const int nports = 1 + static_cast<int>(rng_() % 2);
    for (int i = 0; i < nports; ++i) {
      ServicePort p;
      p.name = nports == 1 && chance(50) ? "" : pick<std::string>({"http", "dns"});
      p.protocol = pick<std::string>({"TCP", "TCP", "UDP", "SCTP"});
      p.port = pick<uint16_t>({80, 443, 53});
      p.node_port = chance(70) ? pick<uint16_t>({30080, 30443}) : 0;
      s.ports.push_back(p);
    }
    if (chance(20)) s.external_ips = {pick(vips_)};
    if (chance(10)) s.external_ips.push_back(pick(vips6_));
    if (s.type == "LoadBalancer") {
      s.lb_ingress = {{pick<std::string>({"192.0.2.1", "192.0.2.2", "2001:db8::1"}), chance(20) ? "Proxy" : ""}};
      if (chance(30)) s.lb_source_ranges = {pick<std::string>({"10.0.0.0/8", "bogus", "fd00::/8"})};
    }
    s.client_ip_affinity = chance(20);
    s.internal_policy_local = chance(15);
    s.external_policy_local = chance(15);
    if (chance(10)) s.scheduler = Scheduler::kMh;
    if (chance(5)) s.meta.labels[kServiceProxyNameLabel] = "other";
    return s;
  }

  EndpointSlice random_slice() {
    EndpointSlice s;
    s.meta.namespace_ = pick(ns_);
    s.meta.name = pick(slice_names_);
    s.address_type = chance(75) ? "IPv4" : "IPv6";
    const bool v6 = s.address_type == "IPv6";
    if (chance(95)) s.meta.labels[kServiceNameLabel] = pick(names_);
    const int neps = static_cast<int>(rng_() % 4);
    for (int i = 0; i < neps; ++i) {
      Endpoint e;
      e.addresses = {v6 ? pick(pods6_) : pick(pods_)};
      if (chance(30)) e.conditions.ready = chance(50);
      if (chance(30)) e.conditions.serving = chance(50);
      if (chance(30)) e.conditions.terminating = chance(50);
      e.node_name = pick<std::string>({"node-a", "node-b", ""});
      if (chance(30)) e.zone_hints = {pick<std::string>({"z1", "z2"})};
      s.endpoints.push_back(e);
    }
    EndpointPort p;
    p.name = pick<std::string>({"http", "dns", ""});
    p.protocol = pick<std::string>({"TCP", "UDP"});
    p.port = pick<uint16_t>({8080, 9053});
    s.ports.push_back(p);
    return s;
  }

  std::mt19937 rng_;
  std::vector<std::string> ns_{"a", "b", "a-b"};
  std::vector<std::string> names_{"s0", "s1", "s2", "s3", "s4"};
  std::vector<std::string> slice_names_{"e0", "e1", "e2", "e3", "e4", "e5", "e6"};
  std::vector<std::string> vips_{"10.96.0.1", "10.96.0.2", "10.96.0.3", "10.96.0.4", "192.0.2.1"};
  std::vector<std::string> pods_{"10.244.0.1", "10.244.0.2", "10.244.0.3", "10.244.0.4", "10.244.0.5"};
  std::vector<std::string> vips6_{"fd00::1", "fd00::2", "2001:db8::1"};
  std::vector<std::string> pods6_{"fd00:244::1", "fd00:244::2", "fd00:244::3"};
};

BuildOptions options() {
  BuildOptions o;
  o.node_name = "node-a";
  o.node_zone = "z1";
  o.node_ips = {*parse_ipv4("192.168.0.10"), *IpAddr::parse("fd00:1::10")};
  return o;
}

// The reference: the whole-table build over the same objects, in (ns, name) order.
BuildResult reference(const std::map<Name, Service>& svcs, const std::map<Name, EndpointSlice>& slices,
                      const BuildOptions& o) {
  std::vector<Service> sv;
  std::vector<EndpointSlice> sl;
  for (const auto& [n, s] : svcs) sv.push_back(s);
  for (const auto& [n, s] : slices) sl.push_back(s);
  return build_service_table(sv, sl, o);
}

TEST(TableIndex, RandomWalkMatchesFullBuildAndReportsExactlyTheChangedKeys) {
  for (uint32_t seed = 1; seed <= 8; ++seed) {
    Walk w(seed);
    const BuildOptions o = options();
    TableIndex index(o);
    std::map<Name, Service> svcs;
    std::map<Name, EndpointSlice> slices;
    ServiceTable before;
    uint64_t version_before = ~uint64_t{0};
    std::vector<std::string> issues_before;
    size_t conflicts_seen = 0, changes = 0, v6_backed = 0;
    for (int step = 0; step < 600; ++step) {
      // One to three object changes per flush (a coalesced burst).
      const int burst = 1 + static_cast<int>(w.rng_() % 3);
      for (int b = 0; b < burst; ++b) {
        const int op = static_cast<int>(w.rng_() % 10);
        if (op < 3) {
          Service s = w.random_service();
          svcs[{s.meta.namespace_, s.meta.name}] = s;
          index.set_service(s);
        } else if (op < 4 && !svcs.empty()) {
          auto it = std::next(svcs.begin(), static_cast<long>(w.rng_() % svcs.size()));
          index.erase_service(it->first.first, it->first.second);
          svcs.erase(it);
        } else if (op < 9) {
          EndpointSlice s = w.random_slice();
          slices[{s.meta.namespace_, s.meta.name}] = s;
          index.set_slice(s);
        } else if (!slices.empty()) {
          auto it = std::next(slices.begin(), static_cast<long>(w.rng_() % slices.size()));
          index.erase_slice(it->first.first, it->first.second);
          slices.erase(it);
        }
      }
      if (step == 300) {  // a relist that replaces everything
        index.clear();
        for (const auto& [n, s] : svcs) index.set_service(s);
        for (const auto& [n, s] : slices) index.set_slice(s);
      }
      std::vector<ServiceKey> touched;
      index.flush(&touched);
      const BuildResult ref = reference(svcs, slices, o);
      ASSERT_EQ(index.table().services, ref.table.services) << "seed " << seed << " step " << step;

      std::set<ServiceKey> expect;
      for (const auto& [k, v] : before.services) {
        auto n = ref.table.services.find(k);
        if (n == ref.table.services.end() || !(n->second == v)) expect.insert(k);
      }
      for (const auto& [k, v] : ref.table.services)
        if (!before.services.count(k)) expect.insert(k);
      const std::set<ServiceKey> got(touched.begin(), touched.end());
      ASSERT_EQ(got.size(), touched.size()) << "a key reported twice";
      ASSERT_EQ(got, expect) << "seed " << seed << " step " << step;
      changes += got.size();

      std::vector<ObjectError> errors, notes;
      index.issues(&errors, &notes);
      ASSERT_EQ(issue_lines(errors), issue_lines(ref.errors)) << "seed " << seed << " step " << step;
      ASSERT_EQ(issue_lines(notes), issue_lines(ref.notes)) << "seed " << seed << " step " << step;
      // An unchanged version promises unchanged issues (the source then skips them).
      std::vector<std::string> now = issue_lines(errors);
      for (const auto& n : issue_lines(notes)) now.push_back("note " + n);
      if (index.issues_version() == version_before)
        ASSERT_EQ(now, issues_before) << "issues changed without a version bump; seed " << seed << " step " << step;
      version_before = index.issues_version();
      issues_before = now;
      for (const auto& e : ref.errors)
        if (e.reason.find("is already used by") != std::string::npos) ++conflicts_seen;
      for (const auto& [k, v] : ref.table.services)
        if (k.vip.is_v6() && !v.backends.empty()) ++v6_backed;
      before = ref.table;
    }
    // The walk must have exercised what it is for.
    EXPECT_GT(conflicts_seen, 10u) << "seed " << seed;
    EXPECT_GT(changes, 200u) << "seed " << seed;
    EXPECT_GT(v6_backed, 0u) << "seed " << seed << ": IPv6 entries with IPv6 backends";
  }
}

TEST(TableIndex, IssuesVersionMovesOnlyWhenIssuesMayHaveChanged) {
  TableIndex index(options());
  Service s;
  s.meta = {"ns", "web", {}, {}};
  s.cluster_ip = "10.96.0.10";
  s.cluster_ips = {s.cluster_ip};
  s.ports = {{"http", "TCP", 80, 0}};
  index.set_service(s);
  std::vector<ServiceKey> touched;
  index.flush(&touched);
  ASSERT_EQ(touched.size(), 1u);
  const uint64_t v0 = index.issues_version();

  // An endpoint change of a service without problems: same issues.
  EndpointSlice e;
  e.meta = {"ns", "web-1", {{kServiceNameLabel, "web"}}, {}};
  e.address_type = "IPv4";
  e.endpoints = {Endpoint{{"10.244.0.1"}, {}, "node-a", "", {}}};
  e.ports = {EndpointPort{"http", "TCP", 8080}};
  index.set_slice(e);
  touched.clear();
  index.flush(&touched);
  EXPECT_EQ(touched.size(), 1u);
  EXPECT_EQ(index.issues_version(), v0);
  ASSERT_EQ(index.table().services.begin()->second.backends.size(), 1u);

  // The same object again (a relist): nothing to rebuild, nothing touched.
  index.set_slice(e);
  index.set_service(s);
  touched.clear();
  index.flush(&touched);
  EXPECT_TRUE(touched.empty());

  // A second service on the same key: a conflict is an issue.
  Service t = s;
  t.meta.name = "zzz";
  index.set_service(t);
  touched.clear();
  index.flush(&touched);
  EXPECT_TRUE(touched.empty());  // the first claimant keeps the key
  EXPECT_NE(index.issues_version(), v0);
  std::vector<ObjectError> errors, notes;
  index.issues(&errors, &notes);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].object, "Service ns/zzz");
  EXPECT_NE(errors[0].reason.find("is already used by ns/web:http"), std::string::npos);

  // The winner goes: the other service takes the key over.
  index.erase_service("ns", "web");
  touched.clear();
  index.flush(&touched);
  ASSERT_EQ(touched.size(), 1u);
  EXPECT_EQ(index.table().services.begin()->second.name, "ns/zzz:http");
  errors.clear();
  index.issues(&errors, &notes);
  EXPECT_TRUE(errors.empty());
}


// A tenant's externalIP or load balancer address on another namespace's
// ClusterIP:port: the ClusterIP keeps it whatever the namespace/name order and
// whatever the order of arrival; the loser is reported as a "precedence"
// conflict. ("aaa-tenant" sorts before "kube-system": plain order would give
// cluster DNS to the tenant.)
Service dns_service() {
  Service s;
  s.meta = {"kube-system", "kube-dns", {}, {}};
  s.cluster_ip = "10.96.0.10";
  s.cluster_ips = {s.cluster_ip};
  s.ports = {{"dns", "UDP", 53, 0}};
  return s;
}

Service tenant_service(bool load_balancer) {
  Service s;
  s.meta = {"aaa-tenant", "evil", {}, {}};
  s.cluster_ip = "10.96.7.7";
  s.cluster_ips = {s.cluster_ip};
  s.ports = {{"dns", "UDP", 53, 0}};
  if (load_balancer) {
    s.type = "LoadBalancer";
    s.lb_ingress = {{"10.96.0.10", ""}};
  } else {
    s.external_ips = {"10.96.0.10"};
  }
  return s;
}

TEST(TableIndex, ClusterIpWinsOverExternalAndLoadBalancerAddresses) {
  const ServiceKey dns{*parse_ipv4("10.96.0.10"), 53, Protocol::kUdp};
  for (const bool lb : {false, true}) {
    for (const bool tenant_first : {true, false}) {
      SCOPED_TRACE(std::string(lb ? "load balancer ingress" : "externalIPs") +
                   (tenant_first ? ", tenant first" : ", kube-dns first"));
      TableIndex index(options());
      std::vector<ServiceKey> touched;
      if (tenant_first) {
        index.set_service(tenant_service(lb));
        index.flush(&touched);
        ASSERT_EQ(index.table().services.at(dns).name, "aaa-tenant/evil:dns");  // unclaimed until now
      }
      index.set_service(dns_service());
      if (!tenant_first) {
        index.flush(&touched);
        index.set_service(tenant_service(lb));
      }
      index.flush(&touched);
      const VirtualService& got = index.table().services.at(dns);
      EXPECT_EQ(got.name, "kube-system/kube-dns:dns");
      EXPECT_EQ(got.kind, ServiceKind::kClusterIp);
      std::vector<ObjectError> errors, notes;
      index.issues(&errors, &notes);
      ASSERT_EQ(errors.size(), 1u);
      EXPECT_EQ(errors[0].object, "Service aaa-tenant/evil");
      EXPECT_EQ(errors[0].conflict, "precedence");
      EXPECT_NE(errors[0].reason.find("is already used by kube-system/kube-dns:dns (ClusterIP, which takes "
                                      "precedence over external and load balancer addresses)"),
                std::string::npos)
          << errors[0].reason;
      // The whole-table build agrees.
      const BuildResult ref = reference({{{"aaa-tenant", "evil"}, tenant_service(lb)},
                                         {{"kube-system", "kube-dns"}, dns_service()}},
                                        {}, options());
      EXPECT_EQ(index.table().services, ref.table.services);
      ASSERT_EQ(ref.errors.size(), 1u);
      EXPECT_EQ(ref.errors[0].conflict, "precedence");
      // The ClusterIP goes: the external address may have the key again.
      index.erase_service("kube-system", "kube-dns");
      index.flush(&touched);
      EXPECT_EQ(index.table().services.at(dns).name, "aaa-tenant/evil:dns");
      errors.clear();
      index.issues(&errors, &notes);
      EXPECT_TRUE(errors.empty());
    }
  }
}

TEST(TableIndex, SameKindConflictsKeepNamespaceNameOrder) {
  Service a = dns_service();
  a.meta.namespace_ = "aaa";
  TableIndex index(options());
  std::vector<ServiceKey> touched;
  index.set_service(dns_service());
  index.set_service(a);
  index.flush(&touched);
  EXPECT_EQ(index.table().services.begin()->second.name, "aaa/kube-dns:dns");
  std::vector<ObjectError> errors, notes;
  index.issues(&errors, &notes);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].conflict, "order");
}

}  // namespace
}  // namespace vipd::cp::k8s
