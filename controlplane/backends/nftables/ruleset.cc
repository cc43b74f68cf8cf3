// Thread: any (pure functions).
#include "controlplane/backends/nftables/ruleset.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <sstream>
#include <string_view>
#include <unordered_map>

#include "controlplane/backends/iptables/chain_names.h"
#include "controlplane/backends/iptables/comment.h"
#include "controlplane/backends/iptables/ruleset.h"

namespace vipd::cp::nft {
namespace {

// nft rule comments are at most 128 bytes; the text goes through the iptables
// mode's sanitiser, so a quote or newline from a Kubernetes name never reaches
// the transaction.
std::string comment(const std::string& text) { return "comment \"" + ipt::comment_text(text, 128) + "\""; }

std::string hex(uint32_t m) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%x", m);
  return buf;
}


std::string key_text(const ServiceKey& k) {
  return k.vip.to_string() + " . " + ipt::protocol_lower(k.protocol) + " . " + std::to_string(k.port);
}

// "10.0.0.1:80", "[fd00::1]:80" (nft's dnat form for IPv6)
std::string endpoint_str(const RealServer& b) { return host_port(b.ip, b.port); }

const char* fam(bool v6) { return v6 ? "ip6" : "ip"; }
const char* addr_type(bool v6) { return v6 ? "ipv6_addr" : "ipv4_addr"; }
std::string decl_key(bool v6) {
  return std::string("type ") + addr_type(v6) + " . inet_proto . inet_service : verdict";
}

}  // namespace

bool render_entry(const VirtualService& svc, const std::string& hash_input, const RenderOptions& opts,
                  EntryRender* out, std::string* error) {
  EntryRender r;
  const bool v6 = svc.key.vip.is_v6();
  r.v6 = v6;
  const std::string saddr = std::string(fam(v6)) + " saddr";
  std::vector<std::string> ranges_text;
  for (const auto& range : svc.source_ranges) {
    if (v6) {
      const auto pfx = IpPrefix::parse(range);
      if (!pfx || !pfx->addr.is_v6()) {
        *error = "nftables: service " + svc.name + " (" + to_string(svc.key) + "): source range '" + range +
                 "' is not an IPv6 CIDR (the VIP is IPv6)";
        return false;
      }
      ranges_text.push_back(pfx->to_string());
      continue;
    }
    ranges_text.push_back(range);
    if (!valid_ipv4_cidr(range)) {
      *error = "nftables: service " + svc.name + " (" + to_string(svc.key) + "): source range '" + range +
               "' is not an IPv4 CIDR a.b.c.d/n";
      return false;
    }
  }
  const std::string key = key_text(svc.key);
  // A real server of the other family cannot be a DNAT target of this table: left out.
  std::vector<const RealServer*> active;
  for (const auto& b : svc.backends)
    if (b.weight > 0 && b.ip.family() == svc.key.vip.family()) active.push_back(&b);
  if (active.empty()) {
    r.elements.push_back({"no-endpoint-services", key,
                          svc.when_empty == WhenEmpty::kDrop ? "drop" : "goto reject-chain"});
    *out = std::move(r);
    return true;
  }
  const std::string hash = ipt::chain_hash(hash_input);
  const std::string svc_chain = "svc-" + hash;
  r.elements.push_back({svc.kind == ServiceKind::kNodePort ? "service-nodeports" : "service-ips", key, "goto " + svc_chain});
  if (!svc.source_ranges.empty()) {
    const std::string fw_chain = "fw-" + hash;
    std::string ranges;
    for (const auto& s : ranges_text) ranges += (ranges.empty() ? "" : ", ") + s;
    r.chains.push_back({fw_chain, {saddr + " != { " + ranges + " } drop " +
                                   comment(svc.name + " traffic not from loadBalancerSourceRanges")}});
    r.elements.push_back({"firewall-ips", key, "goto " + fw_chain});
  }
  Chain sc{svc_chain, {}};
  if (opts.masquerade_all) sc.rules.push_back("jump mark-for-masquerade");
  const uint32_t timeout = svc.persistence_timeout_s;
  const char* p = ipt::protocol_lower(svc.key.protocol);
  if (opts.masquerade_all && timeout == 0) {
    // Compact form: with every flow marked above there is no per-endpoint
    // hairpin rule and no affinity set, so the service chain DNATs itself
    // (a numgen-indexed map of endpoints) and owns no endpoint chains. Each
    // commit makes the kernel validate every chain the hooks reach, so one
    // chain per service instead of 1 + endpoints is what a partial sync pays.
    const std::string how = active.size() == 1 ? std::string("dnat to ") + endpoint_str(*active[0]) : [&] {
      std::string m = std::string("dnat ") + fam(v6) + " to numgen random mod " + std::to_string(active.size()) + " map { ";
      for (size_t i = 0; i < active.size(); ++i)
        m += (i ? ", " : "") + std::to_string(i) + " : " + active[i]->ip.to_string() + " . " +
             std::to_string(active[i]->port);
      return m + " }";
    }();
    sc.rules.push_back(std::string("meta l4proto ") + p + " " + how + " " +
                       comment(active.size() == 1 ? svc.name + " -> " + endpoint_str(*active[0])
                                                  : svc.name + " " + name(svc.kind)));
    r.chains.push_back(std::move(sc));
    *out = std::move(r);
    return true;
  }
  std::vector<std::string> seps, affs;
  for (const RealServer* b : active) {
    const std::string h = ipt::chain_hash(hash_input + endpoint_str(*b));
    seps.push_back("sep-" + h);
    if (timeout > 0) affs.push_back("aff-" + h + "-" + std::to_string(timeout));
  }
  for (size_t i = 0; i < affs.size(); ++i) {
    r.sets[affs[i]] = std::string("type ") + addr_type(v6) + "; flags dynamic,timeout; timeout " + std::to_string(timeout) + "s;";
    sc.rules.push_back(saddr + " @" + affs[i] + " goto " + seps[i]);
  }
  std::string vmap;
  for (size_t i = 0; i < seps.size(); ++i) vmap += (i ? ", " : "") + std::to_string(i) + " : goto " + seps[i];
  sc.rules.push_back("numgen random mod " + std::to_string(seps.size()) + " vmap { " + vmap + " } " +
                     comment(svc.name + " " + name(svc.kind)));
  r.chains.push_back(std::move(sc));
  for (size_t i = 0; i < active.size(); ++i) {
    Chain sep{seps[i], {}};
    sep.rules.push_back(saddr + " " + active[i]->ip.to_string() + " jump mark-for-masquerade");
    if (timeout > 0) sep.rules.push_back("update @" + affs[i] + " { " + saddr + " }");
    sep.rules.push_back(std::string("meta l4proto ") + p + " dnat to " + endpoint_str(*active[i]) + " " +
                        comment(svc.name + " -> " + endpoint_str(*active[i])));
    r.chains.push_back(std::move(sep));
  }
  *out = std::move(r);
  return true;
}

