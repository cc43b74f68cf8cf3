// Thread: control.
#include "controlplane/sources/k8s_objects.h"

#include <arpa/inet.h>

#include <algorithm>
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

std::string scalar_text(const YAML::Node& n) {
  try {
    return n.IsScalar() ? n.Scalar() : std::string(n.IsMap() ? "<mapping>" : "<sequence>");
  } catch (const std::exception&) {
    return "?";
  }
}

// Child `key` of a mapping; an undefined node when absent. `path` names `map`.
YAML::Node child(const YAML::Node& map, const std::string& key, const std::string& path) {
  if (!present(map)) return YAML::Node(YAML::NodeType::Undefined);
  if (!map.IsMap()) throw ParseFail{(path.empty() ? "object" : path) + ": expected a mapping"};
  return map[key];
}

std::string join(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
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
  if (!n.IsScalar() || !YAML::convert<int64_t>::decode(n, v))
    throw ParseFail{join(path, key) + ": expected an integer, got '" + scalar_text(n) + "'"};
  return v;
}

std::optional<bool> opt_bool(const YAML::Node& map, const std::string& key,
                             const std::string& path) {
  const YAML::Node n = child(map, key, path);
  if (!present(n)) return std::nullopt;
  bool v = false;
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
    out[kv.first.Scalar()] = kv.second.IsNull() ? "" : kv.second.Scalar();
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
    throw ParseFail{join(path, "protocol") + ": '" + p + "' is not TCP, UDP or SCTP"};
  return p;
}

bool is_ipv6(const std::string& s) {
  in6_addr a{};
  return inet_pton(AF_INET6, s.c_str(), &a) == 1;
}

void check_cluster_ip(const std::string& ip, const std::string& path) {
  if (ip.empty() || ip == "None" || parse_ipv4(ip) || is_ipv6(ip)) return;
  throw ParseFail{path + ": '" + ip + "' is not an IP address"};
}

// Reads metadata; the kind/apiVersion check is done by the caller.
ObjectMeta parse_meta(const YAML::Node& n) {
  ObjectMeta m;
  const YAML::Node md = child(n, "metadata", "");
  if (!present(md)) throw ParseFail{"metadata is missing"};
  if (!md.IsMap()) throw ParseFail{"metadata: expected a mapping"};
  m.namespace_ = opt_string(md, "namespace", "metadata").value_or("");
  if (m.namespace_.empty()) m.namespace_ = "default";
  m.name = opt_string(md, "name", "metadata").value_or("");
  if (m.name.empty()) throw ParseFail{"metadata.name is missing"};
  m.labels = string_map(md, "labels", "metadata");
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
    if (!name.empty()) return std::string(kind) + " " + ns + "/" + name;
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
  if (v != want) throw ParseFail{"apiVersion '" + v + "' is not supported (want " + want + ")"};
}

}  // namespace

std::string EndpointSlice::service_name() const {
  auto it = meta.labels.find(kServiceNameLabel);
  return it == meta.labels.end() ? "" : it->second;
}

std::string object_id(const char* kind, const ObjectMeta& m) {
  return std::string(kind) + " " + m.namespace_ + "/" + m.name;
}

bool is_known_scheduler(const std::string& name) {
  static const std::set<std::string> kNames = {"rr", "wrr", "lc",  "wlc", "lblc", "lblcr",
                                               "dh", "sh",  "sed", "nq",  "mh"};
  return kNames.count(name) > 0;
}

