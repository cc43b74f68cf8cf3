// Thread: control (parsed once at start-up). See option_values.h.
#include "controlplane/config/option_values.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>
#include <sstream>

#include "model/service_table.h"

namespace vipd::config::values {

void fail(const std::string& option, const std::string& value, const std::string& problem) {
  throw ConfigError("config: --" + option + " '" + value + "': " + problem);
}

void fail_missing(const std::string& option, const std::string& problem) {
  throw ConfigError("config: --" + option + ": " + problem);
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(trim(cur));
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  out.push_back(trim(cur));
  return out;
}

std::vector<std::string> split_ws(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

std::string join(const std::vector<std::string>& words, const char* sep) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : sep) + w;
  return out;
}

std::optional<uint64_t> to_uint(const std::string& s) {
  uint64_t v = 0;
  if (s.empty() || s.size() > 19) return std::nullopt;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

uint32_t parse_number(const std::string& option, const std::string& value, uint64_t lo, uint64_t hi) {
  const auto v = to_uint(trim(value));
  if (!v) fail(option, value, "expected a whole number");
  if (*v < lo || *v > hi)
    fail(option, value, "must be between " + std::to_string(lo) + " and " + std::to_string(hi));
  return static_cast<uint32_t>(*v);
}

bool parse_bool(const std::string& option, const std::string& value) {
  const std::string v = trim(value);
  if (v == "true" || v == "yes" || v == "on" || v == "1") return true;
  if (v == "false" || v == "no" || v == "off" || v == "0") return false;
  fail(option, value, "expected true or false");
}

uint32_t parse_addr(const std::string& option, const std::string& whole, const std::string& addr,
                    const char* what) {
  const auto a = cp::parse_ipv4(addr);
  if (!a) fail(option, whole, std::string(what) + " '" + addr + "' is not an IPv4 address");
  return *a;
}

bool unicast_ipv6(const std::string& a, bool no_loopback, unsigned char buf[16]) {
  if (inet_pton(AF_INET6, a.c_str(), buf) != 1 || buf[0] == 0xff) return false;
  const bool zero_head = std::all_of(buf, buf + 15, [](unsigned char b) { return b == 0; });
  return !(zero_head && (buf[15] == 0 || (no_loopback && buf[15] == 1)));
}

std::vector<unsigned> parse_lcores(const std::string& option, const std::string& value) {
  static const char* kSyntax = "expected a list like 1,2 or 1-3 or 1-3,6";
  std::vector<unsigned> out;
  std::set<unsigned> seen;
  if (trim(value).empty()) fail(option, value, kSyntax);
  for (const auto& item : split(value, ',')) {
    const auto dash = item.find('-');
    const auto lo = to_uint(trim(item.substr(0, dash)));
    const auto hi = dash == std::string::npos ? lo : to_uint(trim(item.substr(dash + 1)));
    if (!lo || !hi) fail(option, value, kSyntax);
    if (*hi < *lo) fail(option, value, "range '" + item + "' ends before it starts");
    if (*hi > kMaxLcore)
      fail(option, value, "lcore " + std::to_string(*hi) + " is above " + std::to_string(kMaxLcore));
    for (uint64_t c = *lo; c <= *hi; ++c) {
      if (!seen.insert(static_cast<unsigned>(c)).second)
        fail(option, value, "lcore " + std::to_string(c) + " is listed twice");
      out.push_back(static_cast<unsigned>(c));
    }
  }
  return out;
}

namespace {
std::string address_twice(const std::string& item) { return "address " + item + " is listed twice"; }
}  // namespace

std::vector<uint32_t> parse_addr_list(const std::string& option, const std::string& value) {
  return parse_list<uint32_t>(option, value, [&](const std::string& item) {
    if (item.empty()) fail(option, value, "expected comma-separated IPv4 addresses");
    return parse_addr(option, value, item, "address");
  }, address_twice);
}

std::vector<cp::IpAddr> parse_ip_list(const std::string& option, const std::string& value) {
  return parse_list<cp::IpAddr>(option, value, [&](const std::string& item) {
    if (item.empty()) fail(option, value, "expected comma-separated IPv4 or IPv6 addresses");
    const auto a = cp::IpAddr::parse(item);
    if (!a) fail(option, value, "address '" + item + "' is not an IPv4 or IPv6 address");
    return *a;
  }, address_twice);
}

std::vector<std::string> parse_ipv6_list(const std::string& option, const std::string& value, size_t max) {
  auto out = parse_list<std::string>(option, value, [&](const std::string& item) {
    unsigned char buf[16];
    if (!unicast_ipv6(item, false, buf)) fail(option, value, "'" + item + "' is not a unicast IPv6 address");
    return item;
  }, address_twice);
  if (out.size() > max) fail(option, value, "at most " + std::to_string(max) + " addresses");
  return out;
}

std::vector<std::string> parse_ifnames(const std::string& option, const std::string& value) {
  return parse_list<std::string>(option, value, [&](const std::string& n) {
    if (n != "-")
      if (const char* problem = interface_name(n)) fail(option, value, problem);
    return n;
  }, [](const std::string& n) { return "'" + n + "' is given twice"; },
     [](const std::string& n) { return n == "-"; });
}

void check_host_port(const std::string& option, const std::string& value) {
  const auto colon = value.rfind(':');
  if (colon == std::string::npos) fail(option, value, "expected HOST:PORT with an IPv4 host");
  if (!cp::parse_ipv4(value.substr(0, colon)))
    fail(option, value, "host '" + value.substr(0, colon) + "' is not an IPv4 address");
  const auto port = to_uint(value.substr(colon + 1));
  if (!port || *port < 1 || *port > 65535) fail(option, value, "port must be between 1 and 65535");
}

const char* interface_name(const std::string& n) {
  const bool ok = !n.empty() && n.size() <= 15 && std::all_of(n.begin(), n.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
  return ok ? nullptr : "expected an interface name of 1..15 characters [A-Za-z0-9_.-]";
}

std::string addrs_text(const std::vector<uint32_t>& addrs) {
  std::vector<std::string> words;
  for (uint32_t a : addrs) words.push_back(cp::ipv4_to_string(a));
  return join(words, ",");
}

std::string lcores_text(const std::vector<unsigned>& lcores) {
  std::vector<std::string> words;
  for (unsigned c : lcores) words.push_back(std::to_string(c));
  return join(words, ",");
}

std::string ips_text(const std::vector<cp::IpAddr>& addrs) {
  std::vector<std::string> words;
  for (const cp::IpAddr& a : addrs) words.push_back(a.to_string());
  return join(words, ",");
}

}  // namespace vipd::config::values
