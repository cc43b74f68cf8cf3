// Thread: control (parsed once at start-up). The value parsers of the option
// table (option_rows.h): numbers, booleans, addresses, lists, listen
// addresses. Each refuses a bad value with one ConfigError line:
//   config: --OPTION 'VALUE': PROBLEM
// Internal to controlplane/config.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "controlplane/config/options.h"

namespace vipd::config::values {

constexpr unsigned kMaxLcore = 1023;

// Throws ConfigError("config: --OPTION 'VALUE': PROBLEM").
[[noreturn]] void fail(const std::string& option, const std::string& value, const std::string& problem);
// Throws ConfigError("config: --OPTION: PROBLEM") (an option that is missing).
[[noreturn]] void fail_missing(const std::string& option, const std::string& problem);

std::string trim(const std::string& s);
// Split on `sep`, each piece trimmed (an empty string gives one empty piece).
std::vector<std::string> split(const std::string& s, char sep);
std::vector<std::string> split_ws(const std::string& s);
std::string join(const std::vector<std::string>& words, const char* sep);
// A whole decimal number of at most 19 digits, nothing else.
std::optional<uint64_t> to_uint(const std::string& s);

// A whole number in [lo, hi] ("expected a whole number", "must be between
// LO and HI").
uint32_t parse_number(const std::string& option, const std::string& value, uint64_t lo, uint64_t hi);
// true/yes/on/1 or false/no/off/0.
bool parse_bool(const std::string& option, const std::string& value);
// An IPv4 address `addr` (host order), part `what` of the whole value.
uint32_t parse_addr(const std::string& option, const std::string& whole, const std::string& addr,
                    const char* what);
// Whether `a` is a unicast IPv6 address (not multicast, not ::); with
// `no_loopback` not ::1 either. `buf` gets its 16 bytes.
bool unicast_ipv6(const std::string& a, bool no_loopback, unsigned char buf[16]);

// A comma-separated list (items trimmed): each item made by `item` (which
// refuses a bad one itself), no value twice (fail(option, value,
// twice(item))) unless `may_repeat(item)`.
template <class T>
std::vector<T> parse_list(const std::string& option, const std::string& value,
                          const std::function<T(const std::string&)>& item,
                          const std::function<std::string(const std::string&)>& twice,
                          bool (*may_repeat)(const std::string&) = nullptr) {
  std::vector<T> out;
  for (const auto& text : split(value, ',')) {
    T v = item(text);
    if (!may_repeat || !may_repeat(text))
      for (const T& x : out)
        if (x == v) fail(option, value, twice(text));
    out.push_back(std::move(v));
  }
  return out;
}

// "1,2", "1-3", "1-3,6": lcores up to kMaxLcore, none twice.
std::vector<unsigned> parse_lcores(const std::string& option, const std::string& value);
// Comma-separated IPv4 addresses (host order), none twice.
std::vector<uint32_t> parse_addr_list(const std::string& option, const std::string& value);
// Comma-separated IPv4 and IPv6 addresses, none twice.
std::vector<cp::IpAddr> parse_ip_list(const std::string& option, const std::string& value);
// Comma-separated unicast IPv6 addresses as written, none twice, at most `max`.
std::vector<std::string> parse_ipv6_list(const std::string& option, const std::string& value, size_t max);
// Comma-separated interface names ('-' = the default, may repeat), none twice.
std::vector<std::string> parse_ifnames(const std::string& option, const std::string& value);
// HOST:PORT with an IPv4 host and a port in 1..65535.
void check_host_port(const std::string& option, const std::string& value);
// nullptr, or why `n` is not an interface name (1..15 of [A-Za-z0-9_.-]).
const char* interface_name(const std::string& n);

std::string addrs_text(const std::vector<uint32_t>& addrs);
std::string lcores_text(const std::vector<unsigned>& lcores);
std::string ips_text(const std::vector<cp::IpAddr>& addrs);

}  // namespace vipd::config::values
