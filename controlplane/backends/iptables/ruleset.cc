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

// The model's address type, in the two places the renderer looks at it.
AddressFamily family_of(const ServiceKey& k) { return k.vip.is_v6() ? AddressFamily::kIpv6 : AddressFamily::kIpv4; }
std::string addr_text(const IpAddr& a) { return a.to_string(); }

// "-d 10.96.0.100/32 -p tcp -m tcp --dport 8080" ("-d fd00:96::100/128 ..." for IPv6)
std::string match_service(const ServiceKey& k) {
  const char* p = protocol_lower(k.protocol);
  return "-d " + host_cidr(addr_text(k.vip), family_of(k)) + " -p " + p + " -m " + p + " --dport " +
         std::to_string(k.port);
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

std::string endpoint_str(const RealServer& b, AddressFamily f) { return host_port(addr_text(b.ip), b.port, f); }

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

const char* family_label(AddressFamily f) { return f == AddressFamily::kIpv6 ? "IPv6" : "IPv4"; }
const char* restore_program(AddressFamily f) {
  return f == AddressFamily::kIpv6 ? "ip6tables-restore" : "iptables-restore";
}
const char* iptables_program(AddressFamily f) { return f == AddressFamily::kIpv6 ? "ip6tables" : "iptables"; }

std::string host_cidr(const std::string& addr, AddressFamily f) {
  return addr + (f == AddressFamily::kIpv6 ? "/128" : "/32");
}

std::string host_port(const std::string& addr, uint16_t port, AddressFamily f) {
  return (f == AddressFamily::kIpv6 ? "[" + addr + "]" : addr) + ":" + std::to_string(port);
}

std::string reject_target(AddressFamily f) {
  return f == AddressFamily::kIpv6 ? "-j REJECT --reject-with icmp6-port-unreachable" : "-j REJECT";
}

std::optional<AddressFamily> cidr_family(const std::string& range) {
  if (valid_ipv4_cidr(range)) return AddressFamily::kIpv4;
  const auto slash = range.find('/');
  if (slash == std::string::npos || slash + 1 >= range.size() || range.size() - slash - 1 > 3) return std::nullopt;
  const std::string len = range.substr(slash + 1);
  if (len.size() > 1 && len[0] == '0') return std::nullopt;
  int n = 0;
  for (char c : len) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + (c - '0');
  }
  if (n > 128 || address_family(range.substr(0, slash)) != AddressFamily::kIpv6) return std::nullopt;
  return AddressFamily::kIpv6;
}

size_t count_entries(const ServiceTable& table, AddressFamily family) {
  size_t n = 0;
  for (const auto& [key, svc] : table.services) n += family_of(key) == family;
  return n;
}

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
  return build_ruleset(table, opts, AddressFamily::kIpv4, out, error);
}

bool build_ruleset(const ServiceTable& table, const RenderOptions& opts, AddressFamily family, Ruleset* out,
                   std::string* error) {
  Ruleset rs;
  rs.family = family;
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
    if (family_of(key) != family) continue;
    std::vector<std::string> ranges;  // this family's source ranges
    for (const auto& r : svc.source_ranges) {
      const auto rf = cidr_family(r);
      if (!rf) {
        *error = "iptables: service " + svc.name + " (" + to_string(key) + "): source range '" + r +
                 "' is not an IPv4 CIDR a.b.c.d/n or an IPv6 CIDR";
        return false;
      }
      if (*rf == family) ranges.push_back(r);
    }
    ++rs.entries;
    const std::string match = match_service(key);
    std::vector<const RealServer*> active;
    for (const auto& b : svc.backends)
      if (b.weight > 0) active.push_back(&b);
    if (active.empty()) {
      const bool drop = svc.when_empty == WhenEmpty::kDrop;
      f_services.rules.push_back(comment(svc.name + (drop ? " has no local endpoints" : " has no endpoints")) +
                                 " " + match + " " + (drop ? std::string("-j DROP") : reject_target(family)));
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
      for (const auto& r : ranges) fw.rules.push_back(comment(label) + " -s " + r + " -j " + svc_chain);
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
      sep_names.push_back(std::string(kChainPrefix) + "SEP-" + chain_hash(input + endpoint_str(*b, family)));
    if (affinity)
      for (size_t i = 0; i < active.size(); ++i)
        sc.rules.push_back(comment(svc.name + " -> " + endpoint_str(*active[i], family)) + " -m recent --name " +
                           sep_names[i] + " --rcheck --seconds " + std::to_string(svc.persistence_timeout_s) +
                           " --reap -j " + sep_names[i]);
    for (size_t i = 0; i < active.size(); ++i) {
      const size_t remaining = active.size() - i;
      std::string rule = comment(svc.name + " -> " + endpoint_str(*active[i], family));
      if (remaining > 1) rule += " -m statistic --mode random --probability " + probability(remaining);
      sc.rules.push_back(rule + " -j " + sep_names[i]);

      const char* p = protocol_lower(key.protocol);
      Chain sep{sep_names[i], {}};
      sep.rules.push_back(comment(svc.name) + " -s " + host_cidr(addr_text(active[i]->ip), family) + " -j " +
                          kMarkMasqChain);
      sep.rules.push_back(comment(svc.name) +
                          (affinity ? " -m recent --name " + sep_names[i] + " --set" : std::string()) + " -p " + p +
                          " -m " + p + " -j DNAT --to-destination " + endpoint_str(*active[i], family));
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
  const AddressFamily f = rules.family;
  out << "# vipd iptables mode: full " << restore_program(f) << " --noflush payload (" << rules.entries << " "
      << (f == AddressFamily::kIpv6 ? "IPv6 " : "") << "service entries, " << rules.nat.size()
      << " nat chains, masquerade " << (opts.masquerade_all ? "all service traffic (fnat)" : "hairpin only (nat)")
      << ")\n";
  out << "# vipd also keeps these jumps in the builtin chains (" << iptables_program(f)
      << " -C, inserted when missing):\n";
  for (const auto& j : jump_rules()) out << "#   " << iptables_program(f) << " " << j.text() << "\n";
  out << render_full(rules, {}).text;
  return out.str();
}

std::string dry_run_text(const Ruleset& v4, const Ruleset& v6, const RenderOptions& opts) {
  std::string s = dry_run_text(v4, opts);
  if (v6.entries > 0) s += dry_run_text(v6, opts);
  return s;
}

}  // namespace vipd::cp::ipt
