// Thread: owned by one thread (a reflector); not shared.
//
// Decoding of Kubernetes API JSON with simdjson:
// - JsonStreamSplitter cuts a byte stream (a watch body: one JSON object per
//   event, usually newline separated, arriving in arbitrary chunks) into
//   complete top-level JSON objects without parsing them twice: it tracks brace
//   depth and string/escape state incrementally across chunks.
// - WatchDecoder parses each object with simdjson and hands out typed events.
// - JsonNode reads a simdjson element for the object rules of
//   controlplane/sources/k8s_rules.h (shared with the manifests source, which
//   reads yaml-cpp nodes): API objects decode straight into the typed structs
//   and are validated exactly like manifests.
// - to_yaml() converts a simdjson element to a yaml-cpp node (tests and the
//   fuzzer check with it that both readers decide the same).
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

// The node reader of the object rules (controlplane/sources/k8s_rules.h) over a
// simdjson element. JSON values read as yaml-cpp reads the same values through
// to_yaml(): a string is a string scalar (never a number or a boolean), a
// number or boolean is a scalar whose text is what to_yaml() writes, null is
// a null node. A key given twice is seen twice (the rules refuse it).
class JsonNode {
 public:
  JsonNode() = default;  // absent
  explicit JsonNode(simdjson::dom::element e) : e_(e), defined_(true) {}
  bool defined() const { return defined_; }
  bool null() const { return defined_ && e_.type() == simdjson::dom::element_type::NULL_VALUE; }
  bool is_map() const { return defined_ && e_.type() == simdjson::dom::element_type::OBJECT; }
  bool is_seq() const { return defined_ && e_.type() == simdjson::dom::element_type::ARRAY; }
  bool is_scalar() const;
  bool is_string() const { return defined_ && e_.type() == simdjson::dom::element_type::STRING; }
  std::string text() const;
  bool to_int(int64_t* v) const;  // an integral JSON number that fits int64
  bool to_bool(bool* v) const;    // true or false
  int find(std::string_view key, JsonNode* out) const;
  template <class F>
  void each(F&& f) const {
    if (!is_seq()) return;
    size_t i = 0;
    const simdjson::dom::array a = e_.get_array().value_unsafe();  // not a temporary in the for
    for (simdjson::dom::element v : a) f(i++, JsonNode(v));
  }
  template <class F>
  void each_member(F&& f) const {
    if (!is_map()) return;
    const simdjson::dom::object o = e_.get_object().value_unsafe();  // not a temporary in the for
    for (simdjson::dom::key_value_pair kv : o) {
      const std::string_view k = kv.key;
      f(&k, JsonNode(kv.value));
    }
  }

 private:
  simdjson::dom::element e_;
  bool defined_ = false;
};

}  // namespace vipd::cp::kube
