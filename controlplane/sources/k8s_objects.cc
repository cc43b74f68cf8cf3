// Thread: control.
#include "controlplane/sources/k8s_objects.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <set>
#include <tuple>

#include "controlplane/sources/k8s_rules.h"

namespace vipd::cp::k8s {
namespace {

bool present(const YAML::Node& n) { return n.IsDefined() && !n.IsNull(); }

bool is_lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool is_alnum(char c) { return is_lower_alnum(c) || (c >= 'A' && c <= 'Z'); }

// [a-z0-9]([-a-z0-9]*[a-z0-9])? (no length limit).
bool dns_label_chars(std::string_view s) {
  if (s.empty() || !is_lower_alnum(s.front()) || !is_lower_alnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return is_lower_alnum(c) || c == '-'; });
}

// ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9], non-empty.
bool qualified_name_chars(std::string_view s) {
  if (s.empty() || !is_alnum(s.front()) || !is_alnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return is_alnum(c) || c == '-' || c == '_' || c == '.'; });
}

const char* kDns1123LabelRule =
    "must be a lowercase RFC 1123 label: lower case alphanumeric characters or '-', starting and "
    "ending with an alphanumeric character";
const char* kLabelValueRule =
    "must be empty or alphanumeric characters, '-', '_' or '.', starting and ending with an "
    "alphanumeric character";

// The node reader of the object rules (k8s_rules.h) over yaml-cpp: manifests.
class YamlNode {
 public:
  YamlNode() : n_(YAML::NodeType::Undefined) {}
  explicit YamlNode(const YAML::Node& n) : n_(n) {}
  bool defined() const { return n_.IsDefined(); }
  bool null() const { return n_.IsNull(); }
  bool is_map() const { return n_.IsMap(); }
  bool is_seq() const { return n_.IsSequence(); }
  bool is_scalar() const { return n_.IsScalar(); }
  // A scalar written as a string: quoted ('80', "80") or tagged !!str. Such a
  // scalar is never taken as a number or a boolean, as the API server's
  // decoders do.
  bool is_string() const {
    const std::string& t = n_.Tag();
    return t == "!" || t == "tag:yaml.org,2002:str";
  }
  std::string text() const { return n_.Scalar(); }
  bool to_int(int64_t* v) const { return YAML::convert<int64_t>::decode(n_, *v); }
  bool to_bool(bool* v) const { return YAML::convert<bool>::decode(n_, *v); }
  int find(std::string_view key, YamlNode* out) const {
    int count = 0;
    for (auto it = n_.begin(); it != n_.end(); ++it) {
      if (!it->first.IsScalar() || it->first.Scalar() != key) continue;
      if (++count > 1) return count;
      out->n_.reset(it->second);
    }
    return count;
  }
  template <class F>
  void each(F&& f) const {
    if (!defined()) return;
    for (size_t i = 0; i < n_.size(); ++i) f(i, YamlNode(n_[i]));
  }
  template <class F>
  void each_member(F&& f) const {
    for (auto it = n_.begin(); it != n_.end(); ++it) {
      std::string_view k;
      const bool scalar_key = it->first.IsScalar();
      if (scalar_key) k = it->first.Scalar();
      f(scalar_key ? &k : nullptr, YamlNode(it->second));
    }
  }

 private:
  YAML::Node n_;
};

}  // namespace

