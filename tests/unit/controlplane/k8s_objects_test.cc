// Thread: test main thread. Tests for controlplane/sources/k8s_objects.cc.
#include "controlplane/sources/k8s_objects.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

namespace vipd::cp::k8s {
namespace {

using ::testing::HasSubstr;

ParsedObjects parse_yaml(const std::string& text) {
  ParsedObjects out;
  const auto docs = YAML::LoadAll(text);
  for (size_t i = 0; i < docs.size(); ++i) parse_document(docs[i], static_cast<int>(i + 1), &out);
  return out;
}

// The single error of TEXT as "OBJECT | REASON".
std::string only_error(const std::string& text) {
  const ParsedObjects p = parse_yaml(text);
  if (p.errors.size() != 1) return "errors: " + std::to_string(p.errors.size());
  return p.errors[0].object + " | " + p.errors[0].reason;
}

BuildResult build(const std::string& text, Scheduler scheduler = Scheduler::kRr) {
  const ParsedObjects p = parse_yaml(text);
  EXPECT_TRUE(p.errors.empty()) << p.errors[0].object << ": " << p.errors[0].reason;
  return build_service_table(p.services, p.slices, scheduler);
}

Ipv4 ip(const char* s) { return *parse_ipv4(s); }

const char* kSeedService = R"(
apiVersion: v1
kind: Service
metadata: {name: db, namespace: default}
spec:
  type: ClusterIP
  clusterIP: 10.96.0.100
  ports: [{name: http, protocol: TCP, port: 8080, targetPort: 8080}]
)";

std::string slice(const std::string& name, const std::string& body) {
  return "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: " + name +
         "\n  namespace: default\n  labels: {kubernetes.io/service-name: db}\naddressType: IPv4\n" +
         body;
}

TEST(K8sParse, Service) {
  const auto p = parse_yaml(R"(
apiVersion: v1
kind: Service
metadata:
  name: web
  labels: {app: web}
  annotations: {vipd.io/scheduler: wrr}
spec:
  type: NodePort
  clusterIPs: [fd00::10, 10.96.0.10]
  clusterIP: fd00::10
  ports:
  - {name: http, port: 80, targetPort: 8080, nodePort: 30080}
  - {name: dns, protocol: UDP, port: 53}
  sessionAffinity: ClientIP
)");
  ASSERT_TRUE(p.errors.empty()) << p.errors[0].reason;
  ASSERT_EQ(p.services.size(), 1u);
  const Service& s = p.services[0];
  EXPECT_EQ(s.meta.namespace_, "default");
  EXPECT_EQ(s.meta.name, "web");
  EXPECT_EQ(s.meta.labels.at("app"), "web");
  EXPECT_EQ(s.type, "NodePort");
  EXPECT_EQ(s.cluster_ip, "fd00::10");
  EXPECT_EQ(s.cluster_ips.size(), 2u);
  ASSERT_EQ(s.ports.size(), 2u);
  EXPECT_EQ(s.ports[0].protocol, "TCP");
  EXPECT_EQ(s.ports[0].port, 80);
  EXPECT_EQ(s.ports[1].protocol, "UDP");
  EXPECT_TRUE(s.client_ip_affinity);
  EXPECT_EQ(s.affinity_timeout_s, kDefaultAffinityTimeoutS);
  EXPECT_EQ(s.scheduler, Scheduler::kWrr);
  EXPECT_EQ(object_id("Service", s.meta), "Service default/web");
}

TEST(K8sParse, ServiceErrors) {
  const std::string head = "apiVersion: v1\nkind: Service\nmetadata: {name: s, namespace: ns}\n";
  EXPECT_EQ(only_error("apiVersion: v1\nkind: Service\nmetadata: {namespace: ns}\nspec: {}\n"),
            "Service (document 1) | metadata.name is missing");
  EXPECT_EQ(only_error("apiVersion: v1\nkind: Service\nspec: {}\n"),
            "Service (document 1) | metadata is missing");
  EXPECT_EQ(only_error("apiVersion: v1\nkind: Service\nmetadata: hello\n"),
            "Service (document 1) | metadata: expected a mapping");
  EXPECT_EQ(only_error(head), "Service ns/s | spec is missing");
  EXPECT_EQ(only_error("apiVersion: v2\nkind: Service\nmetadata: {name: s}\nspec: {}\n"),
            "Service default/s | apiVersion 'v2' is not supported (want v1)");
  EXPECT_EQ(only_error(head + "spec: {clusterIP: 10.96.0.300}\n"),
            "Service ns/s | spec.clusterIP: '10.96.0.300' is not an IP address");
  EXPECT_EQ(only_error(head + "spec: {clusterIPs: [10.0.0.1, bogus]}\n"),
            "Service ns/s | spec.clusterIPs[1]: 'bogus' is not an IP address");
  EXPECT_EQ(only_error(head + "spec: {clusterIP: 10.0.0.1, ports: [{port: 70000}]}\n"),
            "Service ns/s | spec.ports[0].port: port 70000 is out of range 1..65535");
  EXPECT_EQ(only_error(head + "spec: {clusterIP: 10.0.0.1, ports: [{port: 0}]}\n"),
            "Service ns/s | spec.ports[0].port: port 0 is out of range 1..65535");
  EXPECT_EQ(only_error(head + "spec: {clusterIP: 10.0.0.1, ports: [{port: abc}]}\n"),
            "Service ns/s | spec.ports[0].port: expected an integer, got 'abc'");
  EXPECT_EQ(only_error(head + "spec: {clusterIP: 10.0.0.1, ports: [{name: a}]}\n"),
            "Service ns/s | spec.ports[0].port is missing");
  EXPECT_EQ(only_error(head + "spec: {ports: 80}\n"), "Service ns/s | spec.ports: expected a list");
  EXPECT_EQ(only_error(head + "spec: {ports: [80]}\n"), "Service ns/s | spec.ports[0]: expected a mapping");
  EXPECT_EQ(only_error(head + "spec: {ports: [{port: 80, protocol: HTTP}]}\n"),
            "Service ns/s | spec.ports[0].protocol: 'HTTP' is not TCP, UDP or SCTP");
  EXPECT_EQ(only_error(head + "spec: {ports: [{name: a, port: 80}, {name: a, port: 81}]}\n"),
            "Service ns/s | spec.ports[1]: duplicate port name 'a'");
  EXPECT_EQ(only_error(head + "spec: {ports: [{name: a, port: 80}, {name: b, port: 80}]}\n"),
            "Service ns/s | spec.ports[1]: duplicate port 80/TCP");
  EXPECT_EQ(only_error(head + "spec: {type: Magic}\n"), "Service ns/s | spec.type: 'Magic' is not a Service type");
  EXPECT_EQ(only_error(head + "spec: {sessionAffinity: Cookie}\n"),
            "Service ns/s | spec.sessionAffinity: 'Cookie' is not None or ClientIP");
  EXPECT_EQ(only_error(head + "spec: {sessionAffinityConfig: {clientIP: {timeoutSeconds: 86401}}}\n"),
            "Service ns/s | spec.sessionAffinityConfig.clientIP.timeoutSeconds: 86401 is out of range 1..86400");
  EXPECT_EQ(only_error(head + "spec: {clusterIP: [1, 2]}\n"), "Service ns/s | spec.clusterIP: expected a string");
  EXPECT_EQ(only_error("apiVersion: v1\nkind: Service\nmetadata: {name: s, labels: [a]}\nspec: {}\n"),
            "Service default/s | metadata.labels: expected a mapping");
  EXPECT_EQ(only_error("apiVersion: v1\nkind: Service\nmetadata: {name: s, annotations: "
                       "{vipd.io/scheduler: fastest}}\nspec: {}\n"),
            "Service default/s | annotation vipd.io/scheduler: 'fastest' is not a known scheduler");
  for (const char* bad : {"v3", "V1", "\"\"", "proxy"})
    EXPECT_EQ(only_error(std::string("apiVersion: v1\nkind: Service\nmetadata: {name: s, annotations: "
                                     "{vipd.io/proxy-protocol: ") + bad + "}}\nspec: {}\n"),
              std::string("Service default/s | annotation vipd.io/proxy-protocol: '") +
                  (bad[0] == '"' ? "" : bad) + "' is not v1, v2 or none") << bad;
}

TEST(K8sParse, EndpointSlice) {
  const auto p = parse_yaml(R"(
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: db-abc, labels: {kubernetes.io/service-name: db}}
addressType: IPv4
endpoints:
- addresses: [10.244.1.15]
  conditions: {ready: false, serving: true, terminating: true}
  nodeName: n1
  zone: z1
- addresses: [10.244.2.88, 10.244.2.89]
ports:
- {name: http, port: 8080}
- {name: "", protocol: UDP, port: 53}
- {port: 9090}
- {name: noport}
)");
  ASSERT_TRUE(p.errors.empty()) << p.errors[0].reason;
  ASSERT_EQ(p.slices.size(), 1u);
  const EndpointSlice& s = p.slices[0];
  EXPECT_EQ(s.service_name(), "db");
  EXPECT_EQ(s.address_type, "IPv4");
  ASSERT_EQ(s.endpoints.size(), 2u);
  EXPECT_EQ(s.endpoints[0].conditions.ready, false);
  EXPECT_EQ(s.endpoints[0].conditions.terminating, true);
  EXPECT_EQ(s.endpoints[0].node_name, "n1");
  EXPECT_FALSE(s.endpoints[1].conditions.ready.has_value());
  ASSERT_EQ(s.ports.size(), 4u);
  EXPECT_EQ(s.ports[1].name, std::optional<std::string>(""));
  EXPECT_EQ(s.ports[1].protocol, "UDP");
  EXPECT_FALSE(s.ports[2].name.has_value());
  EXPECT_FALSE(s.ports[3].port.has_value());
}

