// Thread: any.
#include "controlplane/backends/ipvs/ipvs_desired.h"

#include <algorithm>
#include <cstdio>
#include <tuple>

#include "controlplane/backends/iptables/comment.h"
#include "controlplane/backends/iptables/ruleset.h"

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

// A strict CIDR of `family` ("a.b.c.d/n" or an IPv6 one) with nothing else in
// it (the model validated it; the payload is still no place for surprises).
bool cidr_of(const std::string& s, AddressFamily family) {
  if (s.empty() || s.size() > 43) return false;
  if (!std::all_of(s.begin(), s.end(), [](char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == '.' || c == '/' ||
               c == ':';
      }))
    return false;
  return ipt::cidr_family(s) == family;
}

AddressFamily family_of(const IpAddr& a) { return a.is_v4() ? AddressFamily::kIpv4 : AddressFamily::kIpv6; }

std::string match(const ServiceKey& k) {
  const std::string p = lower(name(k.protocol));
  return "-d " + host_prefix(k.vip) + " -p " + p + " -m " + p + " --dport " + std::to_string(k.port);
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
  s.netmask = host_netmask(vs.key.vip);
  return s;
}

namespace {
DesiredService to_desired(const VirtualService& vs, size_t* cross_family) {
  DesiredService d;
  d.service = to_ipvs_service(vs);
  d.name = vs.name;
  d.kind = vs.kind;
  d.when_empty = vs.when_empty;
  d.source_ranges = vs.source_ranges;
  for (const RealServer& b : vs.backends) {
    if (b.weight == 0) continue;  // quiesced / terminating: drained like a removed one
    if (b.ip.family() != vs.key.vip.family()) {  // IPVS masquerade stays within a family
      if (cross_family) ++*cross_family;
      continue;
    }
    IpvsDest dest;
    dest.ip = b.ip;
    dest.port = b.port;
    dest.weight = b.weight;
    dest.fwd_method = kFwdMasq;
    d.dests.push_back(dest);
  }
  std::sort(d.dests.begin(), d.dests.end(),
            [](const IpvsDest& a, const IpvsDest& b) { return std::tie(a.ip, a.port) < std::tie(b.ip, b.port); });
  return d;
}
}  // namespace

DesiredService to_desired(const VirtualService& vs) { return to_desired(vs, nullptr); }

Desired build_desired(const ServiceTable& t) {
  Desired d;
  for (const auto& [key, vs] : t.services) {
    d.services.emplace(key, to_desired(vs, &d.cross_family));
    if (binds_vip(vs)) d.vips.insert(key.vip);
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

const std::vector<Sysctl>& required_sysctls6() {
  static const std::vector<Sysctl> k = {
      {"net.ipv6.conf.all.forwarding", "1",
       "IPVS cannot forward IPv6 to real servers on other hosts, and their answers are not let back through"},
  };
  return k;
}

std::string render_rules(const Desired& d, const RulesOptions& o, AddressFamily family) {
  std::string s = "*nat\n:" + std::string(kPostroutingChain) + " - [0:0]\n";
  if (o.masquerade_all)
    s += "-A " + std::string(kPostroutingChain) + " " + comment("vipd ipvs: masquerade service traffic for fnat") +
         " -m ipvs --ipvs --vdir ORIGINAL --vmethod MASQ -j MASQUERADE\n";
  s += "COMMIT\n*filter\n:" + std::string(kServicesChain) + " - [0:0]\n";
  const std::string chain = "-A " + std::string(kServicesChain) + " ";
  for (const auto& [key, svc] : d.services) {
    if (family_of(key.vip) != family) continue;
    if (svc.empty()) {
      const bool drop = svc.when_empty == WhenEmpty::kDrop;
      s += chain + comment(svc.name + (drop ? " has no local endpoints" : " has no endpoints")) + " " + match(key) +
           " " + (drop ? std::string("-j DROP") : ipt::reject_target(family)) + "\n";
      continue;
    }
    if (svc.source_ranges.empty()) continue;
    // Ranges of the other family let nothing of this one through (only the DROP).
    for (const std::string& r : svc.source_ranges)
      if (cidr_of(r, family)) s += chain + "-s " + r + " " + match(key) + " -j RETURN\n";
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
    s += pad(name(key.protocol), 5) + dest_to_string(key.vip, key.port) + " " + svc.service.scheduler;
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
  s += "\n# dummy interface " + interface + ": addresses bound /32 (IPv6 /128, nodad)\n";
  for (const IpAddr& a : d.vips) s += "#   " + host_prefix(a) + "\n";
  s += "\n# sysctls\n";
  for (const Sysctl& c : required_sysctls()) s += "#   " + std::string(c.name) + " = " + c.value + "\n";
  if (d.has_ipv6())
    for (const Sysctl& c : required_sysctls6()) s += "#   " + std::string(c.name) + " = " + c.value + "\n";
  if (d.cross_family)
    s += "\n# " + std::to_string(d.cross_family) +
         " backend(s) not of their service's address family skipped (IPVS masquerade stays within a family)\n";
  std::vector<AddressFamily> families = {AddressFamily::kIpv4};
  if (d.has_ipv6()) families.push_back(AddressFamily::kIpv6);
  for (AddressFamily f : families) {
    const std::string prog = ipt::iptables_program(f);
    s += "\n# " + prog + ": jump rules (added when missing)\n";
    for (const IpvsJump& j : ipvs_jumps()) s += "#   " + prog + " " + j.text() + "\n";
    s += "# " + std::string(ipt::restore_program(f)) + " --noflush payload\n";
    s += render_rules(d, o, f);
  }
  return s;
}

}  // namespace vipd::cp::ipvs
