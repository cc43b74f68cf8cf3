// Thread: any (pure functions).
#include "controlplane/backends/iptables/ruleset.h"

#include <cstdio>
#include <map>
#include <sstream>
#include <string_view>
#include <unordered_map>

#include "controlplane/backends/iptables/chain_names.h"
#include "controlplane/backends/iptables/comment.h"

namespace vipd::cp::ipt {
namespace {

// Every comment goes through the shared sanitiser (comment.h): allowed
// characters only, cut at 255.
std::string comment(const std::string& text) { return comment_match(text); }

// "-d 10.96.0.100/32 -p tcp -m tcp --dport 8080"
std::string match_service(const ServiceKey& k) {
  const char* p = protocol_lower(k.protocol);
  return "-d " + k.vip.to_string() + "/32 -p " + p + " -m " + p + " --dport " + std::to_string(k.port);
}

const char* kind_label(ServiceKind kind) {
  switch (kind) {
    case ServiceKind::kClusterIp: return "cluster IP";
    case ServiceKind::kNodePort: return "node port";
    case ServiceKind::kLoadBalancer: return "loadbalancer IP";
    case ServiceKind::kExternalIp: return "external IP";
  }
  return name(kind);
}

std::string endpoint_str(const RealServer& b) { return b.ip.to_string() + ":" + std::to_string(b.port); }

std::string probability(size_t remaining) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%0.10f", 1.0 / static_cast<double>(remaining));
  return buf;
}

std::string hex_mark(uint32_t m) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%x", m);
  return buf;
}


bool owned(const std::string& chain) { return chain.rfind(kChainPrefix, 0) == 0; }

// Emits one table's section: declarations, rules, deletions. `write` are the
// chains to declare and fill, `remove` the stale ones to flush and delete.
void emit_table(std::ostringstream& out, Table t, const std::vector<const Chain*>& write,
                const std::vector<std::string>& remove) {
  out << "*" << table_name(t) << "\n";
  for (const Chain* c : write) out << ":" << c->name << " - [0:0]\n";
  for (const auto& n : remove) out << ":" << n << " - [0:0]\n";
  for (const Chain* c : write)
    for (const auto& r : c->rules) out << "-A " << c->name << " " << r << "\n";
  for (const auto& n : remove) out << "-X " << n << "\n";
  out << "COMMIT\n";
}

// Chains in `gone` (owned, not in `next`), sorted.
std::vector<std::string> stale(const Ruleset& next, Table t, const std::set<std::string>& gone) {
  std::vector<std::string> out;
  const auto keep = next.names(t);
  for (const auto& n : gone)
    if (owned(n) && !keep.count(n)) out.push_back(n);
  return out;
}

}  // namespace

const char* table_name(Table t) { return t == Table::kFilter ? "filter" : "nat"; }

const Chain* Ruleset::find(Table t, const std::string& name) const {
  for (const auto& c : chains(t))
    if (c.name == name) return &c;
  return nullptr;
}

std::set<std::string> Ruleset::names(Table t) const {
  std::set<std::string> out;
  for (const auto& c : chains(t)) out.insert(c.name);
  return out;
}