TEST(K8sParse, EndpointSliceErrors) {
  const std::string head = "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: e}\n";
  EXPECT_EQ(only_error(head), "EndpointSlice default/e | addressType is missing");
  EXPECT_EQ(only_error(head + "addressType: IPv5\n"),
            "EndpointSlice default/e | addressType: 'IPv5' is not IPv4, IPv6 or FQDN");
  EXPECT_EQ(only_error(head + "addressType: IPv4\nendpoints: [{addresses: [10.0.0.256]}]\n"),
            "EndpointSlice default/e | endpoints[0].addresses[0]: '10.0.0.256' is not an IPv4 address");
  EXPECT_EQ(only_error(head + "addressType: IPv4\nendpoints: [{addresses: []}]\n"),
            "EndpointSlice default/e | endpoints[0].addresses is missing or empty");
  EXPECT_EQ(only_error(head + "addressType: IPv4\nendpoints: [{addresses: [10.0.0.1], conditions: {ready: maybe}}]\n"),
            "EndpointSlice default/e | endpoints[0].conditions.ready: expected true or false, got 'maybe'");
  EXPECT_EQ(only_error(head + "addressType: IPv4\nports: [{name: a, port: 65536}]\n"),
            "EndpointSlice default/e | ports[0].port: port 65536 is out of range 1..65535");
  EXPECT_EQ(only_error(head + "addressType: IPv4\nendpoints: {a: b}\n"),
            "EndpointSlice default/e | endpoints: expected a list");
  EXPECT_EQ(only_error("apiVersion: discovery.k8s.io/v1beta1\nkind: EndpointSlice\nmetadata: {name: e}\n"),
            "EndpointSlice default/e | apiVersion 'discovery.k8s.io/v1beta1' is not supported (want discovery.k8s.io/v1)");
}