namespace rules {

std::string in_quotes(std::string_view s) { return "'" + printable(s) + "'"; }

uint16_t port_number(int64_t v, const Path& path) {
  if (v < 1 || v > 65535)
    throw ParseFail{path.str() + ": port " + std::to_string(v) + " is out of range 1..65535"};
  return static_cast<uint16_t>(v);
}

void check_protocol(const std::string& p, const Path& path) {
  if (p != "TCP" && p != "UDP" && p != "SCTP")
    throw ParseFail{path.key("protocol").str() + ": " + in_quotes(p) + " is not TCP, UDP or SCTP"};
}

// An address that may carry traffic: an IP address, and not of a class the API
// server refuses for endpoints and external IPs (special_ip_class).
void check_ip(const std::string& ip, const Path& path) {
  if (!address_family(ip)) throw ParseFail{path.str() + ": " + in_quotes(ip) + " is not an IP address"};
  if (const char* cls = special_ip_class(ip))
    throw ParseFail{path.str() + ": " + in_quotes(ip) + (cls[0] == 'u' ? " is an " : " is a ") + cls +
                    " address, which Kubernetes refuses"};
}

void check_cluster_ip(const std::string& ip, const Path& path) {
  if (ip.empty() || ip == "None") return;
  check_ip(ip, path);
}

void check_ip_families(const Service& s) {
  for (size_t i = 0; i < s.ip_families.size(); ++i) {
    const std::string& f = s.ip_families[i];
    const std::string at = "spec.ipFamilies[" + std::to_string(i) + "]: ";
    if (f != "IPv4" && f != "IPv6") throw ParseFail{at + in_quotes(f) + " is not IPv4 or IPv6"};
    for (size_t j = 0; j < i; ++j)
      if (s.ip_families[j] == f) throw ParseFail{at + in_quotes(f) + " is listed twice"};
  }
  const std::string& pol = s.ip_family_policy;
  if (!pol.empty() && pol != "SingleStack" && pol != "PreferDualStack" && pol != "RequireDualStack")
    throw ParseFail{"spec.ipFamilyPolicy: " + in_quotes(pol) +
                    " is not SingleStack, PreferDualStack or RequireDualStack"};
  if (pol == "SingleStack" && s.ip_families.size() > 1)
    throw ParseFail{"spec.ipFamilies: two families, but spec.ipFamilyPolicy is SingleStack"};
  if (!s.cluster_ips.empty() && !s.cluster_ip.empty() && s.cluster_ips[0] != s.cluster_ip)
    throw ParseFail{"spec.clusterIPs[0]: " + in_quotes(s.cluster_ips[0]) + " is not spec.clusterIP " +
                    in_quotes(s.cluster_ip)};
  // The addresses (headless "None" and empty entries carry no family).
  std::vector<IpAddr> ips;
  for (const auto& t : s.cluster_ips)
    if (auto a = IpAddr::parse(t)) ips.push_back(*a);
  if (s.cluster_ips.empty())
    if (auto a = IpAddr::parse(s.cluster_ip)) ips.push_back(*a);
  if (ips.size() > 2) throw ParseFail{"spec.clusterIPs: more than two addresses (at most one per family)"};
  if (ips.size() == 2 && ips[0].family() == ips[1].family())
    throw ParseFail{"spec.clusterIPs: " + in_quotes(ips[0].to_string()) + " and " + in_quotes(ips[1].to_string()) +
                    " are both " + family_name(ips[0].family()) + "; a dual-stack Service has one per family"};
  for (size_t i = 0; i < ips.size() && i < s.ip_families.size(); ++i)
    if (family_name(ips[i].family()) != s.ip_families[i])
      throw ParseFail{"spec.clusterIPs[" + std::to_string(i) + "]: " + in_quotes(ips[i].to_string()) + " is " +
                      family_name(ips[i].family()) + ", but spec.ipFamilies[" + std::to_string(i) + "] is " +
                      s.ip_families[i]};
  if (pol == "SingleStack" && ips.size() > 1)
    throw ParseFail{"spec.clusterIPs: two addresses, but spec.ipFamilyPolicy is SingleStack"};
  if (pol == "RequireDualStack" && ips.size() == 1)
    throw ParseFail{"spec.ipFamilyPolicy: RequireDualStack, but spec.clusterIPs has only an " +
                    std::string(family_name(ips[0].family())) + " address"};
}

void check_rule(const std::string& problem, const Path& path, std::string_view value) {
  if (!problem.empty()) throw ParseFail{path.str() + ": " + in_quotes(value) + " " + problem};
}

void check_labels(const std::map<std::string, std::string>& labels) {
  for (const auto& [k, v] : labels) {
    if (std::string p = label_key_problem(k); !p.empty())
      throw ParseFail{"metadata.labels: " + in_quotes(k) + " " + p};
    if (std::string p = label_value_problem(v); !p.empty())
      throw ParseFail{"metadata.labels." + printable(k) + ": " + in_quotes(v) + " " + p};
  }
}

void check_service_type(const std::string& type) {
  if (type != "ClusterIP" && type != "NodePort" && type != "LoadBalancer" && type != "ExternalName")
    throw ParseFail{"spec.type: " + in_quotes(type) + " is not a Service type"};
}

void apply_scheduler(Service* s) {
  auto sched = s->meta.annotations.find(kSchedulerAnnotation);
  if (sched == s->meta.annotations.end()) return;
  s->scheduler = parse_scheduler(sched->second);
  if (!s->scheduler)
    throw ParseFail{std::string("annotation ") + kSchedulerAnnotation + ": " + in_quotes(sched->second) +
                    " is not a known scheduler"};
}

void apply_proxy_protocol(Service* s) {
  auto pp = s->meta.annotations.find(kProxyProtocolAnnotation);
  if (pp == s->meta.annotations.end()) return;
  if (pp->second == "none") {
    s->proxy_protocol = ProxyProtocol::kNone;
    return;
  }
  // The name table spells none "", which is not a value anyone writes on purpose.
  const auto v = pp->second.empty() ? std::nullopt : parse_proxy_protocol(pp->second);
  if (!v)
    throw ParseFail{std::string("annotation ") + kProxyProtocolAnnotation + ": " + in_quotes(pp->second) +
                    " is not v1, v2 or none"};
  s->proxy_protocol = v;
}

void check_address(const std::string& address_type, const std::string& a, const Path& path) {
  if (address_type == "IPv4" && !parse_ipv4(a))
    throw ParseFail{path.str() + ": " + in_quotes(a) + " is not an IPv4 address"};
  if (address_type == "IPv6" && !is_ipv6(a))
    throw ParseFail{path.str() + ": " + in_quotes(a) + " is not an IPv6 address"};
  if (address_type != "FQDN") check_ip(a, path);
}

}  // namespace rules

