// Thread: control (parsed once at start-up, then read-only).
// vipd's configuration: an INI-style file plus command line (command line wins),
// parsed with Boost.Program_options. See docs/configuration.md.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/dataplane_settings.h"
#include "model/ip_addr.h"
#include "model/kinds.h"

namespace vipd::config {

enum class Mode { kDpdk, kIptables, kIpvs, kNftables };
using ForwardMethod = cp::ForwardMethod;  // fnat | nat
enum class LogLevel { kDebug, kInfo, kWarn, kError };
enum class SourceKind { kManifests, kKubernetes };

// One dataplane port: `port = DEVICE IP/PREFIX [via GATEWAY]`.
// DEVICE is a PCI address ("0000:00:08.0") or a vdev string
// ("net_af_packet0,iface=veth1"), no spaces.
struct PortConfig {
  std::string device;
  bool is_pci = false;  // device looks like a PCI address (DDDD:BB:DD.F or BB:DD.F)
  uint32_t ip = 0;      // host byte order
  uint8_t prefix_len = 0;
  std::optional<uint32_t> gateway;
};

struct Options {
  std::string config_file;                // --config
  Mode mode = Mode::kDpdk;                // --mode
  bool dry_run = false;                   // --dry-run
  std::string ipvs_interface = "vipd-ipvs0";  // --ipvs-interface (ipvs mode's dummy interface)
  // dpdk mode, with --exception-path tap: VIPs announced as /32 routes in this
  // routing table (0 = off) on the first exception interface (docs/gateway.md).
  uint32_t announce_table = 0;             // --announce-table
  bool announce_require_endpoints = true;  // --announce-require-endpoints
  // dpdk mode: seconds to drain on SIGTERM before stopping (0: stop at once).
  uint32_t drain_on_sigterm = 0;           // --drain-on-sigterm
  std::vector<PortConfig> ports;          // --port (repeatable)
  ForwardMethod forward_method = ForwardMethod::kFnat;  // --forward-method fnat|nat
  std::vector<uint32_t> fnat_local_addrs;  // --fnat-local-addrs "a,b,c" (required for fnat)
  std::vector<uint32_t> handover_peers;    // --handover-peers "a,b" (fnat: peer gateways, docs/gateway.md)
  std::string manifests_dir;               // --manifests-dir
  std::string admin_socket = "/run/vipd/admin.sock";  // --admin-socket
  std::string metrics_address = "127.0.0.1:10249";     // --metrics-address host:port ("" = off)
  std::string health_address = "127.0.0.1:10256";      // --health-address host:port ("" = off)
  bool metrics_per_backend = true;                      // --metrics-per-backend
  uint32_t metrics_max_backend_series = 10000;          // --metrics-max-backend-series
  uint32_t metrics_max_service_series = 10000;          // --metrics-max-service-series
  LogLevel log_level = LogLevel::kInfo;                 // --log-level
  std::string user;  // --user (dpdk mode: every thread switches to this user after start; "" = keep root)
  cp::Scheduler default_scheduler = cp::Scheduler::kRr;  // --scheduler
  cp::ProxyProtocol default_proxy_protocol = cp::ProxyProtocol::kNone;  // --proxy-protocol
  uint32_t sync_min_interval_ms = 0;         // --sync-min-interval-ms (coalescing)
  uint32_t sync_full_resync_s = 300;         // --sync-full-resync-s (0 = off)
  uint32_t sync_retry_max_ms = 30000;        // --sync-retry-max-ms (backoff cap after apply errors)
  // Desired-state source (docs/kubernetes.md).
  SourceKind source = SourceKind::kManifests;  // --source; kubernetes when --kubeconfig/--in-cluster given
  std::string kubeconfig;                   // --kubeconfig (""= $KUBECONFIG or ~/.kube/config)
  bool in_cluster = false;                  // --in-cluster
  bool api_allow_insecure_token = false;    // --api-allow-insecure-token (bearer token over http://)
  uint32_t api_qps = 5;                     // --api-qps (burst 2 x qps)
  uint32_t api_backoff_initial_ms = 500;    // --api-backoff-initial-ms
  uint32_t api_backoff_max_ms = 30000;      // --api-backoff-max-ms
  std::string node_name;                    // --node-name (traffic policy Local)
  std::string node_zone;                    // --node-zone (topology hints)
  std::vector<cp::IpAddr> node_ips;         // --node-ips (NodePort addresses, IPv4 and IPv6)
  std::string service_proxy_name;           // --service-proxy-name
  // The dpdk dataplane's settings (--eal-args, --main-lcore, --worker-lcores,
  // --conn-table-size, the timeouts, --mbufs, ...), handed to the dataplane as
  // they are (dp::DataplaneConfig is built on them).
  DataplaneSettings dataplane;
};

// One row of the option table (controlplane/config/option_table.cc), as the
// documentation and the tests see it. --help, docs/configuration.md's option
// table and the range checks all come from these rows.
struct SettingDoc {
  enum class Kind { kSwitch, kBool, kNumber, kChoice, kText };
  std::string name;           // without the dashes
  Kind kind = Kind::kText;
  std::string arg;            // placeholder in --help ("" for a switch)
  uint64_t min = 0, max = 0;  // kNumber: the accepted range, both ends included
  std::vector<std::string> choices;  // kChoice: the accepted values
  std::string value;          // docs' Value column (Markdown)
  std::string default_value;  // the default Options' value as text ("" when empty)
  std::string default_shown;  // the default as --help and the docs show it ("none", ...)
  std::string help;           // the one line of --help (without the default)
  std::string meaning;        // docs' Meaning column (Markdown)
  bool in_file = true;        // may be set in the configuration file
};

// Every option, in --help order.
std::vector<SettingDoc> setting_docs();
// The option table of docs/configuration.md (Markdown, one row per option).
std::string option_table_markdown();
// The value of option NAME (without the dashes) in `o`, as --help shows a
// default ("" when empty or NAME is unknown): what the option's row reads from
// its field.
std::string setting_value(const Options& o, const std::string& name);

// A configuration error: `what()` is one line naming the option and the problem,
// e.g. "config: --port 'foo': expected DEVICE IP/PREFIX [via GATEWAY]".
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Parses argv and the file named by --config. Returns nullopt when --help or
// --version was handled (text already printed to `out`). Throws ConfigError.
std::optional<Options> parse(int argc, const char* const argv[], std::ostream& out);

const char* mode_name(Mode m);
const char* source_name(SourceKind s);

}  // namespace vipd::config
