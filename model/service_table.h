// Thread: any (immutable values; built by the control thread).
// ServiceTable: the backend-agnostic desired state that every source produces and
// every backend consumes. IPVS vocabulary, no Kubernetes vocabulary.
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/ip_addr.h"
#include "model/kinds.h"

namespace vipd::cp {

// IPv4 address in host byte order.
using Ipv4 = uint32_t;
std::string ipv4_to_string(Ipv4 a);
std::optional<Ipv4> parse_ipv4(const std::string& s);  // strict dotted quad
bool valid_ipv4_cidr(const std::string& s);             // strict "a.b.c.d/n", n 0..32

// The family of an IP address literal.
enum class AddressFamily : uint8_t { kIpv4, kIpv6 };
// nullopt: not an IP address (inet_pton's strict forms: dotted quad, RFC 4291 text).
std::optional<AddressFamily> address_family(const std::string& s);
bool is_ipv6(const std::string& s);  // address_family(s) == kIpv6

struct ServiceKey {
  IpAddr vip;  // IPv4 or IPv6; every IPv4 key sorts before every IPv6 key
  uint16_t port = 0;
  Protocol protocol = Protocol::kTcp;
  // Ordering: vip, port, protocol (the dry-run output order).
  auto operator<=>(const ServiceKey&) const = default;
};
std::string to_string(const ServiceKey& k);  // "TCP 10.96.0.100:8080", "TCP [fd00::1]:8080"

// "10.0.0.1:80", "[fd00::1]:80" (an address and a port, RFC 5952 section 6).
std::string host_port(const IpAddr& a, uint16_t port);
// The reverse: "a.b.c.d:PORT" or "[IPv6]:PORT" (port 1..65535, decimal); false
// for anything else (an IPv6 address without brackets, a zone, a bad port).
bool parse_host_port(const std::string& s, IpAddr* ip, uint16_t* port);

struct RealServer {
  IpAddr ip;  // the service's family (the sources never mix families in one entry)
  uint16_t port = 0;
  uint32_t weight = 1;       // 0 = quiesced: no new flows
  bool terminating = false;  // serving but terminating (graceful termination)
  auto operator<=>(const RealServer&) const = default;
};

struct VirtualService {
  ServiceKey key;
  std::string name;            // "namespace/service:portname" (or "namespace/service")
  ServiceKind kind = ServiceKind::kClusterIp;
  Scheduler scheduler = Scheduler::kRr;
  uint32_t persistence_timeout_s = 0;  // 0 = no persistence
  WhenEmpty when_empty = WhenEmpty::kReject;
  ProxyProtocol proxy_protocol = ProxyProtocol::kNone;  // dpdk full NAT, TCP only
  std::vector<RealServer> backends;    // sorted by (ip, port), unique
  // Client source ranges allowed to reach this entry (loadBalancerSourceRanges,
  // "a.b.c.d/n" or "x::/n" of the entry's family, sorted, unique); empty = everyone. Carried for the dataplane;
  // in the dry-run JSON only when non-empty.
  std::vector<std::string> source_ranges;
  bool operator==(const VirtualService&) const = default;
};

class ServiceTable {
 public:
  uint64_t generation = 0;
  std::map<ServiceKey, VirtualService> services;

  // Sorts each service's backends by (ip, port) and drops duplicates.
  void normalize();
  bool same_content(const ServiceTable& o) const { return services == o.services; }
};

struct TableDiff {
  std::vector<const VirtualService*> added;    // points into `next`
  std::vector<const VirtualService*> changed;  // points into `next`
  std::vector<ServiceKey> removed;
  bool empty() const { return added.empty() && changed.empty() && removed.empty(); }
  static TableDiff compute(const ServiceTable& prev, const ServiceTable& next);
};

// The dry-run JSON document (see docs/configuration.md): keys in a fixed order,
// services sorted by vip, port, protocol; backends by ip, port. One line, no
// trailing newline.
std::string to_dry_run_json(const ServiceTable& t);

}  // namespace vipd::cp
