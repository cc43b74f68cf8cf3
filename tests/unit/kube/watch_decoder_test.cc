// Thread: test main thread. controlplane/kube/watch_decoder: framing of chunked
// watch streams, event decoding, Status parsing, the simdjson -> YAML bridge.
#include "controlplane/kube/watch_decoder.h"

#include "controlplane/kube/kube_source.h"
#include "controlplane/sources/k8s_objects.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace vipd::cp::kube {
namespace {

// A captured-style watch stream (as kube-apiserver writes it: one event per line).
const char* kStream =
    R"J({"type":"ADDED","object":{"kind":"EndpointSlice","apiVersion":"discovery.k8s.io/v1","metadata":{"name":"db-abc","namespace":"default","resourceVersion":"1001","labels":{"kubernetes.io/service-name":"db"}},"addressType":"IPv4","endpoints":[{"addresses":["10.244.1.15"],"conditions":{"ready":true,"serving":true,"terminating":false},"nodeName":"node-a"}],"ports":[{"name":"http","protocol":"TCP","port":8080}]}})J"
    "\n"
    R"J({"type":"MODIFIED","object":{"kind":"EndpointSlice","apiVersion":"discovery.k8s.io/v1","metadata":{"name":"db-abc","namespace":"default","resourceVersion":"1002","annotations":{"note":"braces } { and \"quotes\" in strings"}},"addressType":"IPv4","endpoints":[],"ports":[]}})J"
    "\n"
    R"J({"type":"BOOKMARK","object":{"kind":"EndpointSlice","apiVersion":"discovery.k8s.io/v1","metadata":{"resourceVersion":"1010"}}})J"
    "\n"
    R"J({"type":"DELETED","object":{"kind":"EndpointSlice","apiVersion":"discovery.k8s.io/v1","metadata":{"name":"db-abc","namespace":"default","resourceVersion":"1011"}}})J"
    "\n"
    R"J({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (1011)","reason":"Expired","code":410}})J"
    "\n";

struct Seen {
  std::string type, rv, key;
};

std::vector<Seen> decode_in_chunks(const std::string& s, size_t chunk, std::string* error) {
  std::vector<Seen> out;
  WatchDecoder d([&](const WatchEvent& e) {
    out.push_back({event_type_name(e.type), e.resource_version, key_of(e.object)});
    return true;
  });
  for (size_t i = 0; i < s.size(); i += chunk) {
    if (!d.feed(s.data() + i, std::min(chunk, s.size() - i))) {
      *error = d.error();
      break;
    }
  }
  return out;
}

TEST(WatchDecoder, CapturedStreamAnyChunking) {
  for (size_t chunk : {1u, 2u, 7u, 64u, 1000u, 100000u}) {
    std::string err;
    const auto ev = decode_in_chunks(kStream, chunk, &err);
    ASSERT_EQ(err, "") << "chunk " << chunk;
    ASSERT_EQ(ev.size(), 5u) << "chunk " << chunk;
    EXPECT_EQ(ev[0].type, "ADDED");
    EXPECT_EQ(ev[0].rv, "1001");
    EXPECT_EQ(ev[0].key, "default/db-abc");
    EXPECT_EQ(ev[1].type, "MODIFIED");
    EXPECT_EQ(ev[1].rv, "1002");
    EXPECT_EQ(ev[2].type, "BOOKMARK");
    EXPECT_EQ(ev[2].rv, "1010");
    EXPECT_EQ(ev[2].key, "");
    EXPECT_EQ(ev[3].type, "DELETED");
    EXPECT_EQ(ev[4].type, "ERROR");
  }
}

TEST(WatchDecoder, ObjectsWithoutNewlinesAndWhitespace) {
  const std::string s =
      R"J(  {"type":"ADDED","object":{"metadata":{"name":"a"}}}{"type":"DELETED","object":{"metadata":{"name":"b","namespace":"x"}}} )J";
  std::string err;
  const auto ev = decode_in_chunks(s, 3, &err);
  EXPECT_EQ(err, "");
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].key, "default/a");
  EXPECT_EQ(ev[1].key, "x/b");
}

