// Thread: any (pure functions). kube-proxy's chain-name hash (docs/contract.md
// C14): the first 16 characters of base32(sha256(input)), and the
// strings vipd hashes for its VIPD-SVC/-FW/-SEP chains.
#pragma once

#include <string>
#include <string_view>

#include "model/service_table.h"

namespace vipd::cp::ipt {

// base32 (RFC 4648 alphabet, as Go's base32.StdEncoding) of `bytes`, no padding.
std::string base32(std::string_view bytes);

// First 16 characters of base32(sha256(input)) (OpenSSL libcrypto).
std::string chain_hash(std::string_view input);

// kube-proxy's hashed strings: servicePortName + lowercase protocol, and for an
// endpoint chain the same followed by "IP:port".
//   port_proto_hash("ns1/svc1:p80", "tcp")                   == "XPGD46QRK7WJZT7O"
//   endpoint_hash("ns1/svc1:p80", "tcp", "10.180.0.1:80")    == "SXIVWICOYRO3J4NJ"
std::string port_proto_hash(std::string_view service_port_name, std::string_view protocol);
std::string endpoint_hash(std::string_view service_port_name, std::string_view protocol,
                          std::string_view endpoint);

// "tcp" / "udp".
const char* protocol_lower(Protocol p);

// The string that names one ServiceTable entry's chains (the "service port"
// part of the hash). A ClusterIP entry hashes exactly like kube-proxy:
// name + protocol. Every other kind (NodePort, LoadBalancer, ExternalIP, which
// share the name and protocol of their ClusterIP entry but may have other
// endpoints, e.g. traffic policy Local) appends "|KIND|VIP:PORT", so distinct
// entries always get distinct chains:
//   "default/db:http" + "tcp"                          (ClusterIP)
//   "default/db:http" + "tcp" + "|NodePort|192.168.1.5:30080"
std::string entry_hash_input(const VirtualService& svc);
// Same with the extension forced (used when two ClusterIP entries would
// collide, e.g. two entries with the same name and protocol).
std::string entry_hash_input_extended(const VirtualService& svc);

}  // namespace vipd::cp::ipt
