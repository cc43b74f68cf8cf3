// Thread: test main thread. The two readers of the object rules
// (controlplane/sources/k8s_rules.h) decide alike: each object of the table,
// valid or not, is decoded through the Kubernetes API path (simdjson ->
// JsonNode -> typed struct, as the reflector decodes a list item or a watch
// object) and through the manifests path (the same text as YAML ->
// parse_document), and both must give the same typed object or the same error.
// The fuzz_watch corpus goes through both readers too.
#include <gtest/gtest.h>
#include <simdjson.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "controlplane/kube/kube_source.h"
#include "controlplane/kube/watch_decoder.h"
#include "controlplane/sources/k8s_objects.h"

namespace vipd::cp {
namespace {

struct Decoded {
  std::optional<k8s::Service> service;
  std::optional<k8s::EndpointSlice> slice;
  std::string error;  // "" when valid
};

// The API path: what Reflector::list and the watch do with one object.
Decoded from_json(const std::string& json) {
  simdjson::dom::parser p;
  simdjson::dom::element e;
  Decoded d;
  if (p.parse(json).get(e) != simdjson::SUCCESS) {
    d.error = "invalid JSON";
    return d;
  }
  std::string_view kind;
  if (e["kind"].get(kind) != simdjson::SUCCESS) kind = "";
  if (kind == "EndpointSlice") d.slice = kube::decode_endpoint_slice(e, &d.error);
  else d.service = kube::decode_service(e, &d.error);
  return d;
}

// The manifests path: the same text as a YAML document (JSON is YAML's flow style).
Decoded from_yaml(const std::string& text) {
  Decoded d;
  k8s::ParsedObjects p;
  const auto docs = YAML::LoadAll(text);
  for (size_t i = 0; i < docs.size(); ++i) k8s::parse_document(docs[i], static_cast<int>(i + 1), &p);
  if (!p.errors.empty()) d.error = p.errors[0].reason;
  if (!p.services.empty()) d.service = p.services[0];
  if (!p.slices.empty()) d.slice = p.slices[0];
  return d;
}

struct Case {
  std::string name;
  std::string json;
  std::string error;  // the expected error, "" for a valid object
};

std::string service(const std::string& metadata, const std::string& spec, const std::string& rest = "") {
  return R"({"apiVersion":"v1","kind":"Service","metadata":)" + metadata + R"(,"spec":)" + spec + rest + "}";
}
std::string svc(const std::string& spec) { return service(R"({"name":"web","namespace":"prod"})", spec); }
std::string svc_meta(const std::string& metadata) {
  return service(metadata, R"({"clusterIP":"10.96.0.1","ports":[{"port":80}]})");
}
std::string port(const std::string& fields) { return svc(R"({"clusterIP":"10.96.0.1","ports":[{)" + fields + "}]}"); }

std::string slice(const std::string& endpoints, const std::string& ports = R"([{"name":"http","port":8080}])",
                  const std::string& name = "db-1", const std::string& type = R"("IPv4")") {
  return R"({"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":")" + name +
         R"(","labels":{"kubernetes.io/service-name":"db"}},"addressType":)" + type + R"(,"endpoints":)" +
         endpoints + R"(,"ports":)" + ports + "}";
}
std::string endpoint(const std::string& fields) { return slice(R"([{"addresses":["10.244.0.5"])" + fields + "}]"); }

