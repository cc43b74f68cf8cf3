// Thread: control.
#include "controlplane/sources/k8s_objects.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <set>
#include <tuple>

namespace vipd::cp::k8s {
namespace {

// Internal: aborts parsing of one object with a reason. Never leaves this file.
struct ParseFail {
  std::string reason;
};

bool present(const YAML::Node& n) { return n.IsDefined() && !n.IsNull(); }

// 'text' with the text made printable, for messages.
std::string quoted(std::string_view s) { return "'" + printable(s) + "'"; }

// A scalar written as a string: quoted in YAML ('80', "80"), tagged !!str, or a
// JSON string (to_yaml in controlplane/kube tags those "!" too). Such a scalar
// is never taken as a number or a boolean, as the API server's decoders do.
bool is_string_scalar(const YAML::Node& n) {
  const std::string& t = n.Tag();
  return t == "!" || t == "tag:yaml.org,2002:str";
}

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

std::string scalar_text(const YAML::Node& n) {
  try {
    return n.IsScalar() ? printable(n.Scalar()) : std::string(n.IsMap() ? "<mapping>" : "<sequence>");
  } catch (const std::exception&) {
    return "?";
  }
}

std::string join(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

// Child `key` of a mapping; an undefined node when absent. `path` names `map`.
YAML::Node child(const YAML::Node& map, const std::string& key, const std::string& path) {
  if (!present(map)) return YAML::Node(YAML::NodeType::Undefined);
  if (!map.IsMap()) throw ParseFail{(path.empty() ? "object" : path) + ": expected a mapping"};
  // A key given twice is refused (yaml-cpp and the JSON bridge keep both and
  // would silently use the first), as the API server's strict decoding does.
  YAML::Node found(YAML::NodeType::Undefined);
  bool seen = false;
  for (auto it = map.begin(); it != map.end(); ++it) {
    if (!it->first.IsScalar() || it->first.Scalar() != key) continue;
    if (seen) throw ParseFail{join(path, key) + ": duplicate key"};
    seen = true;
    found.reset(it->second);
  }
  return found;
}

std::optional<std::string> opt_string(const YAML::Node& map, const std::string& key,
                                      const std::string& path) {
  const YAML::Node n = child(map, key, path);
  if (!present(n)) return std::nullopt;
  if (!n.IsScalar()) throw ParseFail{join(path, key) + ": expected a string"};
  return n.Scalar();
}

std::optional<int64_t> opt_int(const YAML::Node& map, const std::string& key,
                               const std::string& path) {
  const YAML::Node n = child(map, key, path);
  if (!present(n)) return std::nullopt;
  int64_t v = 0;
  if (n.IsScalar() && is_string_scalar(n))
    throw ParseFail{join(path, key) + ": expected an integer, got the string " + quoted(n.Scalar())};
  if (!n.IsScalar() || !YAML::convert<int64_t>::decode(n, v))
    throw ParseFail{join(path, key) + ": expected an integer, got '" + scalar_text(n) + "'"};
  return v;
}

std::optional<bool> opt_bool(const YAML::Node& map, const std::string& key,
                             const std::string& path) {
  const YAML::Node n = child(map, key, path);
  if (!present(n)) return std::nullopt;
  bool v = false;
  if (n.IsScalar() && is_string_scalar(n))
    throw ParseFail{join(path, key) + ": expected true or false, got the string " + quoted(n.Scalar())};
  if (!n.IsScalar() || !YAML::convert<bool>::decode(n, v))
    throw ParseFail{join(path, key) + ": expected true or false, got '" + scalar_text(n) + "'"};
  return v;
}

// A sequence child; empty (undefined) node when absent or null.
YAML::Node opt_seq(const YAML::Node& map, const std::string& key, const std::string& path) {
  const YAML::Node n = child(map, key, path);
  if (!present(n)) return YAML::Node(YAML::NodeType::Undefined);
  if (!n.IsSequence()) throw ParseFail{join(path, key) + ": expected a list"};
  return n;
}

std::map<std::string, std::string> string_map(const YAML::Node& map, const std::string& key,
                                              const std::string& path) {
  std::map<std::string, std::string> out;
  const YAML::Node n = child(map, key, path);
  if (!present(n)) return out;
  if (!n.IsMap()) throw ParseFail{join(path, key) + ": expected a mapping"};
  for (const auto& kv : n) {
    if (!kv.first.IsScalar() || !(kv.second.IsScalar() || kv.second.IsNull()))
      throw ParseFail{join(path, key) + ": expected string keys and values"};
    if (!out.emplace(kv.first.Scalar(), kv.second.IsNull() ? "" : kv.second.Scalar()).second)
      throw ParseFail{join(path, key) + ": duplicate key " + quoted(kv.first.Scalar())};
  }
  return out;
}

std::string index_path(const std::string& path, size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

uint16_t port_number(int64_t v, const std::string& path) {
  if (v < 1 || v > 65535)
    throw ParseFail{path + ": port " + std::to_string(v) + " is out of range 1..65535"};
  return static_cast<uint16_t>(v);
}

std::string protocol_of(const YAML::Node& map, const std::string& path) {
  const std::string p = opt_string(map, "protocol", path).value_or("TCP");
  if (p != "TCP" && p != "UDP" && p != "SCTP")
    throw ParseFail{join(path, "protocol") + ": " + quoted(p) + " is not TCP, UDP or SCTP"};
  return p;
}

// An address that may carry traffic: an IP address, and not of a class the API
// server refuses for endpoints and external IPs (special_ip_class).
void check_ip(const std::string& ip, const std::string& path) {
  if (!address_family(ip)) throw ParseFail{path + ": " + quoted(ip) + " is not an IP address"};
  if (const char* cls = special_ip_class(ip))
    throw ParseFail{path + ": " + quoted(ip) + (cls[0] == 'u' ? " is an " : " is a ") + cls +
                    " address, which Kubernetes refuses"};
}

void check_cluster_ip(const std::string& ip, const std::string& path) {
  if (ip.empty() || ip == "None") return;
  check_ip(ip, path);
}

// Throws when `problem` (from a *_problem rule) is not empty.
void check_rule(const std::string& problem, const std::string& path, std::string_view value) {
  if (!problem.empty()) throw ParseFail{path + ": " + quoted(value) + " " + problem};
}

void check_labels(const std::map<std::string, std::string>& labels) {
  for (const auto& [k, v] : labels) {
    check_rule(label_key_problem(k), "metadata.labels", k);
    check_rule(label_value_problem(v), "metadata.labels." + printable(k), v);
  }
}

// Reads metadata; the kind/apiVersion check is done by the caller.
ObjectMeta parse_meta(const YAML::Node& n) {
  ObjectMeta m;
  const YAML::Node md = child(n, "metadata", "");
  if (!present(md)) throw ParseFail{"metadata is missing"};
  if (!md.IsMap()) throw ParseFail{"metadata: expected a mapping"};
  m.namespace_ = opt_string(md, "namespace", "metadata").value_or("");
  if (m.namespace_.empty()) m.namespace_ = "default";
  check_rule(dns1123_label_problem(m.namespace_), "metadata.namespace", m.namespace_);
  m.name = opt_string(md, "name", "metadata").value_or("");
  if (m.name.empty()) throw ParseFail{"metadata.name is missing"};
  m.labels = string_map(md, "labels", "metadata");
  check_labels(m.labels);
  m.annotations = string_map(md, "annotations", "metadata");
  return m;
}

// Best-effort "Kind ns/name" for error messages, without throwing.
std::string describe(const char* kind, const YAML::Node& n) {
  try {
    const YAML::Node md = child(n, "metadata", "");
    std::string ns = opt_string(md, "namespace", "metadata").value_or("");
    std::string name = opt_string(md, "name", "metadata").value_or("");
    if (ns.empty()) ns = "default";
    if (!name.empty()) return std::string(kind) + " " + printable(ns) + "/" + printable(name);
  } catch (...) {
  }
  return "";
}

template <typename Fn>
bool guarded(const char* kind, const YAML::Node& n, ObjectError* error, Fn&& fn) {
  std::string reason;
  try {
    fn();
    return true;
  } catch (const ParseFail& f) {
    reason = f.reason;
  } catch (const YAML::Exception& e) {
    reason = std::string("malformed object: ") + e.what();
  } catch (const std::exception& e) {
    reason = std::string("malformed object: ") + e.what();
  }
  if (error) {
    error->object = describe(kind, n);
    if (error->object.empty()) error->object = std::string(kind) + " <unnamed>";
    error->reason = reason;
  }
  return false;
}

void check_api_version(const YAML::Node& n, const char* want) {
  const std::string v = opt_string(n, "apiVersion", "").value_or("");
  if (v != want) throw ParseFail{"apiVersion " + quoted(v) + " is not supported (want " + want + ")"};
}

}  // namespace

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
  Service s;
  const bool ok = guarded("Service", n, error, [&] {
    check_api_version(n, "v1");
    s.meta = parse_meta(n);
    check_rule(dns1035_label_problem(s.meta.name), "metadata.name", s.meta.name);
    const YAML::Node spec = child(n, "spec", "");
    if (!present(spec)) throw ParseFail{"spec is missing"};
    if (!spec.IsMap()) throw ParseFail{"spec: expected a mapping"};
    s.type = opt_string(spec, "type", "spec").value_or("ClusterIP");
    if (s.type != "ClusterIP" && s.type != "NodePort" && s.type != "LoadBalancer" &&
        s.type != "ExternalName")
      throw ParseFail{"spec.type: " + quoted(s.type) + " is not a Service type"};
    s.cluster_ip = opt_string(spec, "clusterIP", "spec").value_or("");
    check_cluster_ip(s.cluster_ip, "spec.clusterIP");
    const YAML::Node ips = opt_seq(spec, "clusterIPs", "spec");
    for (size_t i = 0; ips && i < ips.size(); ++i) {
      const std::string p = index_path("spec.clusterIPs", i);
      if (!ips[i].IsScalar()) throw ParseFail{p + ": expected a string"};
      check_cluster_ip(ips[i].Scalar(), p);
      s.cluster_ips.push_back(ips[i].Scalar());
    }
    const YAML::Node ports = opt_seq(spec, "ports", "spec");
    std::set<std::string> names;
    std::set<std::pair<std::string, uint16_t>> numbers;
    for (size_t i = 0; ports && i < ports.size(); ++i) {
      const std::string p = index_path("spec.ports", i);
      if (!ports[i].IsMap()) throw ParseFail{p + ": expected a mapping"};
      ServicePort sp;
      sp.name = opt_string(ports[i], "name", p).value_or("");
      if (!sp.name.empty()) check_rule(dns1123_label_problem(sp.name), p + ".name", sp.name);
      sp.protocol = protocol_of(ports[i], p);
      const auto num = opt_int(ports[i], "port", p);
      if (!num) throw ParseFail{p + ".port is missing"};
      sp.port = port_number(*num, p + ".port");
      if (auto np = opt_int(ports[i], "nodePort", p); np && *np != 0)
        sp.node_port = port_number(*np, p + ".nodePort");
      if (!names.insert(sp.name).second)
        throw ParseFail{p + ": duplicate port name " + quoted(sp.name)};
      if (!numbers.insert({sp.protocol, sp.port}).second)
        throw ParseFail{p + ": duplicate port " + std::to_string(sp.port) + "/" + sp.protocol};
      s.ports.push_back(std::move(sp));
    }
    const std::string affinity = opt_string(spec, "sessionAffinity", "spec").value_or("None");
    if (affinity != "None" && affinity != "ClientIP")
      throw ParseFail{"spec.sessionAffinity: " + quoted(affinity) + " is not None or ClientIP"};
    s.client_ip_affinity = affinity == "ClientIP";
    const YAML::Node cfg = child(spec, "sessionAffinityConfig", "spec");
    const YAML::Node cip = child(cfg, "clientIP", "spec.sessionAffinityConfig");
    if (auto t = opt_int(cip, "timeoutSeconds", "spec.sessionAffinityConfig.clientIP")) {
      if (*t < 1 || *t > kMaxAffinityTimeoutS)
        throw ParseFail{"spec.sessionAffinityConfig.clientIP.timeoutSeconds: " +
                        std::to_string(*t) + " is out of range 1..86400"};
      s.affinity_timeout_s = static_cast<uint32_t>(*t);
    }
    auto policy = [&](const char* key) {
      const std::string v = opt_string(spec, key, "spec").value_or("Cluster");
      if (v != "Cluster" && v != "Local")
        throw ParseFail{std::string("spec.") + key + ": " + quoted(v) + " is not Cluster or Local"};
      return v == "Local";
    };
    s.internal_policy_local = policy("internalTrafficPolicy");
    s.external_policy_local = policy("externalTrafficPolicy");
    auto strings = [&](const YAML::Node& map, const char* key, const std::string& path) {
      std::vector<std::string> out;
      const YAML::Node l = opt_seq(map, key, path);
      for (size_t i = 0; l && i < l.size(); ++i) {
        if (!l[i].IsScalar()) throw ParseFail{index_path(join(path, key), i) + ": expected a string"};
        out.push_back(l[i].Scalar());
      }
      return out;
    };
    s.external_ips = strings(spec, "externalIPs", "spec");
    for (size_t i = 0; i < s.external_ips.size(); ++i)
      check_ip(s.external_ips[i], index_path("spec.externalIPs", i));
    s.lb_source_ranges = strings(spec, "loadBalancerSourceRanges", "spec");
    const YAML::Node lb = child(child(n, "status", ""), "loadBalancer", "status");
    const YAML::Node ingress = opt_seq(lb, "ingress", "status.loadBalancer");
    for (size_t i = 0; ingress && i < ingress.size(); ++i) {
      const std::string p = index_path("status.loadBalancer.ingress", i);
      if (!ingress[i].IsMap()) throw ParseFail{p + ": expected a mapping"};
      LoadBalancerIngress in;
      in.ip = opt_string(ingress[i], "ip", p).value_or("");
      if (!in.ip.empty()) check_ip(in.ip, p + ".ip");
      in.ip_mode = opt_string(ingress[i], "ipMode", p).value_or("");
      s.lb_ingress.push_back(std::move(in));
    }
    auto sched = s.meta.annotations.find(kSchedulerAnnotation);
    if (sched != s.meta.annotations.end()) {
      s.scheduler = parse_scheduler(sched->second);
      if (!s.scheduler)
        throw ParseFail{std::string("annotation ") + kSchedulerAnnotation + ": " +
                        quoted(sched->second) + " is not a known scheduler"};
    }
  });
  if (!ok) return std::nullopt;
  return s;
}

std::optional<EndpointSlice> parse_endpoint_slice(const YAML::Node& n, ObjectError* error) {
  EndpointSlice s;
  const bool ok = guarded("EndpointSlice", n, error, [&] {
    check_api_version(n, "discovery.k8s.io/v1");
    s.meta = parse_meta(n);
    check_rule(dns1123_subdomain_problem(s.meta.name), "metadata.name", s.meta.name);
    const auto type = opt_string(n, "addressType", "");
    if (!type) throw ParseFail{"addressType is missing"};
    s.address_type = *type;
    if (s.address_type != "IPv4" && s.address_type != "IPv6" && s.address_type != "FQDN")
      throw ParseFail{"addressType: " + quoted(s.address_type) + " is not IPv4, IPv6 or FQDN"};
    const YAML::Node eps = opt_seq(n, "endpoints", "");
    for (size_t i = 0; eps && i < eps.size(); ++i) {
      const std::string p = index_path("endpoints", i);
      if (!eps[i].IsMap()) throw ParseFail{p + ": expected a mapping"};
      Endpoint e;
      const YAML::Node addrs = opt_seq(eps[i], "addresses", p);
      if (!addrs || addrs.size() == 0) throw ParseFail{p + ".addresses is missing or empty"};
      for (size_t j = 0; j < addrs.size(); ++j) {
        const std::string ap = index_path(p + ".addresses", j);
        if (!addrs[j].IsScalar()) throw ParseFail{ap + ": expected a string"};
        const std::string a = addrs[j].Scalar();
        if (s.address_type == "IPv4" && !parse_ipv4(a))
          throw ParseFail{ap + ": " + quoted(a) + " is not an IPv4 address"};
        if (s.address_type == "IPv6" && !is_ipv6(a))
          throw ParseFail{ap + ": " + quoted(a) + " is not an IPv6 address"};
        if (s.address_type != "FQDN") check_ip(a, ap);
        e.addresses.push_back(a);
      }
      const YAML::Node cond = child(eps[i], "conditions", p);
      const std::string cp = p + ".conditions";
      e.conditions.ready = opt_bool(cond, "ready", cp);
      e.conditions.serving = opt_bool(cond, "serving", cp);
      e.conditions.terminating = opt_bool(cond, "terminating", cp);
      e.node_name = opt_string(eps[i], "nodeName", p).value_or("");
      if (!e.node_name.empty())
        check_rule(dns1123_subdomain_problem(e.node_name), p + ".nodeName", e.node_name);
      e.zone = opt_string(eps[i], "zone", p).value_or("");
      const YAML::Node zones = opt_seq(child(eps[i], "hints", p), "forZones", p + ".hints");
      for (size_t j = 0; zones && j < zones.size(); ++j) {
        const std::string zp = index_path(p + ".hints.forZones", j);
        if (!zones[j].IsMap()) throw ParseFail{zp + ": expected a mapping"};
        if (auto z = opt_string(zones[j], "name", zp)) e.zone_hints.push_back(*z);
      }
      s.endpoints.push_back(std::move(e));
    }
    const YAML::Node ports = opt_seq(n, "ports", "");
    std::set<std::string> port_names;
    for (size_t i = 0; ports && i < ports.size(); ++i) {
      const std::string p = index_path("ports", i);
      if (!ports[i].IsMap()) throw ParseFail{p + ": expected a mapping"};
      EndpointPort ep;
      ep.name = opt_string(ports[i], "name", p);
      if (ep.name && !ep.name->empty()) check_rule(dns1123_label_problem(*ep.name), p + ".name", *ep.name);
      if (ep.name && !port_names.insert(*ep.name).second)
        throw ParseFail{p + ": duplicate port name " + quoted(*ep.name)};
      ep.protocol = protocol_of(ports[i], p);
      if (auto num = opt_int(ports[i], "port", p)) ep.port = port_number(*num, p + ".port");
      s.ports.push_back(std::move(ep));
    }
  });
  if (!ok) return std::nullopt;
  return s;
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
        std::string id = describe(printable(kind).c_str(), n);
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
