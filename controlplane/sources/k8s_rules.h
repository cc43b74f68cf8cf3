// Thread: the caller's (control thread for manifests, a reflector thread for the
// API source); nothing here is shared.
//
// The Service and EndpointSlice object rules, written once over a small node
// reader so that both sources decode straight into the typed structs of
// k8s_objects.h and accept, refuse and explain objects the same way:
//   - YamlNode (k8s_objects.cc) reads yaml-cpp nodes: manifests;
//   - JsonNode (controlplane/kube/watch_decoder.h) reads simdjson elements:
//     Kubernetes API lists and watch events, without building YAML nodes.
//
// A node reader N offers:
//   N()                          an absent node (a key that is not there)
//   bool defined(), null()       present = defined() && !null()
//   bool is_map(), is_seq(), is_scalar()   scalar: a string, number or boolean
//   bool is_string()             a scalar written as a string (JSON "80", YAML
//                                '80' or !!str 80): never a number or boolean
//   std::string text()           a scalar's text (a number as YAML writes it)
//   bool to_int(int64_t*), to_bool(bool*)   the scalar as YAML 1.1 reads it
//   int find(std::string_view key, N* out)  mapping: how often `key` is given
//                                (0, 1, or 2 for "more than once"); *out = the first
//   void each(F f)               sequence: f(size_t index, const N& item) in order
//   void each_member(F f)        mapping: f(const std::string_view* key, const N& value)
//                                in order; key is nullptr when it is not a scalar
// Problems are thrown as ParseFail inside these templates and come back from
// decode_service / decode_endpoint_slice as an ObjectError; nothing escapes.
#pragma once

#include <cstdint>
#include <exception>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "controlplane/sources/k8s_objects.h"

namespace vipd::cp::k8s::rules {

// Aborts decoding of one object with a reason. Never leaves decode_*.
struct ParseFail {
  std::string reason;
};

// Where a value is in the object ("spec.ports[0].port"), built only when an
// error names it. A Path refers to its parent: keep the parent alive.
class Path {
 public:
  Path() = default;  // the object itself
  Path key(const char* k) const { return Path(this, k, 0); }
  Path index(size_t i) const { return Path(this, nullptr, i); }
  bool root() const { return parent_ == nullptr; }
  std::string str() const {
    if (!parent_) return "";
    std::string s = parent_->str();
    if (key_) return s.empty() ? std::string(key_) : s + "." + key_;
    return s + "[" + std::to_string(index_) + "]";
  }