std::vector<Case> cases() {
  std::vector<Case> c = {
      // ---- valid Services
      {"service, all fields",
       service(R"({"name":"web","namespace":"prod","labels":{"app":"web"},
                   "annotations":{"vipd.io/scheduler":"mh","kubectl.kubernetes.io/last-applied-configuration":"{}"}})",
               R"({"type":"LoadBalancer","clusterIP":"10.96.0.1","clusterIPs":["10.96.0.1"],
                   "ports":[{"name":"http","protocol":"TCP","port":80,"nodePort":30080},
                            {"name":"dns","protocol":"UDP","port":53}],
                   "sessionAffinity":"ClientIP","sessionAffinityConfig":{"clientIP":{"timeoutSeconds":600}},
                   "internalTrafficPolicy":"Local","externalTrafficPolicy":"Cluster",
                   "externalIPs":["203.0.113.7"],"loadBalancerSourceRanges":["198.51.100.0/24"]})",
               R"(,"status":{"loadBalancer":{"ingress":[{"ip":"192.0.2.1","ipMode":"VIP"},{"hostname":"lb.example"}]}})"),
       ""},
      {"service, minimal", service(R"({"name":"web"})", "{}"), ""},
      {"service, headless", svc(R"({"clusterIP":"None","ports":[{"port":80}]})"), ""},
      {"service, nulls are absent", svc(R"({"type":null,"clusterIP":null,"ports":[{"name":null,"port":80}]})"), ""},
      {"service, other annotations dropped, null value",
       svc_meta(R"({"name":"web","annotations":{"a/b":"1","n":2,"t":true,"vipd.io/x":null}})"), ""},
      // ---- wrong types
      {"port as a string", port(R"("port":"80")"), "spec.ports[0].port: expected an integer, got the string '80'"},
      {"port as a fraction", port(R"("port":80.5)"), "spec.ports[0].port: expected an integer, got '80.5'"},
      {"port as 80.0", port(R"("port":80.0)"), "spec.ports[0].port: expected an integer, got '80.0'"},
      {"port as a boolean", port(R"("port":true)"), "spec.ports[0].port: expected an integer, got 'true'"},
      {"port as a list", port(R"("port":[80])"), "spec.ports[0].port: expected an integer, got '<sequence>'"},
      {"port as a mapping", port(R"("port":{"n":80})"), "spec.ports[0].port: expected an integer, got '<mapping>'"},
      {"timeout as a string", svc(R"({"sessionAffinityConfig":{"clientIP":{"timeoutSeconds":"60"}}})"),
       "spec.sessionAffinityConfig.clientIP.timeoutSeconds: expected an integer, got the string '60'"},
      {"clusterIP as a number", svc(R"({"clusterIP":10})"), "spec.clusterIP: '10' is not an IP address"},
      {"clusterIP as a list", svc(R"({"clusterIP":["10.96.0.1"]})"), "spec.clusterIP: expected a string"},
      {"type as a boolean", svc(R"({"type":true})"), "spec.type: 'true' is not a Service type"},
      {"spec as a list", svc("[]"), "spec: expected a mapping"},
      {"spec as a string", svc(R"("x")"), "spec: expected a mapping"},
      {"metadata as a string", service(R"("web")", "{}"), "metadata: expected a mapping"},
      {"ports as a mapping", svc(R"({"ports":{"port":80}})"), "spec.ports: expected a list"},
      {"port entry as a number", svc(R"({"ports":[80]})"), "spec.ports[0]: expected a mapping"},
      {"clusterIPs entry as a mapping", svc(R"({"clusterIPs":[{}]})"), "spec.clusterIPs[0]: expected a string"},
      {"externalIPs entry as a list", svc(R"({"externalIPs":[[1]]})"), "spec.externalIPs[0]: expected a string"},
      // ---- dual-stack fields (the same rules as manifests)
      {"dual-stack service", svc(R"({"clusterIP":"10.96.0.1","clusterIPs":["10.96.0.1","fd00::1"],)"
                                 R"("ipFamilies":["IPv4","IPv6"],"ipFamilyPolicy":"RequireDualStack"})"), ""},
      {"ipFamilies as a string", svc(R"({"ipFamilies":"IPv4"})"), "spec.ipFamilies: expected a list"},
      {"ipFamilies entry unknown", svc(R"({"ipFamilies":["IPv6","ipv4"]})"),
       "spec.ipFamilies[1]: 'ipv4' is not IPv4 or IPv6"},
      {"ipFamilyPolicy as a number", svc(R"({"ipFamilyPolicy":2})"),
       "spec.ipFamilyPolicy: '2' is not SingleStack, PreferDualStack or RequireDualStack"},
      {"clusterIPs family against ipFamilies", svc(R"({"clusterIPs":["fd00::1"],"ipFamilies":["IPv4"]})"),
       "spec.clusterIPs[0]: 'fd00::1' is IPv6, but spec.ipFamilies[0] is IPv4"},
      {"sessionAffinityConfig as a list", svc(R"({"sessionAffinityConfig":[]})"),
       "spec.sessionAffinityConfig: expected a mapping"},
      {"ingress entry as a string", service(R"({"name":"web"})", "{}", R"(,"status":{"loadBalancer":{"ingress":["x"]}})"),
       "status.loadBalancer.ingress[0]: expected a mapping"},
      {"labels as a list", svc_meta(R"({"name":"web","labels":["a"]})"), "metadata.labels: expected a mapping"},
      {"label value as a mapping", svc_meta(R"({"name":"web","labels":{"a":{}}})"),
       "metadata.labels: expected string keys and values"},
      // ---- missing fields
      {"no metadata", R"({"apiVersion":"v1","kind":"Service","spec":{}})", "metadata is missing"},
      {"no name", svc_meta(R"({"namespace":"prod"})"), "metadata.name is missing"},
      {"empty name", svc_meta(R"({"name":""})"), "metadata.name is missing"},
      {"no spec", R"({"apiVersion":"v1","kind":"Service","metadata":{"name":"web"}})", "spec is missing"},
      {"no port number", port(R"("name":"http")"), "spec.ports[0].port is missing"},
      {"wrong apiVersion", R"({"apiVersion":"v2","kind":"Service","metadata":{"name":"web"},"spec":{}})",
       "apiVersion 'v2' is not supported (want v1)"},
      {"null apiVersion", R"({"apiVersion":null,"kind":"Service","metadata":{"name":"web"},"spec":{}})",
       "apiVersion '' is not supported (want v1)"},
      // ---- hostile sizes and names
      {"name of 64 characters", svc_meta(R"({"name":")" + std::string(64, 'w') + R"("})"),
       "metadata.name: '" + std::string(64, 'w') + "' must be at most 63 characters"},
      {"namespace of 64 characters", svc_meta(R"({"name":"web","namespace":")" + std::string(64, 'n') + R"("})"),
       "metadata.namespace: '" + std::string(64, 'n') + "' must be at most 63 characters"},
      {"label value of 64 characters", svc_meta(R"({"name":"web","labels":{"a":")" + std::string(64, 'v') + R"("}})"),
       "metadata.labels.a: '" + std::string(64, 'v') + "' must be at most 63 characters"},
      {"label key with an empty prefix", svc_meta(R"({"name":"web","labels":{"/a":"b"}})"),
       "metadata.labels: '/a' has an empty prefix before '/'"},
      {"name with control characters", svc_meta(R"({"name":"a\u001b[2Jb"})"),
       "metadata.name: 'a\\x1b[2Jb' must be an RFC 1035 label: lower case alphanumeric characters or '-', "
       "starting with a letter and ending with an alphanumeric character"},
      {"name starting with a digit", svc_meta(R"({"name":"1web"})"),
       "metadata.name: '1web' must be an RFC 1035 label: lower case alphanumeric characters or '-', "
       "starting with a letter and ending with an alphanumeric character"},
      {"port name of 64 characters", port(R"("name":")" + std::string(64, 'p') + R"(","port":80)"),
       "spec.ports[0].name: '" + std::string(64, 'p') + "' must be at most 63 characters"},
      // ---- bad ports
      {"port 0", port(R"("port":0)"), "spec.ports[0].port: port 0 is out of range 1..65535"},
      {"port 65536", port(R"("port":65536)"), "spec.ports[0].port: port 65536 is out of range 1..65535"},
      {"port -1", port(R"("port":-1)"), "spec.ports[0].port: port -1 is out of range 1..65535"},
      {"huge port", port(R"("port":9223372036854775807)"),
       "spec.ports[0].port: port 9223372036854775807 is out of range 1..65535"},
      {"nodePort 70000", port(R"("port":80,"nodePort":70000)"), "spec.ports[0].nodePort: port 70000 is out of range 1..65535"},
      {"nodePort 0 means none", port(R"("port":80,"nodePort":0)"), ""},
      {"unknown protocol", port(R"("port":80,"protocol":"ICMP")"), "spec.ports[0].protocol: 'ICMP' is not TCP, UDP or SCTP"},
      {"duplicate port", svc(R"({"ports":[{"name":"a","port":80},{"name":"b","port":80}]})"),
       "spec.ports[1]: duplicate port 80/TCP"},
      {"duplicate port name", svc(R"({"ports":[{"name":"a","port":80},{"name":"a","port":81}]})"),
       "spec.ports[1]: duplicate port name 'a'"},
      {"duplicate key", port(R"("port":80,"port":81)"), "spec.ports[0].port: duplicate key"},
      {"timeout 0", svc(R"({"sessionAffinityConfig":{"clientIP":{"timeoutSeconds":0}}})"),
       "spec.sessionAffinityConfig.clientIP.timeoutSeconds: 0 is out of range 1..86400"},
      {"bad affinity", svc(R"({"sessionAffinity":"Cookie"})"), "spec.sessionAffinity: 'Cookie' is not None or ClientIP"},
      {"bad policy", svc(R"({"externalTrafficPolicy":"Nearest"})"),
       "spec.externalTrafficPolicy: 'Nearest' is not Cluster or Local"},
      {"loopback external IP", svc(R"({"externalIPs":["127.0.0.1"]})"),
       "spec.externalIPs[0]: '127.0.0.1' is a loopback address, which Kubernetes refuses"},
      {"bad ingress IP", service(R"({"name":"web"})", "{}", R"(,"status":{"loadBalancer":{"ingress":[{"ip":"x"}]}})"),
       "status.loadBalancer.ingress[0].ip: 'x' is not an IP address"},
      // ---- scheduler
      {"known scheduler", svc_meta(R"({"name":"web","annotations":{"vipd.io/scheduler":"wrr"}})"), ""},
      {"unknown scheduler", svc_meta(R"({"name":"web","annotations":{"vipd.io/scheduler":"fastest"}})"),
       "annotation vipd.io/scheduler: 'fastest' is not a known scheduler"},
      {"scheduler as a number", svc_meta(R"({"name":"web","annotations":{"vipd.io/scheduler":7}})"),
       "annotation vipd.io/scheduler: '7' is not a known scheduler"},
      // ---- PROXY protocol
      {"proxy protocol v1", svc_meta(R"({"name":"web","annotations":{"vipd.io/proxy-protocol":"v1"}})"), ""},
      {"proxy protocol v2", svc_meta(R"({"name":"web","annotations":{"vipd.io/proxy-protocol":"v2"}})"), ""},
      {"proxy protocol none", svc_meta(R"({"name":"web","annotations":{"vipd.io/proxy-protocol":"none"}})"), ""},
      {"proxy protocol empty", svc_meta(R"({"name":"web","annotations":{"vipd.io/proxy-protocol":""}})"),
       "annotation vipd.io/proxy-protocol: '' is not v1, v2 or none"},
      {"proxy protocol v3", svc_meta(R"({"name":"web","annotations":{"vipd.io/proxy-protocol":"v3"}})"),
       "annotation vipd.io/proxy-protocol: 'v3' is not v1, v2 or none"},
      // ---- bad annotations (kept or not, all are checked)
      {"annotations as a list", svc_meta(R"({"name":"web","annotations":["a"]})"), "metadata.annotations: expected a mapping"},
      {"annotation given twice", svc_meta(R"({"name":"web","annotations":{"x/y":"1","x/y":"2"}})"),
       "metadata.annotations: duplicate key 'x/y'"},
      {"vipd annotation given twice", svc_meta(R"({"name":"web","annotations":{"vipd.io/scheduler":"rr","vipd.io/scheduler":"rr"}})"),
       "metadata.annotations: duplicate key 'vipd.io/scheduler'"},
      {"annotation value a mapping", svc_meta(R"({"name":"web","annotations":{"x/y":{"deep":1}}})"),
       "metadata.annotations: expected string keys and values"},
      {"annotation value a list", svc_meta(R"({"name":"web","annotations":{"vipd.io/scheduler":["rr"]}})"),
       "metadata.annotations: expected string keys and values"},

      // ---- EndpointSlices
      {"slice, all fields",
       slice(R"([{"addresses":["10.244.1.15"],"conditions":{"ready":false,"serving":true,"terminating":true},
                  "nodeName":"node-a","zone":"z1","hints":{"forZones":[{"name":"z1"},{"name":"z2"}]},
                  "targetRef":{"kind":"Pod","name":"db-0"}},
                 {"addresses":["10.244.1.16","10.244.1.17"]}])",
             R"([{"name":"http","protocol":"TCP","port":8080},{"name":"","protocol":"UDP","port":53},{"port":9}])"),
       ""},
      {"slice, no endpoints", slice("[]"), ""},
      {"slice, null endpoints and ports", slice("null", "null"), ""},
      {"slice, IPv6", slice(R"([{"addresses":["2001:db8::1"]}])", "[]", "db-6", R"("IPv6")"), ""},
      {"slice, FQDN", slice(R"([{"addresses":["db.example"]}])", "[]", "db-f", R"("FQDN")"), ""},
      {"no addressType", R"({"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"db-1"}})",
       "addressType is missing"},
      {"bad addressType", slice("[]", "[]", "db-1", R"("IPX")"), "addressType: 'IPX' is not IPv4, IPv6 or FQDN"},
      {"addressType as a number", slice("[]", "[]", "db-1", "4"), "addressType: '4' is not IPv4, IPv6 or FQDN"},
      {"empty addresses", slice(R"([{"addresses":[]}])"), "endpoints[0].addresses is missing or empty"},
      {"no addresses", slice(R"([{"nodeName":"n"}])"), "endpoints[0].addresses is missing or empty"},
      {"address not IPv4", slice(R"([{"addresses":["2001:db8::1"]}])"),
       "endpoints[0].addresses[0]: '2001:db8::1' is not an IPv4 address"},
      {"address a number", slice(R"([{"addresses":[10]}])"), "endpoints[0].addresses[0]: '10' is not an IPv4 address"},
      {"address a mapping", slice(R"([{"addresses":[{}]}])"), "endpoints[0].addresses[0]: expected a string"},
      {"loopback address", slice(R"([{"addresses":["10.0.0.1","127.0.0.1"]}])"),
       "endpoints[0].addresses[1]: '127.0.0.1' is a loopback address, which Kubernetes refuses"},
      {"endpoints as a mapping", slice("{}"), "endpoints: expected a list"},
      {"endpoint as a string", slice(R"(["10.0.0.1"])"), "endpoints[0]: expected a mapping"},
      {"ready as a string", endpoint(R"(,"conditions":{"ready":"true"})"),
       "endpoints[0].conditions.ready: expected true or false, got the string 'true'"},
      {"ready as a number", endpoint(R"(,"conditions":{"ready":1})"),
       "endpoints[0].conditions.ready: expected true or false, got '1'"},
      {"serving as a list", endpoint(R"(,"conditions":{"serving":[]})"),
       "endpoints[0].conditions.serving: expected true or false, got '<sequence>'"},
      {"conditions as a list", endpoint(R"(,"conditions":[])"), "endpoints[0].conditions: expected a mapping"},
      {"bad nodeName", endpoint(R"(,"nodeName":"Node_A")"),
       "endpoints[0].nodeName: 'Node_A' must be a lowercase RFC 1123 subdomain: lower case alphanumeric characters, "
       "'-' or '.', starting and ending with an alphanumeric character"},
      {"zone hint as a string", endpoint(R"(,"hints":{"forZones":["z1"]})"), "endpoints[0].hints.forZones[0]: expected a mapping"},
      {"hints as a list", endpoint(R"(,"hints":[])"), "endpoints[0].hints: expected a mapping"},
      {"slice port 0", slice("[]", R"([{"port":0}])"), "ports[0].port: port 0 is out of range 1..65535"},
      {"slice port as a string", slice("[]", R"([{"port":"8080"}])"),
       "ports[0].port: expected an integer, got the string '8080'"},
      {"slice duplicate port name", slice("[]", R"([{"name":"a","port":1},{"name":"a","port":2}])"),
       "ports[1]: duplicate port name 'a'"},
      {"slice bad protocol", slice("[]", R"([{"protocol":"tcp","port":1}])"), "ports[0].protocol: 'tcp' is not TCP, UDP or SCTP"},
      {"slice name of 254 characters", slice("[]", "[]", std::string(254, 's')),
       "metadata.name: '" + std::string(254, 's') + "' must be at most 253 characters"},
      {"slice duplicate key", R"({"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"a"},
         "addressType":"IPv4","addressType":"IPv6"})",
       "addressType: duplicate key"},
  };
  // Many endpoints and ports, one bad at the end.
  std::string eps = "[";
  for (int i = 0; i < 2000; ++i) eps += std::string(i ? "," : "") + R"({"addresses":["10.1.)" + std::to_string(i / 250) +
                                       "." + std::to_string(i % 250 + 1) + R"("]})";
  c.push_back({"slice, 2000 endpoints", slice(eps + "]"), ""});
  c.push_back({"slice, 2000 endpoints and a bad one", slice(eps + R"(,{"addresses":["10.1.1.300"]}])"),
               "endpoints[2000].addresses[0]: '10.1.1.300' is not an IPv4 address"});
  std::string ports = "[";
  for (int i = 1; i <= 1000; ++i) ports += std::string(i > 1 ? "," : "") + R"({"name":"p)" + std::to_string(i) +
                                           R"(","port":)" + std::to_string(i) + "}";
  c.push_back({"service, 1000 ports", svc(R"({"ports":)" + ports + "]}"), ""});
  c.push_back({"service, 1000 ports and a duplicate", svc(R"({"ports":)" + ports + R"(,{"name":"x","port":7}]})"),
               "spec.ports[1000]: duplicate port 7/TCP"});
  return c;
}

