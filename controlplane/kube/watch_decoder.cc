// Thread: the owning reflector thread.
#include "controlplane/kube/watch_decoder.h"

#include <algorithm>
#include <cstdio>

#include "controlplane/sources/k8s_objects.h"

namespace vipd::cp::kube {

bool JsonStreamSplitter::feed(const char* data, size_t n,
                              const std::function<void(std::string_view)>& on_object) {
  buf_.append(data, n);
  size_t start = 0;  // start of the object being scanned (or of unconsumed bytes)
  size_t i = scan_;
  // Skip whitespace between objects.
  auto skip_ws = [&](size_t k) {
    while (k < buf_.size() && (buf_[k] == ' ' || buf_[k] == '\n' || buf_[k] == '\r' || buf_[k] == '\t'))
      ++k;
    return k;
  };
  if (depth_ == 0) {
    i = skip_ws(i);
    start = i;
  }
  for (; i < buf_.size(); ++i) {
    const char c = buf_[i];
    if (depth_ == 0) {
      if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
      if (c != '{') {
        error_ = std::string("unexpected byte '") + (c >= 32 && c < 127 ? std::string(1, c) : "?") +
                 "' between JSON objects";
        return false;
      }
      start = i;
      depth_ = 1;
      continue;
    }
    if (in_string_) {
      if (escape_) escape_ = false;
      else if (c == '\\') escape_ = true;
      else if (c == '"') in_string_ = false;
      continue;
    }
    if (c == '"') in_string_ = true;
    else if (c == '{' || c == '[') ++depth_;
    else if (c == '}' || c == ']') {
      if (--depth_ == 0) {
        on_object(std::string_view(buf_.data() + start, i + 1 - start));
        start = i + 1;
      }
    }
  }
  if (depth_ == 0) start = skip_ws(start);
  // Keep only the unfinished object.
  buf_.erase(0, std::min(start, buf_.size()));
  scan_ = buf_.size();
  if (buf_.size() > max_) {
    error_ = "JSON object larger than " + std::to_string(max_) + " bytes";
    return false;
  }
  return true;
}

void JsonStreamSplitter::reset() {
  buf_.clear();
  scan_ = 0;
  depth_ = 0;
  in_string_ = escape_ = false;
  error_.clear();
}

const char* event_type_name(EventType t) {
  switch (t) {
    case EventType::kAdded: return "ADDED";
    case EventType::kModified: return "MODIFIED";
    case EventType::kDeleted: return "DELETED";
    case EventType::kBookmark: return "BOOKMARK";
    case EventType::kError: return "ERROR";
  }
  return "?";
}

std::string resource_version_of(simdjson::dom::element obj) {
  std::string_view rv;
  if (obj["metadata"]["resourceVersion"].get(rv) != simdjson::SUCCESS) return "";
  return std::string(rv);
}

std::string key_of(simdjson::dom::element obj) {
  std::string_view ns, name;
  if (obj["metadata"]["name"].get(name) != simdjson::SUCCESS || name.empty()) return "";
  if (obj["metadata"]["namespace"].get(ns) != simdjson::SUCCESS || ns.empty()) ns = "default";
  // The key names the object in logs and errors: printable() leaves valid
  // names as they are and escapes (injectively) what an invalid one holds.
  return k8s::printable(ns) + "/" + k8s::printable(name);
}

std::optional<ApiStatus> parse_status(simdjson::dom::element e) {
  if (!e.is_object()) return std::nullopt;
  ApiStatus s;
  int64_t code = 0;
  std::string_view v;
  if (e["code"].get(code) == simdjson::SUCCESS) s.code = code;
  if (e["reason"].get(v) == simdjson::SUCCESS) s.reason = std::string(v);
  if (e["message"].get(v) == simdjson::SUCCESS) s.message = std::string(v);
  return s;
}

std::optional<ApiStatus> parse_status_body(const std::string& body) {
  simdjson::dom::parser p;
  simdjson::dom::element e;
  if (p.parse(body).get(e) != simdjson::SUCCESS) return std::nullopt;
  return parse_status(e);
}

bool WatchDecoder::feed(const char* data, size_t n) {
  if (stopped_) return true;
  bool ok = true;
  const bool framed = splitter_.feed(data, n, [&](std::string_view obj) {
    if (!ok || stopped_) return;
    ok = decode(obj);
  });
  if (!framed) {
    error_ = splitter_.error();
    return false;
  }
  return ok;
}

bool WatchDecoder::decode(std::string_view obj) {
  simdjson::dom::element doc;
  if (auto err = parser_.parse(obj.data(), obj.size(), true).get(doc); err) {
    error_ = std::string("invalid JSON in watch stream: ") + simdjson::error_message(err);
    return false;
  }
  std::string_view type;
  simdjson::dom::element object;
  if (doc["type"].get(type) != simdjson::SUCCESS || doc["object"].get(object) != simdjson::SUCCESS ||
      !object.is_object()) {
    error_ = "watch event without type or object";
    return false;
  }
  WatchEvent ev{EventType::kAdded, object, ""};
  if (type == "ADDED") ev.type = EventType::kAdded;
  else if (type == "MODIFIED") ev.type = EventType::kModified;
  else if (type == "DELETED") ev.type = EventType::kDeleted;
  else if (type == "BOOKMARK") ev.type = EventType::kBookmark;
  else if (type == "ERROR") ev.type = EventType::kError;
  else {
    error_ = "unknown watch event type '" + std::string(type) + "'";
    return false;
  }
  ev.resource_version = resource_version_of(object);
  ++events_;
  if (!handler_(ev)) stopped_ = true;
  return true;
}

namespace {

// A double as to_yaml() writes it: always with a '.' or an exponent, so that
// 80.0 is not an integer to the rules, as it is not to the API server's decoder.
std::string double_text(double d) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.17g", d);
  std::string t(buf);
  if (t.find_first_of(".eEni") == std::string::npos) t += ".0";
  return t;
}

}  // namespace

