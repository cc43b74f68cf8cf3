// Thread: control (set once before the dataplane starts, then read-only).
// The DPDK dataplane's tunables with their defaults: the one place they are
// written. The configuration (controlplane/config/options.h, Options.dataplane)
// parses the options into this struct, the dataplane's configuration
// (dataplane/runtime/dataplane.h, DataplaneConfig) is built on it, and the
// benchmarks take their defaults from it. Ranges and help texts are in the
// option table (controlplane/config/option_table.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vipd {

// --exception-path: how the kernel reaches the data network (docs/gateway.md).
enum class ExceptionPath : uint8_t { kNone, kTap };

struct DataplaneSettings {
  std::vector<std::string> eal_args;          // --eal-args (split on whitespace)
  unsigned main_lcore = 0;                    // --main-lcore
  std::vector<unsigned> worker_lcores{1};     // --worker-lcores "1,2" or "1-3"
  uint32_t conn_table_size = 262144;          // --conn-table-size (per worker, entries)
  uint32_t tcp_established_timeout_s = 900;   // --tcp-timeout
  uint32_t tcp_fin_timeout_s = 120;           // --tcp-fin-timeout
  uint32_t udp_timeout_s = 300;               // --udp-timeout
  uint32_t neighbor_timeout_s = 60;           // --neighbor-timeout (ARP entry reachable time)
  uint32_t mbuf_count = 8191;                 // --mbufs (mempool size)
  uint32_t idle_sleep_us = 0;                 // --worker-idle-sleep-us (0 = busy poll)
  uint32_t mh_table_size = 65537;             // --mh-table-size (Maglev lookup table, a prime)
  bool expire_quiescent_template = true;      // --expire-quiescent-template
  // Full NAT on several workers: pick local ports whose replies the NIC's RSS
  // sends to the owning worker's queue (docs/operations.md, "RSS steering").
  bool rss_steering = true;                   // --rss-steering
  // Re-steering of TCP connections whose backend does not answer the SYN
  // (docs/scheduling.md, "Re-steering").
  uint32_t resteer_attempts = 3;              // --resteer-attempts (0 = off)
  uint32_t resteer_timeout_ms = 200;          // --resteer-timeout-ms (0 = no timer)
  uint32_t resteer_pool = 16384;              // --resteer-pool (saved SYNs per worker)
  // Passive outlier ejection (docs/scheduling.md, "Outlier ejection").
  uint32_t eject_failures = 3;                // --eject-failures (0 = off)
  uint32_t eject_time_ms = 5000;              // --eject-time-ms (times the ejections in a row)
  uint32_t eject_max_time_s = 300;            // --eject-max-time
  uint32_t eject_max_percent = 50;            // --eject-max-percent
  // --port-ipv6 "ADDR[/PREFIX] [via GATEWAY],-,...": each port's IPv6 address,
  // in --port order ("-" or missing: none), its on-link prefix length (64 when
  // not given) and its IPv6 gateway ("" = none) (docs/architecture.md "IPv6").
  std::vector<std::string> port_ipv6;
  std::vector<uint8_t> port_ipv6_prefix;
  std::vector<std::string> port_ipv6_gateway;
  // --fnat-local-addrs6 "ADDR,...": the IPv6 source addresses of full NAT
  // (IPv6 forwarding in fnat mode needs at least one; docs/architecture.md "IPv6").
  std::vector<std::string> fnat_local_addrs6;
  // Kernel exception path (docs/gateway.md): one kernel interface per port
  // carrying its MAC and address; what the kernel must see goes there, rate
  // limited to exception_pps packets per second (all ports together).
  ExceptionPath exception_path = ExceptionPath::kNone;  // --exception-path
  std::vector<std::string> exception_ifnames;  // --exception-ifnames, per port; missing: vipd-<index>
  uint32_t exception_pps = 10000;              // --exception-pps
  // Connection hand-over between full-NAT gateways (docs/gateway.md,
  // "Hand-over"): packets each worker may hand over per second.
  uint32_t handover_pps = 20000;               // --handover-pps (per worker)
  // Not options (fixed sizes; the benchmarks change them).
  uint32_t max_services = 65536;
  uint32_t max_dests = 262144;
  uint32_t template_table_size = 0;           // per worker; 0 = conn_table_size / 4
  uint16_t rx_desc = 1024, tx_desc = 1024;
};

}  // namespace vipd
