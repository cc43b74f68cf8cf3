// Thread: test main thread. Table tests for the Kubernetes rules of
// controlplane/sources/k8s_objects.cc (shared by the manifests and API sources):
// Services + EndpointSlices -> expected ServiceTable entries.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "controlplane/sources/k8s_objects.h"

namespace vipd::cp::k8s {
namespace {

// One line per table entry: "KIND PROTO VIP:PORT when_empty [ip:port/weight(t) ...] {ranges}".
std::vector<std::string> entries(const std::string& yaml, const BuildOptions& o) {
  ParsedObjects p;
  const auto docs = YAML::LoadAll(yaml);
  for (size_t i = 0; i < docs.size(); ++i) parse_document(docs[i], static_cast<int>(i + 1), &p);
  EXPECT_TRUE(p.errors.empty()) << (p.errors.empty() ? "" : p.errors[0].object + ": " + p.errors[0].reason);
  const BuildResult r = build_service_table(p.services, p.slices, o);
  std::vector<std::string> out;
  for (const auto& [k, v] : r.table.services) {
    std::string s = std::string(name(v.kind)) + " " + to_string(k) + " " + name(v.when_empty) + " [";
    for (size_t i = 0; i < v.backends.size(); ++i) {
      const auto& b = v.backends[i];
      s += (i ? " " : "") + b.ip.to_string() + ":" + std::to_string(b.port) + "/" +
           std::to_string(b.weight) + (b.terminating ? "t" : "");
    }
    s += "]";
    if (!v.source_ranges.empty()) {
      s += " {";
      for (size_t i = 0; i < v.source_ranges.size(); ++i) s += (i ? "," : "") + v.source_ranges[i];
      s += "}";
    }
    out.push_back(s);
  }
  return out;
}

BuildOptions node(const std::string& name = "node-a", const std::string& zone = "") {
  BuildOptions o;
  o.node_name = name;
  o.node_zone = zone;
  o.node_ips = {*parse_ipv4("192.168.0.10"), *parse_ipv4("192.168.0.11")};
  return o;
}

std::string service(const std::string& spec_extra, const std::string& status = "") {
  return R"(apiVersion: v1
kind: Service
metadata: {name: web, namespace: ns}
spec:
  clusterIP: 10.96.0.10
  ports: [{name: http, protocol: TCP, port: 80, nodePort: 30080}]
)" + spec_extra + status + "\n---\n";
}

// Endpoints: "ip,node,ready,serving,terminating,zonehint" separated by ';'.
std::string slice(const std::string& eps) {
  std::string s = R"(apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: ns, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, protocol: TCP, port: 8080}]
endpoints:
)";
  size_t pos = 0;
  while (pos < eps.size()) {
    size_t end = eps.find(';', pos);
    if (end == std::string::npos) end = eps.size();
    std::vector<std::string> f;
    std::string item = eps.substr(pos, end - pos);
    for (size_t a = 0, b; a <= item.size(); a = b + 1) {
      b = item.find(',', a);
      if (b == std::string::npos) b = item.size();
      f.push_back(item.substr(a, b - a));
    }
    s += "- addresses: [" + f[0] + "]\n  nodeName: " + f[1] + "\n  conditions: {ready: " + f[2] +
         ", serving: " + f[3] + ", terminating: " + f[4] + "}\n";
    if (f.size() > 5 && !f[5].empty()) s += "  hints: {forZones: [{name: " + f[5] + "}]}\n";
    pos = end + 1;
  }
  return s;
}

TEST(K8sRules, NodePortOnEveryNodeIp) {
  const auto e = entries(service("  type: NodePort\n") + slice("10.244.1.1,node-b,true,true,false"), node());
  EXPECT_EQ(e, (std::vector<std::string>{
                   "ClusterIP TCP 10.96.0.10:80 reject [10.244.1.1:8080/1]",
                   "NodePort TCP 192.168.0.10:30080 reject [10.244.1.1:8080/1]",
                   "NodePort TCP 192.168.0.11:30080 reject [10.244.1.1:8080/1]",
               }));
}