std::string printable(std::string_view s) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\\' || c == '"' || c == '\'') {
      out += '\\';
      out += ch;
    } else if (c >= 0x20 && c < 0x7f) {
      out += ch;
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string dns1123_label_problem(std::string_view s) {
  if (s.size() > 63) return "must be at most 63 characters";
  return dns_label_chars(s) ? "" : kDns1123LabelRule;
}

std::string dns1123_subdomain_problem(std::string_view s) {
  if (s.size() > 253) return "must be at most 253 characters";
  const char* rule =
      "must be a lowercase RFC 1123 subdomain: lower case alphanumeric characters, '-' or '.', "
      "starting and ending with an alphanumeric character";
  for (size_t start = 0;;) {
    const size_t dot = s.find('.', start);
    if (!dns_label_chars(s.substr(start, dot == std::string_view::npos ? dot : dot - start))) return rule;
    if (dot == std::string_view::npos) return "";
    start = dot + 1;
  }
}

std::string dns1035_label_problem(std::string_view s) {
  if (s.size() > 63) return "must be at most 63 characters";
  if (!dns_label_chars(s) || (s.front() >= '0' && s.front() <= '9'))
    return "must be an RFC 1035 label: lower case alphanumeric characters or '-', starting with "
           "a letter and ending with an alphanumeric character";
  return "";
}

std::string label_key_problem(std::string_view s) {
  std::string_view name = s;
  if (const size_t slash = s.find('/'); slash != std::string_view::npos) {
    const std::string_view prefix = s.substr(0, slash);
    name = s.substr(slash + 1);
    if (prefix.empty()) return "has an empty prefix before '/'";
    if (std::string p = dns1123_subdomain_problem(prefix); !p.empty()) return "prefix " + p;
  }
  if (name.size() > 63) return "name part must be at most 63 characters";
  if (!qualified_name_chars(name))
    return "name part must be alphanumeric characters, '-', '_' or '.', starting and ending with "
           "an alphanumeric character";
  return "";
}

std::string label_value_problem(std::string_view s) {
  if (s.size() > 63) return "must be at most 63 characters";
  return s.empty() || qualified_name_chars(s) ? "" : kLabelValueRule;
}

const char* special_ip_class(const std::string& ip) {
  uint8_t b[16] = {};
  bool v4 = false;
  in_addr a4{};
  in6_addr a6{};
  if (inet_pton(AF_INET, ip.c_str(), &a4) == 1) {
    std::memcpy(b, &a4, 4);
    v4 = true;
  } else if (inet_pton(AF_INET6, ip.c_str(), &a6) == 1) {
    std::memcpy(b, &a6, 16);
    static const uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::memcmp(b, kMapped, 12) == 0) {  // ::ffff:a.b.c.d
      std::memmove(b, b + 12, 4);
      v4 = true;
    }
  } else {
    return nullptr;
  }
  if (v4) {
    if (b[0] == 0 && b[1] == 0 && b[2] == 0 && b[3] == 0) return "unspecified";
    if (b[0] == 127) return "loopback";
    if (b[0] == 169 && b[1] == 254) return "link-local";
    if (b[0] == 224 && b[1] == 0 && b[2] == 0) return "link-local multicast";
    return nullptr;
  }
  static const uint8_t kZero[16] = {};
  if (std::memcmp(b, kZero, 16) == 0) return "unspecified";
  if (std::memcmp(b, kZero, 15) == 0 && b[15] == 1) return "loopback";
  if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) return "link-local";
  if (b[0] == 0xff && (b[1] & 0x0f) == 0x02) return "link-local multicast";
  return nullptr;
}