 private:
  Path(const Path* parent, const char* key, size_t index) : parent_(parent), key_(key), index_(index) {}
  const Path* parent_ = nullptr;
  const char* key_ = nullptr;
  size_t index_ = 0;
};

// The shared checks that do not read nodes (k8s_objects.cc).
std::string in_quotes(std::string_view s);  // 'text', made printable
uint16_t port_number(int64_t v, const Path& path);
void check_protocol(const std::string& p, const Path& path);
void check_ip(const std::string& ip, const Path& path);
void check_cluster_ip(const std::string& ip, const Path& path);
// spec.ipFamilies, spec.ipFamilyPolicy and their agreement with spec.clusterIP(s)
// (the API server's dual-stack validation).
void check_ip_families(const Service& s);
// Throws when `problem` (from a *_problem rule) is not empty.
void check_rule(const std::string& problem, const Path& path, std::string_view value);
void check_labels(const std::map<std::string, std::string>& labels);
void check_service_type(const std::string& type);
// The vipd.io/scheduler annotation of s->meta into s->scheduler.
void apply_scheduler(Service* s);
// The vipd.io/proxy-protocol annotation of s->meta into s->proxy_protocol:
// "v1", "v2" or "none" (none even when --proxy-protocol sets a default).
void apply_proxy_protocol(Service* s);
void check_address(const std::string& address_type, const std::string& a, const Path& path);

template <class N>
bool present(const N& n) {
  return n.defined() && !n.null();
}

template <class N>
std::string scalar_text(const N& n) {
  try {
    return n.is_scalar() ? printable(n.text()) : std::string(n.is_map() ? "<mapping>" : "<sequence>");
  } catch (const std::exception&) {
    return "?";
  }
}

// Child `key` of a mapping; an absent node when `map` is absent. `path` names
// `map`. A key given twice is refused (yaml-cpp and simdjson keep both and
// would silently use the first), as the API server's strict decoding does.
template <class N>
N child(const N& map, const char* key, const Path& path) {
  if (!present(map)) return N();
  if (!map.is_map()) throw ParseFail{(path.root() ? std::string("object") : path.str()) + ": expected a mapping"};
  N found;
  if (map.find(key, &found) > 1) throw ParseFail{path.key(key).str() + ": duplicate key"};
  return found;
}

template <class N>
std::optional<std::string> opt_string(const N& map, const char* key, const Path& path) {
  const N n = child(map, key, path);
  if (!present(n)) return std::nullopt;
  if (!n.is_scalar()) throw ParseFail{path.key(key).str() + ": expected a string"};
  return n.text();
}

// A number or boolean child, never written as a string; `what` names what is
// expected ("an integer"), `read` converts the scalar.
template <class T, class N, class Read>
std::optional<T> opt_typed(const N& map, const char* key, const Path& path, const char* what, Read&& read) {
  const N n = child(map, key, path);
  if (!present(n)) return std::nullopt;
  T v{};
  if (n.is_scalar() && n.is_string())
    throw ParseFail{path.key(key).str() + ": expected " + what + ", got the string " + in_quotes(n.text())};
  if (!n.is_scalar() || !read(n, &v))
    throw ParseFail{path.key(key).str() + ": expected " + what + ", got '" + scalar_text(n) + "'"};
  return v;
}

template <class N>
std::optional<int64_t> opt_int(const N& map, const char* key, const Path& path) {
  return opt_typed<int64_t>(map, key, path, "an integer", [](const N& n, int64_t* v) { return n.to_int(v); });
}

template <class N>
std::optional<bool> opt_bool(const N& map, const char* key, const Path& path) {
  return opt_typed<bool>(map, key, path, "true or false", [](const N& n, bool* v) { return n.to_bool(v); });
}

// A sequence child; an absent node when absent or null.
template <class N>
N opt_seq(const N& map, const char* key, const Path& path) {
  const N n = child(map, key, path);
  if (!present(n)) return N();
  if (!n.is_seq()) throw ParseFail{path.key(key).str() + ": expected a list"};
  return n;
}

// A mapping of strings (labels, annotations): every key and value must be a
// string (a null value is ""), no key twice. Only the keys `keep` accepts are
// returned; the others are checked all the same.
template <class N, class Keep>
std::map<std::string, std::string> string_map(const N& map, const char* key, const Path& path, Keep&& keep) {
  std::map<std::string, std::string> out;
  const N n = child(map, key, path);
  if (!present(n)) return out;
  if (!n.is_map()) throw ParseFail{path.key(key).str() + ": expected a mapping"};
  std::set<std::string_view> dropped;  // keys not kept, for the duplicate check
  n.each_member([&](const std::string_view* k, const N& v) {
    if (!k || !(v.is_scalar() || v.null()))
      throw ParseFail{path.key(key).str() + ": expected string keys and values"};
    const bool fresh = keep(*k) ? out.emplace(std::string(*k), v.null() ? std::string() : v.text()).second
                                : dropped.insert(*k).second;
    if (!fresh) throw ParseFail{path.key(key).str() + ": duplicate key " + in_quotes(*k)};
  });
  return out;
}

template <class N>
std::string protocol_of(const N& map, const Path& path) {
  std::string p = opt_string(map, "protocol", path).value_or("TCP");
  check_protocol(p, path);
  return p;
}

// Only vipd's own annotations are kept (the object's others, such as
// kubectl's last-applied-configuration, can be large and are never read).
inline bool vipd_annotation(std::string_view key) { return key.substr(0, 8) == "vipd.io/"; }

// Reads metadata; the apiVersion check is done by the caller.
template <class N>
ObjectMeta parse_meta(const N& n) {
  ObjectMeta m;
  const Path root;
  const N md = child(n, "metadata", root);
  if (!present(md)) throw ParseFail{"metadata is missing"};
  if (!md.is_map()) throw ParseFail{"metadata: expected a mapping"};
  const Path mp = root.key("metadata");
  m.namespace_ = opt_string(md, "namespace", mp).value_or("");
  if (m.namespace_.empty()) m.namespace_ = "default";
  check_rule(dns1123_label_problem(m.namespace_), mp.key("namespace"), m.namespace_);
  m.name = opt_string(md, "name", mp).value_or("");
  if (m.name.empty()) throw ParseFail{"metadata.name is missing"};
  m.labels = string_map(md, "labels", mp, [](std::string_view) { return true; });
  check_labels(m.labels);
  m.annotations = string_map(md, "annotations", mp, vipd_annotation);
  return m;
}

// Best-effort "Kind ns/name" for error messages, without throwing.
template <class N>
std::string describe(const char* kind, const N& n) {
  try {
    const Path root;
    const N md = child(n, "metadata", root);
    const Path mp = root.key("metadata");
    std::string ns = opt_string(md, "namespace", mp).value_or("");
    std::string name = opt_string(md, "name", mp).value_or("");
    if (ns.empty()) ns = "default";
    if (!name.empty()) return std::string(kind) + " " + printable(ns) + "/" + printable(name);
  } catch (...) {
  }
  return "";
}

template <class N, class Fn>
bool guarded(const char* kind, const N& n, ObjectError* error, Fn&& fn) {
  std::string reason;
  try {
    fn();
    return true;
  } catch (const ParseFail& f) {
    reason = f.reason;
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

// `absent`: the apiVersion to assume when the object has no apiVersion key
// (items of an API list carry none); nullptr: none, the object is refused.
template <class N>
void check_api_version(const N& n, const char* want, const char* absent) {
  const Path root;
  std::string v;
  if (N a; absent && n.is_map() && n.find("apiVersion", &a) == 0) v = absent;
  else v = opt_string(n, "apiVersion", root).value_or("");
  if (v != want) throw ParseFail{"apiVersion " + in_quotes(v) + " is not supported (want " + want + ")"};
}

template <class N>
std::vector<std::string> strings(const N& map, const char* key, const Path& path) {
  std::vector<std::string> out;
  const Path lp = path.key(key);
  opt_seq(map, key, path).each([&](size_t i, const N& v) {
    if (!v.is_scalar()) throw ParseFail{lp.index(i).str() + ": expected a string"};
    out.push_back(v.text());
  });
  return out;
}

// An object of `kind`: its apiVersion, metadata and name rule, then `body`
// (the kind's own fields) inside guarded(). nullopt and *error when refused.
template <class T, class N, class NameRule, class Body>
std::optional<T> decode_object(const char* kind, const char* api_version, const N& n, ObjectError* error,
                               const char* absent_api_version, NameRule&& name_problem, Body&& body) {
  T s;
  const bool ok = guarded(kind, n, error, [&] {
    const Path root;
    check_api_version(n, api_version, absent_api_version);
    s.meta = parse_meta(n);
    check_rule(name_problem(s.meta.name), root.key("metadata.name"), s.meta.name);
    body(s, root);
  });
  if (!ok) return std::nullopt;
  return s;
}

template <class N>
std::optional<Service> decode_service(const N& n, ObjectError* error, const char* absent_api_version = nullptr) {
  return decode_object<Service>("Service", "v1", n, error, absent_api_version,
                                [](const std::string& name) { return dns1035_label_problem(name); },
                                [&](Service& s, const Path& root) {
    const N spec = child(n, "spec", root);
    if (!present(spec)) throw ParseFail{"spec is missing"};
    if (!spec.is_map()) throw ParseFail{"spec: expected a mapping"};
    const Path sp = root.key("spec");
    s.type = opt_string(spec, "type", sp).value_or("ClusterIP");
    check_service_type(s.type);
    s.cluster_ip = opt_string(spec, "clusterIP", sp).value_or("");
    check_cluster_ip(s.cluster_ip, sp.key("clusterIP"));
    const Path ipsp = sp.key("clusterIPs");
    opt_seq(spec, "clusterIPs", sp).each([&](size_t i, const N& ip) {
      const Path p = ipsp.index(i);
      if (!ip.is_scalar()) throw ParseFail{p.str() + ": expected a string"};
      std::string text = ip.text();
      check_cluster_ip(text, p);
      s.cluster_ips.push_back(std::move(text));
    });
    s.ip_families = strings(spec, "ipFamilies", sp);
    s.ip_family_policy = opt_string(spec, "ipFamilyPolicy", sp).value_or("");
    check_ip_families(s);
    std::set<std::string> names;
    std::set<std::pair<std::string, uint16_t>> numbers;
    const Path portsp = sp.key("ports");
    opt_seq(spec, "ports", sp).each([&](size_t i, const N& port) {
      const Path p = portsp.index(i);
      if (!port.is_map()) throw ParseFail{p.str() + ": expected a mapping"};
      ServicePort svp;
      svp.name = opt_string(port, "name", p).value_or("");
      if (!svp.name.empty()) check_rule(dns1123_label_problem(svp.name), p.key("name"), svp.name);
      svp.protocol = protocol_of(port, p);
      const auto num = opt_int(port, "port", p);
      if (!num) throw ParseFail{p.key("port").str() + " is missing"};
      svp.port = port_number(*num, p.key("port"));
      if (auto np = opt_int(port, "nodePort", p); np && *np != 0) svp.node_port = port_number(*np, p.key("nodePort"));
      if (!names.insert(svp.name).second) throw ParseFail{p.str() + ": duplicate port name " + in_quotes(svp.name)};
      if (!numbers.insert({svp.protocol, svp.port}).second)
        throw ParseFail{p.str() + ": duplicate port " + std::to_string(svp.port) + "/" + svp.protocol};
      s.ports.push_back(std::move(svp));
    });
    const std::string affinity = opt_string(spec, "sessionAffinity", sp).value_or("None");
    if (affinity != "None" && affinity != "ClientIP")
      throw ParseFail{"spec.sessionAffinity: " + in_quotes(affinity) + " is not None or ClientIP"};
    s.client_ip_affinity = affinity == "ClientIP";
    const N cfg = child(spec, "sessionAffinityConfig", sp);
    const N cip = child(cfg, "clientIP", root.key("spec.sessionAffinityConfig"));
    if (auto t = opt_int(cip, "timeoutSeconds", root.key("spec.sessionAffinityConfig.clientIP"))) {
      if (*t < 1 || *t > kMaxAffinityTimeoutS)
        throw ParseFail{"spec.sessionAffinityConfig.clientIP.timeoutSeconds: " + std::to_string(*t) +
                        " is out of range 1..86400"};
      s.affinity_timeout_s = static_cast<uint32_t>(*t);
    }
    auto policy = [&](const char* key) {
      const std::string v = opt_string(spec, key, sp).value_or("Cluster");
      if (v != "Cluster" && v != "Local")
        throw ParseFail{std::string("spec.") + key + ": " + in_quotes(v) + " is not Cluster or Local"};
      return v == "Local";
    };
    s.internal_policy_local = policy("internalTrafficPolicy");
    s.external_policy_local = policy("externalTrafficPolicy");
    s.external_ips = strings(spec, "externalIPs", sp);
    const Path xp = sp.key("externalIPs");
    for (size_t i = 0; i < s.external_ips.size(); ++i) check_ip(s.external_ips[i], xp.index(i));
    s.lb_source_ranges = strings(spec, "loadBalancerSourceRanges", sp);
    const N lb = child(child(n, "status", root), "loadBalancer", root.key("status"));
    const Path ingp = root.key("status.loadBalancer.ingress");
    opt_seq(lb, "ingress", root.key("status.loadBalancer")).each([&](size_t i, const N& ing) {
      const Path p = ingp.index(i);
      if (!ing.is_map()) throw ParseFail{p.str() + ": expected a mapping"};
      LoadBalancerIngress in;
      in.ip = opt_string(ing, "ip", p).value_or("");
      if (!in.ip.empty()) check_ip(in.ip, p.key("ip"));
      in.ip_mode = opt_string(ing, "ipMode", p).value_or("");
      s.lb_ingress.push_back(std::move(in));
    });
    apply_scheduler(&s);
    apply_proxy_protocol(&s);
  });
}

template <class N>
std::optional<EndpointSlice> decode_endpoint_slice(const N& n, ObjectError* error,
                                                   const char* absent_api_version = nullptr) {
  return decode_object<EndpointSlice>("EndpointSlice", "discovery.k8s.io/v1", n, error, absent_api_version,
                                      [](const std::string& name) { return dns1123_subdomain_problem(name); },
                                      [&](EndpointSlice& s, const Path& root) {
    auto type = opt_string(n, "addressType", root);
    if (!type) throw ParseFail{"addressType is missing"};
    s.address_type = std::move(*type);
    if (s.address_type != "IPv4" && s.address_type != "IPv6" && s.address_type != "FQDN")
      throw ParseFail{"addressType: " + in_quotes(s.address_type) + " is not IPv4, IPv6 or FQDN"};
    const Path epsp = root.key("endpoints");
    opt_seq(n, "endpoints", root).each([&](size_t i, const N& ep) {
      const Path p = epsp.index(i);
      if (!ep.is_map()) throw ParseFail{p.str() + ": expected a mapping"};
      Endpoint e;
      const N addrs = opt_seq(ep, "addresses", p);
      bool any = false;
      const Path ap = p.key("addresses");
      addrs.each([&](size_t j, const N& addr) {
        any = true;
        const Path apj = ap.index(j);
        if (!addr.is_scalar()) throw ParseFail{apj.str() + ": expected a string"};
        std::string a = addr.text();
        check_address(s.address_type, a, apj);
        e.addresses.push_back(std::move(a));
      });
      if (!any) throw ParseFail{p.str() + ".addresses is missing or empty"};
      const N cond = child(ep, "conditions", p);
      const Path cp = p.key("conditions");
      e.conditions.ready = opt_bool(cond, "ready", cp);
      e.conditions.serving = opt_bool(cond, "serving", cp);
      e.conditions.terminating = opt_bool(cond, "terminating", cp);
      e.node_name = opt_string(ep, "nodeName", p).value_or("");
      if (!e.node_name.empty()) check_rule(dns1123_subdomain_problem(e.node_name), p.key("nodeName"), e.node_name);
      e.zone = opt_string(ep, "zone", p).value_or("");
      const Path hp = p.key("hints");
      const Path zp = hp.key("forZones");
      opt_seq(child(ep, "hints", p), "forZones", hp).each([&](size_t j, const N& zone) {
        const Path zpj = zp.index(j);
        if (!zone.is_map()) throw ParseFail{zpj.str() + ": expected a mapping"};
        if (auto z = opt_string(zone, "name", zpj)) e.zone_hints.push_back(std::move(*z));
      });
      s.endpoints.push_back(std::move(e));
    });
    std::set<std::string> port_names;
    const Path portsp = root.key("ports");
    opt_seq(n, "ports", root).each([&](size_t i, const N& port) {
      const Path p = portsp.index(i);
      if (!port.is_map()) throw ParseFail{p.str() + ": expected a mapping"};
      EndpointPort ep;
      ep.name = opt_string(port, "name", p);
      if (ep.name && !ep.name->empty()) check_rule(dns1123_label_problem(*ep.name), p.key("name"), *ep.name);
      if (ep.name && !port_names.insert(*ep.name).second)
        throw ParseFail{p.str() + ": duplicate port name " + in_quotes(*ep.name)};
      ep.protocol = protocol_of(port, p);
      if (auto num = opt_int(port, "port", p)) ep.port = port_number(*num, p.key("port"));
      s.ports.push_back(std::move(ep));
    });
  });
}

}  // namespace vipd::cp::k8s::rules
