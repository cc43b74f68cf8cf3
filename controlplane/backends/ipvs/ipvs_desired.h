// Thread: any (pure functions over immutable values; the ipvs backend calls them
// on the control thread). Maps a ServiceTable to the IPVS state vipd wants in
// the kernel (docs/modes.md, docs/contract.md C15):
//
// - one virtual service per entry (protocol, VIP, port), IPv4 or IPv6 (the
//   VIP's family); the scheduler passes through by its IPVS name; persistence =
//   flag 0x1 + timeout (netmask /32, IPv6 /128);
// - real servers = the entry's backends with weight > 0, forwarding method
//   masquerade (0). Weight-0 backends (terminating next to ready ones) are not
//   wanted: like removed ones they are quiesced and deleted once drained.
//   Backends of the other family than the VIP are not wanted either (IPVS
//   masquerade cannot cross families): counted in Desired::cross_family;
// - VIPs to bind on the dummy interface (/32, IPv6 /128): every entry's address
//   except NodePort entries (those are the node's own addresses);
// - the iptables part: nat VIPD-IPVS-POSTROUTING (fnat: MASQUERADE what IPVS
//   forwards) and filter VIPD-IPVS-SERVICES (REJECT / DROP for entries without
//   real servers, loadBalancerSourceRanges), as one iptables-restore payload
//   per family: IPv4 entries through iptables-restore, IPv6 ones through
//   ip6tables-restore (the same chains, -d VIP/128, REJECT --reject-with
//   icmp6-port-unreachable, the IPv6 source ranges).
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "controlplane/backends/ipvs/ipvs_kernel.h"
#include "model/service_table.h"

namespace vipd::cp::ipvs {

inline constexpr const char* kPostroutingChain = "VIPD-IPVS-POSTROUTING";  // nat
inline constexpr const char* kServicesChain = "VIPD-IPVS-SERVICES";        // filter
inline constexpr const char* kDefaultInterface = "vipd-ipvs0";

struct DesiredService {
  IpvsService service;
  std::vector<IpvsDest> dests;  // weight > 0, sorted by (ip, port)
  std::string name;             // "ns/svc:port", for comments and messages
  ServiceKind kind = ServiceKind::kClusterIp;
  WhenEmpty when_empty = WhenEmpty::kReject;
  std::vector<std::string> source_ranges;
  bool empty() const { return dests.empty(); }
};

struct Desired {
  std::map<ServiceKey, DesiredService> services;
  std::set<IpAddr> vips;     // to bind on the dummy interface
  size_t cross_family = 0;   // backends skipped: not of their VIP's family
  bool has_ipv6() const { return !services.empty() && services.rbegin()->first.vip.is_v6(); }
};

IpvsService to_ipvs_service(const VirtualService& vs);
DesiredService to_desired(const VirtualService& vs);
Desired build_desired(const ServiceTable& t);
// Whether the entry's VIP is bound to the dummy interface (not for NodePort).
bool binds_vip(const VirtualService& vs);

struct RulesOptions {
  bool masquerade_all = true;  // forward-method fnat
};

// The iptables-restore (kIpv6: ip6tables-restore) --noflush payload for both
// of vipd's ipvs-mode chains, with the entries of that family (declaring a
// chain flushes it: the payload replaces them atomically per table).
std::string render_rules(const Desired& d, const RulesOptions& o, AddressFamily family = AddressFamily::kIpv4);

// Rules vipd keeps in builtin chains (table, chain, arguments after -I CHAIN 1).
struct IpvsJump {
  std::string table;
  std::string chain;
  std::vector<std::string> args;
  std::string text() const;  // "-t nat -I POSTROUTING 1 -m comment ... -j VIPD-IPVS-POSTROUTING"
};
std::vector<IpvsJump> ipvs_jumps();

// The sysctls the mode relies on (docs/contract.md C15), "net.ipv4.vs.conntrack"
// = /proc/sys/net/ipv4/vs/conntrack (the vs ones hold for both families).
// required_sysctls6(): set as well while the table has IPv6 entries.
struct Sysctl {
  const char* name;
  const char* value;
  const char* why;
};
const std::vector<Sysctl>& required_sysctls();
const std::vector<Sysctl>& required_sysctls6();

// `ipvsadm -Ln`-like listing of the desired services (no counters).
std::string ipvsadm_text(const Desired& d);

// `vipd --dry-run --mode ipvs`: the listing, the dummy interface's addresses,
// the sysctls and the iptables payload with its jump rules (then, when there
// are IPv6 entries, the ip6tables ones).
std::string dry_run_text(const Desired& d, const RulesOptions& o, const std::string& interface);

}  // namespace vipd::cp::ipvs
