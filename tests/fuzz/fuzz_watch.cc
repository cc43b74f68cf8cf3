// libFuzzer target: the Kubernetes watch stream decoder
// (controlplane/kube/watch_decoder.h) on arbitrary bytes, arbitrarily chunked.
//
// Input: [chunking seed:1][stream bytes]. The stream is fed twice: in one
// piece, and in chunks whose sizes come from the seed byte (1..64 bytes,
// xorshift). Invariants:
//  - no crash, no exception escapes (the decoder reports errors as values);
//  - chunking does not change the result: the same events (type,
//    resourceVersion, object key) in the same order, and the same verdict
//    (both feeds succeed, or both fail at the same event);
//  - each decoded object also goes through what the reflector does with it:
//    decode_service / decode_endpoint_slice, the object rules read straight
//    from the JSON (or parse_status for ERROR events), which must not throw
//    either; the rules read from the object's yaml-cpp conversion (to_yaml(),
//    as manifests are read) decide the same: the same object, or the same
//    reason.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "controlplane/kube/kube_source.h"
#include "controlplane/kube/watch_decoder.h"
#include "controlplane/sources/k8s_objects.h"

namespace {

using namespace vipd::cp;

struct Ev {
  int type;
  std::string rv, key;
  bool operator==(const Ev&) const = default;
};

struct Run {
  std::vector<Ev> events;
  bool ok = true;
};

void exercise(const kube::WatchEvent& ev) {
  if (ev.type == kube::EventType::kError) {
    (void)kube::parse_status(ev.object);
    return;
  }
  // The reflector's decoding, and the rules on yaml-cpp nodes: the same verdict.
  YAML::Node full = kube::to_yaml(ev.object);
  std::string_view kind;
  if (ev.object["kind"].get(kind) != simdjson::SUCCESS) kind = "";
  std::string why;
  k8s::ObjectError err;
  bool ok_json, ok_yaml, same = true;
  // List items carry no apiVersion: the reflector assumes the resource's.
  auto both = [&](auto from_json, auto from_yaml, const char* api_version) {
    if (!full["apiVersion"]) full["apiVersion"] = api_version;
    const auto a = from_json(ev.object, &why);
    const auto b = from_yaml(full, &err);
    ok_json = a.has_value();
    ok_yaml = b.has_value();
    if (a && b) same = *a == *b;
  };
  if (kind == "EndpointSlice") both(kube::decode_endpoint_slice, k8s::parse_endpoint_slice, "discovery.k8s.io/v1");
  else both(kube::decode_service, k8s::parse_service, "v1");
  if (ok_json != ok_yaml || !same || (!ok_json && why != err.reason)) {
    fprintf(stderr, "fuzz_watch: the JSON and YAML readers disagree: JSON %s (%s), YAML %s (%s)%s\n",
            ok_json ? "accepted" : "rejected", why.c_str(), ok_yaml ? "accepted" : "rejected",
            err.reason.c_str(), same ? "" : ", different objects");
    abort();
  }
}

Run run(const uint8_t* d, size_t n, uint32_t seed, bool chunked) {
  Run r;
  kube::WatchDecoder dec([&](const kube::WatchEvent& ev) {
    r.events.push_back({static_cast<int>(ev.type), ev.resource_version, kube::key_of(ev.object)});
    exercise(ev);
    return true;
  });
  const char* p = reinterpret_cast<const char*>(d);
  if (!chunked) {
    r.ok = dec.feed(p, n);
    return r;
  }
  uint32_t x = seed | 1;
  size_t pos = 0;
  while (pos < n) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    const size_t len = std::min<size_t>(n - pos, 1 + x % 64);
    if (!dec.feed(p + pos, len)) {
      r.ok = false;
      break;
    }
    pos += len;
  }
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const Run whole = run(data + 1, size - 1, 0, false);
  const Run parts = run(data + 1, size - 1, data[0] * 2654435761u, true);
  if (whole.ok != parts.ok || whole.events != parts.events) {
    fprintf(stderr, "fuzz_watch: chunking changed the result: whole ok=%d events=%zu, chunked ok=%d events=%zu\n",
            whole.ok, whole.events.size(), parts.ok, parts.events.size());
    abort();
  }
  return 0;
}