bool Desired::has_cluster_ip(const Vip& v) const {
  auto it = std::lower_bound(cluster_ips.begin(), cluster_ips.end(), std::pair<Vip, int>{v, 0},
                             [](const auto& x, const auto& y) { return x.first < y.first; });
  return it != cluster_ips.end() && it->first == v;
}

bool build_desired(const ServiceTable& table, const RenderOptions& opts, const Desired& prev, Desired* out,
                   size_t* rendered, std::string* error) {
  Desired d;
  size_t fresh = 0;
  // Pass 1: each entry's previous state when its VirtualService is unchanged
  // (a merge walk: both maps are ordered by key), else its hash input.
  struct Item {
    const ServiceKey* key;
    const VirtualService* svc;
    const std::shared_ptr<const Desired::Entry>* old;  // in prev: unchanged VirtualService
    std::string base;                                   // entry_hash_input, only when !old
  };
  std::vector<Item> items;
  items.reserve(table.services.size());
  auto p = prev.entries.begin();
  for (const auto& [key, svc] : table.services) {
    while (p != prev.entries.end() && p->first < key) ++p;
    const std::shared_ptr<const Desired::Entry>* old =
        p != prev.entries.end() && p->first == key && p->second->svc == svc ? &p->second : nullptr;
    items.push_back({&key, &svc, old, old ? std::string() : ipt::entry_hash_input(svc)});
  }
  // Chain names collide when two entries have the same hash input: both then
  // use the extended one. Counted by the inputs' 64-bit hashes, sorted (one
  // array; two inputs that only share a hash get the extended names too,
  // which is harmless).
  const auto base_of = [](const Item& it) -> const std::string& { return it.old ? (*it.old)->base_input : it.base; };
  std::vector<size_t> hashes;
  hashes.reserve(items.size());
  for (const auto& it : items) hashes.push_back(std::hash<std::string>{}(base_of(it)));
  std::vector<size_t> sorted = hashes;
  std::sort(sorted.begin(), sorted.end());
  d.entries.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    const Item& it = items[i];
    const VirtualService& svc = *it.svc;
    const Desired::Entry* old = it.old ? it.old->get() : nullptr;
    const std::string& base = base_of(it);
    const auto range = std::equal_range(sorted.begin(), sorted.end(), hashes[i]);
    const bool collides = range.second - range.first > 1;
    if (svc.kind == ServiceKind::kClusterIp) {
      // keys are ordered by VIP first: equal VIPs are adjacent
      if (!d.cluster_ips.empty() && d.cluster_ips.back().first == it.key->vip)
        ++d.cluster_ips.back().second;
      else
        d.cluster_ips.emplace_back(it.key->vip, 1);
    }
    if (old && (old->hash_input != old->base_input) == collides) {
      d.chain_count += old->render.chains.size();
      d.entries.emplace_back(*it.key, *it.old);
      continue;
    }
    auto e = std::make_shared<Desired::Entry>(
        Desired::Entry{svc, collides ? ipt::entry_hash_input_extended(svc) : base, {}, base});
    if (!render_entry(svc, e->hash_input, opts, &e->render, error)) return false;
    ++fresh;
    d.chain_count += e->render.chains.size();
    d.entries.emplace_back(*it.key, std::move(e));
  }
  if (rendered) *rendered = fresh;
  *out = std::move(d);
  return true;
}

