// Thread: control. The DPDK dataplane as the control plane sees it: no DPDK
// headers here, so controlplane/ and cmd/ can include it. Owns EAL, ports,
// mempool, tables, worker lcores and the publisher.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/dataplane_settings.h"
#include "model/service_table.h"

namespace vipd::dp {

struct PortSpec {
  std::string device;  // PCI address or vdev string
  bool is_pci = false;
  uint32_t ip = 0;     // host order
  uint8_t prefix_len = 24;
  uint32_t gateway = 0;  // 0 = none
};

// What the dataplane is started with: the settings (model/dataplane_settings.h,
// parsed from the options as they are) plus the ports and addresses.
struct DataplaneConfig : DataplaneSettings {
  std::string program = "vipd";
  std::vector<PortSpec> ports;
  bool fnat = true;
  std::vector<uint32_t> local_addrs;
  std::vector<uint32_t> handover_peers;  // full NAT: the peer gateways (docs/gateway.md, "Hand-over")
};

struct WorkerSnapshot {
  unsigned lcore = 0;
  uint64_t rx = 0, tx = 0, drops = 0, new_flows = 0, active_flows = 0;
  uint64_t redirects_out = 0, redirects_in = 0, polls = 0, busy_polls = 0;
  uint64_t reply_redirects = 0, fnat_unsteered = 0;  // RSS steering (rss_steer.h)
  uint64_t rst_sent = 0, icmp_unreach_sent = 0, arp_replies = 0, arp_requests = 0;
  uint64_t proxy_headers = 0, proxy_header_retransmits = 0;  // PROXY protocol (full NAT)
  uint64_t resteers[4] = {};  // re-steered connections by reason (rst, icmp, timeout, retransmit)
  uint64_t resteer_pool_full = 0, resteer_gave_up = 0;
  // Connection hand-over (docs/gateway.md): packets handed over to the peers,
  // from a peer and matched here, from a peer and not held here, over the rate.
  uint64_t handovers = 0, handover_matched = 0, handover_not_held = 0, handover_rate_limited = 0;
  uint64_t handover_not_peer = 0, handover_no_mbuf = 0;
  uint32_t conn_entries = 0, conn_capacity = 0;
  std::vector<std::pair<std::string, uint64_t>> drop_reasons;  // all reasons, fixed order
};

struct DestSnapshot {
  uint64_t conns = 0, inpkts = 0, outpkts = 0, inbytes = 0, outbytes = 0;
  int64_t active = 0, inactive = 0;
  // Outlier ejection (docs/scheduling.md): ejections so far (since the slot
  // was last released) and whether it is ejected now.
  uint64_t ejections = 0;
  bool ejected = false;
};

struct PortSnapshot {
  std::string device;
  uint16_t port_id = 0;
  std::string mac;
  uint64_t ipackets = 0, opackets = 0, ierrors = 0, oerrors = 0, imissed = 0;
  // Kernel exception path (docs/gateway.md); exception_ifname empty: off.
  // Frames dropped because a worker found the ring to the kernel full are the
  // workers' drop reason exception_queue_full.
  std::string exception_ifname;
  uint64_t exc_to_kernel = 0, exc_from_kernel = 0;  // frames written to / read from the interface
  uint64_t exc_rate_limited = 0;       // to the kernel, over --exception-pps
  uint64_t exc_kernel_full = 0;        // to the kernel, refused by the tap
  uint64_t exc_from_kernel_full = 0;   // from the kernel, ring to the port full
  uint32_t ip = 0;                     // the port's address (host order) and prefix
  uint8_t prefix_len = 0;
};

// What the dataplane would do with a packet (vipctl explain). Computed by the
// owning worker itself (through a mailbox it polls), so nothing is read while
// it changes; the scheduler's choice is predicted on a copy of its state.
struct ExplainResult {
  bool answered = false;       // false: the worker did not answer in time
  unsigned worker_lcore = 0;   // the worker that owns the flow
  bool service_found = false;  // (proto, dst, dport) is a virtual service
  bool vip_address = false;    // dst is a VIP address (maybe another port)
  cp::Scheduler scheduler = cp::Scheduler::kRr;  // of the service
  uint32_t n_dests = 0, n_weighted = 0;
  bool drop_when_empty = false;
  bool conn_found = false;     // an existing connection matches
  bool conn_reply = false;     // ... in the reply direction
  bool conn_dest_alive = false;
  std::string conn_state;
  // The query's family; conn_local_ip stays 0.0.0.0 when the connection has
  // no local address of its own (nat mode).
  cp::IpAddr conn_dest_ip, conn_local_ip;
  uint16_t conn_dest_port = 0, conn_local_port = 0;
  double conn_expires_in_s = 0;
  bool would_schedule = false;  // a new flow would be scheduled...
  cp::IpAddr next_dest_ip;      // ...to this destination
  uint16_t next_dest_port = 0;
  bool affinity_found = false;  // ...because the client's persistence template says so
  double affinity_expires_in_s = 0;
};

class Dataplane {
 public:
  // Initialises EAL, ports, tables; does not start workers. nullptr + *error.
  static std::unique_ptr<Dataplane> create(const DataplaneConfig& cfg, std::string* error);
  virtual ~Dataplane() = default;

  virtual bool start(std::string* error) = 0;  // launches the worker lcores
  virtual void stop() = 0;                      // stops workers, closes ports

  // Single writer: programs the table. `full` reconciles against everything
  // published so far; otherwise only `diff` is applied.
  virtual bool apply(const cp::ServiceTable& next, const cp::TableDiff& diff, bool full,
                     std::string* error) = 0;

  virtual std::vector<WorkerSnapshot> workers() const = 0;
  virtual std::vector<PortSnapshot> ports() const = 0;
  // Counters of one destination of one service (summed over workers).
  virtual DestSnapshot dest(const cp::ServiceKey& svc, uint32_t ip, uint16_t port) const = 0;
  // Same for a destination of either family (IPv6 services).
  virtual DestSnapshot dest_at(const cp::ServiceKey& svc, const cp::IpAddr& ip, uint16_t port) const {
    return ip.is_v4() ? dest(svc, ip.v4(), port) : DestSnapshot{};
  }
  virtual uint32_t neighbor_entries() const = 0;
  // Whether IPv6 Service entries are forwarded (IPv6 tables set up: a port
  // has an IPv6 address and, in fnat mode, --fnat-local-addrs6 is given).
  virtual bool forwards_ipv6() const { return false; }
  // Thread: any control-side thread; waits up to ~200 ms for the worker.
  // proto 6 or 17; src and dst of one family; ports host order.
  virtual ExplainResult explain(uint8_t proto, const cp::IpAddr& src, uint16_t sport, const cp::IpAddr& dst,
                                uint16_t dport) const = 0;
};

}  // namespace vipd::dp
