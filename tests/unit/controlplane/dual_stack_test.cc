// Thread: test main thread. Dual-stack Services (controlplane/sources): one
// entry per family and port, each family fed only by its own EndpointSlices
// (addressType IPv4 / IPv6), with the IPv4 endpoint rules; ipFamilies and
// ipFamilyPolicy checked; per-family externalIPs, load-balancer ingress,
// loadBalancerSourceRanges and NodePort addresses.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "controlplane/sources/k8s_objects.h"

namespace vipd::cp::k8s {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct Built {
  ParsedObjects parsed;
  BuildResult result;
  std::vector<std::string> lines;  // "KIND PROTO VIP:PORT when_empty [ip:port/weight(t) ...] {ranges}"
};

Built build(const std::string& yaml, const BuildOptions& o = {}) {
  Built b;
  const auto docs = YAML::LoadAll(yaml);
  for (size_t i = 0; i < docs.size(); ++i) parse_document(docs[i], static_cast<int>(i + 1), &b.parsed);
  b.result = build_service_table(b.parsed.services, b.parsed.slices, o);
  for (const auto& [k, v] : b.result.table.services) {
    std::string s = std::string(name(v.kind)) + " " + to_string(k) + " " + name(v.when_empty) + " [";
    for (size_t i = 0; i < v.backends.size(); ++i) {
      const auto& be = v.backends[i];
      s += (i ? " " : "") + host_port(be.ip, be.port) + "/" + std::to_string(be.weight) + (be.terminating ? "t" : "");
    }
    s += "]";
    if (!v.source_ranges.empty()) {
      s += " {";
      for (size_t i = 0; i < v.source_ranges.size(); ++i) s += (i ? "," : "") + v.source_ranges[i];
      s += "}";
    }
    b.lines.push_back(s);
  }
  return b;
}

std::string service(const std::string& spec, const std::string& status = "") {
  return "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: ns}\nspec:\n" + spec +
         "  ports: [{name: http, port: 80}, {name: dns, port: 53, protocol: UDP}]\n" + status;
}

// A slice of ns/web with `eps` (one "{addresses: [...], ...}" per line).
std::string slice(const std::string& name, const std::string& type, const std::string& eps) {
  return "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: " + name +
         ", namespace: ns, labels: {kubernetes.io/service-name: web}}\naddressType: " + type +
         "\nports: [{name: http, port: 8080}, {name: dns, port: 5353, protocol: UDP}]\nendpoints:\n" + eps;
}

const std::string kDual = service(
    "  ipFamilyPolicy: PreferDualStack\n  ipFamilies: [IPv4, IPv6]\n"
    "  clusterIP: 10.96.0.10\n  clusterIPs: [10.96.0.10, 'fd00:96::a']\n");

const std::string kSlices =
    slice("web-v4", "IPv4", "- {addresses: [10.244.1.5]}\n- {addresses: [10.244.2.6], conditions: {ready: false}}\n") +
    slice("web-v6", "IPv6",
          "- {addresses: ['fd00:244:1::5']}\n- {addresses: ['FD00:244:2:0::6'], conditions: {ready: false}}\n");

TEST(DualStack, OneEntryPerFamilyAndPortEachWithItsOwnSlices) {
  const Built b = build(kDual + kSlices);
  ASSERT_TRUE(b.parsed.errors.empty()) << b.parsed.errors[0].reason;
  EXPECT_TRUE(b.result.errors.empty());
  EXPECT_THAT(b.lines, ElementsAre("ClusterIP UDP 10.96.0.10:53 reject [10.244.1.5:5353/1]",
                                   "ClusterIP TCP 10.96.0.10:80 reject [10.244.1.5:8080/1]",
                                   "ClusterIP UDP [fd00:96::a]:53 reject [[fd00:244:1::5]:5353/1]",
                                   "ClusterIP TCP [fd00:96::a]:80 reject [[fd00:244:1::5]:8080/1]"));
  // Both families carry the same name.
  for (const auto& [k, v] : b.result.table.services) EXPECT_THAT(v.name, HasSubstr("ns/web:"));
}

TEST(DualStack, Ipv6PrimaryAndIpv6OnlyService) {
  const Built six = build(service("  ipFamilies: [IPv6]\n  clusterIPs: ['fd00:96::b']\n") + kSlices);
  EXPECT_THAT(six.lines, ElementsAre("ClusterIP UDP [fd00:96::b]:53 reject [[fd00:244:1::5]:5353/1]",
                                     "ClusterIP TCP [fd00:96::b]:80 reject [[fd00:244:1::5]:8080/1]"));
  // IPv6 primary: the order of clusterIPs does not matter for the table order.
  const Built d = build(service("  ipFamilies: [IPv6, IPv4]\n  clusterIPs: ['fd00:96::b', 10.96.0.11]\n"));
  ASSERT_EQ(d.lines.size(), 4u);
  EXPECT_THAT(d.lines[0], HasSubstr("10.96.0.11:53"));
  EXPECT_THAT(d.lines[3], HasSubstr("[fd00:96::b]:80"));
}

TEST(DualStack, TerminatingFallbackPerFamily) {
  // IPv4 has a ready endpoint; IPv6 only a serving-terminating one, which is used.
  const std::string slices =
      slice("a", "IPv4",
            "- {addresses: [10.244.1.5]}\n"
            "- {addresses: [10.244.1.7], conditions: {ready: false, serving: true, terminating: true}}\n") +
      slice("b", "IPv6", "- {addresses: ['fd00::7'], conditions: {ready: false, serving: true, terminating: true}}\n");
  const Built b = build(kDual + slices);
  EXPECT_THAT(b.lines, ElementsAre("ClusterIP UDP 10.96.0.10:53 reject [10.244.1.5:5353/1 10.244.1.7:5353/0t]",
                                   "ClusterIP TCP 10.96.0.10:80 reject [10.244.1.5:8080/1 10.244.1.7:8080/0t]",
                                   "ClusterIP UDP [fd00:96::a]:53 reject [[fd00::7]:5353/1t]",
                                   "ClusterIP TCP [fd00:96::a]:80 reject [[fd00::7]:8080/1t]"));
}

TEST(DualStack, TrafficPolicyLocalAndTopologyPerFamily) {
  BuildOptions o;
  o.node_name = "node-a";
  o.node_zone = "z1";
  const std::string slices =
      slice("a", "IPv4",
            "- {addresses: [10.244.1.5], nodeName: node-a, hints: {forZones: [{name: z1}]}}\n"
            "- {addresses: [10.244.2.5], nodeName: node-b, hints: {forZones: [{name: z2}]}}\n") +
      slice("b", "IPv6",
            "- {addresses: ['fd00::5'], nodeName: node-b, hints: {forZones: [{name: z1}]}}\n"
            "- {addresses: ['fd00::6'], nodeName: node-b, hints: {forZones: [{name: z2}]}}\n");
  // Cluster policy with topology: each family keeps its endpoints hinted for z1.
  const Built c = build(kDual + slices, o);
  EXPECT_THAT(c.lines, ElementsAre("ClusterIP UDP 10.96.0.10:53 reject [10.244.1.5:5353/1]",
                                   "ClusterIP TCP 10.96.0.10:80 reject [10.244.1.5:8080/1]",
                                   "ClusterIP UDP [fd00:96::a]:53 reject [[fd00::5]:5353/1]",
                                   "ClusterIP TCP [fd00:96::a]:80 reject [[fd00::5]:8080/1]"));
  // internalTrafficPolicy Local: IPv4 has a local endpoint; IPv6 has none here
  // but some elsewhere, so its entries drop.
  const Built l = build(service("  internalTrafficPolicy: Local\n  clusterIPs: [10.96.0.10, 'fd00:96::a']\n") + slices,
                        o);
  EXPECT_THAT(l.lines, ElementsAre("ClusterIP UDP 10.96.0.10:53 reject [10.244.1.5:5353/1]",
                                   "ClusterIP TCP 10.96.0.10:80 reject [10.244.1.5:8080/1]",
                                   "ClusterIP UDP [fd00:96::a]:53 drop []",
                                   "ClusterIP TCP [fd00:96::a]:80 drop []"));
}

TEST(DualStack, AffinityAndSchedulerOnBothFamilies) {
  const Built b = build(
      "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: ns, annotations: {vipd.io/scheduler: mh}}\n"
      "spec: {clusterIPs: [10.96.0.10, 'fd00::a'], sessionAffinity: ClientIP, ports: [{port: 80}],\n"
      "       sessionAffinityConfig: {clientIP: {timeoutSeconds: 60}}}\n");
  ASSERT_EQ(b.result.table.services.size(), 2u);
  for (const auto& [k, v] : b.result.table.services) {
    EXPECT_EQ(v.persistence_timeout_s, 60u) << to_string(k);
    EXPECT_EQ(v.scheduler, Scheduler::kMh) << to_string(k);
  }
}

TEST(DualStack, NodePortExternalAndLoadBalancerPerFamily) {
  BuildOptions o;
  o.node_ips = {*IpAddr::parse("192.168.0.10"), *IpAddr::parse("fd00:1::10"), *IpAddr::parse("192.168.0.11")};
  const Built b = build(
      "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: ns}\n"
      "spec:\n  type: LoadBalancer\n  clusterIPs: [10.96.0.10, 'fd00:96::a']\n"
      "  externalIPs: [203.0.113.7, '2001:db8::7']\n"
      "  loadBalancerSourceRanges: [198.51.100.0/24, '2001:db8:1::1/48']\n"
      "  ports: [{name: http, port: 80, nodePort: 30080}]\n"
      "status: {loadBalancer: {ingress: [{ip: 203.0.113.9}, {ip: '2001:db8::9'}]}}\n",
      o);
  EXPECT_THAT(b.lines,
              ElementsAre("ClusterIP TCP 10.96.0.10:80 reject []",
                          "NodePort TCP 192.168.0.10:30080 reject []",
                          "NodePort TCP 192.168.0.11:30080 reject []",
                          "ExternalIP TCP 203.0.113.7:80 reject []",
                          "LoadBalancer TCP 203.0.113.9:80 reject [] {198.51.100.0/24}",
                          "ExternalIP TCP [2001:db8::7]:80 reject []",
                          "LoadBalancer TCP [2001:db8::9]:80 reject [] {2001:db8:1::/48}",
                          "NodePort TCP [fd00:1::10]:30080 reject []",
                          "ClusterIP TCP [fd00:96::a]:80 reject []"));
}

TEST(DualStack, SourceRangesOfOneFamilyOnlyBlockTheOther) {
  const Built b = build(
      "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: ns}\n"
      "spec:\n  type: LoadBalancer\n  clusterIPs: [10.96.0.10, 'fd00:96::a']\n"
      "  loadBalancerSourceRanges: [198.51.100.0/24]\n  ports: [{port: 80}]\n"
      "status: {loadBalancer: {ingress: [{ip: 203.0.113.9}, {ip: '2001:db8::9'}]}}\n");
  EXPECT_THAT(b.lines, ElementsAre("ClusterIP TCP 10.96.0.10:80 reject []",
                                   "LoadBalancer TCP 203.0.113.9:80 reject [] {198.51.100.0/24}",
                                   "ClusterIP TCP [fd00:96::a]:80 reject []"));
  bool noted = false;
  for (const auto& n : b.result.notes)
    noted = noted || n.reason == "loadBalancerSourceRanges has no IPv6 range; IPv6 load-balancer IPs not served";
  EXPECT_TRUE(noted);
}

TEST(DualStack, OtherFamilyAddressesOfASingleStackServiceAreNoted) {
  BuildOptions o;
  o.node_ips = {*IpAddr::parse("fd00:1::10")};
  const Built b = build(
      "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: ns}\n"
      "spec: {type: NodePort, clusterIP: 10.96.0.10, externalIPs: ['2001:db8::7'], ports: [{port: 80, nodePort: 30080}]}\n",
      o);
  EXPECT_THAT(b.lines, ElementsAre("ClusterIP TCP 10.96.0.10:80 reject []"));
  ASSERT_EQ(b.result.notes.size(), 1u);
  EXPECT_EQ(b.result.notes[0].reason, "externalIPs: 2001:db8::7 has no IPv6 clusterIP; skipped");
}

TEST(DualStack, IpFamiliesWithoutAnAddressIsNoted) {
  const Built b = build(service("  ipFamilyPolicy: PreferDualStack\n  ipFamilies: [IPv4, IPv6]\n  clusterIP: 10.96.0.10\n"));
  EXPECT_EQ(b.lines.size(), 2u);
  ASSERT_EQ(b.result.notes.size(), 1u);
  EXPECT_THAT(b.result.notes[0].reason, HasSubstr("spec.ipFamilies lists IPv6, but there is no IPv6 clusterIP"));
}

// Bad or mismatched family input: an error for that Service only.
TEST(DualStack, BadFamilyInputIsAnObjectError) {
  const std::string good = "---\napiVersion: v1\nkind: Service\nmetadata: {name: ok, namespace: ns}\n"
                           "spec: {clusterIP: 10.96.0.99, ports: [{port: 80}]}\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"  ipFamilies: [IPv5]\n  clusterIP: 10.96.0.10\n", "spec.ipFamilies[0]: 'IPv5' is not IPv4 or IPv6"},
      {"  ipFamilies: [IPv4, IPv4]\n  clusterIP: 10.96.0.10\n", "spec.ipFamilies[1]: 'IPv4' is listed twice"},
      {"  ipFamilyPolicy: DualStack\n  clusterIP: 10.96.0.10\n",
       "spec.ipFamilyPolicy: 'DualStack' is not SingleStack, PreferDualStack or RequireDualStack"},
      {"  ipFamilyPolicy: SingleStack\n  ipFamilies: [IPv4, IPv6]\n  clusterIP: 10.96.0.10\n",
       "spec.ipFamilies: two families, but spec.ipFamilyPolicy is SingleStack"},
      {"  ipFamilyPolicy: SingleStack\n  clusterIPs: [10.96.0.10, 'fd00::a']\n",
       "spec.clusterIPs: two addresses, but spec.ipFamilyPolicy is SingleStack"},
      {"  ipFamilyPolicy: RequireDualStack\n  clusterIPs: ['fd00::a']\n",
       "spec.ipFamilyPolicy: RequireDualStack, but spec.clusterIPs has only an IPv6 address"},
      {"  ipFamilies: [IPv6]\n  clusterIP: 10.96.0.10\n",
       "spec.clusterIPs[0]: '10.96.0.10' is IPv4, but spec.ipFamilies[0] is IPv6"},
      {"  ipFamilies: [IPv4, IPv6]\n  clusterIPs: ['fd00::a', 10.96.0.10]\n",
       "spec.clusterIPs[0]: 'fd00::a' is IPv6, but spec.ipFamilies[0] is IPv4"},
      {"  clusterIPs: [10.96.0.10, 10.96.0.11]\n",
       "spec.clusterIPs: '10.96.0.10' and '10.96.0.11' are both IPv4; a dual-stack Service has one per family"},
      {"  clusterIPs: ['fd00::a', 10.96.0.10, 'fd00::b']\n",
       "spec.clusterIPs: more than two addresses (at most one per family)"},
      {"  clusterIP: 10.96.0.10\n  clusterIPs: ['fd00::a', 10.96.0.10]\n",
       "spec.clusterIPs[0]: 'fd00::a' is not spec.clusterIP '10.96.0.10'"},
      {"  ipFamilies: IPv4\n  clusterIP: 10.96.0.10\n", "spec.ipFamilies: expected a list"},
  };
  for (const auto& [spec, why] : cases) {
    SCOPED_TRACE(spec);
    const Built b = build(service(spec) + good);
    ASSERT_EQ(b.parsed.errors.size(), 1u);
    EXPECT_EQ(b.parsed.errors[0].object, "Service ns/web");
    EXPECT_EQ(b.parsed.errors[0].reason, why);
    // The other Service is still served.
    EXPECT_THAT(b.lines, ElementsAre("ClusterIP TCP 10.96.0.99:80 reject []"));
  }
}

TEST(DualStack, EndpointOfTheWrongFamilyInASliceIsAnObjectError) {
  const Built b = build(kDual + slice("bad", "IPv6", "- {addresses: [10.244.1.5]}\n"));
  ASSERT_EQ(b.parsed.errors.size(), 1u);
  EXPECT_THAT(b.parsed.errors[0].reason, HasSubstr("is not an IPv6 address"));
  EXPECT_EQ(b.lines.size(), 4u);
}

TEST(DualStack, FqdnSlicesStillIgnored) {
  const Built b = build(kDual + slice("f", "FQDN", "- {addresses: [example.com]}\n"));
  EXPECT_EQ(b.lines.size(), 4u);
  ASSERT_EQ(b.result.notes.size(), 1u);
  EXPECT_THAT(b.result.notes[0].reason, HasSubstr("addressType FQDN ignored (IPv4 and IPv6 only)"));
}

}  // namespace
}  // namespace vipd::cp::k8s