TEST(K8sParse, DocumentsListsAndOtherKinds) {
  const auto p = parse_yaml(std::string(kSeedService) + "---\n---\n" + R"(
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: ConfigMap, metadata: {name: cm}}
- {apiVersion: discovery.k8s.io/v1, kind: EndpointSlice, metadata: {name: x}, addressType: IPv4}
- just a string
- {metadata: {name: nokind}}
)");
  EXPECT_EQ(p.services.size(), 1u);
  EXPECT_EQ(p.slices.size(), 1u);
  ASSERT_EQ(p.notes.size(), 1u);
  EXPECT_EQ(p.notes[0].object, "ConfigMap default/cm");
  ASSERT_EQ(p.errors.size(), 2u);
  EXPECT_EQ(p.errors[0].object, "document 3 item 3");
  EXPECT_EQ(p.errors[0].reason, "expected a Kubernetes object (a mapping)");
  EXPECT_EQ(p.errors[1].object, "document 3 item 4");
  EXPECT_EQ(p.errors[1].reason, "kind is missing");
}

TEST(K8sParse, JsonInput) {
  const auto p = parse_yaml(R"({"apiVersion": "v1", "kind": "Service",
    "metadata": {"name": "j", "namespace": "x"},
    "spec": {"clusterIP": "10.96.1.1", "ports": [{"name": "", "port": 443}]}})");
  ASSERT_TRUE(p.errors.empty());
  ASSERT_EQ(p.services.size(), 1u);
  EXPECT_EQ(p.services[0].ports[0].port, 443);
}

TEST(K8sParse, GarbageNeverThrows) {
  const std::vector<std::string> garbage = {
      "", "~", "42", "[1, 2, 3]", "kind: [Service]", "kind: Service", "kind: Service\nmetadata: []",
      "kind: Service\nmetadata: {name: {a: b}}", "kind: Service\nmetadata: {name: a}\nspec: []",
      "kind: Service\nmetadata: {name: a}\nspec: {ports: [{port: [1]}]}",
      "kind: Service\nmetadata: {name: a}\nspec: {sessionAffinityConfig: 7}",
      "kind: Service\nmetadata: {name: a}\nspec: {sessionAffinityConfig: {clientIP: []}}",
      "kind: EndpointSlice\nmetadata: {name: a}\naddressType: IPv4\nendpoints: [7, {addresses: 7}]",
      "kind: EndpointSlice\nmetadata: {name: a}\naddressType: IPv4\nendpoints: [{addresses: [[1]]}]",
      "kind: EndpointSlice\nmetadata: {name: a}\naddressType: IPv4\nendpoints: [{addresses: [1.2.3.4], conditions: 5}]",
      "kind: List\nitems: 5", "kind: List\nitems: [[[]]]", "kind: List",
      "apiVersion: v1\nkind: Service\nmetadata: {name: a, labels: {x: {y: z}}}\nspec: {}",
  };
  for (const auto& g : garbage) {
    ParsedObjects out;
    EXPECT_NO_THROW({
      for (const auto& d : YAML::LoadAll(g)) parse_document(d, 1, &out);
    }) << g;
  }
  // Random mutations of a valid manifest: may fail to parse, must never crash.
  const std::string base = std::string(kSeedService) +
                           slice("db-1", "endpoints:\n- addresses: [10.244.1.15]\n  conditions: {ready: true}\n"
                                         "ports: [{name: http, port: 8080}]\n");
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    std::string m = base;
    for (int k = 0; k < 3; ++k) {
      const size_t pos = rng() % m.size();
      const char repl[] = {':', '-', '[', '{', ' ', '\n', 'x', '9', '"', '}'};
      if (rng() % 2) m.erase(pos, 1);
      else m[pos] = repl[rng() % sizeof repl];
    }
    try {
      const auto docs = YAML::LoadAll(m);
      ParsedObjects out;
      for (size_t d = 0; d < docs.size(); ++d) parse_document(docs[d], static_cast<int>(d + 1), &out);
      build_service_table(out.services, out.slices, Scheduler::kRr);
    } catch (const YAML::Exception&) {
      // syntax errors are reported by the caller of LoadAll
    }
  }
}

