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

namespace {

struct Candidate {
  bool ready = true;
  bool serving = true;
  bool terminating = false;
  bool local = false;
  std::vector<std::string> zone_hints;
};

using Candidates = std::map<std::pair<Ipv4, uint16_t>, Candidate>;

// Endpoints of one service port, merged over all slices, keyed by ip:port.
Candidates merge_endpoints(const ServicePort& sp, const std::vector<const EndpointSlice*>& slices,
                           const std::string& node_name) {
  Candidates out;
  for (const EndpointSlice* s : slices) {
    const EndpointPort* match = nullptr;
    for (const auto& p : s->ports)
      if (p.name && p.port && *p.name == sp.name && p.protocol == sp.protocol) {
        match = &p;
        break;
      }
    if (!match) continue;
    for (const auto& e : s->endpoints) {
      if (e.addresses.empty()) continue;
      const auto ip = parse_ipv4(e.addresses.front());
      if (!ip) continue;  // validated at parse time
      Candidate c;
      c.ready = e.conditions.ready.value_or(true);
      c.serving = e.conditions.serving.value_or(true);
      c.terminating = e.conditions.terminating.value_or(false);
      c.local = !node_name.empty() && e.node_name == node_name;
      c.zone_hints = e.zone_hints;
      auto [it, inserted] = out.emplace(std::make_pair(*ip, *match->port), c);
      if (!inserted && it->second.terminating && !c.terminating) it->second = c;
    }
  }
  return out;
}

// The backends of one scope (cluster-wide or node-local), kube-proxy's
// CategorizeEndpoints: the ready endpoints that pass `keep`; if there are none,
// the serving-and-terminating ones (weight 1). Serving-and-terminating endpoints
// next to ready ones are listed with weight 0 (graceful termination).
std::vector<RealServer> select_backends(const Candidates& cands,
                                        const std::function<bool(const Candidate&)>& in_scope,
                                        const std::function<bool(const Candidate&)>& keep_ready) {
  std::vector<RealServer> out;
  bool any_ready = false;
  for (const auto& [addr, c] : cands)
    if (in_scope(c) && c.ready && keep_ready(c)) any_ready = true;
  for (const auto& [addr, c] : cands) {
    if (!in_scope(c)) continue;
    if (c.ready) {
      if (keep_ready(c)) out.push_back({addr.first, addr.second, 1, false});
    } else if (c.serving && c.terminating) {
      out.push_back({addr.first, addr.second, any_ready ? 0u : 1u, true});
    }
  }
  return out;
}

bool any_usable(const std::vector<RealServer>& b) {
  for (const auto& r : b)
    if (r.weight > 0) return true;
  return false;
}

std::string defined_again(const std::string& first_origin) {
  return first_origin.empty() ? "defined again; the first definition is used"
                              : "defined again; the first definition (in " + first_origin + ") is used";
}

std::optional<Ipv4> service_vip(const Service& s) {
  for (const auto& ip : s.cluster_ips)
    if (auto a = parse_ipv4(ip)) return a;
  return parse_ipv4(s.cluster_ip);
}

// "a.b.c.d/n" with the host bits cleared, or nullopt for anything else (IPv6 included).
std::optional<std::string> ipv4_cidr(const std::string& text) {
  const auto slash = text.find('/');
  const std::string addr = text.substr(0, slash);
  auto a = parse_ipv4(addr);
  if (!a) return std::nullopt;
  unsigned len = 32;
  if (slash != std::string::npos) {
    const std::string l = text.substr(slash + 1);
    if (l.empty() || l.size() > 2 || !std::all_of(l.begin(), l.end(), ::isdigit)) return std::nullopt;
    len = static_cast<unsigned>(std::stoul(l));
    if (len > 32) return std::nullopt;
  }
  const Ipv4 mask = len == 0 ? 0 : ~0u << (32 - len);
  return ipv4_to_string(*a & mask) + "/" + std::to_string(len);
}

}  // namespace

BuildResult build_service_table(const std::vector<Service>& services,
                                const std::vector<EndpointSlice>& slices,
                                const std::string& default_scheduler) {
  BuildOptions o;
  o.default_scheduler = default_scheduler;
  return build_service_table(services, slices, o);
}

