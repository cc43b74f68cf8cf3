// Thread: control (parsed once at start-up).
// Command line + INI file parsing with Boost.Program_options, then validation
// of every value into Options. Every error is one line thrown as ConfigError:
//   config: --OPTION 'VALUE': PROBLEM
#include "controlplane/config/options.h"

#include <arpa/inet.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <ostream>
#include <set>
#include <sstream>
#include <utility>

#include "model/service_table.h"

#ifndef VIPD_VERSION
#define VIPD_VERSION "0.1.0"
#endif

namespace vipd::config {
namespace {

namespace po = boost::program_options;

constexpr unsigned kMaxLcore = 1023;
constexpr const char* kPositional = "_positional";

[[noreturn]] void fail(const std::string& option, const std::string& value,
                       const std::string& problem) {
  throw ConfigError("config: --" + option + " '" + value + "': " + problem);
}

[[noreturn]] void fail_missing(const std::string& option, const std::string& problem) {
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

std::optional<uint64_t> to_uint(const std::string& s) {
  uint64_t v = 0;
  if (s.empty() || s.size() > 19) return std::nullopt;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

uint32_t parse_number(const std::string& option, const std::string& value, uint64_t lo,
                      uint64_t hi) {
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

// DDDD:BB:DD.F or BB:DD.F, hex digits, function 0-7.
bool looks_like_pci(const std::string& dev) {
  const std::string tail = dev.size() == 12 ? dev.substr(5) : dev;
  if (dev.size() == 12 && dev[4] != ':') return false;
  if (tail.size() != 7 || tail[2] != ':' || tail[5] != '.' || tail[6] < '0' || tail[6] > '7')
    return false;
  const std::string hex = (dev.size() == 12 ? dev.substr(0, 4) : "") + tail.substr(0, 2) + tail.substr(3, 2);
  return std::all_of(hex.begin(), hex.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
}

PortConfig parse_port(const std::string& value) {
  static const char* kOpt = "port";
  const auto words = split_ws(value);
  if (words.size() != 2 && words.size() != 4)
    fail(kOpt, value, "expected DEVICE IP/PREFIX [via GATEWAY]");
  PortConfig p;
  p.device = words[0];
  p.is_pci = looks_like_pci(p.device);
  const std::string& cidr = words[1];
  const auto slash = cidr.find('/');
  if (slash == std::string::npos)
    fail(kOpt, value, "address '" + cidr + "' needs a prefix length, e.g. 10.0.0.1/24");
  p.ip = parse_addr(kOpt, value, cidr.substr(0, slash), "address");
  const auto prefix = to_uint(cidr.substr(slash + 1));
  if (!prefix || *prefix < 1 || *prefix > 32)
    fail(kOpt, value, "prefix length '" + cidr.substr(slash + 1) + "' must be between 1 and 32");
  p.prefix_len = static_cast<uint8_t>(*prefix);
  if (words.size() == 4) {
    if (words[2] != "via")
      fail(kOpt, value, "expected 'via GATEWAY' after the address, got '" + words[2] + "'");
    const uint32_t gw = parse_addr(kOpt, value, words[3], "gateway");
    const uint32_t mask = p.prefix_len == 32 ? ~0u : ~(~0u >> p.prefix_len);
    if ((gw & mask) != (p.ip & mask))
      fail(kOpt, value, "gateway " + words[3] + " is not inside " +
                            cp::ipv4_to_string(p.ip & mask) + "/" + std::to_string(p.prefix_len));
    if (gw == p.ip) fail(kOpt, value, "gateway is the port's own address");
    p.gateway = gw;
  }
  return p;
}

// One entry of --port-ipv6: "-", or "ADDR[/PREFIX] [via GATEWAY]".
struct PortIpv6 {
  std::string addr = "-";
  uint8_t prefix_len = 64;
  std::string gateway;  // "" = none
};

bool ip6_in_prefix(const unsigned char a[16], const unsigned char b[16], unsigned len) {
  const unsigned bytes = len / 8, bits = len % 8;
  if (std::memcmp(a, b, bytes) != 0) return false;
  return !bits || ((a[bytes] ^ b[bytes]) & static_cast<unsigned char>(0xff << (8 - bits))) == 0;
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
    if (inet_pton(AF_INET6, a.c_str(), buf) != 1 || buf[0] == 0xff ||
        (std::all_of(buf, buf + 15, [](unsigned char b) { return b == 0; }) && buf[15] <= 1))
      fail(kOpt, whole, std::string(what) + " '" + a + "' is not a unicast IPv6 address (or '-')");
  };
  const std::string& cidr = words[0];
  const auto slash = cidr.find('/');
  unsigned char addr[16];
  p.addr = cidr.substr(0, slash);
  unicast(p.addr, "address", addr);
  if (slash != std::string::npos) {
    const auto len = to_uint(cidr.substr(slash + 1));
    if (!len || *len < 1 || *len > 128)
      fail(kOpt, whole, "prefix length '" + cidr.substr(slash + 1) + "' must be between 1 and 128");
    p.prefix_len = static_cast<uint8_t>(*len);
  }
  if (words.size() == 3) {
    if (words[1] != "via")
      fail(kOpt, whole, "expected 'via GATEWAY' after the address, got '" + words[1] + "'");
    unsigned char gw[16];
    unicast(words[2], "gateway", gw);
    const bool link_local = gw[0] == 0xfe && (gw[1] & 0xc0) == 0x80;
    if (!link_local && !ip6_in_prefix(gw, addr, p.prefix_len))
      fail(kOpt, whole, "gateway " + words[2] + " is neither inside " + p.addr + "/" + std::to_string(p.prefix_len) +
                            " nor link-local (fe80::/10)");
    if (std::memcmp(gw, addr, 16) == 0) fail(kOpt, whole, "gateway is the port's own address");
    p.gateway = words[2];
  }
  return p;
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

std::vector<uint32_t> parse_addr_list(const std::string& option, const std::string& value) {
  std::vector<uint32_t> out;
  for (const auto& item : split(value, ',')) {
    if (item.empty()) fail(option, value, "expected comma-separated IPv4 addresses");
    const uint32_t a = parse_addr(option, value, item, "address");
    for (uint32_t x : out)
      if (x == a) fail(option, value, "address " + item + " is listed twice");
    out.push_back(a);
  }
  return out;
}

// Comma-separated IPv4 and IPv6 addresses, none twice.
std::vector<cp::IpAddr> parse_ip_list(const std::string& option, const std::string& value) {
  std::vector<cp::IpAddr> out;
  for (const auto& item : split(value, ',')) {
    if (item.empty()) fail(option, value, "expected comma-separated IPv4 or IPv6 addresses");
    const auto a = cp::IpAddr::parse(item);
    if (!a) fail(option, value, "address '" + item + "' is not an IPv4 or IPv6 address");
    for (const cp::IpAddr& x : out)
      if (x == *a) fail(option, value, "address " + item + " is listed twice");
    out.push_back(*a);
  }
  return out;
}

void check_host_port(const std::string& option, const std::string& value) {
  const auto colon = value.rfind(':');
  if (colon == std::string::npos) fail(option, value, "expected HOST:PORT with an IPv4 host");
  if (!cp::parse_ipv4(value.substr(0, colon)))
    fail(option, value, "host '" + value.substr(0, colon) + "' is not an IPv4 address");
  const auto port = to_uint(value.substr(colon + 1));
  if (!port || *port < 1 || *port > 65535)
    fail(option, value, "port must be between 1 and 65535");
}

// Checks the config file's line syntax (Boost's own message has no line number).
std::string check_file_syntax(const std::string& file, std::istream& in) {
  std::ostringstream all;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    all << line << "\n";
    std::string t = trim(line.substr(0, line.find('#')));
    if (t.empty() || (t.front() == '[' && t.back() == ']')) continue;
    const auto eq = t.find('=');
    if (eq == std::string::npos || trim(t.substr(0, eq)).empty())
      throw ConfigError("config: " + file + ":" + std::to_string(n) +
                        ": expected 'name = value', got '" + t + "'");
  }
  return all.str();
}

std::string strip_dashes(std::string s) {
  while (!s.empty() && s.front() == '-') s.erase(0, 1);
  return s;
}

constexpr size_t kMaxConfigBytes = 1 << 20;

void store_file(const std::string& file, const po::options_description& desc,
                po::variables_map& vm) {
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec)) fail("config", file, "cannot open file (is a directory)");
  std::ifstream in(file, std::ios::binary);
  if (!in) fail("config", file, "cannot open file");
  // Read at most one byte past the cap: /dev/zero or a huge file fails here
  // instead of being read without end, and a read error is an error.
  std::string content(kMaxConfigBytes + 1, '\0');
  errno = 0;
  in.read(content.data(), static_cast<std::streamsize>(content.size()));
  if (in.bad()) fail("config", file, errno ? std::string("read error: ") + std::strerror(errno) : "read error");
  content.resize(static_cast<size_t>(in.gcount()));
  if (content.size() > kMaxConfigBytes) fail("config", file, "file is larger than 1 MiB");
  if (content.find('\0') != std::string::npos) fail("config", file, "file contains a NUL byte (not a text file)");
  std::istringstream raw(content);
  std::istringstream text(check_file_syntax(file, raw));
  try {
    auto parsed = po::parse_config_file(text, desc, /*allow_unregistered=*/true);
    for (const auto& o : parsed.options)
      if (o.unregistered)
        throw ConfigError("config: " + file + ": unknown option '" + o.string_key + "'");
    po::store(parsed, vm);
  } catch (const po::multiple_occurrences& e) {
    throw ConfigError("config: " + file + ": option '" + strip_dashes(e.get_option_name()) +
                      "' given more than once");
  } catch (const po::error& e) {
    throw ConfigError("config: " + file + ": " + e.what());
  }
}

// ---- The option table -------------------------------------------------------
// One row per option: its name, the field it sets, its range or choices, its
// default (read from a default-constructed Options, never written twice), its
// --help line and its documentation. The Boost descriptions, --help, the
// parsing and range checks, and docs/configuration.md's option table
// (setting_docs(), option_table_markdown()) are all made from these rows.

using Kind = SettingDoc::Kind;

// The field a row sets: a member of Options, or of Options::dataplane.
template <class T>
struct Field {
  T Options::*top = nullptr;
  T DataplaneSettings::*dp = nullptr;
  Field(T Options::*m) : top(m) {}           // NOLINT: implicit on purpose
  Field(T DataplaneSettings::*m) : dp(m) {}  // NOLINT
  T& of(Options& o) const { return top ? o.*top : o.dataplane.*dp; }
  const T& of(const Options& o) const { return top ? o.*top : o.dataplane.*dp; }
};

struct Setting {
  const char* name;
  Kind kind = Kind::kText;
  const char* arg = nullptr;  // placeholder in --help; nullptr for a switch
  uint64_t min = 0, max = 0;  // kNumber
  std::vector<std::string> choices;  // kChoice
  const char* help = "";      // one line for --help
  const char* meaning = "";   // docs' Meaning column (Markdown)
  const char* value_doc = nullptr;    // docs' Value column; nullptr: made from kind and range
  const char* default_text = nullptr; // nullptr: the default Options' value
  bool in_file = true;        // may appear in the config file
  bool composing = false;     // repeatable, values accumulate (command line + file)
  // Parses, checks and stores one value (each value of a repeatable option).
  std::function<void(Options&, const std::string&)> set;
  // The value as --help and the docs show it ("" = none).
  std::function<std::string(const Options&)> show;
};

// Whole numbers: "must be between MIN and MAX" names the option, the value
// and the range. `check` (optional) refuses more, returning the problem.
Setting number(const char* name, const char* arg, Field<uint32_t> f, uint64_t min, uint64_t max,
               const char* help, const char* meaning,
               const char* (*check)(uint64_t) = nullptr) {
  Setting s{name, Kind::kNumber, arg, min, max};
  s.help = help;
  s.meaning = meaning;
  s.set = [name, f, min, max, check](Options& o, const std::string& v) {
    const uint32_t n = parse_number(name, v, min, max);
    if (check)
      if (const char* problem = check(n)) fail(name, v, problem);
    f.of(o) = n;
  };
  s.show = [f](const Options& o) { return std::to_string(f.of(o)); };
  return s;
}

// true/false (yes/no, on/off, 1/0). A switch takes no value on the command line.
Setting boolean(const char* name, Field<bool> f, bool is_switch, const char* help, const char* meaning) {
  Setting s{name, is_switch ? Kind::kSwitch : Kind::kBool, is_switch ? nullptr : "BOOL"};
  s.help = help;
  s.meaning = meaning;
  s.set = [name, f](Options& o, const std::string& v) { f.of(o) = parse_bool(name, v); };
  s.show = [f](const Options& o) { return std::string(f.of(o) ? "true" : "false"); };
  return s;
}

// "expected a, b or c" (up to 5 choices), "expected one of a, b, ..., k".
std::string expected_one_of(const std::vector<std::string>& names) {
  std::string out = names.size() > 5 ? "expected one of " : "expected ";
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += names.size() > 5 || i + 1 < names.size() ? ", " : " or ";
    out += names[i];
  }
  return out;
}

// One of a fixed list of words, each standing for a value of the field.
template <class T>
Setting choice(const char* name, const char* arg, Field<T> f, std::vector<std::pair<std::string, T>> values,
               const char* help, const char* meaning) {
  Setting s{name, Kind::kChoice, arg};
  for (const auto& v : values) s.choices.push_back(v.first);
  s.help = help;
  s.meaning = meaning;
  s.set = [name, f, values, problem = expected_one_of(s.choices)](Options& o, const std::string& v) {
    const std::string w = trim(v);
    for (const auto& [word, value] : values)
      if (w == word) {
        f.of(o) = value;
        return;
      }
    fail(name, v, problem);
  };
  s.show = [f, values](const Options& o) {
    for (const auto& [word, value] : values)
      if (f.of(o) == value) return word;
    return std::string("?");
  };
  return s;
}

// Free text, trimmed; `check` (optional) refuses a value, returning the problem.
Setting text(const char* name, const char* arg, Field<std::string> f, const char* help, const char* meaning,
             const char* (*check)(const std::string&) = nullptr) {
  Setting s{name, Kind::kText, arg};
  s.help = help;
  s.meaning = meaning;
  s.set = [name, f, check](Options& o, const std::string& v) {
    const std::string t = trim(v);
    if (check)
      if (const char* problem = check(t)) fail(name, v, problem);
    f.of(o) = t;
  };
  s.show = [f](const Options& o) { return f.of(o); };
  return s;
}

// Anything else: the row's own parser and printer.
Setting other(const char* name, const char* arg, const char* help, const char* meaning,
              std::function<void(Options&, const std::string&)> set,
              std::function<std::string(const Options&)> show) {
  Setting s{name, Kind::kText, arg};
  s.help = help;
  s.meaning = meaning;
  s.set = std::move(set);
  s.show = std::move(show);
  return s;
}

// A setting's documentation fields, set after the row is made.
Setting with(Setting s, const char* value_doc, const char* default_text = nullptr) {
  s.value_doc = value_doc;
  s.default_text = default_text;
  return s;
}

// The words of one of the model's enums (model/kinds.h), in its name table's
// order (the order help text and error messages list them).
// A table's empty name (ProxyProtocol's none) is spelled `empty_name` here.
template <class E>
std::vector<std::pair<std::string, E>> model_choices(const char* empty_name = "") {
  std::vector<std::pair<std::string, E>> out;
  for (const auto& e : cp::name_table(E{})) out.emplace_back(*e.name ? e.name : empty_name, e.value);
  return out;
}

const char* not_empty(const std::string& v) { return v.empty() ? "must not be empty" : nullptr; }

const char* interface_name(const std::string& n) {
  const bool ok = !n.empty() && n.size() <= 15 && std::all_of(n.begin(), n.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
  return ok ? nullptr : "expected an interface name of 1..15 characters [A-Za-z0-9_.-]";
}

const char* prime(uint64_t n) {
  bool p = n > 1;
  for (uint64_t d = 2; p && d * d <= n; ++d) p = n % d != 0;
  return p ? nullptr : "must be a prime number (e.g. 251, 4093, 65537)";
}

std::string join(const std::vector<std::string>& words, const char* sep) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : sep) + w;
  return out;
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

// HOST:PORT, or "" / "off" to switch the endpoint off.
Setting listen_address(const char* name, std::string Options::*f, const char* help, const char* meaning) {
  return with(other(name, "HOST:PORT", help, meaning,
                    [name, f](Options& o, const std::string& v) {
                      const std::string a = trim(v);
                      if (a.empty() || a == "off") {
                        (o.*f).clear();
                      } else {
                        check_host_port(name, a);
                        o.*f = a;
                      }
                    },
                    [f](const Options& o) { return o.*f; }),
              "`IPv4:PORT` \\| `off`");
}

Setting addr_list(const char* name, std::vector<uint32_t> Options::*f, const char* help, const char* meaning) {
  return with(other(name, "ADDRS", help, meaning,
                    [name, f](Options& o, const std::string& v) { o.*f = parse_addr_list(name, v); },
                    [f](const Options& o) { return addrs_text(o.*f); }),
              "`A,B,...`");
}

Setting ip_list(const char* name, std::vector<cp::IpAddr> Options::*f, const char* help, const char* meaning) {
  return with(other(name, "ADDRS", help, meaning,
                    [name, f](Options& o, const std::string& v) { o.*f = parse_ip_list(name, v); },
                    [f](const Options& o) {
                      std::vector<std::string> words;
                      for (const cp::IpAddr& a : o.*f) words.push_back(a.to_string());
                      return join(words, ",");
                    }),
              "`A,B,...`");
}

Setting command_only(const char* name, const char* arg, const char* help, const char* meaning) {
  Setting s = other(name, arg, help, meaning, nullptr, nullptr);
  s.in_file = false;
  return s;
}

const std::vector<Setting>& settings() {
  static const std::vector<Setting> rows = [] {
    std::vector<Setting> r;
    r.push_back(with(command_only("help", nullptr, "print this help and exit",
                                  "Print the usage line and every option with a one-line description and its "
                                  "default, then exit 0."), "", ""));
    r.push_back(with(command_only("version", nullptr, "print the version and exit",
                                  "Print `vipd VERSION` and exit 0."), "", ""));
    r.push_back(with(command_only("config", "FILE", "read options from FILE (key = value lines; the command line wins)",
                                  "Read options from FILE (see above)."), "FILE", "none"));
    r.push_back(choice<Mode>("mode", "MODE", &Options::mode,
        {{"dpdk", Mode::kDpdk}, {"iptables", Mode::kIptables}, {"nftables", Mode::kNftables}, {"ipvs", Mode::kIpvs}},
        "dataplane",
        "Dataplane. `dpdk` and `iptables` (the kernel forwards; kube-proxy's chain layout with prefix VIPD-, no "
        "DPDK, no port/lcore options needed; see [modes.md](modes.md)), `nftables` (the kernel forwards; "
        "kube-proxy's nftables layout in table `ip vipd`, through libnftables; see "
        "[modes.md](modes.md#nftables-mode-in-detail)) and `ipvs` (kernel IPVS over generic netlink, VIPs on a "
        "dummy interface; see [modes.md](modes.md#ipvs-mode-in-detail)) are implemented."));
    r.push_back(boolean("dry-run", &Options::dry_run, true,
        "build the service table from the manifests, print it as JSON (--mode iptables: the iptables-restore "
        "payload; --mode nftables: the nft transaction; --mode ipvs: the IPVS state, ipvsadm -Ln form); program "
        "nothing",
        "Build the service table from the manifests, print it as JSON (below) and exit. No port, lcore or fnat "
        "address is needed. With `--mode iptables` it prints the full `iptables-restore --noflush` payload "
        "instead, with `--mode nftables` the full-sync nft transaction (`nft -c -f` accepts it), with `--mode "
        "ipvs` the IPVS services in `ipvsadm -Ln` form, the addresses of the dummy interface, the sysctls and the "
        "iptables payload, then the ip6tables one when there are IPv6 entries (see [modes.md](modes.md))."));
    r.push_back(with(text("ipvs-interface", "NAME", &Options::ipvs_interface,
        "ipvs mode: dummy interface the VIPs are bound to (created when missing)",
        "ipvs mode: the dummy interface the VIPs are bound to (/32, IPv6 /128); created when missing, left in place on exit.",
        interface_name), "NAME (1..15 of `[A-Za-z0-9_.-]`)"));
    r.push_back(with(other("eal-args", "ARGS",
        "extra DPDK EAL arguments, split on whitespace (e.g. \"--no-pci --vdev net_null0\")",
        "Extra DPDK EAL arguments, split on whitespace (no quoting).",
        [](Options& o, const std::string& v) { o.dataplane.eal_args = split_ws(v); },
        [](const Options& o) { return join(o.dataplane.eal_args, " "); }), "string"));
    {
      Setting port = other("port", "SPEC", "dataplane port 'DEVICE IP/PREFIX [via GATEWAY]'; repeatable; required in dpdk mode",
          "A DPDK port, see [Port syntax](#port-syntax). Repeatable. At least one is required in dpdk mode unless "
          "`--dry-run`.",
          [](Options& o, const std::string& v) {
            PortConfig p = parse_port(v);
            for (const auto& q : o.ports)
              if (q.device == p.device) fail("port", v, "device " + p.device + " is given twice");
            o.ports.push_back(std::move(p));
          },
          [](const Options&) { return std::string(); });
      port.composing = true;
      r.push_back(std::move(port));
    }
    r.push_back(with(other("port-ipv6", "LIST",
        "IPv6 address of each port, in --port order, comma-separated: 'ADDR[/PREFIX] [via GATEWAY]' ('-' = none; "
        "prefix 64 when not given)",
        "Each port's IPv6 address, in `port` order, comma-separated: `ADDR[/PREFIX] [via GATEWAY]`; `-` (or a "
        "missing entry) for a port without one. The port answers Neighbor Solicitations and ICMPv6 echo for "
        "ADDR; ADDR/PREFIX (PREFIX 1-128, 64 when not given) is on-link for IPv6 forwarding (with "
        "`--forward-method nat`, or fnat with `--fnat-local-addrs6`), and destinations outside every port's "
        "prefix go to the GATEWAY of the first port that has one, as `via` of `port` does for IPv4. GATEWAY is "
        "inside ADDR/PREFIX or link-local (`fe80::/10`, what IPv6 routers advertise), and not ADDR itself; see "
        "architecture.md, \"IPv6\".",
        [](Options& o, const std::string& v) {
          std::vector<PortIpv6> out;
          for (const auto& item : split(v, ',')) out.push_back(parse_port_ipv6(v, trim(item)));
          o.dataplane.port_ipv6.clear();
          o.dataplane.port_ipv6_prefix.clear();
          o.dataplane.port_ipv6_gateway.clear();
          for (auto& p : out) {
            o.dataplane.port_ipv6.push_back(p.addr);
            o.dataplane.port_ipv6_prefix.push_back(p.prefix_len);
            o.dataplane.port_ipv6_gateway.push_back(p.gateway);
          }
        },
        [](const Options& o) {
          const DataplaneSettings& d = o.dataplane;
          std::vector<std::string> items;
          for (size_t i = 0; i < d.port_ipv6.size(); ++i) {
            std::string s = d.port_ipv6[i];
            if (s != "-" && i < d.port_ipv6_prefix.size()) s += "/" + std::to_string(d.port_ipv6_prefix[i]);
            if (i < d.port_ipv6_gateway.size() && !d.port_ipv6_gateway[i].empty()) s += " via " + d.port_ipv6_gateway[i];
            items.push_back(s);
          }
          return join(items, ",");
        }), "string"));
    r.push_back(choice<ExceptionPath>("exception-path", "KIND", &DataplaneSettings::exception_path,
        {{"none", ExceptionPath::kNone}, {"tap", ExceptionPath::kTap}},
        "dpdk mode: kernel interface per port for the gateway's own traffic (BGP, BFD, ping): none or tap",
        "dpdk mode: `tap` gives each port a kernel interface (DPDK `net_tap`) with the port's MAC and address, "
        "so that the kernel and its daemons (BGP, BFD, ssh) can use the data network; frames for the port's "
        "own address that are not VIP traffic go there, rate limited by `--exception-pps`, and what the kernel "
        "sends leaves through the port. The interface exists as long as vipd runs. `none`: vipd answers ARP "
        "and ping for the port address and drops the rest (`local_unhandled`). See [gateway.md](gateway.md)."));
    r.push_back(with(other("exception-ifnames", "LIST",
        "names of the exception interfaces, in --port order, comma-separated ('-' = vipd-<index>)",
        "Names of the kernel interfaces of `--exception-path`, in `port` order, comma-separated; `-` (or a "
        "missing entry): `vipd-<index>` (`vipd-0` for the first port).",
        [](Options& o, const std::string& v) {
          std::vector<std::string> out;
          for (const auto& item : split(v, ',')) {
            const std::string n = trim(item);
            if (n != "-")
              if (const char* problem = interface_name(n)) fail("exception-ifnames", v, problem);
            if (n != "-" && std::find(out.begin(), out.end(), n) != out.end())
              fail("exception-ifnames", v, "'" + n + "' is given twice");
            out.push_back(n);
          }
          o.dataplane.exception_ifnames = std::move(out);
        },
        [](const Options& o) { return join(o.dataplane.exception_ifnames, ","); }), "string",
        "vipd-0,vipd-1,..."));
    r.push_back(number("exception-pps", "N", &DataplaneSettings::exception_pps, 1, 10000000,
        "frames per second the exception path passes to the kernel (all ports); the rest are counted drops",
        "Frames per second the exception path passes to the kernel, all ports together (a token bucket "
        "holding a tenth of a second's worth, at least 32); the rest are dropped and counted "
        "(`vipd_exception_drops_total{reason=\"rate_limited\"}`)."));
    r.push_back(number("announce-table", "N", &Options::announce_table, 0, 4294967295u,
        "dpdk mode, with --exception-path tap: routing table for the announced VIPs (/32 routes); 0 = off",
        "dpdk mode, needs `--exception-path tap`: vipd puts each announced VIP as a /32 route on the first "
        "port's exception interface into this routing table, for a routing daemon to export over BGP "
        "(docs/gateway.md, \"Announcing VIPs\"). 0: nothing is announced. Not 253-255 (the kernel's "
        "default, main and local tables).", [](uint64_t n) -> const char* {
          return n >= 253 && n <= 255 ? "253, 254 and 255 are the kernel's default, main and local tables" : nullptr;
        }));
    r.push_back(boolean("announce-require-endpoints", &Options::announce_require_endpoints, false,
        "announce a VIP only while one of its services has a backend taking new flows",
        "With `--announce-table`: a VIP address is announced only while at least one of its services has a "
        "backend taking new flows (ready, weight > 0); `false`: every VIP address of the applied table."));
    r.push_back(number("drain-on-sigterm", "SECONDS", &Options::drain_on_sigterm, 0, 86400,
        "dpdk mode: on SIGTERM drain first (withdraw the announced VIPs) and wait up to SECONDS for the "
        "connections to end; 0 = off",
        "dpdk mode: on SIGTERM (or SIGINT) vipd first drains like `vipctl drain` (every announced route is "
        "withdrawn, forwarding goes on), then waits until no connection is left or SECONDS have passed, "
        "logging the count every second, and only then stops. A second SIGTERM ends the wait at once. "
        "0: stop at once (docs/gateway.md, \"Draining\")."));
    r.push_back(number("main-lcore", "N", &DataplaneSettings::main_lcore, 0, kMaxLcore,
        "DPDK main (control) lcore", "DPDK main (control) lcore."));
    r.push_back(with(other("worker-lcores", "LIST", "DPDK worker lcores, e.g. 1,2 or 1-3 or 1-3,6",
        "DPDK worker lcores, see [Lcore lists](#lcore-lists). May not include the main lcore.",
        [](Options& o, const std::string& v) { o.dataplane.worker_lcores = parse_lcores("worker-lcores", v); },
        [](const Options& o) { return lcores_text(o.dataplane.worker_lcores); }), "LIST"));
    r.push_back(choice<ForwardMethod>("forward-method", "METHOD", &Options::forward_method,
        model_choices<ForwardMethod>(),
        "dpdk forwarding (fnat: full NAT; nat: DNAT, backends route replies via vipd)",
        "`fnat`: full NAT, the client source is rewritten to one of `--fnat-local-addrs`, so replies come back to "
        "vipd on any topology. `nat`: destination NAT only; backends must route replies through vipd."));
    r.push_back(addr_list("fnat-local-addrs", &Options::fnat_local_addrs,
        "comma-separated IPv4 source addresses for fnat (required for fnat in dpdk mode)",
        "IPv4 source addresses for full NAT, comma-separated, no duplicates. Required with `fnat` in dpdk mode "
        "(not with `--dry-run`). They are vipd's own: a Service entry (cluster IP, external IP, ...) on one of "
        "them is an object error and is not served, and the dataplane treats every packet to one as a reply. "
        "Each worker keeps a 256 KiB port index per address (at most 16 addresses)."));
    r.push_back(addr_list("handover-peers", &Options::handover_peers,
        "dpdk fnat: the other gateways' data-port IPv4 addresses; a TCP packet of no connection here "
        "(not a SYN) is handed over to them",
        "dpdk mode with `--forward-method fnat`, several gateways behind ECMP: the other gateways' IPv4 "
        "addresses on a port's subnet (at most 8, resolved by ARP). A TCP packet without SYN that belongs to "
        "no connection here (ECMP moved its flow, e.g. during a drain) is sent to each of them unchanged "
        "(only the Ethernet header: their MAC, ethertype 0x88b5); the one that holds the connection forwards "
        "it, the others drop it (`handover_not_held`) and never hand it over again. Rate limited by "
        "`--handover-pps`. Empty: off (docs/gateway.md, \"Hand-over\")."));
    r.push_back(number("handover-pps", "N", &DataplaneSettings::handover_pps, 1, 10000000,
        "dpdk fnat: packets each worker may hand over to --handover-peers per second",
        "dpdk mode with `--handover-peers`: packets each worker may hand over per second (a token bucket "
        "holding a tenth of a second's worth); more are dropped and counted (`handover_rate_limited`), so "
        "that random ACKs cannot be multiplied by the number of peers past it."));
    r.push_back(with(other("fnat-local-addrs6", "ADDRS",
        "comma-separated IPv6 source addresses for fnat (IPv6 forwarding in fnat mode needs them)",
        "IPv6 source addresses for full NAT, comma-separated, no duplicates, at most 16. IPv6 Services are "
        "forwarded in dpdk fnat mode only with at least one (and a port with `--port-ipv6`); without them "
        "IPv6 entries are skipped with a warning, as before. They are vipd's own: it answers Neighbor "
        "Solicitations for them and treats every packet to one as a reply (see architecture.md, \"IPv6\").",
        [](Options& o, const std::string& v) {
          std::vector<std::string> out;
          for (const auto& item : split(v, ',')) {
            const std::string a = trim(item);
            unsigned char buf[16];
            if (inet_pton(AF_INET6, a.c_str(), buf) != 1 || buf[0] == 0xff ||
                std::all_of(buf, buf + 16, [](unsigned char b) { return b == 0; }))
              fail("fnat-local-addrs6", v, "'" + a + "' is not a unicast IPv6 address");
            for (const auto& x : out)
              if (x == a) fail("fnat-local-addrs6", v, "address " + a + " is listed twice");
            out.push_back(a);
          }
          if (out.size() > 16) fail("fnat-local-addrs6", v, "at most 16 addresses");
          o.dataplane.fnat_local_addrs6 = std::move(out);
        },
        [](const Options& o) { return join(o.dataplane.fnat_local_addrs6, ","); }), "string"));
    r.push_back(with(text("manifests-dir", "DIR", &Options::manifests_dir,
        "directory of Service/EndpointSlice manifests (*.yaml, *.yml, *.json); required with --source manifests",
        "Directory of Service/EndpointSlice manifests. Must exist and be a directory. Required with `--source "
        "manifests`."), "DIR"));
    r.push_back(with(text("admin-socket", "PATH", &Options::admin_socket,
        "unix socket of the admin API (used by vipctl)",
        "Unix socket of the admin API (used by `vipctl`). Must not be empty.", not_empty), "PATH"));
    r.push_back(listen_address("metrics-address", &Options::metrics_address,
        "listen address of the Prometheus /metrics endpoint; empty or 'off' disables it",
        "Listen address of the Prometheus `/metrics` endpoint (docs/metrics.md). The host must be an IPv4 address "
        "(`0.0.0.0` for all). Empty or `off`: no metrics endpoint."));
    r.push_back(listen_address("health-address", &Options::health_address,
        "listen address of /healthz and /livez; empty or 'off' disables them",
        "Listen address of `/healthz` and `/livez` (docs/metrics.md, \"Health endpoints\"). Empty or `off`: none. "
        "Must differ from `--metrics-address`."));
    r.push_back(boolean("metrics-per-backend", &Options::metrics_per_backend, false,
        "export per-backend series (vipd_backend_*)", "Export per-backend series (`vipd_backend_*`)."));
    r.push_back(number("metrics-max-backend-series", "N", &Options::metrics_max_backend_series, 0, 10000000,
        "at most N backends get per-backend series",
        "At most this many backends get per-backend series (8 series each), in table order; the rest are counted "
        "in `vipd_metrics_omitted_backends`."));
    r.push_back(number("metrics-max-service-series", "N", &Options::metrics_max_service_series, 0, 10000000,
        "at most N services get per-service series",
        "At most this many services get per-service series (8 series each), in table order; the rest are counted "
        "in `vipd_metrics_omitted_services`. See docs/metrics.md, \"Cardinality\"."));
    r.push_back(choice<LogLevel>("log-level", "LEVEL", &Options::log_level,
        {{"debug", LogLevel::kDebug}, {"info", LogLevel::kInfo}, {"warn", LogLevel::kWarn}, {"error", LogLevel::kError}},
        "log verbosity", "Log verbosity (stderr, one line per message)."));
    r.push_back(with(other("user", "NAME",
        "dpdk mode: once the ports run and the sockets are bound, switch every thread to this unprivileged user "
        "and its groups, keeping no capability (docs/security.md)",
        "dpdk mode: once the ports run and the sockets are bound, every thread switches to this unprivileged "
        "user and its groups, with no capability left and `no_new_privs`. The user must read the manifests "
        "directory; add `--legacy-mem` to `--eal-args` with hugepages. Refused in the kernel modes (iptables, "
        "nftables, ipvs) except with `--dry-run`. See [security.md](security.md).",
        [](Options& o, const std::string& v) {
          o.user = trim(v);
          if (o.user.empty()) fail("user", v, "must not be empty (leave --user out to keep root)");
        },
        [](const Options& o) { return o.user; }), "user name", "none (keep root)"));
    r.push_back(choice<cp::Scheduler>("scheduler", "NAME", &Options::default_scheduler, model_choices<cp::Scheduler>(),
        "default scheduler for services without a vipd.io/scheduler annotation",
        "Scheduler of services without a `vipd.io/scheduler` annotation (docs/scheduling.md)."));
    r.push_back(choice<cp::ProxyProtocol>("proxy-protocol", "VERSION", &Options::default_proxy_protocol,
        model_choices<cp::ProxyProtocol>("none"),
        "PROXY protocol header (none, v1, v2) for TCP services without a vipd.io/proxy-protocol annotation; "
        "applies to TCP services in dpdk fnat mode only",
        "PROXY protocol header sent to the backend ahead of the client's bytes, for TCP services without a "
        "`vipd.io/proxy-protocol` annotation. Applies to TCP services in dpdk mode with `--forward-method fnat` "
        "only; the kernel modes and `nat` ignore it with a warning (docs/scheduling.md, \"PROXY protocol\")."));
    r.push_back(number("mh-table-size", "N", &DataplaneSettings::mh_table_size, 251, 1000003,
        "Maglev (mh) lookup table size per service, a prime",
        "Maglev (`mh`) lookup table size per service; must be a prime (docs/scheduling.md).", prime));
    r.push_back(boolean("expire-quiescent-template", &DataplaneSettings::expire_quiescent_template, false,
        "persistence templates pointing at a weight-0 (terminating) backend expire at once (kube-proxy's "
        "net.ipv4.vs.expire_quiescent_template=1)",
        "Persistence templates pointing at a weight-0 (terminating) backend expire at once, as with kube-proxy's "
        "`net.ipv4.vs.expire_quiescent_template=1` (docs/scheduling.md)."));
    r.push_back(boolean("rss-steering", &DataplaneSettings::rss_steering, false,
        "dpdk fnat, several workers: choose local ports so that the NIC's RSS puts each reply on the queue of "
        "the worker that owns its connection",
        "dpdk mode with `--forward-method fnat` and several workers: vipd programs its own RSS key and "
        "redirection table and chooses each connection's local port so that the reply's RSS hash selects the "
        "owning worker's queue, so replies need no redirect ring. Needs a NIC whose RSS key and redirection "
        "table can be set and read back and that hashes TCP/UDP ports; otherwise it stays off by itself "
        "(logged). `false`: the driver's own RSS key and table, local ports in any order (docs/operations.md, "
        "\"RSS steering\")."));
    r.push_back(number("resteer-attempts", "N", &DataplaneSettings::resteer_attempts, 0, 7,
        "dpdk: times a TCP connection whose backend refuses or ignores the SYN is sent to another backend; "
        "0 = off",
        "dpdk mode: how many times a new TCP connection whose backend answers the SYN with an RST or an ICMP "
        "unreachable, or does not answer it in `--resteer-timeout-ms`, is sent to another backend (never the "
        "same one twice) before the client sees the failure; 0 turns re-steering off (docs/scheduling.md, "
        "\"Re-steering\")."));
    r.push_back(number("resteer-timeout-ms", "MS", &DataplaneSettings::resteer_timeout_ms, 0, 60000,
        "dpdk: wait this long for a backend's SYN-ACK before re-steering; 0 = only on RST, ICMP or the client's "
        "retransmission",
        "dpdk mode: how long vipd waits for a backend's SYN-ACK before it sends the SYN to another backend; "
        "keep it under the clients' first SYN retransmission (1 s). 0 = no timer: only an RST, an ICMP "
        "unreachable or the client's retransmitted SYN re-steer (docs/scheduling.md, \"Re-steering\")."));
    r.push_back(number("resteer-pool", "N", &DataplaneSettings::resteer_pool, 0, 16777216,
        "dpdk: saved SYNs per worker for re-steering (connections waiting for their SYN-ACK); 0 = off",
        "dpdk mode: SYNs each worker keeps for re-steering, one per connection waiting for its SYN-ACK (about "
        "130 bytes each). New connections that find it full are counted (`vipd_worker_resteer_pool_full_total`) "
        "and go without re-steering; 0 turns re-steering off."));
    r.push_back(number("eject-failures", "N", &DataplaneSettings::eject_failures, 0, 1000,
        "dpdk: consecutive failed connections (as re-steering sees them) that eject a backend from scheduling; "
        "0 = off",
        "dpdk mode: after this many consecutive new TCP connections to a backend failed (an RST or ICMP "
        "unreachable answering the SYN, or no SYN-ACK in `--resteer-timeout-ms`), the backend gets no new "
        "connections for a while (`--eject-time-ms`); its first SYN-ACK readmits it. Needs re-steering on; "
        "0 turns ejection off (docs/scheduling.md, \"Outlier ejection\")."));
    r.push_back(number("eject-time-ms", "MS", &DataplaneSettings::eject_time_ms, 1, 3600000,
        "dpdk: ejection time of a backend, times its ejections in a row",
        "dpdk mode: how long an ejected backend gets no new connections, times the number of its ejections in "
        "a row, at most `--eject-max-time` (docs/scheduling.md, \"Outlier ejection\")."));
    r.push_back(number("eject-max-time", "SECONDS", &DataplaneSettings::eject_max_time_s, 1, 86400,
        "dpdk: longest ejection of a backend",
        "dpdk mode: the longest ejection of a backend; after this long without an ejection the multiplier "
        "starts over (docs/scheduling.md, \"Outlier ejection\")."));
    r.push_back(number("eject-max-percent", "PCT", &DataplaneSettings::eject_max_percent, 0, 100,
        "dpdk: most of a service's backends ejected at once, in percent",
        "dpdk mode: never eject more than this share of a service's backends with a weight at once (at least "
        "one always stays); 0 = never eject (docs/scheduling.md, \"Outlier ejection\")."));
    r.push_back(number("conn-table-size", "N", &DataplaneSettings::conn_table_size, 1024, 67108864,
        "connection table entries per worker",
        "Connection table entries per worker (about 100 bytes each at the default size, full NAT or NAT: "
        "operations.md, \"Sizing lcores and tables\")."));
    r.push_back(number("tcp-timeout", "SECONDS", &DataplaneSettings::tcp_established_timeout_s, 1, 604800,
        "idle timeout of established TCP connections",
        "Idle timeout of established TCP connections (IPVS default)."));
    r.push_back(number("tcp-fin-timeout", "SECONDS", &DataplaneSettings::tcp_fin_timeout_s, 1, 86400,
        "timeout of closing TCP connections", "Timeout of closing TCP connections (IPVS default)."));
    r.push_back(number("udp-timeout", "SECONDS", &DataplaneSettings::udp_timeout_s, 1, 86400,
        "idle timeout of UDP flows", "Idle timeout of UDP flows (IPVS default)."));
    r.push_back(number("neighbor-timeout", "SECONDS", &DataplaneSettings::neighbor_timeout_s, 1, 86400,
        "how long a resolved ARP entry counts as reachable", "How long a resolved ARP entry counts as reachable."));
    r.push_back(number("mbufs", "N", &DataplaneSettings::mbuf_count, 511, 16777215,
        "packet buffers in the mempool; best 2^n-1",
        "Packet buffers in the mempool; 2^n-1 is the most efficient size."));
    r.push_back(number("sync-min-interval-ms", "MS", &Options::sync_min_interval_ms, 0, 60000,
        "minimum time between two dataplane syncs",
        "Minimum time between two dataplane syncs. Bursts are always coalesced (see [Sync](#sync-log-lines))."));
    r.push_back(number("sync-full-resync-s", "SECONDS", &Options::sync_full_resync_s, 0, 86400,
        "full resync of the dataplane at least this often; 0 = only at start and after errors",
        "A full resync (compare everything, reprogram what differs) at least this often; 0 = only at start and "
        "after errors."));
    r.push_back(number("sync-retry-max-ms", "MS", &Options::sync_retry_max_ms, 1000, 600000,
        "largest retry delay after a failed sync; the first is 1 s, doubling with jitter",
        "Largest retry delay after a failed sync; the first retry comes after 1 s, doubling with jitter."));
    r.push_back(number("worker-idle-sleep-us", "US", &DataplaneSettings::idle_sleep_us, 0, 100000,
        "worker sleep after an empty poll round; 0 = busy poll",
        "Sleep of a worker after a poll round without packets; 0 = busy poll."));
    r.push_back(with(choice<SourceKind>("source", "SOURCE", &Options::source,
        {{"manifests", SourceKind::kManifests}, {"kubernetes", SourceKind::kKubernetes}},
        "where the desired state comes from",
        "Where the desired state comes from. With `kubernetes`, `--manifests-dir` is not required and is "
        "ignored. See [docs/kubernetes.md](kubernetes.md)."),
        nullptr, "manifests; kubernetes when --kubeconfig or --in-cluster is given"));
    r.push_back(with(other("kubeconfig", "FILE", "kubeconfig of the Kubernetes API server (current-context)",
        "kubeconfig of the API server (its current context); must exist. Conflicts with `--in-cluster`.",
        [](Options& o, const std::string& v) {
          o.kubeconfig = trim(v);
          if (o.kubeconfig.empty()) fail("kubeconfig", v, "must not be empty");
          std::error_code ec;
          if (!std::filesystem::is_regular_file(o.kubeconfig, ec)) fail("kubeconfig", v, "no such file");
        },
        [](const Options& o) { return o.kubeconfig; }), "FILE", "$KUBECONFIG or ~/.kube/config"));
    r.push_back(boolean("in-cluster", &Options::in_cluster, true,
        "use the in-cluster service account and KUBERNETES_SERVICE_HOST/PORT",
        "Use the pod's service account and `KUBERNETES_SERVICE_HOST`/`_PORT`."));
    r.push_back(boolean("api-allow-insecure-token", &Options::api_allow_insecure_token, true,
        "send the kubeconfig's bearer token to a plain http:// API server (in clear); refused otherwise",
        "Send the kubeconfig's bearer token to a plain `http://` API server, in clear. Without it such a "
        "kubeconfig stops the start (docs/security.md \"Kubernetes API transport\")."));
    r.push_back(number("api-qps", "N", &Options::api_qps, 1, 1000,
        "Kubernetes API requests per second (burst 2 x N)", "Kubernetes API requests per second (burst 2 x N)."));
    r.push_back(number("api-backoff-initial-ms", "MS", &Options::api_backoff_initial_ms, 1, 60000,
        "first retry delay after an API error; doubles, with jitter",
        "First retry delay after an API error (doubles, with jitter)."));
    r.push_back(number("api-backoff-max-ms", "MS", &Options::api_backoff_max_ms, 1, 600000,
        "largest retry delay after API errors", "Largest retry delay; not below the initial one."));
    r.push_back(text("node-name", "NAME", &Options::node_name,
        "this node's name, for internal/externalTrafficPolicy Local",
        "This node, for internal/externalTrafficPolicy Local."));
    r.push_back(text("node-zone", "ZONE", &Options::node_zone,
        "this node's topology zone, for EndpointSlice zone hints",
        "This node's zone, for EndpointSlice topology hints."));
    r.push_back(ip_list("node-ips", &Options::node_ips,
        "comma-separated IPv4 and IPv6 addresses NodePort services are served on",
        "IPv4 and IPv6 addresses NodePort services are served on (each family's NodePort entries use that "
        "family's addresses)."));
    r.push_back(text("service-proxy-name", "NAME", &Options::service_proxy_name,
        "serve only services labelled service.kubernetes.io/service-proxy-name=NAME",
        "Serve only services labelled `service.kubernetes.io/service-proxy-name=NAME`."));
    return r;
  }();
  return rows;
}

// What --help and the docs show as the default.
std::string default_text(const Setting& s) {
  if (s.default_text) return s.default_text;
  const std::string v = s.show ? s.show(Options{}) : "";
  return v.empty() ? "none" : v;
}

SettingDoc doc_of(const Setting& s) {
  SettingDoc d;
  d.name = s.name;
  d.kind = s.kind;
  d.arg = s.arg ? s.arg : "";
  d.min = s.min;
  d.max = s.max;
  d.choices = s.choices;
  d.default_value = s.show ? s.show(Options{}) : "";
  d.default_shown = default_text(s);
  d.help = s.help;
  d.meaning = s.meaning;
  d.in_file = s.in_file;
  if (s.value_doc) {
    d.value = s.value_doc;
  } else if (s.kind == Kind::kNumber) {
    d.value = std::to_string(s.min) + ".." + std::to_string(s.max);
    if (d.arg == "SECONDS") d.value += " s";
  } else if (s.kind == Kind::kChoice) {
    for (const auto& c : s.choices) d.value += (d.value.empty() ? "`" : " \\| `") + c + "`";
  } else if (s.kind == Kind::kBool) {
    d.value = "`true` \\| `false`";
  } else if (s.kind == Kind::kSwitch) {
    d.value = "switch (`true`/`false` in the file)";
  } else {
    d.value = d.arg;
  }
  return d;
}

void print_help(std::ostream& out) {
  out << "Usage: vipd --manifests-dir DIR [--config FILE] [OPTIONS]\n"
      << "vipd: Kubernetes service proxy and L4 load balancer (dpdk | iptables | nftables | ipvs).\n"
      << "Options (all but --help, --version and --config may also be set in the\n"
      << "--config file as 'name = value'; the command line wins, ports add up):\n";
  for (const auto& s : settings()) {
    std::string left = std::string("  --") + s.name;
    if (s.arg) left += std::string(" ") + s.arg;
    out << std::left << std::setw(32) << left << " " << s.help;
    if (s.kind == Kind::kNumber) out << " (" << s.min << ".." << s.max << ")";
    if (s.kind == Kind::kChoice) out << ": " << join(s.choices, " | ");
    const std::string def = default_text(s);
    if (!def.empty()) out << " (default: " << def << ")";
    out << "\n";
  }
  out << "Exit status 2 on a configuration error. See docs/configuration.md.\n";
}

}  // namespace

const char* mode_name(Mode m) {
  switch (m) {
    case Mode::kDpdk: return "dpdk";
    case Mode::kIptables: return "iptables";
    case Mode::kIpvs: return "ipvs";
    case Mode::kNftables: return "nftables";
  }
  return "?";
}

const char* source_name(SourceKind s) {
  return s == SourceKind::kKubernetes ? "kubernetes" : "manifests";
}

std::vector<SettingDoc> setting_docs() {
  std::vector<SettingDoc> out;
  for (const auto& s : settings()) out.push_back(doc_of(s));
  return out;
}

std::string setting_value(const Options& o, const std::string& name) {
  for (const auto& s : settings())
    if (s.name == name) return s.show ? s.show(o) : "";
  return "";
}

std::string option_table_markdown() {
  std::string out = "| Option | Value | Default | Meaning |\n|---|---|---|---|\n";
  for (const auto& s : settings()) {
    const SettingDoc d = doc_of(s);
    std::string def = d.default_shown;
    const bool plain = s.default_text || def == "none" || s.kind == Kind::kNumber || s.kind == Kind::kBool ||
                       s.kind == Kind::kSwitch;
    if (!plain) def = "`" + def + "`";
    out += "| `--" + d.name + "` | " + d.value + " | " + def + " | " + d.meaning + " |\n";
  }
  return out;
}

std::optional<Options> parse(int argc, const char* const argv[], std::ostream& out) {
  po::options_description cmd_desc, file_desc;
  for (const auto& s : settings()) {
    const bool is_switch = s.arg == nullptr;
    const std::string name = s.name;
    if (name == "help" || name == "version") {
      cmd_desc.add_options()(s.name, po::bool_switch(), s.help);
      continue;
    }
    auto make = [&]() -> const po::value_semantic* {
      if (s.composing) return po::value<std::vector<std::string>>()->composing();
      if (is_switch) return po::value<std::string>()->implicit_value("true")->zero_tokens();
      return po::value<std::string>();
    };
    cmd_desc.add_options()(s.name, make(), s.help);
    if (s.in_file) file_desc.add_options()(s.name, make(), s.help);
  }
  cmd_desc.add_options()(kPositional, po::value<std::vector<std::string>>(), "");
  po::positional_options_description positional;
  positional.add(kPositional, -1);

  po::variables_map vm;
  try {
    const int style = po::command_line_style::default_style &
                      ~po::command_line_style::allow_guessing;
    po::store(po::command_line_parser(argc, argv)
                  .options(cmd_desc)
                  .positional(positional)
                  .style(style)
                  .run(),
              vm);
  } catch (const po::unknown_option& e) {
    throw ConfigError("config: unknown option " + e.get_option_name());
  } catch (const po::multiple_occurrences& e) {
    throw ConfigError("config: --" + strip_dashes(e.get_option_name()) + ": given more than once");
  } catch (const po::error& e) {
    throw ConfigError(std::string("config: ") + e.what());
  }
  if (vm.count(kPositional))
    throw ConfigError("config: unexpected argument '" +
                      vm[kPositional].as<std::vector<std::string>>().front() + "'");
  if (vm["help"].as<bool>()) {
    print_help(out);
    return std::nullopt;
  }
  if (vm["version"].as<bool>()) {
    out << "vipd " << VIPD_VERSION << "\n";
    return std::nullopt;
  }

  Options o;
  if (vm.count("config")) {
    o.config_file = vm["config"].as<std::string>();
    store_file(o.config_file, file_desc, vm);
  }

  auto get = [&](const char* name) -> std::optional<std::string> {
    if (!vm.count(name)) return std::nullopt;
    return vm[name].as<std::string>();
  };

  // Every option given, in table order: parsed, checked and stored by its row.
  for (const auto& s : settings()) {
    if (!s.set || !vm.count(s.name)) continue;
    if (s.composing) {
      for (const auto& v : vm[s.name].as<std::vector<std::string>>()) s.set(o, v);
    } else {
      s.set(o, vm[s.name].as<std::string>());
    }
  }

  // Cross-option checks.
  for (unsigned c : o.dataplane.worker_lcores)
    if (c == o.dataplane.main_lcore)
      fail("worker-lcores", get("worker-lcores").value_or("1"),
           "lcore " + std::to_string(c) + " is also the main lcore (--main-lcore)");
  if (!o.metrics_address.empty() && o.metrics_address == o.health_address)
    fail("health-address", o.health_address, "is also the --metrics-address");
  if (!o.kubeconfig.empty() && o.in_cluster)
    fail("in-cluster", "true", "conflicts with --kubeconfig (choose one)");
  const bool kube_given = !o.kubeconfig.empty() || o.in_cluster;
  if (auto v = get("source")) {
    if (o.source == SourceKind::kManifests && kube_given)
      fail("source", *v, "--kubeconfig/--in-cluster need --source kubernetes");
  } else {
    o.source = kube_given ? SourceKind::kKubernetes : SourceKind::kManifests;
  }
  if (o.api_backoff_max_ms < o.api_backoff_initial_ms)
    fail("api-backoff-max-ms", std::to_string(o.api_backoff_max_ms), "must not be below --api-backoff-initial-ms");

  std::error_code ec;
  if (o.source == SourceKind::kKubernetes) {
    // --manifests-dir (e.g. from a shared config file) is not used.
  } else {
  if (o.manifests_dir.empty())
    fail_missing("manifests-dir", "required (the directory of Service/EndpointSlice manifests)");
  if (!std::filesystem::exists(o.manifests_dir, ec)) fail("manifests-dir", o.manifests_dir, "no such directory");
  if (!std::filesystem::is_directory(o.manifests_dir, ec)) fail("manifests-dir", o.manifests_dir, "not a directory");
  }
  if (!o.user.empty() && o.mode != Mode::kDpdk && !o.dry_run)
    fail("user", o.user, std::string("only dpdk mode drops privileges; ") + mode_name(o.mode) +
                             " mode programs the kernel on every sync and needs CAP_NET_ADMIN (docs/security.md)");
  if (o.mode == Mode::kDpdk && !o.dry_run) {
    if (o.ports.empty()) fail_missing("port", "at least one port is required in dpdk mode (or use --dry-run)");
    if (o.forward_method == ForwardMethod::kFnat && o.fnat_local_addrs.empty())
      fail("forward-method", "fnat", "needs --fnat-local-addrs (or use --forward-method nat)");
    if (o.announce_table && o.dataplane.exception_path != ExceptionPath::kTap)
      fail("announce-table", std::to_string(o.announce_table), "needs --exception-path tap (the routes are on its interface)");
    if (o.announce_table && !o.user.empty())
      fail("announce-table", std::to_string(o.announce_table),
           "cannot be used with --user: routes change on every sync and need CAP_NET_ADMIN");
    if (!o.handover_peers.empty() && o.forward_method != ForwardMethod::kFnat)
      fail("handover-peers", addrs_text(o.handover_peers),
           "only with --forward-method fnat (in nat mode the mh scheduler lets any gateway go on with a flow)");
    if (o.handover_peers.size() > 8)
      fail("handover-peers", addrs_text(o.handover_peers), "at most 8 peers");
    if (o.dataplane.exception_ifnames.size() > o.ports.size())
      fail("exception-ifnames", join(o.dataplane.exception_ifnames, ","), "lists more names than there are ports");
  }
  return o;
}

}  // namespace vipd::config