TEST(K8sBuild, SeedService) {
  const auto r = build(std::string(kSeedService) +
                       slice("db-1", R"(endpoints:
- addresses: [10.244.3.44]
- addresses: [10.244.1.15]
- addresses: [10.244.2.88]
- addresses: [10.244.3.12]
ports: [{name: http, protocol: TCP, port: 8080}]
)"));
  EXPECT_TRUE(r.errors.empty());
  ASSERT_EQ(r.table.services.size(), 1u);
  const VirtualService& vs = r.table.services.begin()->second;
  EXPECT_EQ(vs.name, "default/db:http");
  EXPECT_EQ(vs.key, (ServiceKey{ip("10.96.0.100"), 8080, Protocol::kTcp}));
  EXPECT_EQ(vs.scheduler, Scheduler::kRr);
  EXPECT_EQ(vs.persistence_timeout_s, 0u);
  EXPECT_EQ(vs.when_empty, WhenEmpty::kReject);
  ASSERT_EQ(vs.backends.size(), 4u);
  EXPECT_EQ(vs.backends[0], (RealServer{ip("10.244.1.15"), 8080, 1, false}));
  EXPECT_EQ(vs.backends[3], (RealServer{ip("10.244.3.44"), 8080, 1, false}));
}

TEST(K8sBuild, PortMatchingUsesNameAndProtocolAndSliceTargetPort) {
  const auto r = build(R"(
apiVersion: v1
kind: Service
metadata: {name: db}
spec:
  clusterIP: 10.96.0.100
  ports:
  - {name: "", port: 80, targetPort: 1}
  - {name: dns, protocol: UDP, port: 53}
  - {name: dnstcp, protocol: TCP, port: 53}
  - {name: other, port: 99}
)" + slice("db-1", R"(endpoints: [{addresses: [10.0.0.1]}]
ports:
- {name: "", port: 8080}
- {name: dns, protocol: UDP, port: 5353}
- {name: dnstcp, protocol: UDP, port: 5454}
- {port: 9999}
- {name: other}
)"));
  ASSERT_EQ(r.table.services.size(), 4u);
  const auto& http = r.table.services.at({ip("10.96.0.100"), 80, Protocol::kTcp});
  EXPECT_EQ(http.name, "default/db");
  ASSERT_EQ(http.backends.size(), 1u);
  EXPECT_EQ(http.backends[0].port, 8080);  // from the slice, not targetPort
  const auto& dns = r.table.services.at({ip("10.96.0.100"), 53, Protocol::kUdp});
  EXPECT_EQ(dns.name, "default/db:dns");
  ASSERT_EQ(dns.backends.size(), 1u);
  EXPECT_EQ(dns.backends[0].port, 5353);
  // Protocol mismatch, and a slice port without a port number: no endpoints.
  EXPECT_TRUE(r.table.services.at({ip("10.96.0.100"), 53, Protocol::kTcp}).backends.empty());
  EXPECT_TRUE(r.table.services.at({ip("10.96.0.100"), 99, Protocol::kTcp}).backends.empty());
}

TEST(K8sBuild, SliceMatchingByLabelAndNamespace) {
  const auto r = build(std::string(kSeedService) +
                       "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
                       "metadata: {name: other-ns, namespace: prod, labels: {kubernetes.io/service-name: db}}\n"
                       "addressType: IPv4\nendpoints: [{addresses: [10.0.0.1]}]\nports: [{name: http, port: 1}]\n"
                       "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
                       "metadata: {name: unlabelled}\n"
                       "addressType: IPv4\nendpoints: [{addresses: [10.0.0.2]}]\nports: [{name: http, port: 1}]\n"
                       "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
                       "metadata: {name: v6, labels: {kubernetes.io/service-name: db}}\n"
                       "addressType: IPv6\nendpoints: [{addresses: [\"fd00::1\"]}]\nports: [{name: http, port: 1}]\n");
  // The IPv6 slice is usable but feeds only IPv6 entries: db is IPv4-only.
  ASSERT_EQ(r.table.services.size(), 1u);
  EXPECT_TRUE(r.table.services.begin()->second.backends.empty());
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_THAT(r.notes[0].reason, HasSubstr("no kubernetes.io/service-name label"));
}

TEST(K8sBuild, MergeSlicesNonTerminatingWins) {
  const auto r = build(std::string(kSeedService) +
                       slice("db-1", R"(endpoints:
- {addresses: [10.0.0.1], conditions: {ready: false, serving: true, terminating: true}}
- {addresses: [10.0.0.2]}
ports: [{name: http, port: 8080}]
)") + slice("db-2", R"(endpoints:
- {addresses: [10.0.0.1], conditions: {ready: true}}
- {addresses: [10.0.0.2], conditions: {ready: false, serving: true, terminating: true}}
- {addresses: [10.0.0.3], conditions: {ready: false, serving: false}}
ports: [{name: http, port: 8080}]
)"));
  const auto& b = r.table.services.begin()->second.backends;
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0], (RealServer{ip("10.0.0.1"), 8080, 1, false}));
  EXPECT_EQ(b[1], (RealServer{ip("10.0.0.2"), 8080, 1, false}));
}

