// Thread: control (parsed once at start-up). The option table: one row per
// option, in --help order, made with the builders of option_rows.h.
#include <filesystem>

#include "controlplane/config/option_rows.h"
#include "controlplane/config/port_spec.h"

namespace vipd::config::rows {

using namespace values;  // the value parsers the rows call

namespace {

constexpr const char* kAddrList = "`A,B,...`";

std::string comma_text(const std::vector<std::string>& words) { return join(words, ","); }

}  // namespace

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
        [](Options& o, const std::string& v) { set_port_ipv6(o.dataplane, v); },
        [](const Options& o) { return port_ipv6_text(o.dataplane); }), "string"));
    r.push_back(choice<ExceptionPath>("exception-path", "KIND", &DataplaneSettings::exception_path,
        {{"none", ExceptionPath::kNone}, {"tap", ExceptionPath::kTap}},
        "dpdk mode: kernel interface per port for the gateway's own traffic (BGP, BFD, ping): none or tap",
        "dpdk mode: `tap` gives each port a kernel interface (DPDK `net_tap`) with the port's MAC and address, "
        "so that the kernel and its daemons (BGP, BFD, ssh) can use the data network; frames for the port's "
        "own address that are not VIP traffic go there, rate limited by `--exception-pps`, and what the kernel "
        "sends leaves through the port. The interface exists as long as vipd runs. `none`: vipd answers ARP "
        "and ping for the port address and drops the rest (`local_unhandled`). See [gateway.md](gateway.md)."));
    r.push_back(with(parsed("exception-ifnames", "LIST", &DataplaneSettings::exception_ifnames,
        "names of the exception interfaces, in --port order, comma-separated ('-' = vipd-<index>)",
        "Names of the kernel interfaces of `--exception-path`, in `port` order, comma-separated; `-` (or a "
        "missing entry): `vipd-<index>` (`vipd-0` for the first port).",
        parse_ifnames, comma_text, "string"), "string", "vipd-0,vipd-1,..."));
    r.push_back(number("exception-pps", "N", &DataplaneSettings::exception_pps, 1, 10000000,
        "frames per second the exception path passes to the kernel (all ports); the rest are counted drops",
        "Frames per second the exception path passes to the kernel, all ports together (a token bucket "
        "holding a tenth of a second's worth, at least 32); the rest are dropped and counted "
        "(`vipd_exception_drops_total{reason=\"rate_limited\"}`)."));
    r.push_back(number("announce-table", "N", &Options::announce_table, 0, 4294967295u,
        "dpdk mode, with --exception-path tap: routing table for the announced VIPs (/32 and /128 routes); 0 = off",
        "dpdk mode, needs `--exception-path tap`: vipd puts each announced VIP as a /32 (IPv4) or /128 "
        "(IPv6) route on the first port's exception interface into this routing table, for a routing daemon to export over BGP "
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
    r.push_back(parsed("worker-lcores", "LIST", &DataplaneSettings::worker_lcores,
        "DPDK worker lcores, e.g. 1,2 or 1-3 or 1-3,6",
        "DPDK worker lcores, see [Lcore lists](#lcore-lists). May not include the main lcore.",
        parse_lcores, lcores_text, "LIST"));
    r.push_back(choice<ForwardMethod>("forward-method", "METHOD", &Options::forward_method,
        model_choices<ForwardMethod>(),
        "dpdk forwarding (fnat: full NAT; nat: DNAT, backends route replies via vipd)",
        "`fnat`: full NAT, the client source is rewritten to one of `--fnat-local-addrs`, so replies come back to "
        "vipd on any topology. `nat`: destination NAT only; backends must route replies through vipd."));
    r.push_back(parsed("fnat-local-addrs", "ADDRS", &Options::fnat_local_addrs,
        "comma-separated IPv4 source addresses for fnat (required for fnat in dpdk mode)",
        "IPv4 source addresses for full NAT, comma-separated, no duplicates. Required with `fnat` in dpdk mode "
        "(not with `--dry-run`). They are vipd's own: a Service entry (cluster IP, external IP, ...) on one of "
        "them is an object error and is not served, and the dataplane treats every packet to one as a reply. "
        "Each worker keeps a 256 KiB port index per address (at most 16 addresses).",
        parse_addr_list, addrs_text, kAddrList));
    r.push_back(parsed("handover-peers", "ADDRS", &Options::handover_peers,
        "dpdk fnat: the other gateways' data-port IPv4 addresses; a TCP packet of no connection here "
        "(not a SYN) is handed over to them",
        "dpdk mode with `--forward-method fnat`, several gateways behind ECMP: the other gateways' IPv4 "
        "addresses on a port's subnet (at most 8, resolved by ARP). A TCP packet without SYN that belongs to "
        "no connection here (ECMP moved its flow, e.g. during a drain) is sent to each of them unchanged "
        "(only the Ethernet header: their MAC, ethertype 0x88b5); the one that holds the connection forwards "
        "it, the others drop it (`handover_not_held`) and never hand it over again. Rate limited by "
        "`--handover-pps`. Empty: off (docs/gateway.md, \"Hand-over\").",
        parse_addr_list, addrs_text, kAddrList));
    r.push_back(number("handover-pps", "N", &DataplaneSettings::handover_pps, 1, 10000000,
        "dpdk fnat: packets each worker may hand over to --handover-peers per second",
        "dpdk mode with `--handover-peers`: packets each worker may hand over per second (a token bucket "
        "holding a tenth of a second's worth); more are dropped and counted (`handover_rate_limited`), so "
        "that random ACKs cannot be multiplied by the number of peers past it."));
    r.push_back(parsed("fnat-local-addrs6", "ADDRS", &DataplaneSettings::fnat_local_addrs6,
        "comma-separated IPv6 source addresses for fnat (IPv6 forwarding in fnat mode needs them)",
        "IPv6 source addresses for full NAT, comma-separated, no duplicates, at most 16. IPv6 Services are "
        "forwarded in dpdk fnat mode only with at least one (and a port with `--port-ipv6`); without them "
        "IPv6 entries are skipped with a warning, as before. They are vipd's own: it answers Neighbor "
        "Solicitations for them and treats every packet to one as a reply (see architecture.md, \"IPv6\").",
        [](const std::string& opt, const std::string& v) { return parse_ipv6_list(opt, v, 16); }, comma_text,
        "string"));
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
        "130 bytes each; 64 more each with IPv6 forwarding on, for a SYN's extension headers). New connections that find it full are counted (`vipd_worker_resteer_pool_full_total`) "
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
    r.push_back(parsed("node-ips", "ADDRS", &Options::node_ips,
        "comma-separated IPv4 and IPv6 addresses NodePort services are served on",
        "IPv4 and IPv6 addresses NodePort services are served on (each family's NodePort entries use that "
        "family's addresses).",
        parse_ip_list, ips_text, kAddrList));
    r.push_back(text("service-proxy-name", "NAME", &Options::service_proxy_name,
        "serve only services labelled service.kubernetes.io/service-proxy-name=NAME",
        "Serve only services labelled `service.kubernetes.io/service-proxy-name=NAME`."));
    return r;
  }();
  return rows;
}

}  // namespace vipd::config::rows
