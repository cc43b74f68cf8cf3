// Thread: control (parsed once at start-up).
// Command line + INI file parsing with Boost.Program_options, then validation
// of every value into Options. Every error is one line thrown as ConfigError:
//   config: --OPTION 'VALUE': PROBLEM
#include "controlplane/config/options.h"

#include <algorithm>
#include <boost/program_options.hpp>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <ostream>
#include <set>
#include <sstream>

#include "model/service_table.h"

#ifndef VIPD_VERSION
#define VIPD_VERSION "0.1.0"
#endif

namespace vipd::config {
namespace {

namespace po = boost::program_options;

constexpr unsigned kMaxLcore = 1023;
constexpr const char* kPositional = "_positional";

// One row per option: the single source for the Boost descriptions and --help.
struct OptSpec {
  const char* name;
  const char* arg;   // value placeholder in --help; nullptr for switches
  const char* def;   // default shown in --help
  const char* help;  // one line
  bool in_file;      // may appear in the config file
  bool composing;    // repeatable, values accumulate (command line + file)
};

constexpr OptSpec kSpecs[] = {
    {"help", nullptr, "", "print this help and exit", false, false},
    {"version", nullptr, "", "print the version and exit", false, false},
    {"config", "FILE", "none", "read options from FILE (key = value lines; the command line wins)", false, false},
    {"mode", "MODE", "dpdk", "dataplane: dpdk | iptables | nftables | ipvs", true, false},
    {"dry-run", nullptr, "false", "build the service table from the manifests, print it as JSON (--mode iptables: the iptables-restore payload; --mode nftables: the nft transaction; --mode ipvs: the IPVS state, ipvsadm -Ln form); program nothing", true, false},
    {"ipvs-interface", "NAME", "vipd-ipvs0", "ipvs mode: dummy interface the VIPs are bound to (created when missing)", true, false},
    {"eal-args", "ARGS", "none", "extra DPDK EAL arguments, split on whitespace (e.g. \"--no-pci --vdev net_null0\")", true, false},
    {"port", "SPEC", "none", "dataplane port 'DEVICE IP/PREFIX [via GATEWAY]'; repeatable; required in dpdk mode", true, true},
    {"main-lcore", "N", "0", "DPDK main (control) lcore", true, false},
    {"worker-lcores", "LIST", "1", "DPDK worker lcores, e.g. 1,2 or 1-3 or 1-3,6", true, false},
    {"forward-method", "METHOD", "fnat", "dpdk forwarding: fnat (full NAT) | nat (DNAT, backends route replies via vipd)", true, false},
    {"fnat-local-addrs", "ADDRS", "none", "comma-separated IPv4 source addresses for fnat (required for fnat in dpdk mode)", true, false},
    {"manifests-dir", "DIR", "none", "directory of Service/EndpointSlice manifests (*.yaml, *.yml, *.json); required", true, false},
    {"admin-socket", "PATH", "/run/vipd/admin.sock", "unix socket of the admin API (used by vipctl)", true, false},
    {"metrics-address", "HOST:PORT", "127.0.0.1:10249", "listen address of the Prometheus /metrics endpoint; empty or 'off' disables it", true, false},
    {"health-address", "HOST:PORT", "127.0.0.1:10256", "listen address of /healthz and /livez; empty or 'off' disables them", true, false},
    {"metrics-per-backend", "BOOL", "true", "export per-backend series (vipd_backend_*)", true, false},
    {"metrics-max-backend-series", "N", "10000", "at most N backends get per-backend series (0..10000000)", true, false},
    {"metrics-max-service-series", "N", "10000", "at most N services get per-service series (0..10000000)", true, false},
    {"log-level", "LEVEL", "info", "debug | info | warn | error", true, false},
    {"user", "NAME", "none (keep root)", "dpdk mode: once the ports run and the sockets are bound, switch every thread to this unprivileged user and its groups, keeping no capability (docs/security.md)", true, false},
    {"scheduler", "NAME", "rr", "default scheduler for services without a vipd.io/scheduler annotation: rr | wrr | lc | wlc | sed | nq | sh | dh | lblc | lblcr | mh", true, false},
    {"mh-table-size", "N", "65537", "Maglev (mh) lookup table size per service, a prime (251..1000003)", true, false},
    {"expire-quiescent-template", "BOOL", "true", "persistence templates pointing at a weight-0 (terminating) backend expire at once (kube-proxy's net.ipv4.vs.expire_quiescent_template=1)", true, false},
    {"conn-table-size", "N", "262144", "connection table entries per worker (1024..67108864)", true, false},
    {"tcp-timeout", "SECONDS", "900", "idle timeout of established TCP connections (1..604800)", true, false},
    {"tcp-fin-timeout", "SECONDS", "120", "timeout of closing TCP connections (1..86400)", true, false},
    {"udp-timeout", "SECONDS", "300", "idle timeout of UDP flows (1..86400)", true, false},
    {"neighbor-timeout", "SECONDS", "60", "how long a resolved ARP entry counts as reachable (1..86400)", true, false},
    {"mbufs", "N", "8191", "packet buffers in the mempool (511..16777215; best 2^n-1)", true, false},
    {"sync-min-interval-ms", "MS", "0", "minimum time between two dataplane syncs (0..60000)", true, false},
    {"sync-full-resync-s", "S", "300", "full resync of the dataplane at least this often; 0 = only at start and after errors (0..86400)", true, false},
    {"sync-retry-max-ms", "MS", "30000", "largest retry delay after a failed sync; the first is 1 s, doubling with jitter (1000..600000)", true, false},
    {"worker-idle-sleep-us", "US", "0", "worker sleep after an empty poll round; 0 = busy poll (0..100000)", true, false},
    {"source", "SOURCE", "manifests", "desired state from: manifests | kubernetes (kubernetes when --kubeconfig or --in-cluster is given)", true, false},
    {"kubeconfig", "FILE", "$KUBECONFIG or ~/.kube/config", "kubeconfig of the Kubernetes API server (current-context)", true, false},
    {"in-cluster", nullptr, "false", "use the in-cluster service account and KUBERNETES_SERVICE_HOST/PORT", true, false},
    {"api-allow-insecure-token", nullptr, "false", "send the kubeconfig's bearer token to a plain http:// API server (in clear); refused otherwise", true, false},
    {"api-qps", "N", "5", "Kubernetes API requests per second (burst 2 x N) (1..1000)", true, false},
    {"api-backoff-initial-ms", "MS", "500", "first retry delay after an API error; doubles, with jitter (1..60000)", true, false},
    {"api-backoff-max-ms", "MS", "30000", "largest retry delay after API errors (1..600000)", true, false},
    {"node-name", "NAME", "none", "this node's name, for internal/externalTrafficPolicy Local", true, false},
    {"node-zone", "ZONE", "none", "this node's topology zone, for EndpointSlice zone hints", true, false},
    {"node-ips", "ADDRS", "none", "comma-separated IPv4 addresses NodePort services are served on", true, false},
    {"service-proxy-name", "NAME", "none", "serve only services labelled service.kubernetes.io/service-proxy-name=NAME", true, false},
};

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

void check_host_port(const std::string& option, const std::string& value) {
  const auto colon = value.rfind(':');
  if (colon == std::string::npos) fail(option, value, "expected HOST:PORT with an IPv4 host");
  if (!cp::parse_ipv4(value.substr(0, colon)))
    fail(option, value, "host '" + value.substr(0, colon) + "' is not an IPv4 address");
  const auto port = to_uint(value.substr(colon + 1));
  if (!port || *port < 1 || *port > 65535)
    fail(option, value, "port must be between 1 and 65535");
}

void print_help(std::ostream& out) {
  out << "Usage: vipd --manifests-dir DIR [--config FILE] [OPTIONS]\n"
      << "vipd: Kubernetes service proxy and L4 load balancer (dpdk | iptables | nftables | ipvs).\n"
      << "Options (all but --help, --version and --config may also be set in the\n"
      << "--config file as 'name = value'; the command line wins, ports add up):\n";
  for (const auto& s : kSpecs) {
    std::string left = std::string("  --") + s.name;
    if (s.arg) left += std::string(" ") + s.arg;
    out << std::left << std::setw(32) << left << " " << s.help;
    if (s.def[0] != '\0') out << " (default: " << s.def << ")";
    out << "\n";
  }
  out << "Exit status 2 on a configuration error. See docs/configuration.md.\n";
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

std::optional<Options> parse(int argc, const char* const argv[], std::ostream& out) {
  po::options_description cmd_desc, file_desc;
  for (const auto& s : kSpecs) {
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

  if (auto v = get("mode")) {
    const std::string m = trim(*v);
    if (m == "dpdk") o.mode = Mode::kDpdk;
    else if (m == "iptables") o.mode = Mode::kIptables;
    else if (m == "ipvs") o.mode = Mode::kIpvs;
    else if (m == "nftables") o.mode = Mode::kNftables;
    else fail("mode", *v, "expected dpdk, iptables, nftables or ipvs");
  }
  if (auto v = get("dry-run")) o.dry_run = parse_bool("dry-run", *v);
  if (auto v = get("ipvs-interface")) {
    const std::string n = trim(*v);
    const bool ok = !n.empty() && n.size() <= 15 && std::all_of(n.begin(), n.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
    });
    if (!ok) fail("ipvs-interface", *v, "expected an interface name of 1..15 characters [A-Za-z0-9_.-]");
    o.ipvs_interface = n;
  }
  if (auto v = get("eal-args")) o.eal_args = split_ws(*v);
  if (vm.count("port")) {
    std::set<std::string> devices;
    for (const auto& s : vm["port"].as<std::vector<std::string>>()) {
      PortConfig p = parse_port(s);
      if (!devices.insert(p.device).second) fail("port", s, "device " + p.device + " is given twice");
      o.ports.push_back(std::move(p));
    }
  }
  if (auto v = get("main-lcore")) o.main_lcore = parse_number("main-lcore", *v, 0, kMaxLcore);
  if (auto v = get("worker-lcores")) o.worker_lcores = parse_lcores("worker-lcores", *v);
  for (unsigned c : o.worker_lcores)
    if (c == o.main_lcore)
      fail("worker-lcores", get("worker-lcores").value_or("1"),
           "lcore " + std::to_string(c) + " is also the main lcore (--main-lcore)");
  if (auto v = get("forward-method")) {
    const auto f = cp::parse_forward_method(trim(*v));
    if (!f) fail("forward-method", *v, "expected " + cp::names<cp::ForwardMethod>(" or "));
    o.forward_method = *f;
  }
  if (auto v = get("fnat-local-addrs")) o.fnat_local_addrs = parse_addr_list("fnat-local-addrs", *v);
  if (auto v = get("manifests-dir")) o.manifests_dir = trim(*v);
  if (auto v = get("admin-socket")) {
    if (trim(*v).empty()) fail("admin-socket", *v, "must not be empty");
    o.admin_socket = trim(*v);
  }
  // HOST:PORT, or "" / "off" to switch the endpoint off.
  auto listen_address = [&](const char* name, std::string* out) {
    if (auto v = get(name)) {
      const std::string a = trim(*v);
      if (a.empty() || a == "off") {
        out->clear();
      } else {
        check_host_port(name, a);
        *out = a;
      }
    }
  };
  listen_address("metrics-address", &o.metrics_address);
  listen_address("health-address", &o.health_address);
  if (auto v = get("metrics-per-backend")) o.metrics_per_backend = parse_bool("metrics-per-backend", *v);
  if (auto v = get("metrics-max-backend-series"))
    o.metrics_max_backend_series = parse_number("metrics-max-backend-series", *v, 0, 10000000);
  if (auto v = get("metrics-max-service-series"))
    o.metrics_max_service_series = parse_number("metrics-max-service-series", *v, 0, 10000000);
  if (!o.metrics_address.empty() && o.metrics_address == o.health_address)
    fail("health-address", o.health_address, "is also the --metrics-address");
  if (auto v = get("user")) {
    o.user = trim(*v);
    if (o.user.empty()) fail("user", *v, "must not be empty (leave --user out to keep root)");
  }
  if (auto v = get("log-level")) {
    const std::string l = trim(*v);
    if (l == "debug") o.log_level = LogLevel::kDebug;
    else if (l == "info") o.log_level = LogLevel::kInfo;
    else if (l == "warn") o.log_level = LogLevel::kWarn;
    else if (l == "error") o.log_level = LogLevel::kError;
    else fail("log-level", *v, "expected debug, info, warn or error");
  }
  if (auto v = get("scheduler")) {
    const auto s = cp::parse_scheduler(trim(*v));
    if (!s) fail("scheduler", *v, "expected one of " + cp::names<cp::Scheduler>(", "));
    o.default_scheduler = *s;
  }
  if (auto v = get("mh-table-size")) {
    o.mh_table_size = parse_number("mh-table-size", *v, 251, 1000003);
    bool prime = o.mh_table_size > 1;
    for (uint64_t d = 2; prime && d * d <= o.mh_table_size; ++d) prime = o.mh_table_size % d != 0;
    if (!prime) fail("mh-table-size", *v, "must be a prime number (e.g. 251, 4093, 65537)");
  }
  if (auto v = get("expire-quiescent-template"))
    o.expire_quiescent_template = parse_bool("expire-quiescent-template", *v);
  if (auto v = get("conn-table-size")) o.conn_table_size = parse_number("conn-table-size", *v, 1024, 67108864);
  if (auto v = get("tcp-timeout")) o.tcp_established_timeout_s = parse_number("tcp-timeout", *v, 1, 604800);
  if (auto v = get("tcp-fin-timeout")) o.tcp_fin_timeout_s = parse_number("tcp-fin-timeout", *v, 1, 86400);
  if (auto v = get("udp-timeout")) o.udp_timeout_s = parse_number("udp-timeout", *v, 1, 86400);
  if (auto v = get("neighbor-timeout")) o.neighbor_timeout_s = parse_number("neighbor-timeout", *v, 1, 86400);
  if (auto v = get("mbufs")) o.mbuf_count = parse_number("mbufs", *v, 511, 16777215);
  if (auto v = get("sync-min-interval-ms")) o.sync_min_interval_ms = parse_number("sync-min-interval-ms", *v, 0, 60000);
  if (auto v = get("sync-full-resync-s")) o.sync_full_resync_s = parse_number("sync-full-resync-s", *v, 0, 86400);
  if (auto v = get("sync-retry-max-ms")) o.sync_retry_max_ms = parse_number("sync-retry-max-ms", *v, 1000, 600000);
  if (auto v = get("worker-idle-sleep-us")) o.worker_idle_sleep_us = parse_number("worker-idle-sleep-us", *v, 0, 100000);
  if (auto v = get("kubeconfig")) {
    o.kubeconfig = trim(*v);
    if (o.kubeconfig.empty()) fail("kubeconfig", *v, "must not be empty");
    std::error_code kec;
    if (!std::filesystem::is_regular_file(o.kubeconfig, kec)) fail("kubeconfig", *v, "no such file");
  }
  if (auto v = get("in-cluster")) o.in_cluster = parse_bool("in-cluster", *v);
  if (!o.kubeconfig.empty() && o.in_cluster)
    fail("in-cluster", "true", "conflicts with --kubeconfig (choose one)");
  const bool kube_given = !o.kubeconfig.empty() || o.in_cluster;
  o.source = kube_given ? SourceKind::kKubernetes : SourceKind::kManifests;
  if (auto v = get("source")) {
    const std::string src = trim(*v);
    if (src == "manifests") o.source = SourceKind::kManifests;
    else if (src == "kubernetes") o.source = SourceKind::kKubernetes;
    else fail("source", *v, "expected manifests or kubernetes");
    if (o.source == SourceKind::kManifests && kube_given)
      fail("source", *v, "--kubeconfig/--in-cluster need --source kubernetes");
  }
  if (auto v = get("api-allow-insecure-token"))
    o.api_allow_insecure_token = parse_bool("api-allow-insecure-token", *v);
  if (auto v = get("api-qps")) o.api_qps = parse_number("api-qps", *v, 1, 1000);
  if (auto v = get("api-backoff-initial-ms")) o.api_backoff_initial_ms = parse_number("api-backoff-initial-ms", *v, 1, 60000);
  if (auto v = get("api-backoff-max-ms")) o.api_backoff_max_ms = parse_number("api-backoff-max-ms", *v, 1, 600000);
  if (o.api_backoff_max_ms < o.api_backoff_initial_ms)
    fail("api-backoff-max-ms", std::to_string(o.api_backoff_max_ms), "must not be below --api-backoff-initial-ms");
  if (auto v = get("node-name")) o.node_name = trim(*v);
  if (auto v = get("node-zone")) o.node_zone = trim(*v);
  if (auto v = get("node-ips")) o.node_ips = parse_addr_list("node-ips", *v);
  if (auto v = get("service-proxy-name")) o.service_proxy_name = trim(*v);

  // Cross-option checks.
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
  }
  return o;
}

}  // namespace vipd::config
