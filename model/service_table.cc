// Thread: any.
#include "model/service_table.h"

#include <arpa/inet.h>

#include <algorithm>
#include <nlohmann/json.hpp>

namespace vipd::cp {

std::string ipv4_to_string(Ipv4 a) {
  return std::to_string(a >> 24) + "." + std::to_string((a >> 16) & 0xff) + "." +
         std::to_string((a >> 8) & 0xff) + "." + std::to_string(a & 0xff);
}

std::optional<Ipv4> parse_ipv4(const std::string& s) {
  // inet_pton accepts only the strict dotted-quad form for AF_INET.
  in_addr a{};
  if (s.empty() || inet_pton(AF_INET, s.c_str(), &a) != 1) return std::nullopt;
  return ntohl(a.s_addr);
}

bool valid_ipv4_cidr(const std::string& s) {
  const auto slash = s.find('/');
  if (slash == std::string::npos || slash + 1 >= s.size() || s.size() - slash - 1 > 2) return false;
  if (!parse_ipv4(s.substr(0, slash))) return false;
  int n = 0;
  for (size_t i = slash + 1; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    n = n * 10 + (s[i] - '0');
  }
  return n <= 32;
}

std::optional<AddressFamily> address_family(const std::string& s) {
  if (parse_ipv4(s)) return AddressFamily::kIpv4;
  in6_addr a{};
  if (inet_pton(AF_INET6, s.c_str(), &a) == 1) return AddressFamily::kIpv6;
  return std::nullopt;
}

bool is_ipv6(const std::string& s) { return address_family(s) == AddressFamily::kIpv6; }

std::string host_port(const IpAddr& a, uint16_t port) {
  if (a.is_v6()) return "[" + a.to_string() + "]:" + std::to_string(port);
  return a.to_string() + ":" + std::to_string(port);
}

bool parse_host_port(const std::string& s, IpAddr* ip, uint16_t* port) {
  const auto colon = s.rfind(':');
  if (colon == std::string::npos) return false;
  std::string host = s.substr(0, colon);
  const bool bracketed = host.size() >= 2 && host.front() == '[' && host.back() == ']';
  if (bracketed) host = host.substr(1, host.size() - 2);
  const auto a = IpAddr::parse(host);
  if (!a || a->is_v6() != bracketed) return false;
  const std::string p = s.substr(colon + 1);
  if (p.empty() || p.size() > 5 || p.find_first_not_of("0123456789") != std::string::npos) return false;
  const unsigned long v = std::stoul(p);
  if (v < 1 || v > 65535) return false;
  *ip = *a;
  *port = static_cast<uint16_t>(v);
  return true;
}

std::string to_string(const ServiceKey& k) { return std::string(name(k.protocol)) + " " + host_port(k.vip, k.port); }

void ServiceTable::normalize() {
  for (auto& [key, svc] : services) {
    auto& b = svc.backends;
    std::sort(b.begin(), b.end(), [](const RealServer& x, const RealServer& y) {
      return std::tie(x.ip, x.port) < std::tie(y.ip, y.port);
    });
    b.erase(std::unique(b.begin(), b.end(),
                        [](const RealServer& x, const RealServer& y) {
                          return x.ip == y.ip && x.port == y.port;
                        }),
            b.end());
  }
}

TableDiff TableDiff::compute(const ServiceTable& prev, const ServiceTable& next) {
  TableDiff d;
  auto p = prev.services.begin();
  auto n = next.services.begin();
  while (p != prev.services.end() || n != next.services.end()) {
    if (n == next.services.end() || (p != prev.services.end() && p->first < n->first)) {
      d.removed.push_back(p->first);
      ++p;
    } else if (p == prev.services.end() || n->first < p->first) {
      d.added.push_back(&n->second);
      ++n;
    } else {
      if (!(p->second == n->second)) d.changed.push_back(&n->second);
      ++p;
      ++n;
    }
  }
  return d;
}

std::string to_dry_run_json(const ServiceTable& t) {
  nlohmann::ordered_json services = nlohmann::ordered_json::array();
  for (const auto& [key, svc] : t.services) {
    nlohmann::ordered_json backends = nlohmann::ordered_json::array();
    for (const auto& b : svc.backends) {
      nlohmann::ordered_json j;
      j["ip"] = b.ip.to_string();
      j["port"] = b.port;
      j["weight"] = b.weight;
      j["terminating"] = b.terminating;
      backends.push_back(std::move(j));
    }
    nlohmann::ordered_json s;
    s["name"] = svc.name;
    s["protocol"] = name(key.protocol);
    s["vip"] = key.vip.to_string();
    s["port"] = key.port;
    s["kind"] = name(svc.kind);
    s["scheduler"] = name(svc.scheduler);
    s["persistence_timeout_s"] = svc.persistence_timeout_s;
    s["when_empty"] = name(svc.when_empty);
    s["proxy_protocol"] = name(svc.proxy_protocol);
    if (!svc.source_ranges.empty()) s["source_ranges"] = svc.source_ranges;
    s["backends"] = std::move(backends);
    services.push_back(std::move(s));
  }
  nlohmann::ordered_json doc;
  doc["services"] = std::move(services);
  // Names come from manifests, which may hold bytes that are not UTF-8:
  // replace them (U+FFFD) instead of throwing (found by tests/fuzz/fuzz_manifest).
  return doc.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace vipd::cp
