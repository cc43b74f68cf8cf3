// Thread: control (parsed once at start-up).
// Command line + INI file parsing with Boost.Program_options, then validation
// of every value into Options by the option table's rows (option_rows.h,
// option_table.cc; the value parsers: option_values.h, port_spec.h), then the
// checks across options. Every error is one line thrown as ConfigError:
//   config: --OPTION 'VALUE': PROBLEM
#include "controlplane/config/options.h"

#include <boost/program_options.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "controlplane/config/option_rows.h"
#include "controlplane/config/option_values.h"

#ifndef VIPD_VERSION
#define VIPD_VERSION "0.1.0"
#endif

namespace vipd::config {
namespace {

namespace po = boost::program_options;
using rows::Kind;
using rows::Setting;
using rows::settings;
using values::addrs_text;
using values::fail;
using values::fail_missing;
using values::join;
using values::trim;

constexpr const char* kPositional = "_positional";

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
