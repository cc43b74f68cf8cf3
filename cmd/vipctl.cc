// Thread: main only (single-threaded CLI).
// vipctl: the operator CLI for vipd. Talks to the daemon's admin API (HTTP/JSON
// over the unix socket, see docs/vipctl.md) and prints ipvsadm-style tables.
//
// Exit status: 0 ok, 1 daemon unreachable or bad answer, 2 usage error.
#include <httplib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cmd/vipctl_format.h"
#include "common/clock.h"
#include "common/text.h"
#include "model/service_table.h"

namespace po = boost::program_options;

namespace {

constexpr const char* kDefaultSocket = "/run/vipd/admin.sock";
constexpr const char* kSocketEnv = "VIPD_ADMIN_SOCKET";
constexpr int kExitOk = 0;
constexpr int kExitFail = 1;
constexpr int kExitUsage = 2;
constexpr auto kRateInterval = std::chrono::seconds(1);

// Thrown for a usage error (exit 2). `command` selects the help hint.
class UsageError : public std::runtime_error {
 public:
  explicit UsageError(const std::string& msg, std::string command = "")
      : std::runtime_error(msg), command_(std::move(command)) {}
  const std::string& command() const { return command_; }

 private:
  std::string command_;
};
// Thrown when the daemon cannot be reached (exit 1, fixed message shape).
class Unreachable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::string default_socket() {
  const char* env = std::getenv(kSocketEnv);
  return env && *env ? env : kDefaultSocket;
}

const char* kTopUsage =
    "Usage: vipctl [--socket PATH] COMMAND [OPTIONS]\n"
    "\n"
    "Inspect a running vipd through its admin socket.\n"
    "\n"
    "Commands:\n"
    "  list     virtual services and backends, like ipvsadm -Ln\n"
    "           (--stats: traffic counters, --rate: per-second rates)\n"
    "  stats    per-worker packet counters and drops by reason\n"
    "  status   sync state: mode, generation, syncs, errors, latency\n"
    "  dump     the service table as dry-run JSON, one line\n"
    "  explain  PROTO SRC:PORT DST:PORT: which service and backend a packet gets, and why\n"
    "  drain    withdraw the announced VIPs, keep forwarding (--cancel: announce again)\n"
    "  undrain  announce the VIPs again (same as drain --cancel)\n"
    "\n"
    "Run 'vipctl COMMAND --help' for a command's options.\n"
    "Exit status: 0 ok, 1 vipd unreachable or bad answer, 2 usage error.\n";

// Why connect() to the socket fails, as strerror text.
std::string connect_failure_reason(const std::string& path) {
  if (path.size() >= sizeof(sockaddr_un{}.sun_path)) return "socket path too long";
  struct stat st{};
  if (::stat(path.c_str(), &st) == 0 && !S_ISSOCK(st.st_mode)) return "not a socket";
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::strerror(errno);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, path.data(), path.size());
  std::string why;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    why = std::strerror(errno);
  } else {
    why = "connection failed";
  }
  ::close(fd);
  return why;
}

// GET `path` from the daemon and return the body of a 200 answer.
std::string fetch(const std::string& socket, const std::string& path) {
  if (socket.empty()) throw UsageError("--socket: empty path");
  if (socket.size() >= sizeof(sockaddr_un{}.sun_path)) throw Unreachable("socket path too long");
  httplib::Client cli(socket, 80);
  cli.set_address_family(AF_UNIX);
  cli.set_connection_timeout(2, 0);
  cli.set_read_timeout(10, 0);
  cli.set_write_timeout(5, 0);
  httplib::Headers headers{{"Host", "vipd"}, {"Accept", "application/json"}};
  auto res = cli.Get(path.c_str(), headers);
  if (!res) {
    auto err = res.error();
    if (err == httplib::Error::Connection || err == httplib::Error::ConnectionTimeout) {
      throw Unreachable(connect_failure_reason(socket));
    }
    throw Unreachable(httplib::to_string(err));
  }
  if (res->status != 200) {
    std::string msg;
    auto j = nlohmann::json::parse(res->body, nullptr, false);
    if (j.is_object() && j.contains("error") && j["error"].is_string()) {
      msg = j["error"].get<std::string>();
    } else {
      msg = res->body.substr(0, 200);
    }
    throw std::runtime_error("GET " + path + ": HTTP " + std::to_string(res->status) + ": " + msg);
  }
  return res->body;
}