TEST(WatchDecoder, GarbageIsAnErrorNotACrash) {
  std::string err;
  decode_in_chunks("{\"type\":\"ADDED\",\"object\":{\"kind\":\"Service\", garbage ]]]\n", 5, &err);
  EXPECT_NE(err, "");
  err.clear();
  decode_in_chunks("<html>502 Bad Gateway</html>", 4, &err);
  EXPECT_NE(err.find("unexpected byte"), std::string::npos) << err;
  err.clear();
  decode_in_chunks(R"J({"type":"ADDED"})J", 4, &err);
  EXPECT_EQ(err, "watch event without type or object");
  err.clear();
  decode_in_chunks(R"J({"type":"WHAT","object":{}})J", 4, &err);
  EXPECT_NE(err.find("unknown watch event type"), std::string::npos);
}

TEST(WatchDecoder, IncompleteObjectWaitsForMore) {
  std::vector<std::string> types;
  WatchDecoder d([&](const WatchEvent& e) {
    types.push_back(event_type_name(e.type));
    return true;
  });
  const std::string a = R"J({"type":"ADDED","object":{"metadata":{"name":"s\"}{"}}})J";
  ASSERT_TRUE(d.feed(a.data(), a.size() - 1));
  EXPECT_TRUE(types.empty());
  ASSERT_TRUE(d.feed(a.data() + a.size() - 1, 1));
  EXPECT_EQ(types.size(), 1u);
}

TEST(WatchDecoder, ErrorStatus) {
  auto st = parse_status_body(
      R"J({"kind":"Status","status":"Failure","message":"too old resource version: 5 (9)","reason":"Expired","code":410})J");
  ASSERT_TRUE(st);
  EXPECT_EQ(st->code, 410);
  EXPECT_EQ(st->reason, "Expired");
  EXPECT_FALSE(parse_status_body("not json"));
}

TEST(WatchDecoder, ToYaml) {
  simdjson::dom::parser p;
  simdjson::dom::element e;
  ASSERT_EQ(p.parse(std::string(R"J({"a":1,"b":true,"c":null,"d":[1.5,"x"],"e":{"f":"g"},"h":-3})J")).get(e),
            simdjson::SUCCESS);
  YAML::Node n = to_yaml(e);
  EXPECT_EQ(n["a"].as<int>(), 1);
  EXPECT_TRUE(n["b"].as<bool>());
  EXPECT_TRUE(n["c"].IsNull());
  EXPECT_DOUBLE_EQ(n["d"][0].as<double>(), 1.5);
  EXPECT_EQ(n["d"][1].as<std::string>(), "x");
  EXPECT_EQ(n["e"]["f"].as<std::string>(), "g");
  EXPECT_EQ(n["h"].as<int>(), -3);
}

// What the object rules never read (managedFields, other annotations,
// targetRef...) changes nothing in the decoded object, and nothing they read is lost.
TEST(WatchDecoder, DecodeReadsWhatTheRulesRead) {
  const std::string full = R"J({"kind":"EndpointSlice","apiVersion":"discovery.k8s.io/v1",
    "metadata":{"name":"db-abc","namespace":"prod","uid":"1234","resourceVersion":"77",
      "labels":{"kubernetes.io/service-name":"db"},
      "annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{huge}","vipd.io/scheduler":"mh"},
      "managedFields":[{"manager":"kube-controller-manager","fieldsV1":{"f:endpoints":{}}}],
      "ownerReferences":[{"kind":"Service","name":"db"}]},
    "addressType":"IPv4",
    "endpoints":[{"addresses":["10.244.1.15"],"conditions":{"ready":false,"serving":true,"terminating":true},
      "nodeName":"node-a","zone":"z1","hints":{"forZones":[{"name":"z1"}]},
      "targetRef":{"kind":"Pod","name":"db-0"},"deprecatedTopology":{"x":"y"}}],
    "ports":[{"name":"http","protocol":"TCP","port":8080}]})J";
  const std::string lean = R"J({"kind":"EndpointSlice","apiVersion":"discovery.k8s.io/v1",
    "metadata":{"name":"db-abc","namespace":"prod","labels":{"kubernetes.io/service-name":"db"},
      "annotations":{"vipd.io/scheduler":"mh"}},
    "addressType":"IPv4",
    "endpoints":[{"addresses":["10.244.1.15"],"conditions":{"ready":false,"serving":true,"terminating":true},
      "nodeName":"node-a","zone":"z1","hints":{"forZones":[{"name":"z1"}]}}],
    "ports":[{"name":"http","protocol":"TCP","port":8080}]})J";
  simdjson::dom::parser p1, p2;
  simdjson::dom::element a, b;
  ASSERT_EQ(p1.parse(full).get(a), simdjson::SUCCESS);
  ASSERT_EQ(p2.parse(lean).get(b), simdjson::SUCCESS);
  // The object the rules make of it is the one they make of the lean form.
  std::string why1, why2;
  const auto s1 = decode_endpoint_slice(a, &why1);
  const auto s2 = decode_endpoint_slice(b, &why2);
  ASSERT_TRUE(s1) << why1;
  ASSERT_TRUE(s2) << why2;
  EXPECT_TRUE(*s1 == *s2);
  EXPECT_EQ(s1->meta.namespace_, "prod");
  ASSERT_EQ(s1->endpoints.size(), 1u);
  EXPECT_EQ(s1->endpoints[0].zone_hints, std::vector<std::string>{"z1"});
  EXPECT_EQ(s1->endpoints[0].conditions.terminating, true);
  // Only vipd's own annotations are kept.
  EXPECT_EQ(s1->meta.annotations, (std::map<std::string, std::string>{{"vipd.io/scheduler", "mh"}}));
  // Wrong types the rules must still see are still there.
  ASSERT_EQ(p1.parse(std::string(R"J({"kind":"EndpointSlice","apiVersion":"discovery.k8s.io/v1","metadata":"oops","addressType":"IPv4"})J")).get(a),
            simdjson::SUCCESS);
  EXPECT_FALSE(decode_endpoint_slice(a, &why1));
  EXPECT_NE(why1.find("metadata"), std::string::npos) << why1;
}