YAML::Node to_yaml(simdjson::dom::element e) {
  using simdjson::dom::element_type;
  switch (e.type()) {
    case element_type::OBJECT: {
      YAML::Node m(YAML::NodeType::Map);
      simdjson::dom::object o = e.get_object().value_unsafe();  // not a temporary in the for
      // force_insert: no search of the keys so far for each new key (yaml-cpp's
      // operator[] is linear), so a duplicate key keeps its first value.
      for (auto field : o) m.force_insert(std::string(field.key), to_yaml(field.value));
      return m;
    }
    case element_type::ARRAY: {
      YAML::Node s(YAML::NodeType::Sequence);
      simdjson::dom::array a = e.get_array().value_unsafe();
      for (auto v : a) s.push_back(to_yaml(v));
      return s;
    }
    case element_type::STRING: {
      // Tagged "!" like a quoted YAML scalar: the object rules never take a
      // string for a number or a boolean ("port": "80" is refused).
      YAML::Node n(std::string(e.get_string().value_unsafe()));
      n.SetTag("!");
      return n;
    }
    case element_type::INT64:
      return YAML::Node(std::to_string(e.get_int64().value_unsafe()));
    case element_type::UINT64:
      return YAML::Node(std::to_string(e.get_uint64().value_unsafe()));
    case element_type::DOUBLE:
      return YAML::Node(double_text(e.get_double().value_unsafe()));
    case element_type::BOOL:
      return YAML::Node(std::string(e.get_bool().value_unsafe() ? "true" : "false"));
    case element_type::NULL_VALUE:
      return YAML::Node(YAML::NodeType::Null);
  }
  return YAML::Node();
}


bool JsonNode::is_scalar() const {
  if (!defined_) return false;
  using simdjson::dom::element_type;
  switch (e_.type()) {
    case element_type::STRING:
    case element_type::INT64:
    case element_type::UINT64:
    case element_type::DOUBLE:
    case element_type::BOOL:
      return true;
    default:
      return false;
  }
}

std::string JsonNode::text() const {
  using simdjson::dom::element_type;
  if (!defined_) return "";
  switch (e_.type()) {
    case element_type::STRING: return std::string(e_.get_string().value_unsafe());
    case element_type::INT64: return std::to_string(e_.get_int64().value_unsafe());
    case element_type::UINT64: return std::to_string(e_.get_uint64().value_unsafe());
    case element_type::DOUBLE: return double_text(e_.get_double().value_unsafe());
    case element_type::BOOL: return e_.get_bool().value_unsafe() ? "true" : "false";
    default: return "";
  }
}

// yaml-cpp reads to_yaml()'s text of an INT64 as that number; the text of a
// UINT64 (above INT64_MAX) overflows and that of a double has a '.' or an
// exponent: neither is an integer.
bool JsonNode::to_int(int64_t* v) const {
  if (!defined_ || e_.type() != simdjson::dom::element_type::INT64) return false;
  *v = e_.get_int64().value_unsafe();
  return true;
}

// Only "true" and "false" of to_yaml()'s texts are booleans to yaml-cpp.
bool JsonNode::to_bool(bool* v) const {
  if (!defined_ || e_.type() != simdjson::dom::element_type::BOOL) return false;
  *v = e_.get_bool().value_unsafe();
  return true;
}

int JsonNode::find(std::string_view key, JsonNode* out) const {
  if (!is_map()) return 0;
  int count = 0;
  const simdjson::dom::object o = e_.get_object().value_unsafe();  // not a temporary in the for
  for (simdjson::dom::key_value_pair kv : o) {
    if (kv.key != key) continue;
    if (++count > 1) return count;
    *out = JsonNode(kv.value);
  }
  return count;
}

}  // namespace vipd::cp::kube