std::string EndpointSlice::service_name() const {
  auto it = meta.labels.find(kServiceNameLabel);
  return it == meta.labels.end() ? "" : it->second;
}

std::string object_id(const char* kind, const ObjectMeta& m) {
  return std::string(kind) + " " + m.namespace_ + "/" + m.name;
}

std::optional<Service> parse_service(const YAML::Node& n, ObjectError* error) {
  return rules::decode_service(YamlNode(n), error);
}

std::optional<EndpointSlice> parse_endpoint_slice(const YAML::Node& n, ObjectError* error) {
  return rules::decode_endpoint_slice(YamlNode(n), error);
}

void parse_document(const YAML::Node& doc, int doc_index, ParsedObjects* out) {
  const std::string where = "document " + std::to_string(doc_index);
  auto one = [&](const YAML::Node& n, const std::string& label) {
    try {
      if (!present(n)) return;
      if (!n.IsMap()) {
        out->errors.push_back({"", label, "expected a Kubernetes object (a mapping)"});
        return;
      }
      const YAML::Node kind_node = n["kind"];
      if (!present(kind_node) || !kind_node.IsScalar()) {
        out->errors.push_back({"", label, "kind is missing"});
        return;
      }
      const std::string kind = kind_node.Scalar();
      ObjectError err;
      // An object without a usable name is named by its place in the file.
      auto failed = [&] {
        if (err.object == kind + " <unnamed>") err.object = kind + " (" + label + ")";
        out->errors.push_back(std::move(err));
      };
      if (kind == "Service") {
        if (auto s = parse_service(n, &err)) out->services.push_back(std::move(*s));
        else failed();
      } else if (kind == "EndpointSlice") {
        if (auto s = parse_endpoint_slice(n, &err)) out->slices.push_back(std::move(*s));
        else failed();
      } else {
        std::string id = rules::describe(printable(kind).c_str(), YamlNode(n));
        out->notes.push_back({"", id.empty() ? label : id, "kind " + printable(kind) + " is not used; skipped"});
      }
    } catch (const std::exception& e) {
      out->errors.push_back({"", label, std::string("malformed object: ") + e.what()});
    }
  };
  try {
    if (!present(doc)) return;
    if (doc.IsMap() && present(doc["kind"]) && doc["kind"].IsScalar() &&
        doc["kind"].Scalar() == "List") {
      const YAML::Node items = doc["items"];
      if (!present(items)) return;
      if (!items.IsSequence()) {
        out->errors.push_back({"", where, "List: items: expected a list"});
        return;
      }
      for (size_t i = 0; i < items.size(); ++i)
        one(items[i], where + " item " + std::to_string(i + 1));
      return;
    }
    one(doc, where);
  } catch (const std::exception& e) {
    out->errors.push_back({"", where, std::string("malformed document: ") + e.what()});
  }
}

}  // namespace vipd::cp::k8s