std::optional<Service> parse_service(const YAML::Node& n, ObjectError* error) {
  Service s;
  const bool ok = guarded("Service", n, error, [&] {
    check_api_version(n, "v1");
    s.meta = parse_meta(n);
    const YAML::Node spec = child(n, "spec", "");
    if (!present(spec)) throw ParseFail{"spec is missing"};
    if (!spec.IsMap()) throw ParseFail{"spec: expected a mapping"};
    s.type = opt_string(spec, "type", "spec").value_or("ClusterIP");
    if (s.type != "ClusterIP" && s.type != "NodePort" && s.type != "LoadBalancer" &&
        s.type != "ExternalName")
      throw ParseFail{"spec.type: '" + s.type + "' is not a Service type"};
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
      sp.protocol = protocol_of(ports[i], p);
      const auto num = opt_int(ports[i], "port", p);
      if (!num) throw ParseFail{p + ".port is missing"};
      sp.port = port_number(*num, p + ".port");
      if (auto np = opt_int(ports[i], "nodePort", p); np && *np != 0)
        sp.node_port = port_number(*np, p + ".nodePort");
      if (!names.insert(sp.name).second)
        throw ParseFail{p + ": duplicate port name '" + sp.name + "'"};
      if (!numbers.insert({sp.protocol, sp.port}).second)
        throw ParseFail{p + ": duplicate port " + std::to_string(sp.port) + "/" + sp.protocol};
      s.ports.push_back(std::move(sp));
    }
    const std::string affinity = opt_string(spec, "sessionAffinity", "spec").value_or("None");
    if (affinity != "None" && affinity != "ClientIP")
      throw ParseFail{"spec.sessionAffinity: '" + affinity + "' is not None or ClientIP"};
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
        throw ParseFail{std::string("spec.") + key + ": '" + v + "' is not Cluster or Local"};
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
    s.lb_source_ranges = strings(spec, "loadBalancerSourceRanges", "spec");
    const YAML::Node lb = child(child(n, "status", ""), "loadBalancer", "status");
    const YAML::Node ingress = opt_seq(lb, "ingress", "status.loadBalancer");
    for (size_t i = 0; ingress && i < ingress.size(); ++i) {
      const std::string p = index_path("status.loadBalancer.ingress", i);
      if (!ingress[i].IsMap()) throw ParseFail{p + ": expected a mapping"};
      LoadBalancerIngress in;
      in.ip = opt_string(ingress[i], "ip", p).value_or("");
      in.ip_mode = opt_string(ingress[i], "ipMode", p).value_or("");
      s.lb_ingress.push_back(std::move(in));
    }
    auto sched = s.meta.annotations.find(kSchedulerAnnotation);
    if (sched != s.meta.annotations.end()) {
      if (!is_known_scheduler(sched->second))
        throw ParseFail{std::string("annotation ") + kSchedulerAnnotation + ": '" + sched->second +
                        "' is not a known scheduler"};
      s.scheduler = sched->second;
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
    const auto type = opt_string(n, "addressType", "");
    if (!type) throw ParseFail{"addressType is missing"};
    s.address_type = *type;
    if (s.address_type != "IPv4" && s.address_type != "IPv6" && s.address_type != "FQDN")
      throw ParseFail{"addressType: '" + s.address_type + "' is not IPv4, IPv6 or FQDN"};
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
          throw ParseFail{ap + ": '" + a + "' is not an IPv4 address"};
        if (s.address_type == "IPv6" && !is_ipv6(a))
          throw ParseFail{ap + ": '" + a + "' is not an IPv6 address"};
        e.addresses.push_back(a);
      }
      const YAML::Node cond = child(eps[i], "conditions", p);
      const std::string cp = p + ".conditions";
      e.conditions.ready = opt_bool(cond, "ready", cp);
      e.conditions.serving = opt_bool(cond, "serving", cp);
      e.conditions.terminating = opt_bool(cond, "terminating", cp);
      e.node_name = opt_string(eps[i], "nodeName", p).value_or("");
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
    for (size_t i = 0; ports && i < ports.size(); ++i) {
      const std::string p = index_path("ports", i);
      if (!ports[i].IsMap()) throw ParseFail{p + ": expected a mapping"};
      EndpointPort ep;
      ep.name = opt_string(ports[i], "name", p);
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
        std::string id = describe(kind.c_str(), n);
        out->notes.push_back({"", id.empty() ? label : id, "kind " + kind + " is not used; skipped"});
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
