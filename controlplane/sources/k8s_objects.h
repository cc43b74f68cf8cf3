// Thread: control. Kubernetes Service (v1) and EndpointSlice (discovery.k8s.io/v1)
// objects as plain structs, parsed from yaml-cpp nodes here and from simdjson
// elements by controlplane/kube with the same rules (k8s_rules.h), and the
// translation of a set of them into a ServiceTable following docs/contract.md
// C8-C11. Kubernetes vocabulary stays in this module. Nothing here throws:
// problems come back as ObjectError values.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "model/service_table.h"

namespace vipd::cp::k8s {

inline constexpr const char* kServiceNameLabel = "kubernetes.io/service-name";
inline constexpr const char* kHeadlessLabel = "service.kubernetes.io/headless";
inline constexpr const char* kServiceProxyNameLabel = "service.kubernetes.io/service-proxy-name";
inline constexpr const char* kSchedulerAnnotation = "vipd.io/scheduler";
inline constexpr const char* kProxyProtocolAnnotation = "vipd.io/proxy-protocol";
inline constexpr uint32_t kDefaultAffinityTimeoutS = 10800;
inline constexpr uint32_t kMaxAffinityTimeoutS = 86400;

// A problem with one object: `object` is "Kind ns/name" (or "document N" when the
// object has no usable kind/name), `origin` is where the object came from (a file
// name; empty when unknown).
struct ObjectError {
  std::string origin;
  std::string object;
  std::string reason;
  // For a lost key conflict only: how it was settled (conflict_kind); "" otherwise.
  std::string conflict;
};

struct ObjectMeta {
  std::string namespace_ = "default";
  std::string name;
  std::map<std::string, std::string> labels;
  // Only vipd's own (vipd.io/...); the others are checked (string keys and
  // values, no key twice) and dropped.
  std::map<std::string, std::string> annotations;
  bool operator==(const ObjectMeta&) const = default;
};

struct ServicePort {
  std::string name;              // "" allowed
  std::string protocol = "TCP";  // TCP | UDP | SCTP
  uint16_t port = 0;
  uint16_t node_port = 0;        // spec.ports[].nodePort; 0 = none
  bool operator==(const ServicePort&) const = default;
};

struct LoadBalancerIngress {     // status.loadBalancer.ingress[]
  std::string ip;                // "" when only a hostname is given
  std::string ip_mode;           // "", "VIP" or "Proxy"
  bool operator==(const LoadBalancerIngress&) const = default;
};

struct Service {
  ObjectMeta meta;
  std::string origin;
  std::string type = "ClusterIP";  // ClusterIP | NodePort | LoadBalancer | ExternalName
  std::string cluster_ip;                // spec.clusterIP ("None" = headless)
  std::vector<std::string> cluster_ips;  // spec.clusterIPs
  std::vector<std::string> ip_families;  // spec.ipFamilies ("IPv4", "IPv6"; at most one of each)
  std::string ip_family_policy;          // spec.ipFamilyPolicy ("" = unset, SingleStack, PreferDualStack,
                                         // RequireDualStack)
  std::vector<ServicePort> ports;
  bool client_ip_affinity = false;                       // sessionAffinity: ClientIP
  uint32_t affinity_timeout_s = kDefaultAffinityTimeoutS;  // ...clientIP.timeoutSeconds
  std::optional<Scheduler> scheduler;  // annotation vipd.io/scheduler; none = default
  // annotation vipd.io/proxy-protocol (v1, v2, none); nullopt = the default.
  std::optional<ProxyProtocol> proxy_protocol;
  std::vector<std::string> external_ips;              // spec.externalIPs
  std::vector<LoadBalancerIngress> lb_ingress;        // status.loadBalancer.ingress
  std::vector<std::string> lb_source_ranges;          // spec.loadBalancerSourceRanges
  bool internal_policy_local = false;                 // spec.internalTrafficPolicy: Local
  bool external_policy_local = false;                 // spec.externalTrafficPolicy: Local
  bool operator==(const Service&) const = default;
};

struct EndpointConditions {
  std::optional<bool> ready;        // nil means true
  std::optional<bool> serving;      // nil means true
  std::optional<bool> terminating;  // nil means false
  bool operator==(const EndpointConditions&) const = default;
};

struct Endpoint {
  std::vector<std::string> addresses;
  EndpointConditions conditions;
  std::string node_name;
  std::string zone;
  std::vector<std::string> zone_hints;  // hints.forZones[].name
  bool operator==(const Endpoint&) const = default;
};

struct EndpointPort {
  std::optional<std::string> name;  // absent vs "" matters
  std::string protocol = "TCP";
  std::optional<uint16_t> port;
  bool operator==(const EndpointPort&) const = default;
};

struct EndpointSlice {
  ObjectMeta meta;
  std::string origin;
  std::string address_type;  // IPv4 | IPv6 | FQDN
  std::vector<Endpoint> endpoints;
  std::vector<EndpointPort> ports;
  std::string service_name() const;  // label kubernetes.io/service-name, or ""
  bool operator==(const EndpointSlice&) const = default;
};

// "Service ns/name", "EndpointSlice ns/name".
std::string object_id(const char* kind, const ObjectMeta& m);

// Parses one object. On failure returns nullopt and fills *error.
std::optional<Service> parse_service(const YAML::Node& n, ObjectError* error);
std::optional<EndpointSlice> parse_endpoint_slice(const YAML::Node& n, ObjectError* error);

struct ParsedObjects {
  std::vector<Service> services;
  std::vector<EndpointSlice> slices;
  std::vector<ObjectError> errors;  // invalid objects
  std::vector<ObjectError> notes;   // objects of other kinds, skipped
};

// Parses one document: a Service, an EndpointSlice, a `kind: List` with items,
// or a null document (ignored). Other kinds are skipped with a note.
// `doc_index` (1-based) names objects that have no name of their own.
void parse_document(const YAML::Node& doc, int doc_index, ParsedObjects* out);

struct BuildResult {
  ServiceTable table;               // normalized; generation 0
  std::vector<ObjectError> errors;  // conflicts between valid objects
  std::vector<ObjectError> notes;   // things deliberately ignored (SCTP, IPv6, headless...)
};

// What the table build needs to know about this proxy and node.
struct BuildOptions {
  Scheduler default_scheduler = Scheduler::kRr;  // services without the vipd.io/scheduler annotation
  // TCP ports of services without the vipd.io/proxy-protocol annotation (UDP
  // ports never get one).
  ProxyProtocol default_proxy_protocol = ProxyProtocol::kNone;
  // This node (kube-proxy's hostname-override). Empty: no node identity, so
  // internal/externalTrafficPolicy Local cannot be honoured and every endpoint
  // counts as cluster-wide (noted per service).
  std::string node_name;
  std::string node_zone;     // topology.kubernetes.io/zone of this node; "" = no hints filtering
  // Addresses NodePorts are served on (each family's entries on that family's
  // addresses); empty = no NodePort entries.
  std::vector<IpAddr> node_ips;
  // Addresses vipd itself owns that no Service entry may use: the full-NAT
  // local addresses (--fnat-local-addrs; replies to them are vipd's own).
  // An entry on one is an object error and is not served.
  std::vector<IpAddr> reserved_addrs;
  // "" = serve services without the service-proxy-name label (kube-proxy's
  // default); otherwise serve only services labelled with this name.
  std::string service_proxy_name;
};

// Builds the table from all Services and EndpointSlices (docs/contract.md C8-C11):
// per service port one entry for the cluster IP (kind ClusterIP), one per node IP
// x nodePort (NodePort), per load-balancer ingress IP with ipMode VIP or unset
// (LoadBalancer, carrying loadBalancerSourceRanges) and per external IP
// (ExternalIP). Traffic policy Local (internal for ClusterIP, external for the
// others) uses this node's endpoints only; with none but remote ones the entry has
// no backends and when_empty drop. Topology hints filter cluster-wide endpoints.
BuildResult build_service_table(const std::vector<Service>& services,
                                const std::vector<EndpointSlice>& slices,
                                const BuildOptions& options);
// Same, with only a default scheduler (no node identity).
BuildResult build_service_table(const std::vector<Service>& services,
                                const std::vector<EndpointSlice>& slices,
                                Scheduler default_scheduler);

// The building blocks of build_service_table, shared with TableIndex (k8s_index.h).
//
// A slice that cannot feed any service (addressType FQDN, no service-name label): the note
// saying why; nullopt for a usable slice.
std::optional<ObjectError> slice_ignored(const EndpointSlice& s);

// What one Service contributes: its entries in the order they claim their keys
// (per port: ClusterIP, NodePort x node IPs, LoadBalancer IPs, external IPs), each
// with normalized backends, and its own errors and notes. `mine` are the usable
// slices of this service, in the order their endpoints are merged.
struct ServiceEntries {
  std::vector<VirtualService> entries;
  std::vector<ObjectError> errors;
  std::vector<ObjectError> notes;
};
ServiceEntries build_service_entries(const Service& s, const std::vector<const EndpointSlice*>& mine,
                                     const BuildOptions& options);

// Several entries claiming one key (address, port, protocol): the one with the
// lowest claim_rank keeps it, ties go to (namespace, name, entry order). A
// ClusterIP (0) always wins over a NodePort (1), and both over externalIPs and
// load balancer ingress addresses (2), which any tenant can write into its own
// Service: they cannot take over another namespace's service address
// (docs/kubernetes.md "Address conflicts").
int claim_rank(const VirtualService& vs);

// The error of an entry whose key `winner` holds.
std::string conflict_reason(const VirtualService& loser, const VirtualService& winner);
// How that conflict was settled, for the metrics: "precedence" (the winner's
// kind outranks the loser's) or "order" (same rank: namespace/name order).
const char* conflict_kind(const VirtualService& loser, const VirtualService& winner);

// Text taken from an object, made safe for an error message or a log line:
// printable ASCII stays, a backslash or quote gets a backslash, every other byte
// (control characters, NUL, ESC, DEL, anything non-ASCII) becomes \xNN.
std::string printable(std::string_view s);

// The name rules of the API server (apimachinery validation; docs/kubernetes.md).
// Each returns "" when `s` is valid, else why not ("must be at most 63
// characters", "must consist of lower case alphanumeric characters or '-'...").
std::string dns1123_label_problem(std::string_view s);      // namespaces, port names
std::string dns1123_subdomain_problem(std::string_view s);  // EndpointSlice names, node names
std::string dns1035_label_problem(std::string_view s);      // Service names
std::string label_key_problem(std::string_view s);          // [prefix/]name
std::string label_value_problem(std::string_view s);

// The class of address the API server refuses for an endpoint address and a
// Service external IP (ValidateNonSpecialIP): "unspecified", "loopback",
// "link-local", "link-local multicast"; nullptr for any other address (and for
// text that is not an address). IPv4-mapped IPv6 addresses count as IPv4.
const char* special_ip_class(const std::string& ip);

}  // namespace vipd::cp::k8s
