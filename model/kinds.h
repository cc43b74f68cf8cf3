// Thread: any (constants).
// The model's closed vocabularies: scheduler, service kind, protocol,
// forwarding method and the no-endpoints policy. Each has ONE name table here;
// every spelling elsewhere (options, annotations, dry-run JSON, the admin API,
// metrics labels, help text, error messages) comes from it.
//
//   name(x)            -> "wlc", "NodePort", "TCP", "fnat", "drop"
//   parse_scheduler(s) -> std::optional<Scheduler> (exact spelling; protocol:
//                         any case), and the same for each enum
//   names<E>(sep)      -> every name of E in table order, joined by sep
//                         ("rr, wrr, ..." for help text and error messages)
//
// Header only and constexpr, so the fast path can use the enums without
// linking the model. (AddressFamily, in service_table.h next to the address
// parsing, has no name table yet; it joins these when IPv6 entries are spelled.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace vipd::cp {

// IPVS schedulers, as ipvsadm spells them (docs/scheduling.md).
enum class Scheduler : uint8_t { kRr, kWrr, kLc, kWlc, kSed, kNq, kSh, kDh, kLblc, kLblcr, kMh };
// Where a VirtualService's address comes from: the cluster IP, a node IP x
// nodePort, a load-balancer ingress IP, or one of spec.externalIPs.
enum class ServiceKind : uint8_t { kClusterIp, kNodePort, kLoadBalancer, kExternalIp };
// Values are the IP protocol numbers.
enum class Protocol : uint8_t { kTcp = 6, kUdp = 17 };
// dpdk forwarding: full NAT, or DNAT with backends routing replies via vipd.
enum class ForwardMethod : uint8_t { kFnat, kNat };
// A service without usable endpoints: reject (RST / ICMP unreachable) or drop.
enum class WhenEmpty : uint8_t { kReject, kDrop };
// dpdk full NAT: the PROXY protocol header sent to the backend ahead of the
// client's bytes (TCP only); kNone = none ("" in the dry-run JSON).
enum class ProxyProtocol : uint8_t { kNone, kV1, kV2 };

template <class E>
struct NameOf {
  E value;
  const char* name;
};

// The name tables. The first entry is also the default: name() of a value
// outside the table (only a cast can make one) is the first entry's name.
inline constexpr NameOf<Scheduler> kSchedulerNames[] = {
    {Scheduler::kRr, "rr"},     {Scheduler::kWrr, "wrr"},   {Scheduler::kLc, "lc"},
    {Scheduler::kWlc, "wlc"},   {Scheduler::kSed, "sed"},   {Scheduler::kNq, "nq"},
    {Scheduler::kSh, "sh"},     {Scheduler::kDh, "dh"},     {Scheduler::kLblc, "lblc"},
    {Scheduler::kLblcr, "lblcr"}, {Scheduler::kMh, "mh"}};
inline constexpr NameOf<ServiceKind> kServiceKindNames[] = {{ServiceKind::kClusterIp, "ClusterIP"},
                                                           {ServiceKind::kNodePort, "NodePort"},
                                                           {ServiceKind::kLoadBalancer, "LoadBalancer"},
                                                           {ServiceKind::kExternalIp, "ExternalIP"}};
inline constexpr NameOf<Protocol> kProtocolNames[] = {{Protocol::kTcp, "TCP"}, {Protocol::kUdp, "UDP"}};
inline constexpr NameOf<ForwardMethod> kForwardMethodNames[] = {{ForwardMethod::kFnat, "fnat"},
                                                               {ForwardMethod::kNat, "nat"}};
inline constexpr NameOf<WhenEmpty> kWhenEmptyNames[] = {{WhenEmpty::kReject, "reject"},
                                                       {WhenEmpty::kDrop, "drop"}};
inline constexpr NameOf<ProxyProtocol> kProxyProtocolNames[] = {
    {ProxyProtocol::kNone, ""}, {ProxyProtocol::kV1, "v1"}, {ProxyProtocol::kV2, "v2"}};

// name_table(E{}): the table of E (found by argument-dependent lookup).
constexpr const auto& name_table(Scheduler) { return kSchedulerNames; }
constexpr const auto& name_table(ServiceKind) { return kServiceKindNames; }
constexpr const auto& name_table(Protocol) { return kProtocolNames; }
constexpr const auto& name_table(ForwardMethod) { return kForwardMethodNames; }
constexpr const auto& name_table(WhenEmpty) { return kWhenEmptyNames; }
constexpr const auto& name_table(ProxyProtocol) { return kProxyProtocolNames; }

template <class E>
concept NamedKind = requires { name_table(E{}); };

template <NamedKind E>
constexpr const char* name(E v) noexcept {
  for (const auto& e : name_table(v))
    if (e.value == v) return e.name;
  return name_table(v)[0].name;
}

namespace kinds_detail {
constexpr char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }
constexpr bool same(std::string_view a, std::string_view b, bool any_case) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (any_case ? lower(a[i]) != lower(b[i]) : a[i] != b[i]) return false;
  return true;
}
template <NamedKind E>
constexpr std::optional<E> parse(std::string_view s, bool any_case = false) {
  for (const auto& e : name_table(E{}))
    if (same(s, e.name, any_case)) return e.value;
  return std::nullopt;
}
}  // namespace kinds_detail

constexpr std::optional<Scheduler> parse_scheduler(std::string_view s) {
  return kinds_detail::parse<Scheduler>(s);
}
constexpr std::optional<ServiceKind> parse_service_kind(std::string_view s) {
  return kinds_detail::parse<ServiceKind>(s);
}
// "TCP" / "UDP" in any case.
constexpr std::optional<Protocol> parse_protocol(std::string_view s) {
  return kinds_detail::parse<Protocol>(s, true);
}
constexpr std::optional<ForwardMethod> parse_forward_method(std::string_view s) {
  return kinds_detail::parse<ForwardMethod>(s);
}
constexpr std::optional<WhenEmpty> parse_when_empty(std::string_view s) {
  return kinds_detail::parse<WhenEmpty>(s);
}
// "v1", "v2" or "" (none).
constexpr std::optional<ProxyProtocol> parse_proxy_protocol(std::string_view s) {
  return kinds_detail::parse<ProxyProtocol>(s);
}

// Every name of E in table order, joined by `sep`: names<Scheduler>(", ") ->
// "rr, wrr, lc, wlc, sed, nq, sh, dh, lblc, lblcr, mh".
template <NamedKind E>
std::string names(std::string_view sep = " ") {
  std::string r;
  for (const auto& e : name_table(E{})) {
    if (!r.empty()) r += sep;
    r += e.name;
  }
  return r;
}

}  // namespace vipd::cp