std::string render_base(const RenderOptions& opts, bool v6) {
  const std::string mark = hex(opts.masq_mark);
  const std::string kDeclKey = decl_key(v6);
  const std::string m = std::string(fam(v6)) + " daddr . meta l4proto . th dport";
  std::ostringstream o;
  o << "table " << fam(v6) << " " << kTable << " {\n"
    << "\tmap service-ips { " << kDeclKey << "; comment \"ClusterIP, ExternalIP and LoadBalancer IP traffic\"; }\n"
    << "\tmap service-nodeports { " << kDeclKey << "; comment \"NodePort traffic\"; }\n"
    << "\tmap no-endpoint-services { " << kDeclKey << "; comment \"services without usable endpoints\"; }\n"
    << "\tmap firewall-ips { " << kDeclKey << "; comment \"loadBalancerSourceRanges\"; }\n"
    << "\tset cluster-ips { type " << addr_type(v6) << "; comment \"active ClusterIPs\"; }\n"
    << "\tchain reject-chain {\n\t\treject comment \"service has no endpoints\"\n\t}\n"
    << "\tchain mark-for-masquerade {\n\t\tmeta mark set meta mark | " << mark << "\n\t}\n"
    << "\tchain masquerading {\n\t\tmeta mark & " << mark << " == 0 return\n\t\tmeta mark set meta mark ^ " << mark
    << "\n\t\tmasquerade fully-random " << comment("vipd service traffic requiring SNAT") << "\n\t}\n"
    << "\tchain services {\n\t\t" << m << " vmap @service-ips\n\t\t" << m << " vmap @service-nodeports\n\t}\n"
    << "\tchain service-endpoints-check {\n\t\t" << m << " vmap @no-endpoint-services\n\t}\n"
    << "\tchain firewall-check {\n\t\t" << m << " vmap @firewall-ips\n\t}\n"
    << "\tchain cluster-ips-check {\n\t\t" << fam(v6) << " daddr @cluster-ips reject "
    << comment("traffic to ports of cluster IPs that no service has") << "\n\t}\n"
    << "\tchain filter-prerouting {\n\t\ttype filter hook prerouting priority -110; policy accept;\n"
    << "\t\tct state new jump firewall-check\n\t}\n"
    << "\tchain filter-input {\n\t\ttype filter hook input priority -10; policy accept;\n"
    << "\t\tct state new jump service-endpoints-check\n\t}\n"
    << "\tchain filter-forward {\n\t\ttype filter hook forward priority -10; policy accept;\n"
    << "\t\tct state new jump service-endpoints-check\n\t\tct state new jump cluster-ips-check\n\t}\n"
    << "\tchain filter-output {\n\t\ttype filter hook output priority -10; policy accept;\n"
    << "\t\tct state new jump service-endpoints-check\n\t\tct state new jump firewall-check\n\t}\n"
    << "\tchain filter-output-post-dnat {\n\t\ttype filter hook output priority -90; policy accept;\n"
    << "\t\tct state new jump cluster-ips-check\n\t}\n"
    << "\tchain nat-prerouting {\n\t\ttype nat hook prerouting priority -100; policy accept;\n"
    << "\t\tjump services\n\t}\n"
    << "\tchain nat-output {\n\t\ttype nat hook output priority -100; policy accept;\n\t\tjump services\n\t}\n"
    << "\tchain nat-postrouting {\n\t\ttype nat hook postrouting priority 100; policy accept;\n"
    << "\t\tjump masquerading\n\t}\n"
    << "}\n";
  return o.str();
}