template <class Json>
Json fetch_json(const std::string& socket, const std::string& path) {
  std::string body = fetch(socket, path);
  try {
    return Json::parse(body);
  } catch (const std::exception& e) {
    throw std::runtime_error("GET " + path + ": invalid JSON from vipd: " + e.what());
  }
}

// Common per-command option parsing: --help, --socket, plus `desc`'s own.
// Returns false if --help was printed.
bool parse_command(const std::string& name, const std::string& summary,
                   po::options_description& desc, const std::vector<std::string>& args,
                   po::variables_map& vm, std::string& socket) {
  desc.add_options()
      ("socket", po::value<std::string>(&socket), "admin socket path")
      ("help,h", "show this help");
  try {
    auto parsed = po::command_line_parser(args).options(desc).run();
    for (const auto& extra : po::collect_unrecognized(parsed.options, po::include_positional)) {
      throw UsageError(name + ": unexpected argument '" + extra + "'", name);
    }
    po::store(parsed, vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(name + ": " + e.what(), name);
  }
  if (vm.count("help")) {
    std::cout << "Usage: vipctl " << name << " [OPTIONS]\n\n" << summary << "\n\n" << desc;
    return false;
  }
  return true;
}

int cmd_list(const std::vector<std::string>& args, std::string& socket) {
  po::options_description desc("Options");
  desc.add_options()
      ("stats", "show traffic counters: Conns InPkts OutPkts InBytes OutBytes")
      ("rate", "show rates over 1 s: CPS InPPS OutPPS InBPS OutBPS")
      ("json", "print JSON instead of a table");
  po::variables_map vm;
  if (!parse_command("list", "List virtual services and their backends (like ipvsadm -Ln).", desc,
                     args, vm, socket)) {
    return kExitOk;
  }
  bool stats = vm.count("stats") > 0;
  bool rate = vm.count("rate") > 0;
  bool json = vm.count("json") > 0;
  if (stats && rate) throw UsageError("list: --stats and --rate are mutually exclusive", "list");

  if (rate) {
    // The interval is measured between the two answers, not assumed.
    auto before = fetch_json<nlohmann::json>(socket, "/v1/services");
    auto t0 = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(kRateInterval);
    auto after = fetch_json<nlohmann::json>(socket, "/v1/services");
    auto t1 = std::chrono::steady_clock::now();
    double interval = std::chrono::duration<double>(t1 - t0).count();
    auto rates = vipd::ctl::compute_rates(before, after, interval);
    std::cout << (json ? rates.dump(2) + "\n" : vipd::ctl::format_list_rate(rates));
    return kExitOk;
  }
  auto doc = fetch_json<nlohmann::json>(socket, "/v1/services");
  if (json) {
    std::cout << doc.dump(2) << "\n";
  } else {
    std::cout << (stats ? vipd::ctl::format_list_stats(doc) : vipd::ctl::format_list(doc));
  }
  return kExitOk;
}

int cmd_stats(const std::vector<std::string>& args, std::string& socket) {
  po::options_description desc("Options");
  desc.add_options()("json", "print JSON instead of a table");
  po::variables_map vm;
  if (!parse_command("stats", "Per-worker packet counters, then drops by reason over all workers.",
                     desc, args, vm, socket)) {
    return kExitOk;
  }
  auto doc = fetch_json<nlohmann::json>(socket, "/v1/stats");
  std::cout << (vm.count("json") ? doc.dump(2) + "\n" : vipd::ctl::format_stats(doc));
  return kExitOk;
}

int cmd_status(const std::vector<std::string>& args, std::string& socket) {
  po::options_description desc("Options");
  desc.add_options()("json", "print JSON instead of text");
  po::variables_map vm;
  if (!parse_command("status", "Daemon state: mode, generation, syncs, errors, sync latency.", desc,
                     args, vm, socket)) {
    return kExitOk;
  }
  auto doc = fetch_json<nlohmann::json>(socket, "/v1/status");
  std::cout << (vm.count("json") ? doc.dump(2) + "\n" : vipd::ctl::format_status(doc, vipd::now_unix_ns()));
  return kExitOk;
}

int cmd_dump(const std::vector<std::string>& args, std::string& socket) {
  po::options_description desc("Options");
  po::variables_map vm;
  if (!parse_command("dump",
                     "Print the current service table as dry-run JSON (the same document as\n"
                     "'vipd --dry-run'), on one line.",
                     desc, args, vm, socket)) {
    return kExitOk;
  }
  // ordered_json keeps the daemon's key order.
  auto doc = fetch_json<nlohmann::ordered_json>(socket, "/v1/table");
  std::cout << vipd::ctl::format_dump(doc);
  return kExitOk;
}

// `vipctl drain [--cancel]` and `vipctl undrain` (docs/gateway.md, "Draining").
int cmd_drain(const std::vector<std::string>& args, std::string& socket, bool undrain) {
  const std::string name = undrain ? "undrain" : "drain";
  po::options_description desc("Options");
  if (!undrain) desc.add_options()("cancel", "leave draining: announce the VIPs again (same as 'vipctl undrain')");
  desc.add_options()("json", "print JSON instead of text");
  po::variables_map vm;
  const char* summary = undrain ? "Leave draining: the VIPs of the applied table are announced again."
                                : "Drain the gateway: every announced VIP route is withdrawn at once and stays\n"
                                  "withdrawn; the flows that still arrive are forwarded. Prints the state and\n"
                                  "how many connections remain. Running it again only reports.";
  if (!parse_command(name, summary, desc, args, vm, socket)) return kExitOk;
  const bool cancel = undrain || vm.count("cancel") > 0;
  auto doc = fetch_json<nlohmann::json>(socket, std::string("/v1/drain?action=") + (cancel ? "cancel" : "start"));
  std::cout << (vm.count("json") ? doc.dump(2) + "\n" : vipd::ctl::format_drain(doc, vipd::now_unix_ns()));
  return kExitOk;
}

int cmd_explain(const std::vector<std::string>& args, std::string& socket) {
  const char* usage = "Usage: vipctl explain PROTO SRC:PORT DST:PORT [OPTIONS]\n\n";
  const char* summary =
      "Which virtual service a packet from SRC:PORT to DST:PORT matches, whether an\n"
      "existing connection takes it, and which backend a new connection would get\n"
      "(scheduler, weights, session affinity), as computed by the worker that owns\n"
      "the flow. PROTO is tcp or udp; an IPv6 address goes in brackets\n"
      "([fd00::2]:40000). Nothing is sent and nothing changes.\n"
      "Example: vipctl explain tcp 10.0.0.2:40000 10.96.0.100:8080\n\n";
  po::options_description desc("Options");
  desc.add_options()
      ("json", "print JSON instead of text")
      ("socket", po::value<std::string>(&socket), "admin socket path")
      ("help,h", "show this help");
  po::options_description all;
  all.add(desc).add_options()("flow", po::value<std::vector<std::string>>(), "");
  po::positional_options_description pos;
  pos.add("flow", -1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(all).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(std::string("explain: ") + e.what(), "explain");
  }
  if (vm.count("help")) {
    std::cout << usage << summary << desc;
    return kExitOk;
  }
  std::vector<std::string> flow;
  if (vm.count("flow")) flow = vm["flow"].as<std::vector<std::string>>();
  if (flow.size() != 3)
    throw UsageError("explain: expected PROTO SRC:PORT DST:PORT, e.g. tcp 10.0.0.2:40000 10.96.0.100:8080",
                     "explain");
  std::string proto = flow[0];
  for (auto& c : proto) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (proto != "tcp" && proto != "udp")
    throw UsageError("explain: protocol '" + flow[0] + "': expected tcp or udp", "explain");
  vipd::cp::IpAddr ip[3];
  uint16_t port = 0;
  for (size_t i = 1; i < 3; ++i)
    if (!vipd::cp::parse_host_port(flow[i], &ip[i], &port))
      throw UsageError("explain: '" + flow[i] + "': expected IPv4:PORT or [IPv6]:PORT (port 1..65535)", "explain");
  if (ip[1].family() != ip[2].family())
    throw UsageError("explain: '" + flow[1] + "' and '" + flow[2] + "': expected addresses of one family", "explain");
  auto doc = fetch_json<nlohmann::json>(
      socket, "/v1/explain?proto=" + proto + "&src=" + flow[1] + "&dst=" + flow[2]);
  std::cout << (vm.count("json") ? doc.dump(2) + "\n" : vipd::ctl::format_explain(doc));
  return kExitOk;
}

int run(int argc, char** argv, std::string& socket) {
  std::vector<std::string> argl(argv + 1, argv + argc);
  // Global options come before the command; find the command (the first word
  // that is neither an option nor --socket's value).
  size_t cmd_at = argl.size();
  for (size_t i = 0; i < argl.size(); ++i) {
    const std::string& a = argl[i];
    if (a == "--socket") {
      ++i;
      continue;
    }
    if (!a.empty() && a[0] == '-') continue;
    cmd_at = i;
    break;
  }
  std::vector<std::string> global_args(argl.begin(), argl.begin() + static_cast<long>(cmd_at));

  po::options_description global("Global options");
  global.add_options()
      ("socket", po::value<std::string>(&socket),
       "admin socket path (default: $VIPD_ADMIN_SOCKET, else /run/vipd/admin.sock)")
      ("help,h", "show this help");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(global_args).options(global).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(e.what());
  }
  if (vm.count("help")) {
    std::cout << kTopUsage << "\n" << global;
    return kExitOk;
  }
  if (cmd_at == argl.size()) throw UsageError("no command given");

  const std::string& cmd = argl[cmd_at];
  std::vector<std::string> rest(argl.begin() + static_cast<long>(cmd_at) + 1, argl.end());
  if (cmd == "list") return cmd_list(rest, socket);
  if (cmd == "stats") return cmd_stats(rest, socket);
  if (cmd == "status") return cmd_status(rest, socket);
  if (cmd == "dump") return cmd_dump(rest, socket);
  if (cmd == "explain") return cmd_explain(rest, socket);
  if (cmd == "drain") return cmd_drain(rest, socket, false);
  if (cmd == "undrain") return cmd_drain(rest, socket, true);
  if (cmd == "help") {
    std::cout << kTopUsage << "\n" << global;
    return kExitOk;
  }
  throw UsageError("unknown command '" + cmd + "' (expected list, stats, status, dump, explain, drain or undrain)");
}

}  // namespace

int main(int argc, char** argv) {
  std::string socket = default_socket();
  try {
    return run(argc, argv, socket);
  } catch (const UsageError& e) {
    std::string hint = e.command().empty() ? "vipctl --help" : "vipctl " + e.command() + " --help";
    std::cerr << "vipctl: " << e.what() << "\nTry '" << hint << "'.\n";
    return kExitUsage;
  } catch (const Unreachable& e) {
    std::cerr << "vipctl: cannot reach vipd at " << socket << ": " << e.what() << "\n";
    return kExitFail;
  } catch (const std::exception& e) {
    std::cerr << "vipctl: " << vipd::escape_control(e.what()) << "\n";  // may quote the daemon's answer
    return kExitFail;
  }
}