TEST(DecodePaths, JsonAndYamlDecodeAlike) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const Decoded j = from_json(c.json);
    const Decoded y = from_yaml(c.json);
    EXPECT_EQ(j.error, c.error);
    EXPECT_EQ(y.error, c.error);
    EXPECT_EQ(j.service.has_value(), y.service.has_value());
    EXPECT_EQ(j.slice.has_value(), y.slice.has_value());
    if (c.error.empty()) {
      EXPECT_TRUE(j.service || j.slice);
    }
    if (j.service && y.service) {
      EXPECT_TRUE(*j.service == *y.service);
    }
    if (j.slice && y.slice) {
      EXPECT_TRUE(*j.slice == *y.slice);
    }
  }
}

// The typed values themselves, for a few cases (both paths agree above; here
// that what they agree on is right).
TEST(DecodePaths, TypedValues) {
  const auto all = cases();
  const Decoded s = from_json(all[0].json);
  ASSERT_TRUE(s.service) << s.error;
  EXPECT_EQ(s.service->meta.namespace_, "prod");
  EXPECT_EQ(s.service->meta.annotations, (std::map<std::string, std::string>{{"vipd.io/scheduler", "mh"}}));
  EXPECT_EQ(s.service->scheduler, Scheduler::kMh);
  EXPECT_EQ(s.service->type, "LoadBalancer");
  ASSERT_EQ(s.service->ports.size(), 2u);
  EXPECT_EQ(s.service->ports[0].node_port, 30080);
  EXPECT_EQ(s.service->ports[1].protocol, "UDP");
  EXPECT_TRUE(s.service->client_ip_affinity);
  EXPECT_EQ(s.service->affinity_timeout_s, 600u);
  EXPECT_TRUE(s.service->internal_policy_local);
  EXPECT_FALSE(s.service->external_policy_local);
  ASSERT_EQ(s.service->lb_ingress.size(), 2u);
  EXPECT_EQ(s.service->lb_ingress[0].ip_mode, "VIP");
  EXPECT_EQ(s.service->lb_ingress[1].ip, "");

  const Decoded n = from_json(svc_meta(R"({"name":"web","annotations":{"a/b":"1","n":2,"t":true,"vipd.io/x":null}})"));
  ASSERT_TRUE(n.service) << n.error;
  EXPECT_EQ(n.service->meta.annotations, (std::map<std::string, std::string>{{"vipd.io/x", ""}}));

  for (const Case& c : all) {
    if (c.name != "slice, all fields") continue;
    const Decoded d = from_json(c.json);
    ASSERT_TRUE(d.slice) << d.error;
    ASSERT_EQ(d.slice->endpoints.size(), 2u);
    EXPECT_EQ(d.slice->endpoints[0].conditions.ready, false);
    EXPECT_EQ(d.slice->endpoints[0].conditions.terminating, true);
    EXPECT_FALSE(d.slice->endpoints[1].conditions.ready.has_value());
    EXPECT_EQ(d.slice->endpoints[0].zone_hints, (std::vector<std::string>{"z1", "z2"}));
    EXPECT_EQ(d.slice->endpoints[1].addresses.size(), 2u);
    ASSERT_EQ(d.slice->ports.size(), 3u);
    EXPECT_EQ(d.slice->ports[1].name, std::optional<std::string>(""));
    EXPECT_FALSE(d.slice->ports[2].name.has_value());
    EXPECT_EQ(d.slice->service_name(), "db");
  }
}