bool build_ruleset(const ServiceTable& table, const RenderOptions& opts, Ruleset* out, std::string* error) {
  Ruleset rs;
  Chain f_services{kServicesChain, {}};
  Chain f_firewall{kFirewallChain, {}};
  Chain n_services{kServicesChain, {}};
  Chain n_mark{kMarkMasqChain, {"-j MARK --or-mark " + hex_mark(opts.masq_mark)}};
  const std::string mark = hex_mark(opts.masq_mark);
  Chain n_post{kPostroutingChain,
               {"-m mark ! --mark " + mark + "/" + mark + " -j RETURN", "-j MARK --xor-mark " + mark,
                comment("vipd service traffic requiring SNAT") + " -j MASQUERADE"}};
  std::vector<Chain> per_entry;

  // Hashed strings: a ClusterIP entry uses kube-proxy's name + protocol; should two
  // entries still map to the same string, every one of them uses the extended form.
  std::map<std::string, int> uses;
  for (const auto& [key, svc] : table.services) ++uses[entry_hash_input(svc)];

  for (const auto& [key, svc] : table.services) {
    for (const auto& r : svc.source_ranges)
      if (!valid_ipv4_cidr(r)) {
        *error = "iptables: service " + svc.name + " (" + to_string(key) + "): source range '" + r +
                 "' is not an IPv4 CIDR a.b.c.d/n";
        return false;
      }
    ++rs.entries;
    const std::string match = match_service(key);
    std::vector<const RealServer*> active;
    for (const auto& b : svc.backends)
      if (b.weight > 0) active.push_back(&b);
    if (active.empty()) {
      const bool drop = svc.when_empty == WhenEmpty::kDrop;
      f_services.rules.push_back(comment(svc.name + (drop ? " has no local endpoints" : " has no endpoints")) +
                                 " " + match + (drop ? " -j DROP" : " -j REJECT"));
      continue;
    }
    std::string input = entry_hash_input(svc);
    if (uses[input] > 1) input = entry_hash_input_extended(svc);
    const std::string hash = chain_hash(input);
    const std::string svc_chain = std::string(kChainPrefix) + "SVC-" + hash;
    const std::string fw_chain = std::string(kChainPrefix) + "FW-" + hash;
    const std::string label = svc.name + " " + kind_label(svc.kind);
    const bool firewall = !svc.source_ranges.empty();

    n_services.rules.push_back(comment(label) + " " + match + " -j " + (firewall ? fw_chain : svc_chain));
    if (firewall) {
      Chain fw{fw_chain, {}};
      for (const auto& r : svc.source_ranges) fw.rules.push_back(comment(label) + " -s " + r + " -j " + svc_chain);
      per_entry.push_back(std::move(fw));
      f_firewall.rules.push_back(comment(svc.name + " traffic not accepted by " + fw_chain) + " " + match +
                                 " -j DROP");
    }

    Chain sc{svc_chain, {}};
    std::vector<Chain> seps;
    if (opts.masquerade_all) sc.rules.push_back(comment(label) + " " + match + " -j " + kMarkMasqChain);
    const bool affinity = svc.persistence_timeout_s > 0;
    std::vector<std::string> sep_names;
    for (const RealServer* b : active)
      sep_names.push_back(std::string(kChainPrefix) + "SEP-" + chain_hash(input + endpoint_str(*b)));
    if (affinity)
      for (size_t i = 0; i < active.size(); ++i)
        sc.rules.push_back(comment(svc.name + " -> " + endpoint_str(*active[i])) + " -m recent --name " +
                           sep_names[i] + " --rcheck --seconds " + std::to_string(svc.persistence_timeout_s) +
                           " --reap -j " + sep_names[i]);
    for (size_t i = 0; i < active.size(); ++i) {
      const size_t remaining = active.size() - i;
      std::string rule = comment(svc.name + " -> " + endpoint_str(*active[i]));
      if (remaining > 1) rule += " -m statistic --mode random --probability " + probability(remaining);
      sc.rules.push_back(rule + " -j " + sep_names[i]);

      const char* p = protocol_lower(key.protocol);
      Chain sep{sep_names[i], {}};
      sep.rules.push_back(comment(svc.name) + " -s " + active[i]->ip.to_string() + "/32 -j " + kMarkMasqChain);
      sep.rules.push_back(comment(svc.name) +
                          (affinity ? " -m recent --name " + sep_names[i] + " --set" : std::string()) + " -p " + p +
                          " -m " + p + " -j DNAT --to-destination " + endpoint_str(*active[i]));
      seps.push_back(std::move(sep));
    }
    per_entry.push_back(std::move(sc));
    for (auto& s : seps) per_entry.push_back(std::move(s));
  }

  rs.filter.push_back(std::move(f_services));
  rs.filter.push_back(std::move(f_firewall));
  rs.nat.push_back(std::move(n_services));
  rs.nat.push_back(std::move(n_mark));
  rs.nat.push_back(std::move(n_post));
  for (auto& c : per_entry) rs.nat.push_back(std::move(c));
  *out = std::move(rs);
  return true;
}

