// Thread: control (parsed once at start-up). See port_spec.h.
#include "controlplane/config/port_spec.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <vector>

#include "controlplane/config/option_values.h"
#include "model/service_table.h"

namespace vipd::config::values {
namespace {

// DDDD:BB:DD.F or BB:DD.F, hex digits, function 0-7.
bool looks_like_pci(const std::string& dev) {
  const std::string tail = dev.size() == 12 ? dev.substr(5) : dev;
  if (dev.size() == 12 && dev[4] != ':') return false;
  if (tail.size() != 7 || tail[2] != ':' || tail[5] != '.' || tail[6] < '0' || tail[6] > '7') return false;
  const std::string hex = (dev.size() == 12 ? dev.substr(0, 4) : "") + tail.substr(0, 2) + tail.substr(3, 2);
  return std::all_of(hex.begin(), hex.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
}

// The spec's shared parts: "PREFIX" after the slash (1..max) and the word
// before the gateway.
uint8_t parse_prefix(const char* opt, const std::string& whole, const std::string& text, unsigned max) {
  const auto len = to_uint(text);
  if (!len || *len < 1 || *len > max)
    fail(opt, whole, "prefix length '" + text + "' must be between 1 and " + std::to_string(max));
  return static_cast<uint8_t>(*len);
}

void expect_via(const char* opt, const std::string& whole, const std::string& word) {
  if (word != "via") fail(opt, whole, "expected 'via GATEWAY' after the address, got '" + word + "'");
}

constexpr const char* kOwnAddress = "gateway is the port's own address";

bool ip6_in_prefix(const unsigned char a[16], const unsigned char b[16], unsigned len) {
  const unsigned bytes = len / 8, bits = len % 8;
  if (std::memcmp(a, b, bytes) != 0) return false;
  return !bits || ((a[bytes] ^ b[bytes]) & static_cast<unsigned char>(0xff << (8 - bits))) == 0;
}

}  // namespace

PortConfig parse_port(const std::string& value) {
  static const char* kOpt = "port";
  const auto words = split_ws(value);
  if (words.size() != 2 && words.size() != 4) fail(kOpt, value, "expected DEVICE IP/PREFIX [via GATEWAY]");
  PortConfig p;
  p.device = words[0];
  p.is_pci = looks_like_pci(p.device);
  const std::string& cidr = words[1];
  const auto slash = cidr.find('/');
  if (slash == std::string::npos)
    fail(kOpt, value, "address '" + cidr + "' needs a prefix length, e.g. 10.0.0.1/24");
  p.ip = parse_addr(kOpt, value, cidr.substr(0, slash), "address");
  p.prefix_len = parse_prefix(kOpt, value, cidr.substr(slash + 1), 32);
  if (words.size() == 4) {
    expect_via(kOpt, value, words[2]);
    const uint32_t gw = parse_addr(kOpt, value, words[3], "gateway");
    const uint32_t mask = p.prefix_len == 32 ? ~0u : ~(~0u >> p.prefix_len);
    if ((gw & mask) != (p.ip & mask))
      fail(kOpt, value, "gateway " + words[3] + " is not inside " + cp::ipv4_to_string(p.ip & mask) + "/" +
                            std::to_string(p.prefix_len));
    if (gw == p.ip) fail(kOpt, value, kOwnAddress);
    p.gateway = gw;
  }
  return p;
}

PortIpv6 parse_port_ipv6(const std::string& whole, const std::string& item) {
  static const char* kOpt = "port-ipv6";
  PortIpv6 p;
  if (item == "-") return p;
  const auto words = split_ws(item);
  if (words.size() != 1 && words.size() != 3)
    fail(kOpt, whole, "'" + item + "': expected ADDR[/PREFIX] [via GATEWAY] (or '-')");
  // Unicast, not the loopback: what a port can own or send to.
  const auto unicast = [&](const std::string& a, const char* what, unsigned char* buf) {
    if (!unicast_ipv6(a, true, buf))
      fail(kOpt, whole, std::string(what) + " '" + a + "' is not a unicast IPv6 address (or '-')");
  };
  const std::string& cidr = words[0];
  const auto slash = cidr.find('/');
  unsigned char addr[16];
  p.addr = cidr.substr(0, slash);
  unicast(p.addr, "address", addr);
  if (slash != std::string::npos) p.prefix_len = parse_prefix(kOpt, whole, cidr.substr(slash + 1), 128);
  if (words.size() == 3) {
    expect_via(kOpt, whole, words[1]);
    unsigned char gw[16];
    unicast(words[2], "gateway", gw);
    const bool link_local = gw[0] == 0xfe && (gw[1] & 0xc0) == 0x80;
    if (!link_local && !ip6_in_prefix(gw, addr, p.prefix_len))
      fail(kOpt, whole, "gateway " + words[2] + " is neither inside " + p.addr + "/" + std::to_string(p.prefix_len) +
                            " nor link-local (fe80::/10)");
    if (std::memcmp(gw, addr, 16) == 0) fail(kOpt, whole, kOwnAddress);
    p.gateway = words[2];
  }
  return p;
}

void set_port_ipv6(DataplaneSettings& d, const std::string& value) {
  std::vector<PortIpv6> out;
  for (const auto& item : split(value, ',')) out.push_back(parse_port_ipv6(value, trim(item)));
  d.port_ipv6.clear();
  d.port_ipv6_prefix.clear();
  d.port_ipv6_gateway.clear();
  for (auto& p : out) {
    d.port_ipv6.push_back(p.addr);
    d.port_ipv6_prefix.push_back(p.prefix_len);
    d.port_ipv6_gateway.push_back(p.gateway);
  }
}

std::string port_ipv6_text(const DataplaneSettings& d) {
  std::vector<std::string> items;
  for (size_t i = 0; i < d.port_ipv6.size(); ++i) {
    std::string s = d.port_ipv6[i];
    if (s != "-" && i < d.port_ipv6_prefix.size()) s += "/" + std::to_string(d.port_ipv6_prefix[i]);
    if (i < d.port_ipv6_gateway.size() && !d.port_ipv6_gateway[i].empty()) s += " via " + d.port_ipv6_gateway[i];
    items.push_back(s);
  }
  return join(items, ",");
}

}  // namespace vipd::config::values