// The one intended difference: an object without apiVersion is an item of an
// API list (which carries none per item) on the API path, and refused from a
// manifest.
TEST(DecodePaths, ApiListItemsNeedNoApiVersion) {
  const std::string item = R"({"kind":"Service","metadata":{"name":"web"},"spec":{}})";
  const Decoded j = from_json(item);
  EXPECT_TRUE(j.service) << j.error;
  EXPECT_EQ(from_yaml(item).error, "apiVersion '' is not supported (want v1)");
}

// The watch streams of the fuzz_watch corpus (tests/fuzz/corpus/fuzz_watch;
// first byte: the fuzzer's chunking seed): every object decodes from JSON as
// the rules decode its yaml-cpp conversion, as fuzz_watch checks.
TEST(DecodePaths, FuzzWatchCorpusDecodesAlike) {
  int objects = 0;
  for (const auto& f : std::filesystem::directory_iterator("tests/fuzz/corpus/fuzz_watch")) {
    std::ifstream in(f.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string data = ss.str();
    if (data.empty()) continue;
    SCOPED_TRACE(f.path().string());
    kube::WatchDecoder dec([&](const kube::WatchEvent& ev) {
      if (ev.type == kube::EventType::kError) return true;
      YAML::Node full = kube::to_yaml(ev.object);
      std::string_view kind;
      if (ev.object["kind"].get(kind) != simdjson::SUCCESS) kind = "";
      std::string why;
      k8s::ObjectError err;
      auto both = [&](auto from_json, auto from_yaml, const char* api_version) {
        if (!full["apiVersion"]) full["apiVersion"] = api_version;  // as for a list item
        const auto a = from_json(ev.object, &why);
        const auto b = from_yaml(full, &err);
        EXPECT_EQ(a.has_value(), b.has_value());
        if (a && b) {
          EXPECT_TRUE(*a == *b);
        }
      };
      if (kind == "EndpointSlice") both(kube::decode_endpoint_slice, k8s::parse_endpoint_slice, "discovery.k8s.io/v1");
      else both(kube::decode_service, k8s::parse_service, "v1");
      EXPECT_EQ(why, err.reason);
      ++objects;
      return true;
    });
    dec.feed(data.data() + 1, data.size() - 1);
  }
  EXPECT_GT(objects, 3);
}

}  // namespace
}  // namespace vipd::cp
