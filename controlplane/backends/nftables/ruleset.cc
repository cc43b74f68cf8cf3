// Thread: any (pure functions). The transactions: the tables' fixed objects
// (render_base, render_shard_base), a full sync (render_full), the delta
// between two desired states (render_delta, emit_delta) and the dry-run text.
// One entry's objects: entry.cc; the desired state: desired.cc.
#include "controlplane/backends/nftables/ruleset.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <sstream>
#include <string_view>
#include <unordered_map>

#include "controlplane/backends/nftables/ruleset_internal.h"

namespace vipd::cp::nft {

using detail::EntryPair;
using detail::addr_type;
using detail::comment;
using detail::fam;
using detail::hex;

namespace {

std::string decl_key(bool v6) {
  return std::string("type ") + addr_type(v6) + " . inet_proto . inet_service : verdict";
}

}  // namespace

std::string shard_table(bool v6, uint32_t shard) {
  std::string t = std::string(fam(v6)) + " " + kTable;
  if (shard) t += "-" + std::to_string(shard);
  return t;
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

std::string render_shard_base(const RenderOptions& opts, bool v6, uint32_t shard) {
  const std::string mark = hex(opts.masq_mark);
  const std::string kDeclKey = decl_key(v6);
  const std::string m = std::string(fam(v6)) + " daddr . meta l4proto . th dport";
  std::ostringstream o;
  o << "table " << shard_table(v6, shard) << " {\n"
    << "\tmap service-ips { " << kDeclKey << "; comment \"ClusterIP, ExternalIP and LoadBalancer IP traffic\"; }\n"
    << "\tmap service-nodeports { " << kDeclKey << "; comment \"NodePort traffic\"; }\n"
    << "\tchain mark-for-masquerade {\n\t\tmeta mark set meta mark | " << mark << "\n\t}\n"
    << "\tchain services {\n\t\t" << m << " vmap @service-ips\n\t\t" << m << " vmap @service-nodeports\n\t}\n"
    << "\tchain nat-prerouting {\n\t\ttype nat hook prerouting priority -100; policy accept;\n"
    << "\t\tjump services\n\t}\n"
    << "\tchain nat-output {\n\t\ttype nat hook output priority -100; policy accept;\n\t\tjump services\n\t}\n"
    << "}\n";
  return o.str();
}

namespace {

// Object names inside the transaction code: an IPv4 entry's chains, sets and
// maps in table ip vipd by their names; in shard table k "@k" appended; an
// IPv6 entry's with kV6Suffix appended after that (the tables hold objects of
// the same names). q() turns one into "ip vipd NAME" / "ip vipd-3 NAME" /
// "ip6 vipd NAME".
constexpr std::string_view kV6Suffix = "/6";

// Objects of an entry that stay in table ip/ip6 vipd whatever its shard.
bool in_main_table(const std::string& name) {
  return name.compare(0, 3, "fw-") == 0 || name == "firewall-ips" || name == "no-endpoint-services" ||
         name == "cluster-ips";
}

std::string key_of(const std::string& name, bool v6, uint32_t shard = 0) {
  std::string k = name;
  if (shard && !in_main_table(name)) k += "@" + std::to_string(shard);
  if (v6) k += kV6Suffix;
  return k;
}

std::string q(const std::string& key) {
  const bool v6 = key.size() > kV6Suffix.size() && key.compare(key.size() - kV6Suffix.size(), kV6Suffix.size(), kV6Suffix) == 0;
  std::string name = v6 ? key.substr(0, key.size() - kV6Suffix.size()) : key;
  uint32_t shard = 0;
  const size_t at = name.rfind('@');
  if (at != std::string::npos) {
    shard = static_cast<uint32_t>(std::stoul(name.substr(at + 1)));
    name.resize(at);
  }
  return shard_table(v6, shard) + " " + name;
}

void add_rules(std::ostringstream& o, const Chain& c, bool v6, uint32_t shard) {
  const std::string t = shard_table(v6, in_main_table(c.name) ? 0 : shard);
  for (const auto& r : c.rules) o << "add rule " << t << " " << c.name << " " << r << "\n";
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

// Tables `list tables` printed that are shard tables of vipd ("ip vipd-3").
bool is_shard_table(const std::string& t) {
  for (const char* f : {"ip ", "ip6 "}) {
    const std::string p = std::string(f) + kTable + "-";
    if (t.size() > p.size() && t.compare(0, p.size(), p) == 0 &&
        t.find_first_not_of("0123456789", p.size()) == std::string::npos)
      return true;
  }
  return false;
}

}  // namespace

Transaction render_full(const Desired& next, const RenderOptions& opts, const std::vector<std::string>& existing) {
  Transaction t;
  std::ostringstream o;
  o << "add table ip " << kTable << "\ndelete table ip " << kTable << "\n" << render_base(opts, false);
  // table ip6 vipd: deleted too (a table of an earlier run with IPv6 entries),
  // declared only when there are IPv6 entries
  o << "add table ip6 " << kTable << "\ndelete table ip6 " << kTable << "\n";
  if (next.has_v6()) o << render_base(opts, true);
  // shard tables: every one the kernel holds is deleted (an earlier run may
  // have had more), the ones in use declared afresh
  std::set<std::string> gone;
  for (const auto& e : existing)
    if (is_shard_table(e)) gone.insert(e);
  for (int f = 0; f < 2; ++f)
    for (uint32_t k = 1; k < next.shard_fill[f].size(); ++k) gone.insert(shard_table(f == 1, k));
  for (const auto& g : gone) o << "add table " << g << "\ndelete table " << g << "\n";
  for (int f = 0; f < 2; ++f)
    for (uint32_t k = 1; k < next.shard_fill[f].size(); ++k) o << render_shard_base(opts, f == 1, k);
  std::map<std::string, std::vector<std::string>> adds;
  for (const auto& [k, e] : next.entries) {
    for (const auto& [name, decl] : e->render.sets)
      o << "add set " << q(key_of(name, e->render.v6, e->shard)) << " { " << decl << " }\n";
    for (const auto& c : e->render.chains) o << "add chain " << q(key_of(c.name, e->render.v6, e->shard)) << "\n";
  }
  for (const auto& [k, e] : next.entries) {
    for (const auto& c : e->render.chains) add_rules(o, c, e->render.v6, e->shard);
    t.chains_written += e->render.chains.size();
    for (const auto& el : e->render.elements) adds[key_of(el.map, e->render.v6, e->shard)].push_back(elem(el, true));
  }
  for (const auto& [ip, n] : next.cluster_ips) adds[key_of("cluster-ips", ip.is_v6())].push_back(ip.to_string());
  for (const auto& [m, v] : adds) t.elements_added += v.size();
  emit_elements(o, "add", adds);
  t.text = o.str();
  return t;
}

Transaction detail::emit_delta(const std::vector<EntryPair>& pairs, const std::vector<Desired::Vip>& cip_add,
                               const std::vector<Desired::Vip>& cip_del,
                               const std::vector<std::pair<bool, uint32_t>>& new_shards, const RenderOptions& opts,
                               std::set<std::string> retired_chains, std::set<std::string> retired_sets) {
  std::map<std::string, const Chain*> old_chains, new_chains;
  std::map<std::string, const std::string*> old_sets, new_sets;
  std::map<std::pair<std::string, std::string>, const Element*> old_elems, new_elems;
  std::map<std::string, std::pair<bool, uint32_t>> where;  // chain key -> (v6, shard)
  // keyed by key_of(name, family, shard)
  auto take = [&where](const Desired::Entry& x, auto& chains, auto& sets, auto& elems) {
    const EntryRender& r = x.render;
    for (const auto& c : r.chains) {
      const std::string k = key_of(c.name, r.v6, x.shard);
      chains[k] = &c;
      where[k] = {r.v6, x.shard};
    }
    for (const auto& [n, d] : r.sets) sets[key_of(n, r.v6, x.shard)] = &d;
    for (const auto& e : r.elements) elems[{key_of(e.map, r.v6, x.shard), e.key}] = &e;
  };
  for (const auto& [x, y] : pairs) {
    if (x) take(*x, old_chains, old_sets, old_elems);
    if (y) take(*y, new_chains, new_sets, new_elems);
  }

  Transaction t;
  std::ostringstream o;
  // 0. shard tables used for the first time since the last full sync
  for (const auto& [v6, k] : new_shards) o << render_shard_base(opts, v6, k);
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
  for (const auto& ip : cip_del) dels[key_of("cluster-ips", ip.is_v6())].push_back(ip.to_string());
  for (const auto& ip : cip_add) adds[key_of("cluster-ips", ip.is_v6())].push_back(ip.to_string());
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

namespace {

std::vector<std::pair<bool, uint32_t>> shards_added(const Desired& prev, const Desired& next) {
  std::vector<std::pair<bool, uint32_t>> out;
  for (int f = 0; f < 2; ++f)
    for (size_t k = std::max<size_t>(1, prev.shard_fill[f].size()); k < next.shard_fill[f].size(); ++k)
      out.emplace_back(f == 1, static_cast<uint32_t>(k));
  return out;
}

}  // namespace

Transaction render_delta(const Desired& prev, const Desired& next) {
  // The entries that differ (an O(N) merge walk; unchanged entries compare
  // their inputs only, never their renders).
  std::vector<EntryPair> pairs;
  auto a = prev.entries.begin(), b = next.entries.begin();
  while (a != prev.entries.end() || b != next.entries.end()) {
    if (b == next.entries.end() || (a != prev.entries.end() && a->first < b->first)) {
      pairs.emplace_back(a->second.get(), nullptr);
      ++a;
    } else if (a == prev.entries.end() || b->first < a->first) {
      pairs.emplace_back(nullptr, b->second.get());
      ++b;
    } else {
      const Desired::Entry& x = *a->second;
      const Desired::Entry& y = *b->second;
      if (&x != &y && !(x.svc == y.svc && x.hash_input == y.hash_input && x.shard == y.shard) &&
          !(x.render == y.render && x.shard == y.shard))
        pairs.emplace_back(&x, &y);
      ++a;
      ++b;
    }
  }
  std::vector<Desired::Vip> cip_add, cip_del;
  if (prev.cluster_ips.size() != next.cluster_ips.size() ||
      !std::equal(prev.cluster_ips.begin(), prev.cluster_ips.end(), next.cluster_ips.begin(),
                  [](const auto& x, const auto& y) { return x.first == y.first; })) {
    for (const auto& [ip, n] : prev.cluster_ips)
      if (!next.has_cluster_ip(ip)) cip_del.push_back(ip);
    for (const auto& [ip, n] : next.cluster_ips)
      if (!prev.has_cluster_ip(ip)) cip_add.push_back(ip);
  }
  RenderOptions ro;
  ro.masq_mark = next.masq_mark;
  return detail::emit_delta(pairs, cip_add, cip_del, shards_added(prev, next), ro, prev.retired_chains, prev.retired_sets);
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