BuildResult build_service_table(const std::vector<Service>& services,
                                const std::vector<EndpointSlice>& slices,
                                const BuildOptions& opts) {
  BuildResult r;
  using Name = std::pair<std::string, std::string>;  // namespace, name
  // Slices: first copy of a name wins; IPv4 only; grouped by owning service.
  std::map<Name, const EndpointSlice*> slice_by_name;
  std::map<Name, std::vector<const EndpointSlice*>> slices_of;
  for (const auto& s : slices) {
    const std::string id = object_id("EndpointSlice", s.meta);
    auto [it, fresh] = slice_by_name.emplace(Name{s.meta.namespace_, s.meta.name}, &s);
    if (!fresh) {
      r.errors.push_back({s.origin, id, defined_again(it->second->origin)});
      continue;
    }
    if (s.address_type != "IPv4") {
      r.notes.push_back({s.origin, id, "addressType " + s.address_type + " ignored (IPv4 only)"});
      continue;
    }
    if (s.service_name().empty()) {
      r.notes.push_back({s.origin, id, std::string("no ") + kServiceNameLabel + " label; ignored"});
      continue;
    }
    slices_of[{s.meta.namespace_, s.service_name()}].push_back(&s);
  }

  std::vector<const Service*> order;
  for (const auto& s : services) order.push_back(&s);
  std::stable_sort(order.begin(), order.end(), [](const Service* a, const Service* b) {
    return std::tie(a->meta.namespace_, a->meta.name) < std::tie(b->meta.namespace_, b->meta.name);
  });
  std::map<Name, const Service*> seen;
  const bool node_known = !opts.node_name.empty();
  for (const Service* s : order) {
    const std::string id = object_id("Service", s->meta);
    auto [prev, fresh] = seen.emplace(Name{s->meta.namespace_, s->meta.name}, s);
    if (!fresh) {
      r.errors.push_back({s->origin, id, defined_again(prev->second->origin)});
      continue;
    }
    auto note = [&](const std::string& why) { r.notes.push_back({s->origin, id, why}); };
    if (s->type == "ExternalName") { note("type ExternalName ignored"); continue; }
    if (s->meta.labels.count(kHeadlessLabel)) { note(std::string("label ") + kHeadlessLabel + ": ignored"); continue; }
    const auto proxy_label = s->meta.labels.find(kServiceProxyNameLabel);
    if (opts.service_proxy_name.empty() && proxy_label != s->meta.labels.end()) {
      note(std::string("label ") + kServiceProxyNameLabel + ": served by another proxy; ignored");
      continue;
    }
    if (!opts.service_proxy_name.empty() &&
        (proxy_label == s->meta.labels.end() || proxy_label->second != opts.service_proxy_name)) {
      note(std::string("label ") + kServiceProxyNameLabel + " is not '" + opts.service_proxy_name +
           "': served by another proxy; ignored");
      continue;
    }
    if (s->cluster_ip == "None") { note("headless (clusterIP None); ignored"); continue; }
    const auto vip = service_vip(*s);
    if (!vip) {
      note(s->cluster_ip.empty() && s->cluster_ips.empty() ? "no clusterIP; ignored"
                                                           : "no IPv4 clusterIP; ignored");
      continue;
    }
    if ((s->internal_policy_local || s->external_policy_local) && !node_known)
      note("traffic policy Local not applied: no node name configured (--node-name); all endpoints count");

    // The external addresses of the service (NodePort needs the port's nodePort).
    std::vector<Ipv4> external_ips, lb_ips;
    for (const auto& e : s->external_ips) {
      if (auto a = parse_ipv4(e)) {
        if (std::find(external_ips.begin(), external_ips.end(), *a) == external_ips.end())
          external_ips.push_back(*a);
      } else if (!is_ipv6(e)) {
        note("externalIPs: '" + e + "' is not an IP address; skipped");
      }
    }
    if (s->type == "LoadBalancer") {
      for (const auto& in : s->lb_ingress) {
        if (in.ip.empty()) continue;  // hostname only
        if (!in.ip_mode.empty() && in.ip_mode != "VIP") {
          note("load-balancer ingress " + in.ip + " has ipMode " + in.ip_mode + "; not served");
          continue;
        }
        if (auto a = parse_ipv4(in.ip))
          if (std::find(lb_ips.begin(), lb_ips.end(), *a) == lb_ips.end()) lb_ips.push_back(*a);
      }
    }
    std::vector<std::string> ranges;
    if (s->type == "LoadBalancer") {
      for (const auto& sr : s->lb_source_ranges) {
        std::string t = sr;
        t.erase(std::remove(t.begin(), t.end(), ' '), t.end());
        if (auto c = ipv4_cidr(t)) ranges.push_back(*c);
        else if (t.find(':') == std::string::npos)
          note("loadBalancerSourceRanges: '" + sr + "' is not an IPv4 CIDR; skipped");
      }
      std::sort(ranges.begin(), ranges.end());
      ranges.erase(std::unique(ranges.begin(), ranges.end()), ranges.end());
      if (ranges.empty() && !s->lb_source_ranges.empty())
        note("loadBalancerSourceRanges has no IPv4 range; load-balancer IPs not served");
    }
    const bool lb_blocked = ranges.empty() && !s->lb_source_ranges.empty();

    const auto& mine = slices_of[{s->meta.namespace_, s->meta.name}];
    for (const auto& sp : s->ports) {
      if (sp.protocol == "SCTP") {
        note("port " + (sp.name.empty() ? std::to_string(sp.port) : sp.name) +
             " SCTP ignored (TCP and UDP only)");
        continue;
      }
      const auto proto = parse_protocol(sp.protocol);
      if (!proto || sp.port == 0) {
        r.errors.push_back({s->origin, id, "port " + std::to_string(sp.port) + "/" + sp.protocol +
                                               " is not usable; skipped"});
        continue;
      }
      const auto cands = merge_endpoints(sp, mine, opts.node_name);
      // Topology: only if every ready endpoint has zone hints and one is for our zone.
      bool use_topology = !opts.node_zone.empty();
      bool zone_hinted = false;
      for (const auto& [addr, c] : cands) {
        if (!c.ready) continue;
        if (c.zone_hints.empty()) use_topology = false;
        if (std::find(c.zone_hints.begin(), c.zone_hints.end(), opts.node_zone) != c.zone_hints.end())
          zone_hinted = true;
      }
      use_topology = use_topology && zone_hinted;
      const auto all = [](const Candidate&) { return true; };
      const auto for_zone = [&](const Candidate& c) {
        return !use_topology ||
               std::find(c.zone_hints.begin(), c.zone_hints.end(), opts.node_zone) != c.zone_hints.end();
      };
      const std::vector<RealServer> cluster = select_backends(cands, all, for_zone);
      const std::vector<RealServer> local =
          select_backends(cands, [](const Candidate& c) { return c.local; }, all);
      // Any ready or serving-terminating endpoint anywhere (kube-proxy's hasAnyEndpoints).
      const bool has_any = any_usable(cluster) || any_usable(local);

      auto add = [&](Ipv4 addr, uint16_t port, const char* kind, bool policy_local,
                     const std::vector<std::string>& source_ranges) {
        VirtualService vs;
        vs.key = ServiceKey{addr, port, *proto};
        vs.name = s->meta.namespace_ + "/" + s->meta.name + (sp.name.empty() ? "" : ":" + sp.name);
        vs.kind = kind;
        vs.scheduler = s->scheduler.empty() ? opts.default_scheduler : s->scheduler;
        vs.persistence_timeout_s = s->client_ip_affinity ? s->affinity_timeout_s : 0;
        vs.source_ranges = source_ranges;
        if (policy_local && node_known) {
          vs.backends = local;
          // Local policy, nothing usable here but something elsewhere: DROP.
          vs.when_empty = !any_usable(local) && has_any ? WhenEmpty::kDrop : WhenEmpty::kReject;
        } else {
          vs.backends = cluster;
          vs.when_empty = WhenEmpty::kReject;
        }
        auto [it, fresh_key] = r.table.services.emplace(vs.key, vs);
        if (!fresh_key)
          r.errors.push_back({s->origin, id, to_string(vs.key) +
                                                 (vs.kind == "ClusterIP" ? "" : " (" + vs.kind + ")") +
                                                 " is already used by " + it->second.name + "; port skipped"});
      };
      add(*vip, sp.port, "ClusterIP", s->internal_policy_local, {});
      if ((s->type == "NodePort" || s->type == "LoadBalancer") && sp.node_port)
        for (Ipv4 nip : opts.node_ips) add(nip, sp.node_port, "NodePort", s->external_policy_local, {});
      if (!lb_blocked)
        for (Ipv4 lip : lb_ips) add(lip, sp.port, "LoadBalancer", s->external_policy_local, ranges);
      for (Ipv4 eip : external_ips) add(eip, sp.port, "ExternalIP", s->external_policy_local, {});
    }
  }
  r.table.normalize();
  return r;
}

}  // namespace vipd::cp::k8s
