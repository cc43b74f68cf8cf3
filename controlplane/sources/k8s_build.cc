// Thread: control. The table build of docs/contract.md C8-C11: the entries
// one Service contributes (build_service_entries) and the whole-table build that
// merges them in (namespace, name) order, first claim of a key winning
// (build_service_table). TableIndex (k8s_index.h) keeps the same result up to
// date one Service at a time.

#include <algorithm>
#include <functional>
#include <tuple>

#include "controlplane/sources/k8s_objects.h"

namespace vipd::cp::k8s {
namespace {

struct Candidate {
  bool ready = true;
  bool serving = true;
  bool terminating = false;
  bool local = false;
  std::vector<std::string> zone_hints;
};

using Candidates = std::map<std::pair<IpAddr, uint16_t>, Candidate>;

// Endpoints of one service port in one family, merged over that family's
// slices (addressType IPv4 or IPv6), keyed by ip:port.
Candidates merge_endpoints(const ServicePort& sp, const std::vector<const EndpointSlice*>& slices,
                           const std::string& node_name, IpAddr::Family family) {
  Candidates out;
  for (const EndpointSlice* s : slices) {
    if (s->address_type != family_name(family)) continue;
    const EndpointPort* match = nullptr;
    for (const auto& p : s->ports)
      if (p.name && p.port && *p.name == sp.name && p.protocol == sp.protocol) {
        match = &p;
        break;
      }
    if (!match) continue;
    for (const auto& e : s->endpoints) {
      if (e.addresses.empty()) continue;
      const auto ip = IpAddr::parse(e.addresses.front());
      if (!ip || ip->family() != family) continue;  // validated at parse time
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

// The cluster IPs of the service, primary first, at most one per family
// (spec.clusterIPs, else spec.clusterIP; k8s_rules.h checked their families).
std::vector<IpAddr> service_vips(const Service& s) {
  std::vector<IpAddr> out;
  auto add = [&](const std::string& text) {
    auto a = IpAddr::parse(text);
    if (!a) return;
    for (const IpAddr& x : out)
      if (x.family() == a->family()) return;
    out.push_back(*a);
  };
  for (const auto& ip : s.cluster_ips) add(ip);
  if (s.cluster_ips.empty()) add(s.cluster_ip);
  return out;
}

// "a.b.c.d/n" with the host bits cleared, or nullopt for anything else (IPv6 included).
// IPv6 ranges: IpPrefix::parse_or_host.
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

// Sorted by (ip, port), duplicates dropped (ServiceTable::normalize for one entry).
void normalize_backends(std::vector<RealServer>* b) {
  std::sort(b->begin(), b->end(), [](const RealServer& x, const RealServer& y) {
    return std::tie(x.ip, x.port) < std::tie(y.ip, y.port);
  });
  b->erase(std::unique(b->begin(), b->end(),
                       [](const RealServer& x, const RealServer& y) { return x.ip == y.ip && x.port == y.port; }),
           b->end());
}

}  // namespace

std::optional<ObjectError> slice_ignored(const EndpointSlice& s) {
  const std::string id = object_id("EndpointSlice", s.meta);
  if (s.address_type != "IPv4" && s.address_type != "IPv6")
    return ObjectError{s.origin, id, "addressType " + s.address_type + " ignored (IPv4 and IPv6 only)"};
  if (s.service_name().empty())
    return ObjectError{s.origin, id, std::string("no ") + kServiceNameLabel + " label; ignored"};
  return std::nullopt;
}

int claim_rank(const VirtualService& vs) {
  if (vs.kind == ServiceKind::kClusterIp) return 0;
  if (vs.kind == ServiceKind::kNodePort) return 1;
  return 2;  // ExternalIP, LoadBalancer: written by the Service's owner
}

std::string conflict_reason(const VirtualService& loser, const VirtualService& winner) {
  std::string r = to_string(loser.key) +
                  (loser.kind == ServiceKind::kClusterIp ? "" : " (" + std::string(name(loser.kind)) + ")") +
                  " is already used by " + winner.name;
  if (claim_rank(winner) < claim_rank(loser))
    r += " (" + std::string(name(winner.kind)) + ", which takes precedence over " +
         (claim_rank(loser) == 1 ? std::string("node ports") : "external and load balancer addresses") + ")";
  return r + "; port skipped";
}

const char* conflict_kind(const VirtualService& loser, const VirtualService& winner) {
  return claim_rank(winner) < claim_rank(loser) ? "precedence" : "order";
}

ServiceEntries build_service_entries(const Service& svc, const std::vector<const EndpointSlice*>& mine,
                                     const BuildOptions& opts) {
  ServiceEntries r;
  const Service* s = &svc;
  const std::string id = object_id("Service", s->meta);
  const bool node_known = !opts.node_name.empty();
  auto note = [&](const std::string& why) { r.notes.push_back({s->origin, id, why}); };
  if (s->type == "ExternalName") { note("type ExternalName ignored"); return r; }
  if (s->meta.labels.count(kHeadlessLabel)) { note(std::string("label ") + kHeadlessLabel + ": ignored"); return r; }
  const auto proxy_label = s->meta.labels.find(kServiceProxyNameLabel);
  if (opts.service_proxy_name.empty() && proxy_label != s->meta.labels.end()) {
    note(std::string("label ") + kServiceProxyNameLabel + ": served by another proxy; ignored");
    return r;
  }
  if (!opts.service_proxy_name.empty() &&
      (proxy_label == s->meta.labels.end() || proxy_label->second != opts.service_proxy_name)) {
    note(std::string("label ") + kServiceProxyNameLabel + " is not '" + opts.service_proxy_name +
         "': served by another proxy; ignored");
    return r;
  }
  if (s->cluster_ip == "None") { note("headless (clusterIP None); ignored"); return r; }
  const std::vector<IpAddr> vips = service_vips(*s);
  if (vips.empty()) {
    note(s->cluster_ip.empty() && s->cluster_ips.empty() ? "no clusterIP; ignored" : "no usable clusterIP; ignored");
    return r;
  }
  for (const auto& f : s->ip_families) {
    const bool have =
        std::any_of(vips.begin(), vips.end(), [&](const IpAddr& a) { return family_name(a.family()) == f; });
    if (!have) note("spec.ipFamilies lists " + f + ", but there is no " + f + " clusterIP; " + f + " not served");
  }
  if ((s->internal_policy_local || s->external_policy_local) && !node_known)
    note("traffic policy Local not applied: no node name configured (--node-name); all endpoints count");
  const bool dual = vips.size() > 1;

  // Per family: the cluster IP and the external addresses of that family
  // (NodePort needs the port's nodePort; kube-proxy's per-family split).
  struct Family {
    IpAddr vip;
    std::vector<IpAddr> external_ips, lb_ips, node_ips;
    std::vector<std::string> ranges;
    bool lb_blocked = false;
  };
  std::vector<Family> fams;
  for (const IpAddr& v : vips) fams.push_back(Family{v, {}, {}, {}, {}, false});
  auto fam_of = [&](const IpAddr& a) -> Family* {
    for (auto& f : fams)
      if (f.vip.family() == a.family()) return &f;
    return nullptr;
  };
  auto add_unique = [](std::vector<IpAddr>* v, const IpAddr& a) {
    if (std::find(v->begin(), v->end(), a) == v->end()) v->push_back(a);
  };
  for (const auto& e : s->external_ips) {
    if (auto a = IpAddr::parse(e)) {
      if (Family* f = fam_of(*a)) add_unique(&f->external_ips, *a);
      else note("externalIPs: " + a->to_string() + " has no " + family_name(a->family()) + " clusterIP; skipped");
    } else {
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
      if (auto a = IpAddr::parse(in.ip)) {
        if (Family* f = fam_of(*a)) add_unique(&f->lb_ips, *a);
        else note("load-balancer ingress " + a->to_string() + " has no " + family_name(a->family()) +
                  " clusterIP; not served");
      }
    }
    for (const auto& sr : s->lb_source_ranges) {
      std::string t = sr;
      t.erase(std::remove(t.begin(), t.end(), ' '), t.end());
      if (auto c = ipv4_cidr(t)) {
        if (Family* f = fam_of(IpAddr(0u))) f->ranges.push_back(*c);
      } else if (auto p = IpPrefix::parse_or_host(t); p && p->addr.is_v6()) {
        if (Family* f = fam_of(p->addr)) f->ranges.push_back(p->to_string());
      } else {
        note("loadBalancerSourceRanges: '" + sr + "' is not an IPv4 or IPv6 CIDR; skipped");
      }
    }
    for (auto& f : fams) {
      std::sort(f.ranges.begin(), f.ranges.end());
      f.ranges.erase(std::unique(f.ranges.begin(), f.ranges.end()), f.ranges.end());
      f.lb_blocked = f.ranges.empty() && !s->lb_source_ranges.empty();
      if (f.lb_blocked) {
        const std::string fam = family_name(f.vip.family());
        note("loadBalancerSourceRanges has no " + fam + " range; " + (dual ? fam + " " : "") +
             "load-balancer IPs not served");
      }
    }
  }
  for (const IpAddr& n : opts.node_ips)
    if (Family* f = fam_of(n)) add_unique(&f->node_ips, n);

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
    for (const Family& fam : fams) {
      // Each family's entries get only that family's endpoints.
      const auto cands = merge_endpoints(sp, mine, opts.node_name, fam.vip.family());
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

      auto add = [&](const IpAddr& addr, uint16_t port, ServiceKind kind, bool policy_local,
                     const std::vector<std::string>& source_ranges) {
        if (std::find(opts.reserved_addrs.begin(), opts.reserved_addrs.end(), addr) != opts.reserved_addrs.end()) {
          r.errors.push_back({s->origin, id, std::string(name(kind)) + " " + host_port(addr, port) +
                                                 " is one of vipd's full-NAT local "
                                                 "addresses (--fnat-local-addrs); not served"});
          return;
        }
        VirtualService vs;
        vs.key = ServiceKey{addr, port, *proto};
        vs.name = s->meta.namespace_ + "/" + s->meta.name + (sp.name.empty() ? "" : ":" + sp.name);
        vs.kind = kind;
        vs.scheduler = s->scheduler.value_or(opts.default_scheduler);
        // PROXY protocol is a TCP stream header: UDP ports never carry one.
        if (*proto == Protocol::kTcp) vs.proxy_protocol = s->proxy_protocol.value_or(opts.default_proxy_protocol);
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
        normalize_backends(&vs.backends);
        r.entries.push_back(std::move(vs));
      };
      add(fam.vip, sp.port, ServiceKind::kClusterIp, s->internal_policy_local, {});
      if ((s->type == "NodePort" || s->type == "LoadBalancer") && sp.node_port)
        for (const IpAddr& nip : fam.node_ips)
          add(nip, sp.node_port, ServiceKind::kNodePort, s->external_policy_local, {});
      if (!fam.lb_blocked)
        for (const IpAddr& lip : fam.lb_ips)
          add(lip, sp.port, ServiceKind::kLoadBalancer, s->external_policy_local, fam.ranges);
      for (const IpAddr& eip : fam.external_ips)
        add(eip, sp.port, ServiceKind::kExternalIp, s->external_policy_local, {});
    }
  }
  return r;
}

BuildResult build_service_table(const std::vector<Service>& services,
                                const std::vector<EndpointSlice>& slices,
                                Scheduler default_scheduler) {
  BuildOptions o;
  o.default_scheduler = default_scheduler;
  return build_service_table(services, slices, o);
}

BuildResult build_service_table(const std::vector<Service>& services,
                                const std::vector<EndpointSlice>& slices,
                                const BuildOptions& opts) {
  BuildResult r;
  using Name = std::pair<std::string, std::string>;  // namespace, name
  // Slices: first copy of a name wins; IPv4 and IPv6; grouped by owning service.
  std::map<Name, const EndpointSlice*> slice_by_name;
  std::map<Name, std::vector<const EndpointSlice*>> slices_of;
  for (const auto& s : slices) {
    auto [it, fresh] = slice_by_name.emplace(Name{s.meta.namespace_, s.meta.name}, &s);
    if (!fresh) {
      r.errors.push_back({s.origin, object_id("EndpointSlice", s.meta), defined_again(it->second->origin)});
      continue;
    }
    if (auto why = slice_ignored(s)) {
      r.notes.push_back(std::move(*why));
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
  static const std::vector<const EndpointSlice*> kNone;
  struct Claim {
    const Service* service;
    VirtualService entry;
  };
  std::map<ServiceKey, std::vector<Claim>> claims;
  for (const Service* s : order) {
    const std::string id = object_id("Service", s->meta);
    auto [prev, fresh] = seen.emplace(Name{s->meta.namespace_, s->meta.name}, s);
    if (!fresh) {
      r.errors.push_back({s->origin, id, defined_again(prev->second->origin)});
      continue;
    }
    auto mine = slices_of.find({s->meta.namespace_, s->meta.name});
    ServiceEntries e = build_service_entries(*s, mine == slices_of.end() ? kNone : mine->second, opts);
    r.errors.insert(r.errors.end(), e.errors.begin(), e.errors.end());
    r.notes.insert(r.notes.end(), e.notes.begin(), e.notes.end());
    for (auto& vs : e.entries) claims[vs.key].push_back({s, std::move(vs)});
  }
  // Per key: the lowest claim_rank wins, then the first in (namespace, name,
  // entry order) -- the order claims were collected in (stable sort).
  for (auto& [key, list] : claims) {
    std::stable_sort(list.begin(), list.end(), [](const Claim& a, const Claim& b) {
      return claim_rank(a.entry) < claim_rank(b.entry);
    });
    const VirtualService& winner = list.front().entry;
    for (size_t i = 1; i < list.size(); ++i) {
      const Claim& c = list[i];
      r.errors.push_back({c.service->origin, object_id("Service", c.service->meta), conflict_reason(c.entry, winner),
                          conflict_kind(c.entry, winner)});
    }
    r.table.services.emplace(key, std::move(list.front().entry));
  }
  return r;
}

}  // namespace vipd::cp::k8s
