// Thread: any (pure functions).
#include "controlplane/backends/iptables/chain_names.h"

#include <openssl/evp.h>

#include <array>
#include <stdexcept>

namespace vipd::cp::ipt {

std::string base32(std::string_view bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
  std::string out;
  out.reserve((bytes.size() * 8 + 4) / 5);
  uint32_t buffer = 0;
  int bits = 0;
  for (unsigned char c : bytes) {
    buffer = (buffer << 8) | c;
    bits += 8;
    while (bits >= 5) {
      out.push_back(kAlphabet[(buffer >> (bits - 5)) & 0x1f]);
      bits -= 5;
    }
  }
  if (bits > 0) out.push_back(kAlphabet[(buffer << (5 - bits)) & 0x1f]);
  return out;
}

std::string chain_hash(std::string_view input) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned int len = 0;
  if (EVP_Digest(input.data(), input.size(), md.data(), &len, EVP_sha256(), nullptr) != 1 || len != 32)
    throw std::runtime_error("iptables: sha256 failed (OpenSSL EVP_Digest)");
  // 16 base32 characters = 80 bits = the first 10 bytes of the digest.
  return base32(std::string_view(reinterpret_cast<const char*>(md.data()), 10));
}

std::string port_proto_hash(std::string_view service_port_name, std::string_view protocol) {
  std::string s(service_port_name);
  s.append(protocol);
  return chain_hash(s);
}

std::string endpoint_hash(std::string_view service_port_name, std::string_view protocol,
                          std::string_view endpoint) {
  std::string s(service_port_name);
  s.append(protocol);
  s.append(endpoint);
  return chain_hash(s);
}

const char* protocol_lower(Protocol p) { return p == Protocol::kUdp ? "udp" : "tcp"; }

std::string entry_hash_input_extended(const VirtualService& svc) {
  return svc.name + protocol_lower(svc.key.protocol) + "|" + name(svc.kind) + "|" + svc.key.vip.to_string() +
         ":" + std::to_string(svc.key.port);
}

std::string entry_hash_input(const VirtualService& svc) {
  if (svc.kind == ServiceKind::kClusterIp) return svc.name + protocol_lower(svc.key.protocol);
  return entry_hash_input_extended(svc);
}

}  // namespace vipd::cp::ipt