ExistingChains parse_saved_chains(const std::string& save_output) {
  ExistingChains out;
  std::set<std::string>* cur = nullptr;
  std::istringstream in(save_output);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (line[0] == '*') {
      const std::string t = line.substr(1);
      cur = t == "filter" ? &out.filter : t == "nat" ? &out.nat : nullptr;
    } else if (line[0] == ':' && cur) {
      const std::string name = line.substr(1, line.find(' ') == std::string::npos ? std::string::npos
                                                                                  : line.find(' ') - 1);
      if (owned(name)) cur->insert(name);
    } else if (line == "COMMIT") {
      cur = nullptr;
    }
  }
  return out;
}

Payload render_full(const Ruleset& next, const ExistingChains& existing) {
  Payload p;
  std::ostringstream out;
  for (Table t : {Table::kFilter, Table::kNat}) {
    std::vector<const Chain*> write;
    for (const auto& c : next.chains(t)) write.push_back(&c);
    const auto remove = stale(next, t, existing.of(t));
    p.chains_written += write.size();
    p.chains_deleted += remove.size();
    emit_table(out, t, write, remove);
  }
  p.text = out.str();
  return p;
}

Payload render_partial(const Ruleset& next, const Ruleset& prev, const ExistingChains& existing) {
  Payload p;
  std::ostringstream out;
  for (Table t : {Table::kFilter, Table::kNat}) {
    // An index of the previous chains: Ruleset::find is a linear scan, and
    // 10k services have 50k nat chains (a quadratic compare took seconds).
    std::unordered_map<std::string_view, const Chain*> old_chains;
    old_chains.reserve(prev.chains(t).size());
    for (const auto& c : prev.chains(t)) old_chains.emplace(c.name, &c);
    std::vector<const Chain*> write;
    for (const auto& c : next.chains(t)) {
      const auto old = old_chains.find(c.name);
      if (old == old_chains.end() || old->second->rules != c.rules) write.push_back(&c);
    }
    std::set<std::string> gone = prev.names(t);
    gone.insert(existing.of(t).begin(), existing.of(t).end());
    const auto remove = stale(next, t, gone);
    if (write.empty() && remove.empty()) continue;
    p.chains_written += write.size();
    p.chains_deleted += remove.size();
    emit_table(out, t, write, remove);
  }
  p.text = out.str();
  return p;
}

std::string JumpRule::text() const {
  std::string s = std::string("-t ") + table_name(table) + " -I " + chain + " 1";
  for (const auto& a : args) s += " " + (a.find(' ') != std::string::npos ? "\"" + a + "\"" : a);
  return s;
}

std::vector<JumpRule> jump_rules() {
  const std::vector<std::string> portals = {"-m", "comment", "--comment", "vipd service portals", "-j",
                                            kServicesChain};
  auto ct_new = [](std::vector<std::string> rest) {
    std::vector<std::string> a = {"-m", "conntrack", "--ctstate", "NEW"};
    a.insert(a.end(), rest.begin(), rest.end());
    return a;
  };
  const std::vector<std::string> firewall = {"-m", "comment", "--comment", "vipd load balancer firewall", "-j",
                                             kFirewallChain};
  std::vector<JumpRule> out;
  for (const char* c : {"INPUT", "FORWARD", "OUTPUT"}) {
    out.push_back({Table::kFilter, c, ct_new(portals)});
    out.push_back({Table::kFilter, c, ct_new(firewall)});
  }
  out.push_back({Table::kNat, "PREROUTING", portals});
  out.push_back({Table::kNat, "OUTPUT", portals});
  out.push_back({Table::kNat, "POSTROUTING",
                 {"-m", "comment", "--comment", "vipd postrouting rules", "-j", kPostroutingChain}});
  return out;
}

std::string dry_run_text(const Ruleset& rules, const RenderOptions& opts) {
  std::ostringstream out;
  out << "# vipd iptables mode: full iptables-restore --noflush payload (" << rules.entries << " service entries, "
      << rules.nat.size() << " nat chains, masquerade "
      << (opts.masquerade_all ? "all service traffic (fnat)" : "hairpin only (nat)") << ")\n";
  out << "# vipd also keeps these jumps in the builtin chains (iptables -C, inserted when missing):\n";
  for (const auto& j : jump_rules()) out << "#   iptables " << j.text() << "\n";
  out << render_full(rules, {}).text;
  return out.str();
}

}  // namespace vipd::cp::ipt