TEST(K8sRules, NodePortNeedsNodeIpsAndType) {
  BuildOptions o = node();
  o.node_ips.clear();
  EXPECT_EQ(entries(service("  type: NodePort\n") + slice("10.244.1.1,n,true,true,false"), o).size(), 1u);
  // ClusterIP type: a stray nodePort is not served.
  EXPECT_EQ(entries(service("") + slice("10.244.1.1,n,true,true,false"), node()).size(), 1u);
}

TEST(K8sRules, LoadBalancerIngressIpModeAndSourceRanges) {
  const std::string svc = service(
      "  type: LoadBalancer\n  loadBalancerSourceRanges: [203.0.113.0/24, 198.51.100.7/32, 10.1.2.3/8, '2001:db8::/32']\n",
      "status:\n  loadBalancer:\n    ingress: [{ip: 198.51.100.1}, {ip: 198.51.100.2, ipMode: VIP}, "
      "{ip: 198.51.100.3, ipMode: Proxy}, {hostname: lb.example.com}]\n");
  BuildOptions o = node();
  o.node_ips.clear();
  const auto e = entries(svc + slice("10.244.1.1,n,true,true,false"), o);
  EXPECT_EQ(e, (std::vector<std::string>{
                   "ClusterIP TCP 10.96.0.10:80 reject [10.244.1.1:8080/1]",
                   "LoadBalancer TCP 198.51.100.1:80 reject [10.244.1.1:8080/1] "
                   "{10.0.0.0/8,198.51.100.7/32,203.0.113.0/24}",
                   "LoadBalancer TCP 198.51.100.2:80 reject [10.244.1.1:8080/1] "
                   "{10.0.0.0/8,198.51.100.7/32,203.0.113.0/24}",
               }));
}

TEST(K8sRules, ExternalIPs) {
  const auto e = entries(service("  externalIPs: [172.16.0.5, '2001:db8::5', 172.16.0.5]\n") +
                             slice("10.244.1.1,n,true,true,false"),
                         node());
  EXPECT_EQ(e, (std::vector<std::string>{
                   "ClusterIP TCP 10.96.0.10:80 reject [10.244.1.1:8080/1]",
                   "ExternalIP TCP 172.16.0.5:80 reject [10.244.1.1:8080/1]",
               }));
}

// A full-NAT local address is vipd's own (--fnat-local-addrs): an entry on it
// is an object error and is not served; the Service's other entries are.
TEST(K8sRules, EntryOnAFullNatLocalAddressIsRefused) {
  const std::string yaml = service("  externalIPs: [172.16.0.5, 172.16.0.6]\n") +
                           slice("10.244.1.1,n,true,true,false");
  BuildOptions o = node();
  o.reserved_addrs = {0xac100005};  // 172.16.0.5
  ParsedObjects p;
  const auto docs = YAML::LoadAll(yaml);
  for (size_t i = 0; i < docs.size(); ++i) parse_document(docs[i], static_cast<int>(i + 1), &p);
  const BuildResult r = build_service_table(p.services, p.slices, o);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_NE(r.errors[0].reason.find("ExternalIP 172.16.0.5:80 is one of vipd's full-NAT local addresses"),
            std::string::npos)
      << r.errors[0].reason;
  EXPECT_NE(r.errors[0].object.find("Service"), std::string::npos) << r.errors[0].object;
  EXPECT_EQ(entries(yaml, o), (std::vector<std::string>{
                                  "ClusterIP TCP 10.96.0.10:80 reject [10.244.1.1:8080/1]",
                                  "ExternalIP TCP 172.16.0.6:80 reject [10.244.1.1:8080/1]",
                              }));
  o.reserved_addrs = {0x0a60000a};  // the cluster IP 10.96.0.10 itself
  EXPECT_EQ(entries(yaml, o), (std::vector<std::string>{
                                  "ExternalIP TCP 172.16.0.5:80 reject [10.244.1.1:8080/1]",
                                  "ExternalIP TCP 172.16.0.6:80 reject [10.244.1.1:8080/1]",
                              }));
}