// ---- The API path applies the same validation as manifests (k8s_objects).

// The verdict of the rules on a JSON object as the reflector decodes it,
// checked against the rules on its full yaml-cpp conversion: "" when
// accepted, else the reason.
std::string verdict(const std::string& json) {
  simdjson::dom::parser p;
  simdjson::dom::element e;
  if (p.parse(json).get(e) != simdjson::SUCCESS) return "invalid JSON";
  std::string_view kind;
  if (e["kind"].get(kind) != simdjson::SUCCESS) kind = "";
  std::string why;
  bool ok = kind == "EndpointSlice" ? decode_endpoint_slice(e, &why).has_value()
                                    : decode_service(e, &why).has_value();
  // The full conversion decides the same.
  YAML::Node full = to_yaml(e);
  k8s::ObjectError err;
  const bool ok_full = kind == "EndpointSlice" ? k8s::parse_endpoint_slice(full, &err).has_value()
                                               : k8s::parse_service(full, &err).has_value();
  EXPECT_EQ(ok, ok_full) << json << ": JSON '" << why << "', YAML '" << err.reason << "'";
  if (!ok) {
    EXPECT_EQ(why, err.reason) << json;
  }
  return ok ? "" : why;
}

std::string service_json(const std::string& name, const std::string& port, const std::string& extra = "") {
  return R"J({"kind":"Service","apiVersion":"v1","metadata":{"name":)J" + name +
         R"J(,"namespace":"default"},"spec":{"clusterIP":"10.96.0.1","ports":[{"name":"http","port":)J" +
         port + "}]" + extra + "}}";
}

std::string slice_json(const std::string& addr, const std::string& metadata_extra = "") {
  return R"J({"kind":"EndpointSlice","apiVersion":"discovery.k8s.io/v1","metadata":{"name":"db-1")J" +
         metadata_extra +
         R"J(,"labels":{"kubernetes.io/service-name":"db"}},"addressType":"IPv4","endpoints":[{"addresses":[")J" +
         addr + R"J("]}],"ports":[{"name":"http","port":8080}]})J";
}