namespace {

// Object names inside the transaction code: an IPv4 entry's chains, sets and
// maps by their names, an IPv6 entry's with kV6Suffix appended (the two tables
// hold objects of the same names); q() turns one into "ip vipd NAME" /
// "ip6 vipd NAME".
constexpr std::string_view kV6Suffix = "/6";

std::string key_of(const std::string& name, bool v6) { return v6 ? name + std::string(kV6Suffix) : name; }

std::string q(const std::string& key) {
  const bool v6 = key.size() > kV6Suffix.size() && key.compare(key.size() - kV6Suffix.size(), kV6Suffix.size(), kV6Suffix) == 0;
  return std::string(fam(v6)) + " " + kTable + " " + (v6 ? key.substr(0, key.size() - kV6Suffix.size()) : key);
}

void add_rules(std::ostringstream& o, const Chain& c, bool v6) {
  for (const auto& r : c.rules) o << "add rule " << fam(v6) << " " << kTable << " " << c.name << " " << r << "\n";
}

// One `add element` (or delete) command per map, elements batched.
void emit_elements(std::ostringstream& o, const char* verb, const std::map<std::string, std::vector<std::string>>& by_map) {
  for (const auto& [map, items] : by_map) {
    if (items.empty()) continue;
    o << verb << " element " << q(map) << " { ";
    for (size_t i = 0; i < items.size(); ++i) o << (i ? ", " : "") << items[i];
    o << " }\n";
  }
}

std::string elem(const Element& e, bool with_value) {
  return with_value && !e.value.empty() ? e.key + " : " + e.value : e.key;
}

}  // namespace

Transaction render_full(const Desired& next, const RenderOptions& opts) {
  Transaction t;
  std::ostringstream o;
  o << "add table ip " << kTable << "\ndelete table ip " << kTable << "\n" << render_base(opts, false);
  // table ip6 vipd: deleted too (a table of an earlier run with IPv6 entries),
  // declared only when there are IPv6 entries
  o << "add table ip6 " << kTable << "\ndelete table ip6 " << kTable << "\n";
  if (next.has_v6()) o << render_base(opts, true);
  std::map<std::string, std::vector<std::string>> adds;
  for (const auto& [k, e] : next.entries) {
    for (const auto& [name, decl] : e->render.sets) o << "add set " << q(key_of(name, e->render.v6)) << " { " << decl << " }\n";
    for (const auto& c : e->render.chains) o << "add chain " << q(key_of(c.name, e->render.v6)) << "\n";
  }
  for (const auto& [k, e] : next.entries) {
    for (const auto& c : e->render.chains) add_rules(o, c, e->render.v6);
    t.chains_written += e->render.chains.size();
    for (const auto& el : e->render.elements) adds[key_of(el.map, e->render.v6)].push_back(elem(el, true));
  }
  for (const auto& [ip, n] : next.cluster_ips) adds[key_of("cluster-ips", ip.is_v6())].push_back(ip.to_string());
  for (const auto& [m, v] : adds) t.elements_added += v.size();
  emit_elements(o, "add", adds);
  t.text = o.str();
  return t;
}

