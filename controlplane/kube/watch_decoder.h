// Thread: owned by one thread (a reflector); not shared.
//
// Decoding of Kubernetes API JSON with simdjson:
// - JsonStreamSplitter cuts a byte stream (a watch body: one JSON object per
//   event, usually newline separated, arriving in arbitrary chunks) into
//   complete top-level JSON objects without parsing them twice: it tracks brace
//   depth and string/escape state incrementally across chunks.
// - WatchDecoder parses each object with simdjson and hands out typed events.
// - to_yaml() bridges a simdjson element to a yaml-cpp node so that the object
//   rules in controlplane/sources/k8s_objects.cc (shared with the manifests
//   source) validate API objects exactly like manifests.
#pragma once

#include <simdjson.h>
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace vipd::cp::kube {

class JsonStreamSplitter {
 public:
  explicit JsonStreamSplitter(size_t max_object_bytes = 64u << 20) : max_(max_object_bytes) {}
  // Appends bytes; calls on_object for every complete top-level object (the
  // view is valid during the call). Returns false (and sets error()) on bytes
  // that cannot start an object, or an object larger than the limit; the
  // splitter must then be reset().
  bool feed(const char* data, size_t n, const std::function<void(std::string_view)>& on_object);
  void reset();
  const std::string& error() const { return error_; }
  size_t buffered() const { return buf_.size(); }

 private:
  std::string buf_;
  size_t scan_ = 0;   // next byte of buf_ to look at
  int depth_ = 0;
  bool in_string_ = false;
  bool escape_ = false;
  size_t max_;
  std::string error_;
};

enum class EventType { kAdded, kModified, kDeleted, kBookmark, kError };
const char* event_type_name(EventType t);

struct WatchEvent {
  EventType type;
  simdjson::dom::element object;  // valid until the next event is decoded
  std::string resource_version;   // object.metadata.resourceVersion ("" if absent)
};

// A Status object (ERROR events, non-2xx bodies): code, reason, message.
struct ApiStatus {
  int64_t code = 0;
  std::string reason;
  std::string message;
};
std::optional<ApiStatus> parse_status(simdjson::dom::element e);
std::optional<ApiStatus> parse_status_body(const std::string& body);

class WatchDecoder {
 public:
  // on_event returns false to stop decoding (the rest of the chunk is dropped).
  using Handler = std::function<bool(const WatchEvent&)>;
  explicit WatchDecoder(Handler h) : handler_(std::move(h)) {}
  // Returns false on a malformed stream (garbage bytes, invalid JSON, an event
  // without type/object, an unknown type): error() says why. The caller relists.
  bool feed(const char* data, size_t n);
  const std::string& error() const { return error_; }
  uint64_t events() const { return events_; }
  bool stopped() const { return stopped_; }

 private:
  bool decode(std::string_view obj);

  Handler handler_;
  JsonStreamSplitter splitter_;
  simdjson::dom::parser parser_;
  std::string error_;
  uint64_t events_ = 0;
  bool stopped_ = false;
};

// metadata.resourceVersion of an object, or "".
std::string resource_version_of(simdjson::dom::element obj);
// "ns/name" of an object ("default" namespace when absent), or "" without a
// name; bytes that are not printable ASCII (and quotes, backslashes) are
// escaped with k8s::printable, so the key is safe in logs and errors.
std::string key_of(simdjson::dom::element obj);

// The element as a yaml-cpp node (strings, numbers, booleans as scalars; null as Null).
// Strings are tagged "!" like quoted YAML scalars, so the object rules never
// take "80" for a number; a non-integral number always shows a '.' or an
// exponent (80.0 stays "80.0"). A key that appears twice in one JSON object is
// kept twice; the object rules refuse a key they read that is given twice.
YAML::Node to_yaml(simdjson::dom::element e);

// A Service or EndpointSlice object as a yaml-cpp node for the object rules of
// k8s_objects, without the parts those rules never read: in metadata only
// name, namespace, labels and the vipd.io/ annotations are kept (not
// managedFields, ownerReferences, last-applied-configuration...), and the
// targetRef / deprecatedTopology of each endpoint are dropped. Building
// yaml-cpp nodes is most of the cost of decoding a list (docs/benchmarks.md).
// Where the rules would refuse a part it drops (annotations given twice or
// with a value that is not a string), the metadata is converted in full
// instead, so the rules accept or refuse the same objects as from to_yaml().
YAML::Node to_yaml_for_rules(simdjson::dom::element obj);

}  // namespace vipd::cp::kube