TEST(K8sRules, InternalTrafficPolicyLocal) {
  const std::string svc = service("  internalTrafficPolicy: Local\n");
  // Local endpoint present: only it.
  EXPECT_EQ(entries(svc + slice("10.244.1.1,node-a,true,true,false;10.244.2.1,node-b,true,true,false"), node()),
            std::vector<std::string>{"ClusterIP TCP 10.96.0.10:80 reject [10.244.1.1:8080/1]"});
  // Only remote endpoints: DROP.
  EXPECT_EQ(entries(svc + slice("10.244.2.1,node-b,true,true,false"), node()),
            std::vector<std::string>{"ClusterIP TCP 10.96.0.10:80 drop []"});
  // No endpoints at all: REJECT.
  EXPECT_EQ(entries(svc + slice(""), node()),
            std::vector<std::string>{"ClusterIP TCP 10.96.0.10:80 reject []"});
  // Local serving+terminating fallback.
  EXPECT_EQ(entries(svc + slice("10.244.1.1,node-a,false,true,true;10.244.2.1,node-b,true,true,false"), node()),
            std::vector<std::string>{"ClusterIP TCP 10.96.0.10:80 reject [10.244.1.1:8080/1t]"});
  // No node name configured: policy not applied, all endpoints count.
  EXPECT_EQ(entries(svc + slice("10.244.2.1,node-b,true,true,false"), node("")),
            std::vector<std::string>{"ClusterIP TCP 10.96.0.10:80 reject [10.244.2.1:8080/1]"});
}

TEST(K8sRules, ExternalTrafficPolicyLocalAppliesToExternalEntriesOnly) {
  BuildOptions o = node();
  o.node_ips = {*parse_ipv4("192.168.0.10")};
  const auto e = entries(service("  type: NodePort\n  externalTrafficPolicy: Local\n  externalIPs: [172.16.0.5]\n") +
                             slice("10.244.2.1,node-b,true,true,false"),
                         o);
  EXPECT_EQ(e, (std::vector<std::string>{
                   "ClusterIP TCP 10.96.0.10:80 reject [10.244.2.1:8080/1]",
                   "ExternalIP TCP 172.16.0.5:80 drop []",
                   "NodePort TCP 192.168.0.10:30080 drop []",
               }));
}

TEST(K8sRules, TopologyHints) {
  const std::string svc = service("");
  // All ready endpoints hinted, one for our zone: only zone-a's.
  EXPECT_EQ(entries(svc + slice("10.244.1.1,n1,true,true,false,zone-a;10.244.2.1,n2,true,true,false,zone-b"),
                    node("node-a", "zone-a")),
            std::vector<std::string>{"ClusterIP TCP 10.96.0.10:80 reject [10.244.1.1:8080/1]"});
  // One ready endpoint without hints: no filtering.
  EXPECT_EQ(entries(svc + slice("10.244.1.1,n1,true,true,false,zone-a;10.244.2.1,n2,true,true,false"),
                    node("node-a", "zone-a")),
            std::vector<std::string>{"ClusterIP TCP 10.96.0.10:80 reject [10.244.1.1:8080/1 10.244.2.1:8080/1]"});
  // No hint for our zone: no filtering.
  EXPECT_EQ(entries(svc + slice("10.244.1.1,n1,true,true,false,zone-b;10.244.2.1,n2,true,true,false,zone-b"),
                    node("node-a", "zone-a")),
            std::vector<std::string>{"ClusterIP TCP 10.96.0.10:80 reject [10.244.1.1:8080/1 10.244.2.1:8080/1]"});
  // No zone configured: no filtering.
  EXPECT_EQ(entries(svc + slice("10.244.1.1,n1,true,true,false,zone-a;10.244.2.1,n2,true,true,false,zone-b"),
                    node("node-a", "")),
            std::vector<std::string>{"ClusterIP TCP 10.96.0.10:80 reject [10.244.1.1:8080/1 10.244.2.1:8080/1]"});
}

