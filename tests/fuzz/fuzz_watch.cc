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
//    to_yaml_for_rules() and the Service / EndpointSlice rules of k8s_objects
//    (or parse_status for ERROR events), which must not throw either; the
//    rules accept or reject it the same way from the full to_yaml().
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

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
  // The reflector's lean conversion, and the full one: the object rules must
  // accept or reject an object the same way from either.
  const YAML::Node lean = kube::to_yaml_for_rules(ev.object);
  const YAML::Node full = kube::to_yaml(ev.object);
  std::string_view kind;
  if (ev.object["kind"].get(kind) != simdjson::SUCCESS) kind = "";
  k8s::ObjectError e1, e2;
  bool ok_lean, ok_full;
  if (kind == "EndpointSlice") {
    ok_lean = k8s::parse_endpoint_slice(lean, &e1).has_value();
    ok_full = k8s::parse_endpoint_slice(full, &e2).has_value();
  } else {
    ok_lean = k8s::parse_service(lean, &e1).has_value();
    ok_full = k8s::parse_service(full, &e2).has_value();
  }
  if (ok_lean != ok_full) {
    fprintf(stderr, "fuzz_watch: to_yaml_for_rules and to_yaml disagree: lean %s (%s), full %s (%s)\n",
            ok_lean ? "accepted" : "rejected", e1.reason.c_str(), ok_full ? "accepted" : "rejected", e2.reason.c_str());
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
