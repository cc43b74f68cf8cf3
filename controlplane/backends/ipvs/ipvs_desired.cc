// Thread: any.
#include "controlplane/backends/ipvs/ipvs_desired.h"

#include <algorithm>
#include <cstdio>
#include <tuple>

#include "controlplane/backends/iptables/comment.h"

namespace vipd::cp::ipvs {
namespace {

std::string lower(const char* s) {
  std::string r(s);
  for (char& c : r) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return r;
}

// A comment for iptables, through the iptables mode's sanitiser (allowed
// characters only, cut at 255): a name with a NUL, a quote or a newline
// cannot cut the rule short, and a long one cannot fail iptables-restore.
std::string comment(const std::string& s) { return ipt::comment_match(s); }

// "a.b.c.d/n" with nothing else in it (the model validated it; the payload is
// still no place for surprises).
bool plain_cidr(const std::string& s) {
  if (s.empty() || s.size() > 18) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || c == '.' || c == '/'; });
}

std::string match(const ServiceKey& k) {
  const std::string p = lower(name(k.protocol));
  return "-d " + k.vip.to_string() + "/32 -p " + p + " -m " + p + " --dport " + std::to_string(k.port);
}

std::string pad(std::string s, size_t n) {
  if (s.size() < n) s.append(n - s.size(), ' ');
  return s;
}

}  // namespace

bool binds_vip(const VirtualService& vs) { return vs.kind != ServiceKind::kNodePort; }

IpvsService to_ipvs_service(const VirtualService& vs) {
  IpvsService s;
  s.key = vs.key;
  s.scheduler = name(vs.scheduler);
  if (vs.persistence_timeout_s > 0) {
    s.flags = kFlagPersistent;
    s.timeout_s = vs.persistence_timeout_s;
  }
  s.netmask = 0xffffffffu;
  return s;
}

DesiredService to_desired(const VirtualService& vs) {
  DesiredService d;
  d.service = to_ipvs_service(vs);
  d.name = vs.name;
  d.kind = vs.kind;
  d.when_empty = vs.when_empty;
  d.source_ranges = vs.source_ranges;
  for (const RealServer& b : vs.backends) {
    if (b.weight == 0) continue;  // quiesced / terminating: drained like a removed one
    IpvsDest dest;
    dest.ip = b.ip.v4();
    dest.port = b.port;
    dest.weight = b.weight;
    dest.fwd_method = kFwdMasq;
    d.dests.push_back(dest);
  }
  std::sort(d.dests.begin(), d.dests.end(),
            [](const IpvsDest& a, const IpvsDest& b) { return std::tie(a.ip, a.port) < std::tie(b.ip, b.port); });
  return d;
}

Desired build_desired(const ServiceTable& t) {
  Desired d;
  for (const auto& [key, vs] : t.services) {
    d.services.emplace(key, to_desired(vs));
    if (binds_vip(vs)) d.vips.insert(key.vip.v4());
  }
  return d;
}

const std::vector<Sysctl>& required_sysctls() {
  static const std::vector<Sysctl> k = {
      {"net.ipv4.ip_forward", "1", "IPVS forwards to real servers on other hosts"},
      {"net.ipv4.vs.conntrack", "1", "keeps conntrack entries for IPVS connections, so the MASQUERADE rule works"},
      {"net.ipv4.vs.expire_nodest_conn", "1", "connections of a deleted real server are expired (the client gets a RST)"},
      {"net.ipv4.vs.expire_quiescent_template", "1",
       "persistence templates of weight-0 real servers expire (affinity moves off a terminating endpoint)"},
  };
  return k;
}

std::string render_rules(const Desired& d, const RulesOptions& o) {
  std::string s = "*nat\n:" + std::string(kPostroutingChain) + " - [0:0]\n";
  if (o.masquerade_all)
    s += "-A " + std::string(kPostroutingChain) + " " + comment("vipd ipvs: masquerade service traffic for fnat") +
         " -m ipvs --ipvs --vdir ORIGINAL --vmethod MASQ -j MASQUERADE\n";
  s += "COMMIT\n*filter\n:" + std::string(kServicesChain) + " - [0:0]\n";
  const std::string chain = "-A " + std::string(kServicesChain) + " ";
  for (const auto& [key, svc] : d.services) {
    if (svc.empty()) {
      const bool drop = svc.when_empty == WhenEmpty::kDrop;
      s += chain + comment(svc.name + (drop ? " has no local endpoints" : " has no endpoints")) + " " + match(key) +
           (drop ? " -j DROP\n" : " -j REJECT\n");
      continue;
    }
    if (svc.source_ranges.empty()) continue;
    for (const std::string& r : svc.source_ranges)
      if (plain_cidr(r)) s += chain + "-s " + r + " " + match(key) + " -j RETURN\n";
    s += chain + comment(svc.name + " source ranges") + " " + match(key) + " -j DROP\n";
  }
  s += "COMMIT\n";
  return s;
}

std::string IpvsJump::text() const {
  std::string s = "-t " + table + " -I " + chain + " 1";
  for (const auto& a : args) s += " " + (a.find(' ') != std::string::npos ? "\"" + a + "\"" : a);
  return s;
}

std::vector<IpvsJump> ipvs_jumps() {
  const std::vector<std::string> filter = {"-m", "conntrack", "--ctstate", "NEW", "-m", "comment", "--comment",
                                           "vipd ipvs service filter", "-j", kServicesChain};
  return {
      {"nat", "POSTROUTING", {"-m", "comment", "--comment", "vipd ipvs postrouting rules", "-j", kPostroutingChain}},
      {"filter", "INPUT", filter},
      {"filter", "FORWARD", filter},
      {"filter", "OUTPUT", filter},
  };
}

std::string ipvsadm_text(const Desired& d) {
  std::string s = "Prot LocalAddress:Port Scheduler Flags\n  -> RemoteAddress:Port           Forward Weight\n";
  for (const auto& [key, svc] : d.services) {
    s += pad(name(key.protocol), 5) + dest_to_string(key.vip.v4(), key.port) + " " + svc.service.scheduler;
    if (svc.service.flags & kFlagPersistent) s += " persistent " + std::to_string(svc.service.timeout_s);
    s += "\n";
    for (const IpvsDest& dst : svc.dests)
      s += "  -> " + pad(dest_to_string(dst.ip, dst.port), 28) + " Masq    " + std::to_string(dst.weight) + "\n";
  }
  return s;
}

std::string dry_run_text(const Desired& d, const RulesOptions& o, const std::string& interface) {
  std::string s = "# vipd --mode ipvs --dry-run: the IPVS state vipd would program (ipvsadm -Ln form)\n";
  s += "# " + std::to_string(d.services.size()) + " virtual services, forward method masquerade\n";
  s += ipvsadm_text(d);
  s += "\n# dummy interface " + interface + ": addresses bound /32\n";
  for (Ipv4 a : d.vips) s += "#   " + ipv4_to_string(a) + "/32\n";
  s += "\n# sysctls\n";
  for (const Sysctl& c : required_sysctls()) s += "#   " + std::string(c.name) + " = " + c.value + "\n";
  s += "\n# iptables: jump rules (added when missing)\n";
  for (const IpvsJump& j : ipvs_jumps()) s += "#   iptables " + j.text() + "\n";
  s += "# iptables-restore --noflush payload\n";
  s += render_rules(d, o);
  return s;
}

}  // namespace vipd::cp::ipvs