Transaction render_delta(const Desired& prev, const Desired& next) {
  // The entries that differ (an O(N) merge walk; unchanged entries compare
  // their inputs only, never their renders).
  std::map<std::string, const Chain*> old_chains, new_chains;
  std::map<std::string, const std::string*> old_sets, new_sets;
  std::map<std::pair<std::string, std::string>, const Element*> old_elems, new_elems;
  // keyed by key_of(name, family)
  auto take = [](const EntryRender& r, auto& chains, auto& sets, auto& elems) {
    for (const auto& c : r.chains) chains[key_of(c.name, r.v6)] = &c;
    for (const auto& [n, d] : r.sets) sets[key_of(n, r.v6)] = &d;
    for (const auto& e : r.elements) elems[{key_of(e.map, r.v6), e.key}] = &e;
  };
  auto a = prev.entries.begin(), b = next.entries.begin();
  while (a != prev.entries.end() || b != next.entries.end()) {
    if (b == next.entries.end() || (a != prev.entries.end() && a->first < b->first)) {
      take(a->second->render, old_chains, old_sets, old_elems);
      ++a;
    } else if (a == prev.entries.end() || b->first < a->first) {
      take(b->second->render, new_chains, new_sets, new_elems);
      ++b;
    } else {
      const Desired::Entry& x = *a->second;
      const Desired::Entry& y = *b->second;
      if (&x != &y && !(x.svc == y.svc && x.hash_input == y.hash_input) && !(x.render == y.render)) {
        take(x.render, old_chains, old_sets, old_elems);
        take(y.render, new_chains, new_sets, new_elems);
      }
      ++a;
      ++b;
    }
  }

  Transaction t;
  std::ostringstream o;
  std::set<std::string> retired_chains = prev.retired_chains, retired_sets = prev.retired_sets;
  // 1. sets (re)declared: `add set` is idempotent, and it puts a set that
  // already exists into nft's cache, so the rules below can name it without a
  // set cache fetch; then new chains, empty (before anything refers to them)
  for (const auto& [n, d] : new_sets) {
    o << "add set " << q(n) << " { " << *d << " }\n";
    retired_sets.erase(n);
  }
  for (const auto& [n, c] : new_chains)
    if (!old_chains.count(n)) {
      o << "add chain " << q(n) << "\n";
      retired_chains.erase(n);  // an empty retired chain is reused
    }
  // 2. elements that go or change value (they may refer to chains flushed below)
  std::map<std::string, std::vector<std::string>> dels, adds;
  for (const auto& [k, e] : old_elems) {
    auto n = new_elems.find(k);
    if (n == new_elems.end() || n->second->value != e->value) dels[k.first].push_back(elem(*e, false));
  }
  for (const auto& [k, e] : new_elems) {
    auto n = old_elems.find(k);
    if (n == old_elems.end() || n->second->value != e->value) adds[k.first].push_back(elem(*e, true));
  }
  // cluster-ips: a set element per ClusterIP VIP in use
  if (prev.cluster_ips.size() != next.cluster_ips.size() ||
      !std::equal(prev.cluster_ips.begin(), prev.cluster_ips.end(), next.cluster_ips.begin(),
                  [](const auto& x, const auto& y) { return x.first == y.first; })) {
    for (const auto& [ip, n] : prev.cluster_ips)
      if (!next.has_cluster_ip(ip)) dels[key_of("cluster-ips", ip.is_v6())].push_back(ip.to_string());
    for (const auto& [ip, n] : next.cluster_ips)
      if (!prev.has_cluster_ip(ip)) adds[key_of("cluster-ips", ip.is_v6())].push_back(ip.to_string());
  }
  for (const auto& [m, v] : dels) t.elements_deleted += v.size();
  for (const auto& [m, v] : adds) t.elements_added += v.size();
  emit_elements(o, "delete", dels);
  // 3. chains rewritten or no longer used: flushed (which drops their references)
  for (const auto& [n, c] : old_chains) {
    auto nc = new_chains.find(n);
    if (nc == new_chains.end() || nc->second->rules != c->rules) o << "flush chain " << q(n) << "\n";
  }
  // 4. new and rewritten chains filled, one `add chain NAME { rules }` each
  // (rules before the chains that jump to them are irrelevant: all exist now)
  for (const auto& [n, c] : new_chains) {
    auto oc = old_chains.find(n);
    if (oc == old_chains.end() || oc->second->rules != c->rules) {
      o << "add chain " << q(n) << " {";
      for (const auto& r : c->rules) o << " " << r << ";";
      o << " }\n";
      ++t.chains_written;
    }
  }
  // 5. new elements (their chains are filled now)
  emit_elements(o, "add", adds);
  // 6. chains and sets nothing refers to any more: retired (deleted in bulk)
  for (const auto& [n, c] : old_chains)
    if (!new_chains.count(n)) {
      retired_chains.insert(n);
      ++t.chains_retired;
    }
  for (const auto& [n, d] : old_sets)
    if (!new_sets.count(n)) retired_sets.insert(n);
  if (retired_chains.size() + retired_sets.size() >= kRetiredLimit) {
    for (const auto& n : retired_chains) o << "delete chain " << q(n) << "\n";
    for (const auto& n : retired_sets) o << "delete set " << q(n) << "\n";
    t.chains_deleted = retired_chains.size();
    retired_chains.clear();
    retired_sets.clear();
  }
  t.retired_chains = std::move(retired_chains);
  t.retired_sets = std::move(retired_sets);
  t.text = o.str();
  return t;
}

std::string dry_run_text(const Desired& d, const RenderOptions& opts) {
  std::ostringstream o;
  o << "# vipd nftables mode: the full-sync transaction (nft -f; nft -c -f checks it): " << d.entries.size()
    << " service entries, " << d.chains() << " service chains, masquerade "
    << (opts.masquerade_all ? "all service traffic (fnat)" : "hairpin only (nat)") << "\n";
  o << render_full(d, opts).text;
  return o.str();
}

}  // namespace vipd::cp::nft