TEST(K8sRules, TerminatingWeightZeroAndFallback) {
  EXPECT_EQ(entries(service("") + slice("10.244.1.1,n,true,true,false;10.244.1.2,n,false,true,true;"
                                        "10.244.1.3,n,false,false,true"),
                    node()),
            std::vector<std::string>{"ClusterIP TCP 10.96.0.10:80 reject [10.244.1.1:8080/1 10.244.1.2:8080/0t]"});
  EXPECT_EQ(entries(service("") + slice("10.244.1.2,n,false,true,true;10.244.1.3,n,false,false,true"), node()),
            std::vector<std::string>{"ClusterIP TCP 10.96.0.10:80 reject [10.244.1.2:8080/1t]"});
}

TEST(K8sRules, ServiceProxyName) {
  const std::string labelled = R"(apiVersion: v1
kind: Service
metadata: {name: mine, namespace: ns, labels: {service.kubernetes.io/service-proxy-name: vipd}}
spec: {clusterIP: 10.96.0.20, ports: [{port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: plain, namespace: ns}
spec: {clusterIP: 10.96.0.21, ports: [{port: 80}]}
)";
  BuildOptions o = node();
  EXPECT_EQ(entries(labelled, o), std::vector<std::string>{"ClusterIP TCP 10.96.0.21:80 reject []"});
  o.service_proxy_name = "vipd";
  EXPECT_EQ(entries(labelled, o), std::vector<std::string>{"ClusterIP TCP 10.96.0.20:80 reject []"});
  o.service_proxy_name = "other";
  EXPECT_TRUE(entries(labelled, o).empty());
}

TEST(K8sRules, KindInDryRunJsonAndSourceRangesOnlyWhenSet) {
  ParsedObjects p;
  parse_document(YAML::LoadAll(service("  type: LoadBalancer\n  loadBalancerSourceRanges: [203.0.113.0/24]\n",
                                       "status: {loadBalancer: {ingress: [{ip: 198.51.100.1}]}}\n"))[0],
                 1, &p);
  ASSERT_TRUE(p.errors.empty()) << p.errors[0].reason;
  BuildOptions o = node();
  o.node_ips.clear();
  const std::string j = to_dry_run_json(build_service_table(p.services, {}, o).table);
  EXPECT_EQ(j,
            R"({"services":[{"name":"ns/web:http","protocol":"TCP","vip":"10.96.0.10","port":80,"kind":"ClusterIP","scheduler":"rr","persistence_timeout_s":0,"when_empty":"reject","proxy_protocol":"","backends":[]},)"
            R"({"name":"ns/web:http","protocol":"TCP","vip":"198.51.100.1","port":80,"kind":"LoadBalancer","scheduler":"rr","persistence_timeout_s":0,"when_empty":"reject","proxy_protocol":"","source_ranges":["203.0.113.0/24"],"backends":[]}]})");
}

TEST(K8sRules, BadPolicyValueIsAnObjectError) {
  ParsedObjects p;
  parse_document(YAML::Load(R"(apiVersion: v1
kind: Service
metadata: {name: x}
spec: {clusterIP: 10.96.0.1, externalTrafficPolicy: Sometimes, ports: [{port: 80}]}
)"),
                 1, &p);
  ASSERT_EQ(p.errors.size(), 1u);
  EXPECT_EQ(p.errors[0].reason, "spec.externalTrafficPolicy: 'Sometimes' is not Cluster or Local");
}

}  // namespace
}  // namespace vipd::cp::k8s