TEST(K8sBuild, TerminatingFallback) {
  const auto r = build(std::string(kSeedService) + slice("db-1", R"(endpoints:
- {addresses: [10.0.0.1], conditions: {ready: false, serving: true, terminating: true}}
- {addresses: [10.0.0.2], conditions: {ready: false, serving: false, terminating: true}}
- {addresses: [10.0.0.3], conditions: {ready: false}}
ports: [{name: http, port: 8080}]
)"));
  const auto& b = r.table.services.begin()->second.backends;
  ASSERT_EQ(b.size(), 1u);
  // Nothing ready: serving-and-terminating endpoints are the fallback and take
  // new flows.
  EXPECT_EQ(b[0], (RealServer{ip("10.0.0.1"), 8080, 1, true}));
}

TEST(K8sBuild, TerminatingEndpointsGetWeightZeroWhileOthersAreReady) {
  const auto r = build(std::string(kSeedService) + slice("db-1", R"(endpoints:
- {addresses: [10.0.0.1], conditions: {ready: false, serving: true, terminating: true}}
- {addresses: [10.0.0.2, 10.0.0.9]}
- {addresses: [10.0.0.3], conditions: {ready: false, serving: false, terminating: true}}
ports: [{name: http, port: 8080}]
)"));
  const auto& b = r.table.services.begin()->second.backends;
  ASSERT_EQ(b.size(), 2u);  // first address only; not-serving terminating dropped
  EXPECT_EQ(b[0], (RealServer{ip("10.0.0.1"), 8080, 0, true}));
  EXPECT_EQ(b[1], (RealServer{ip("10.0.0.2"), 8080, 1, false}));
}

TEST(K8sBuild, IgnoredServices) {
  const auto r = build(R"(
apiVersion: v1
kind: Service
metadata: {name: headless}
spec: {clusterIP: None, ports: [{port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: ext}
spec: {type: ExternalName, ports: [{port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: labelled, labels: {service.kubernetes.io/headless: ""}}
spec: {clusterIP: 10.96.0.1, ports: [{port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: other-proxy, labels: {service.kubernetes.io/service-proxy-name: foo}}
spec: {clusterIP: 10.96.0.2, ports: [{port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: v6}
spec: {clusterIP: "fd00::1", ports: [{port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: noip}
spec: {ports: [{port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: sctp}
spec: {clusterIP: 10.96.0.3, ports: [{name: s, protocol: SCTP, port: 80}, {name: t, port: 81}]}
)");
  // The IPv6-only Service is served (IPv6 is a table family like IPv4).
  ASSERT_EQ(r.table.services.size(), 2u);
  EXPECT_EQ(r.table.services.begin()->second.name, "default/sctp:t");
  EXPECT_EQ(r.table.services.rbegin()->second.name, "default/v6");
  EXPECT_EQ(r.table.services.rbegin()->first.vip.to_string(), "fd00::1");
  EXPECT_EQ(r.notes.size(), 6u);
  EXPECT_TRUE(r.errors.empty());
}

TEST(K8sBuild, SchedulerAndAffinity) {
  const auto r = build(R"(
apiVersion: v1
kind: Service
metadata: {name: a, annotations: {vipd.io/scheduler: mh}}
spec: {clusterIP: 10.96.0.1, ports: [{port: 80}], sessionAffinity: ClientIP,
       sessionAffinityConfig: {clientIP: {timeoutSeconds: 60}}}
---
apiVersion: v1
kind: Service
metadata: {name: b}
spec: {clusterIP: 10.96.0.2, ports: [{port: 80}], sessionAffinity: ClientIP}
---
apiVersion: v1
kind: Service
metadata: {name: c}
spec: {clusterIPs: ["fd00::3", 10.96.0.3], ports: [{port: 80}]}
)", Scheduler::kWrr);
  ASSERT_EQ(r.table.services.size(), 4u);  // c is dual-stack: fd00::3 and 10.96.0.3
  const auto& a = r.table.services.at({ip("10.96.0.1"), 80, Protocol::kTcp});
  EXPECT_EQ(a.scheduler, Scheduler::kMh);
  EXPECT_EQ(a.persistence_timeout_s, 60u);
  const auto& b = r.table.services.at({ip("10.96.0.2"), 80, Protocol::kTcp});
  EXPECT_EQ(b.scheduler, Scheduler::kWrr);
  EXPECT_EQ(b.persistence_timeout_s, 10800u);
  EXPECT_EQ(r.table.services.at({ip("10.96.0.3"), 80, Protocol::kTcp}).persistence_timeout_s, 0u);
}

TEST(K8sBuild, ProxyProtocolAnnotationAndDefault) {
  const std::string text = R"(
apiVersion: v1
kind: Service
metadata: {name: one, annotations: {vipd.io/proxy-protocol: v1}}
spec: {clusterIP: 10.96.0.1, ports: [{name: t, port: 80}, {name: u, port: 53, protocol: UDP}]}
---
apiVersion: v1
kind: Service
metadata: {name: two, annotations: {vipd.io/proxy-protocol: v2}}
spec: {clusterIP: 10.96.0.2, ports: [{port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: plain}
spec: {clusterIP: 10.96.0.3, ports: [{port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: off, annotations: {vipd.io/proxy-protocol: none}}
spec: {clusterIP: 10.96.0.4, ports: [{port: 80}]}
)";
  const ParsedObjects p = parse_yaml(text);
  ASSERT_TRUE(p.errors.empty()) << p.errors[0].reason;
  for (const ProxyProtocol def : {ProxyProtocol::kNone, ProxyProtocol::kV2}) {
    BuildOptions o;
    o.default_proxy_protocol = def;
    const auto r = build_service_table(p.services, p.slices, o);
    ASSERT_EQ(r.table.services.size(), 5u);
    auto pp = [&](const char* vip, uint16_t port, Protocol proto) {
      return r.table.services.at({ip(vip), port, proto}).proxy_protocol;
    };
    EXPECT_EQ(pp("10.96.0.1", 80, Protocol::kTcp), ProxyProtocol::kV1);
    // A stream header: UDP ports of an annotated service never get one.
    EXPECT_EQ(pp("10.96.0.1", 53, Protocol::kUdp), ProxyProtocol::kNone);
    EXPECT_EQ(pp("10.96.0.2", 80, Protocol::kTcp), ProxyProtocol::kV2);
    EXPECT_EQ(pp("10.96.0.3", 80, Protocol::kTcp), def);
    EXPECT_EQ(pp("10.96.0.4", 80, Protocol::kTcp), ProxyProtocol::kNone);
  }
}

TEST(K8sBuild, Conflicts) {
  ParsedObjects p = parse_yaml(std::string(kSeedService) + "---\n" + kSeedService + R"(
---
apiVersion: v1
kind: Service
metadata: {name: clash}
spec: {clusterIP: 10.96.0.100, ports: [{name: x, port: 8080}]}
)" + slice("s", "") + slice("s", ""));
  ASSERT_TRUE(p.errors.empty());
  p.services[1].origin = "b.yaml";
  const auto r = build_service_table(p.services, p.slices, Scheduler::kRr);
  ASSERT_EQ(r.table.services.size(), 1u);
  EXPECT_EQ(r.table.services.begin()->second.name, "default/clash:x");  // sorted by name
  ASSERT_EQ(r.errors.size(), 3u);
  EXPECT_EQ(r.errors[0].object, "EndpointSlice default/s");
  EXPECT_THAT(r.errors[0].reason, HasSubstr("defined again"));
  EXPECT_EQ(r.errors[1].origin, "b.yaml");
  EXPECT_THAT(r.errors[1].reason, HasSubstr("defined again"));
  // Key conflicts are settled once every service is built.
  EXPECT_EQ(r.errors[2].object, "Service default/db");
  EXPECT_EQ(r.errors[2].reason, "TCP 10.96.0.100:8080 is already used by default/clash:x; port skipped");
  EXPECT_EQ(r.errors[2].conflict, "order");
}

// CVE-2020-8554 class: an externalIP (or a load balancer ingress address) in a
// tenant's Service equal to another namespace's ClusterIP and port. The
// tenant's namespace sorts first; the ClusterIP must still win.
TEST(K8sBuild, ClusterIpWinsOverATenantsExternalIpAndIngress) {
  for (const char* extra : {"  externalIPs: [10.96.0.10]\n",
                            "  type: LoadBalancer\nstatus: {loadBalancer: {ingress: [{ip: 10.96.0.10}]}}\n"}) {
    SCOPED_TRACE(extra);
    ParsedObjects p = parse_yaml(std::string(R"(
apiVersion: v1
kind: Service
metadata: {name: evil, namespace: aaa-tenant}
spec:
  clusterIP: 10.96.7.7
  ports: [{name: dns, port: 53, protocol: UDP}]
)") + extra + R"(---
apiVersion: v1
kind: Service
metadata: {name: kube-dns, namespace: kube-system}
spec: {clusterIP: 10.96.0.10, ports: [{name: dns, port: 53, protocol: UDP}]}
)");
    ASSERT_TRUE(p.errors.empty()) << p.errors[0].reason;
    const auto r = build_service_table(p.services, p.slices, Scheduler::kRr);
    const auto& dns = r.table.services.at({ip("10.96.0.10"), 53, Protocol::kUdp});
    EXPECT_EQ(dns.name, "kube-system/kube-dns:dns");
    EXPECT_EQ(dns.kind, ServiceKind::kClusterIp);
    ASSERT_EQ(r.errors.size(), 1u);
    EXPECT_EQ(r.errors[0].object, "Service aaa-tenant/evil");
    EXPECT_EQ(r.errors[0].conflict, "precedence");
    EXPECT_THAT(r.errors[0].reason, HasSubstr("is already used by kube-system/kube-dns:dns (ClusterIP, which takes "
                                              "precedence over external and load balancer addresses)"));
  }
}

TEST(K8sBuild, KnownSchedulers) {
  // Every scheduler of the model is accepted in the annotation.
  for (const auto& e : kSchedulerNames) {
    const ParsedObjects p = parse_yaml(std::string("apiVersion: v1\nkind: Service\nmetadata: {name: s, annotations: "
                                                   "{vipd.io/scheduler: ") + e.name + "}}\nspec: {}\n");
    ASSERT_EQ(p.services.size(), 1u) << e.name;
    EXPECT_EQ(p.services[0].scheduler, e.value) << e.name;
  }
}

// ---- Validation as the API server does it (docs/kubernetes.md, "Validation").

std::string svc_named(const std::string& name_yaml, const std::string& ns_yaml = "default") {
  return "apiVersion: v1\nkind: Service\nmetadata: {name: " + name_yaml + ", namespace: " + ns_yaml +
         "}\nspec: {clusterIP: 10.96.0.1, ports: [{name: http, port: 80}]}\n";
}

std::string slice_named(const std::string& name_yaml) {
  return "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: " + name_yaml +
         ", labels: {kubernetes.io/service-name: db}}\naddressType: IPv4\n"
         "endpoints: [{addresses: [10.0.0.1]}]\n";
}

// Every byte of an error is printable ASCII (nothing can forge a log line or
// drive a terminal).
bool all_printable(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
}

TEST(K8sValidate, Printable) {
  EXPECT_EQ(printable("web-1.x"), "web-1.x");
  EXPECT_EQ(printable(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(printable("a\nb\x1b[31m\x7f"), "a\\x0ab\\x1b[31m\\x7f");
  EXPECT_EQ(printable("q\"u'o\\te"), "q\\\"u\\'o\\\\te");
  EXPECT_EQ(printable("\xff\xfe\xc3\xa9"), "\\xff\\xfe\\xc3\\xa9");
}

TEST(K8sValidate, HostileServiceNamesRefused) {
  // YAML text of the name -> the name as the error shows it.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"("a\"b")", "a\\\"b"},
      {R"("a'b")", "a\\'b"},
      {R"("a\nb")", "a\\x0ab"},
      {R"("a\0b")", "a\\x00b"},
      {R"("a\e[2Jb")", "a\\x1b[2Jb"},
      {"a\xff\xfe" "b", "a\\xff\\xfeb"},  // invalid UTF-8, raw
      {"Web", "Web"},
      {"1web", "1web"},      // DNS-1035: starts with a letter
      {"web-", "web-"},
      {"web.x", "web.x"},    // a subdomain, not a label
      {std::string(64, 'a'), std::string(64, 'a')},
  };
  for (const auto& [yaml, shown] : cases) {
    const ParsedObjects p = parse_yaml(svc_named(yaml));
    ASSERT_EQ(p.errors.size(), 1u) << yaml;
    EXPECT_TRUE(p.services.empty()) << yaml;
    EXPECT_EQ(p.errors[0].object, "Service default/" + shown);
    EXPECT_THAT(p.errors[0].reason, HasSubstr("metadata.name: '" + shown + "' must be "));
    EXPECT_TRUE(all_printable(p.errors[0].object + p.errors[0].reason)) << p.errors[0].reason;
  }
  EXPECT_THAT(only_error(svc_named(std::string(64, 'a'))), HasSubstr("must be at most 63 characters"));
  EXPECT_THAT(only_error(svc_named("1web")), HasSubstr("RFC 1035 label"));
  // The longest valid name, and one with digits and dashes.
  EXPECT_TRUE(parse_yaml(svc_named(std::string(63, 'a'))).errors.empty());
  EXPECT_TRUE(parse_yaml(svc_named("web-2-x")).errors.empty());
}

TEST(K8sValidate, HostileNamespacesRefused) {
  EXPECT_EQ(only_error(svc_named("web", R"("kube\nsystem")")),
            "Service kube\\x0asystem/web | metadata.namespace: 'kube\\x0asystem' " +
                dns1123_label_problem("-"));
  EXPECT_THAT(only_error(svc_named("web", std::string(64, 'n'))), HasSubstr("at most 63 characters"));
  EXPECT_THAT(only_error(svc_named("web", "a.b")), HasSubstr("metadata.namespace: 'a.b' must be"));
  EXPECT_TRUE(parse_yaml(svc_named("web", "0-team")).errors.empty());  // DNS-1123: may start with a digit
}

TEST(K8sValidate, EndpointSliceNamesAreSubdomains) {
  EXPECT_TRUE(parse_yaml(slice_named("db-abc.v2")).errors.empty());
  std::string longest;
  while (longest.size() < 253) longest += longest.empty() ? "a" : ".a";
  ASSERT_EQ(longest.size(), 253u);
  EXPECT_TRUE(parse_yaml(slice_named(longest)).errors.empty());
  EXPECT_THAT(only_error(slice_named(longest + "a")), HasSubstr("at most 253 characters"));
  for (const char* bad : {R"("db\tx")", "db..x", ".db", "DB", R"("db\u00e9")", R"("a\0")"}) {
    const ParsedObjects p = parse_yaml(slice_named(bad));
    ASSERT_EQ(p.errors.size(), 1u) << bad;
    EXPECT_TRUE(p.slices.empty());
    EXPECT_THAT(p.errors[0].reason, HasSubstr("RFC 1123 subdomain")) << bad;
    EXPECT_TRUE(all_printable(p.errors[0].object + p.errors[0].reason));
  }
}

TEST(K8sValidate, LabelsAndPortNames) {
  // The service-name label value: label value rules, at most 63.
  auto with_label = [](const std::string& label) {
    return "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: s, labels: {" +
           label + "}}\naddressType: IPv4\n";
  };
  EXPECT_EQ(only_error(with_label("kubernetes.io/service-name: " + std::string(64, 'd'))),
            "EndpointSlice default/s | metadata.labels.kubernetes.io/service-name: '" +
                std::string(64, 'd') + "' must be at most 63 characters");
  EXPECT_THAT(only_error(with_label(R"(kubernetes.io/service-name: "db\nx")")),
              HasSubstr("'db\\x0ax' must be empty or alphanumeric"));
  EXPECT_THAT(only_error(with_label(R"("bad key!": x)")), HasSubstr("metadata.labels: 'bad key!' name part"));
  EXPECT_THAT(only_error(with_label(R"("a/b/c": x)")), HasSubstr("'a/b/c' name part must be"));
  EXPECT_THAT(only_error(with_label(R"("A_B/c": x)")), HasSubstr("'A_B/c' prefix must be a lowercase RFC 1123"));
  EXPECT_TRUE(parse_yaml(with_label("app.kubernetes.io/name: My_App.v1, empty: ''")).errors.empty());

  // Service port names: DNS-1123 labels; EndpointSlice port names too, unique.
  EXPECT_EQ(only_error("apiVersion: v1\nkind: Service\nmetadata: {name: s}\n"
                       "spec: {clusterIP: 10.96.0.1, ports: [{name: HTTP_1, port: 80}]}\n"),
            "Service default/s | spec.ports[0].name: 'HTTP_1' " + dns1123_label_problem("_"));
  EXPECT_THAT(only_error(with_label("kubernetes.io/service-name: db") +
                         "ports: [{name: \"h\\x1bttp\", port: 80}]\n"),
              HasSubstr("ports[0].name: 'h\\x1bttp' must be a lowercase RFC 1123 label"));
  EXPECT_THAT(only_error(with_label("kubernetes.io/service-name: db") +
                         "ports: [{name: http, port: 80}, {name: http, port: 81}]\n"),
              HasSubstr("ports[1]: duplicate port name 'http'"));
  EXPECT_THAT(only_error(with_label("kubernetes.io/service-name: db") +
                         "endpoints: [{addresses: [10.0.0.1], nodeName: \"n\\x01\"}]\n"),
              HasSubstr("endpoints[0].nodeName: 'n\\x01' must be a lowercase RFC 1123 subdomain"));
}

TEST(K8sValidate, SpecialAddressClasses) {
  EXPECT_STREQ(special_ip_class("0.0.0.0"), "unspecified");
  EXPECT_STREQ(special_ip_class("127.0.0.1"), "loopback");
  EXPECT_STREQ(special_ip_class("127.255.0.9"), "loopback");
  EXPECT_STREQ(special_ip_class("169.254.169.254"), "link-local");
  EXPECT_STREQ(special_ip_class("224.0.0.251"), "link-local multicast");
  EXPECT_STREQ(special_ip_class("::"), "unspecified");
  EXPECT_STREQ(special_ip_class("::1"), "loopback");
  EXPECT_STREQ(special_ip_class("fe80::1"), "link-local");
  EXPECT_STREQ(special_ip_class("ff02::1"), "link-local multicast");
  EXPECT_STREQ(special_ip_class("::ffff:169.254.169.254"), "link-local");
  // What the API server accepts for endpoints is accepted (docs/kubernetes.md).
  for (const char* ok : {"10.0.0.1", "128.0.0.1", "169.255.0.1", "224.0.1.1", "239.1.2.3",
                         "255.255.255.255", "2001:db8::1", "fec0::1", "ff05::1", "nonsense"})
    EXPECT_EQ(special_ip_class(ok), nullptr) << ok;
}

TEST(K8sValidate, EndpointAddressesOfRefusedClasses) {
  for (const char* a : {"0.0.0.0", "127.0.0.1", "169.254.169.254", "224.0.0.1"}) {
    const ParsedObjects p = parse_yaml(slice("e", std::string("endpoints: [{addresses: [10.0.0.1]}, "
                                                               "{addresses: [") + a + "]}]\n"));
    ASSERT_EQ(p.errors.size(), 1u) << a;
    EXPECT_TRUE(p.slices.empty());
    const std::string cls = special_ip_class(a);
    EXPECT_EQ(p.errors[0].reason, std::string("endpoints[1].addresses[0]: '") + a + "' is " +
                                      (cls[0] == 'u' ? "an " : "a ") + cls +
                                      " address, which Kubernetes refuses");
  }
  const ParsedObjects v6 = parse_yaml(
      "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: e}\naddressType: IPv6\n"
      "endpoints: [{addresses: ['fe80::1']}]\n");
  ASSERT_EQ(v6.errors.size(), 1u);
  EXPECT_THAT(v6.errors[0].reason, HasSubstr("'fe80::1' is a link-local address"));
  // Multicast beyond the link-local block and broadcast: accepted as the API server does.
  EXPECT_TRUE(parse_yaml(slice("e", "endpoints: [{addresses: [239.1.1.1, 255.255.255.255]}]\n")).errors.empty());
}

TEST(K8sValidate, ServiceAddressesOfRefusedClasses) {
  auto svc = [](const std::string& spec_extra, const std::string& status = "") {
    return "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec:\n  type: LoadBalancer\n"
           "  ports: [{port: 80}]\n" + spec_extra + status;
  };
  EXPECT_EQ(only_error(svc("  clusterIP: 127.0.0.1\n")),
            "Service default/s | spec.clusterIP: '127.0.0.1' is a loopback address, which Kubernetes refuses");
  EXPECT_EQ(only_error(svc("  clusterIP: 10.96.0.1\n  clusterIPs: [10.96.0.1, '::1']\n")),
            "Service default/s | spec.clusterIPs[1]: '::1' is a loopback address, which Kubernetes refuses");
  EXPECT_EQ(only_error(svc("  clusterIP: 10.96.0.1\n  externalIPs: [1.2.3.4, 169.254.169.254]\n")),
            "Service default/s | spec.externalIPs[1]: '169.254.169.254' is a link-local address, "
            "which Kubernetes refuses");
  EXPECT_EQ(only_error(svc("  clusterIP: 10.96.0.1\n  externalIPs: [\"1.2.3.4\\n\"]\n")),
            "Service default/s | spec.externalIPs[0]: '1.2.3.4\\x0a' is not an IP address");
  EXPECT_EQ(only_error(svc("  clusterIP: 10.96.0.1\n",
                           "status: {loadBalancer: {ingress: [{ip: 0.0.0.0}]}}\n")),
            "Service default/s | status.loadBalancer.ingress[0].ip: '0.0.0.0' is an unspecified "
            "address, which Kubernetes refuses");
  EXPECT_TRUE(parse_yaml(svc("  clusterIP: 10.96.0.1\n  externalIPs: [239.1.1.1]\n",
                             "status: {loadBalancer: {ingress: [{ip: 203.0.113.1}, {hostname: lb.x}]}}\n"))
                  .errors.empty());
}

TEST(K8sValidate, QuotedNumbersAreStrings) {
  auto svc_port = [](const std::string& port_map) {
    return "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {clusterIP: 10.96.0.1, ports: [" +
           port_map + "]}\n";
  };
  EXPECT_EQ(only_error(svc_port(R"({port: "80"})")),
            "Service default/s | spec.ports[0].port: expected an integer, got the string '80'");
  EXPECT_THAT(only_error(svc_port("{port: '80'}")), HasSubstr("got the string '80'"));
  EXPECT_THAT(only_error(svc_port("{port: !!str 80}")), HasSubstr("got the string '80'"));
  EXPECT_THAT(only_error(svc_port(R"({port: 80, nodePort: "30080"})")),
              HasSubstr("spec.ports[0].nodePort: expected an integer, got the string '30080'"));
  EXPECT_THAT(only_error(svc_port("{port: 80.0}")), HasSubstr("expected an integer, got '80.0'"));
  EXPECT_THAT(only_error(svc_port("{port: 1_000}")), HasSubstr("expected an integer"));
  // Unquoted YAML integers as Kubernetes' YAML decoder (YAML 1.1) reads them.
  for (const char* plain : {"80", "+80", "0x50", "0120"}) {
    const ParsedObjects p = parse_yaml(svc_port(std::string("{port: ") + plain + "}"));
    ASSERT_TRUE(p.errors.empty()) << plain << ": " << p.errors[0].reason;
    EXPECT_EQ(p.services[0].ports[0].port, 80) << plain;
  }
  EXPECT_THAT(only_error(slice("e", "ports: [{name: http, port: \"8080\"}]\n")),
              HasSubstr("ports[0].port: expected an integer, got the string '8080'"));
  EXPECT_THAT(only_error(slice("e", "endpoints: [{addresses: [10.0.0.1], conditions: {ready: \"true\"}}]\n")),
              HasSubstr("endpoints[0].conditions.ready: expected true or false, got the string 'true'"));
  EXPECT_THAT(only_error("apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {clusterIP: 10.96.0.1, "
                         "sessionAffinity: ClientIP, sessionAffinityConfig: {clientIP: {timeoutSeconds: '60'}}}\n"),
              HasSubstr("timeoutSeconds: expected an integer, got the string '60'"));
}

TEST(K8sValidate, DuplicateKeysRefused) {
  EXPECT_EQ(only_error("apiVersion: v1\nkind: Service\nmetadata: {name: s}\n"
                       "spec: {clusterIP: 10.96.0.1, ports: [{port: 80, port: 81}]}\n"),
            "Service default/s | spec.ports[0].port: duplicate key");
  EXPECT_EQ(only_error("apiVersion: v1\nkind: Service\nmetadata: {name: s}\n"
                       "spec: {clusterIP: 10.96.0.1, clusterIP: 127.0.0.1}\n"),
            "Service default/s | spec.clusterIP: duplicate key");
  EXPECT_THAT(only_error("apiVersion: v1\nkind: Service\nmetadata: {name: s, name: t}\nspec: {}\n"),
              HasSubstr("metadata.name: duplicate key"));
  EXPECT_THAT(only_error(slice("e", "addressType: IPv6\n")), HasSubstr("addressType: duplicate key"));
  EXPECT_THAT(only_error("apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
                         "metadata: {name: e, labels: {a: x, a: y}}\naddressType: IPv4\n"),
              HasSubstr("metadata.labels: duplicate key 'a'"));
  EXPECT_THAT(only_error("apiVersion: v1\nkind: Service\nmetadata: {name: s, annotations: {k: x, k: y}}\n"
                         "spec: {clusterIP: 10.96.0.1}\n"),
              HasSubstr("metadata.annotations: duplicate key 'k'"));
}

}  // namespace
}  // namespace vipd::cp::k8s