TEST(WatchDecoderRules, PortsMustBeJsonNumbers) {
  EXPECT_EQ(verdict(service_json(R"("web")", "80")), "");
  EXPECT_EQ(verdict(service_json(R"("web")", R"("80")")),
            "spec.ports[0].port: expected an integer, got the string '80'");
  EXPECT_EQ(verdict(service_json(R"("web")", "80.0")), "spec.ports[0].port: expected an integer, got '80.0'");
  EXPECT_EQ(verdict(service_json(R"("web")", "8e1")), "spec.ports[0].port: expected an integer, got '80.0'");
  EXPECT_EQ(verdict(service_json(R"("web")", R"("0x50")")),
            "spec.ports[0].port: expected an integer, got the string '0x50'");
  EXPECT_EQ(verdict(service_json(R"("web")", "80", R"J(,"sessionAffinity":"ClientIP","sessionAffinityConfig":{"clientIP":{"timeoutSeconds":"60"}})J")),
            "spec.sessionAffinityConfig.clientIP.timeoutSeconds: expected an integer, got the string '60'");
  // to_yaml keeps the difference between a string and a number.
  simdjson::dom::parser p;
  simdjson::dom::element e;
  ASSERT_EQ(p.parse(std::string(R"J({"s":"80","n":80,"d":2.0})J")).get(e), simdjson::SUCCESS);
  const YAML::Node n = to_yaml(e);
  EXPECT_EQ(n["s"].Tag(), "!");
  EXPECT_NE(n["n"].Tag(), "!");
  EXPECT_EQ(n["d"].Scalar(), "2.0");
}

TEST(WatchDecoderRules, DuplicateKeysRefused) {
  EXPECT_EQ(verdict(service_json(R"("web")", R"J(80,"port":81)J")), "spec.ports[0].port: duplicate key");
  EXPECT_EQ(verdict(R"J({"kind":"Service","apiVersion":"v1","metadata":{"name":"web","name":"x"},"spec":{}})J"),
            "metadata.name: duplicate key");
  EXPECT_EQ(verdict(slice_json("10.0.0.1", R"J(,"labels":{"a":"b"})J")), "metadata.labels: duplicate key");
  // Annotations the decoder does not keep (not vipd.io/) are checked all the
  // same: given twice, or not strings, the object is refused.
  EXPECT_EQ(verdict(slice_json("10.0.0.1", R"J(,"annotations":{"x/y":"1","x/y":"2"})J")),
            "metadata.annotations: duplicate key 'x/y'");
  EXPECT_EQ(verdict(slice_json("10.0.0.1", R"J(,"annotations":{"x/y":{"deep":1}})J")),
            "metadata.annotations: expected string keys and values");
  EXPECT_EQ(verdict(slice_json("10.0.0.1", R"J(,"annotations":{"x/y":"1","n":2,"vipd.io/z":null})J")), "");
}

TEST(WatchDecoderRules, HostileNamesRefusedAndEscaped) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"("a\"b")", "a\\\"b"},   {R"("a\nb")", "a\\x0ab"},     {R"("a\u0000b")", "a\\x00b"},
      {R"("a\u001b[2J")", "a\\x1b[2J"}, {R"("caf\u00e9")", "caf\\xc3\\xa9"}, {R"("Web")", "Web"},
      {"\"" + std::string(64, 'w') + "\"", std::string(64, 'w')},
  };
  for (const auto& [json, shown] : cases) {
    const std::string why = verdict(service_json(json, "80"));
    EXPECT_EQ(why.rfind("metadata.name: '" + shown + "' must be", 0), 0u) << why;
    // The key the reflector logs the object under is escaped too.
    simdjson::dom::parser p;
    simdjson::dom::element e;
    ASSERT_EQ(p.parse(service_json(json, "80")).get(e), simdjson::SUCCESS);
    EXPECT_EQ(key_of(e), "default/" + shown);
  }
  // simdjson refuses invalid UTF-8 outright: the stream is invalid JSON.
  EXPECT_EQ(verdict(service_json("\"a\xff\"", "80")), "invalid JSON");
}

TEST(WatchDecoderRules, RefusedAddressClasses) {
  EXPECT_EQ(verdict(slice_json("10.244.0.5")), "");
  for (const char* a : {"0.0.0.0", "127.0.0.1", "169.254.169.254", "224.0.0.251"}) {
    const std::string why = verdict(slice_json(a));
    EXPECT_EQ(why.rfind(std::string("endpoints[0].addresses[0]: '") + a + "' is a", 0), 0u) << why;
    EXPECT_NE(why.find("which Kubernetes refuses"), std::string::npos) << why;
  }
  EXPECT_EQ(verdict(service_json(R"("web")", "80", R"J(,"externalIPs":["169.254.169.254"])J")),
            "spec.externalIPs[0]: '169.254.169.254' is a link-local address, which Kubernetes refuses");
}

}  // namespace
}  // namespace vipd::cp::kube
