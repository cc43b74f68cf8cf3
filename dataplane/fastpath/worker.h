// Thread: worker (worker_main and process_*); the structures are set up by
// the control thread before the workers start.
// The per-packet pipeline: rx burst -> parse -> ARP / ICMP / VIP lookup ->
// redirect to the owning worker -> conn lookup or schedule -> NAT rewrite ->
// neighbour resolution -> tx burst.
#pragma once

#include <atomic>
#include <string>
#include <cstdint>

#include "dataplane/fastpath/burst.h"
#include "dataplane/fastpath/conn_table.h"
#include "dataplane/fastpath/neighbor.h"
#include "dataplane/fastpath/proxy_proto.h"
#include "dataplane/fastpath/resteer.h"
#include "dataplane/fastpath/rss_steer.h"
#include "dataplane/fastpath/templates.h"
#include "dataplane/fastpath/tables.h"
#include "dataplane/fastpath/v6_tables.h"
#include "dataplane/sched/sched.h"

struct rte_mbuf;
struct rte_mempool;
struct rte_ring;

namespace vipd::dp {

constexpr unsigned kBurst = 32;
// Packets taken per rx call: up to two bursts, so that the lookups and
// prefetches of the second overlap with the per-packet work of the first
// (process_burst).
constexpr unsigned kRxBurst = 2 * kBurst;
constexpr unsigned kMaxLocalAddrs = 16;
constexpr unsigned kPendingMax = 64;
constexpr unsigned kMaxHandoverPeers = 8;
constexpr unsigned kPeerFramesMax = 2 * kRxBurst;  // handed-over frames matched per poll, at most

struct PortInfo {
  uint16_t port_id = 0;
  uint8_t mac[6]{};
  uint32_t ip = 0;
  uint32_t mask = 0;
  uint32_t gateway = 0;  // 0 = none
  uint16_t mtu = 1500;   // largest IPv4 packet it sends (a PROXY header must fit)
  // The port's IPv6 address (network order), answered for NDP and echo
  // (docs/architecture.md "IPv6"); has_ip6 false: none.
  bool has_ip6 = false;
  uint8_t ip6[16]{};
};

// Read-only for workers after start (except the atomics and lock-free tables).
struct Shared {
  rte_hash* vip_table = nullptr;  // VipKey -> Service* (RW_CONCURRENCY_LF)
  rte_hash* vip_addrs = nullptr;  // uint32 VIP address -> refcount (LF)
  rte_rcu_qsbr* qsbr = nullptr;
  DestSlot* dest_slots = nullptr;
  // Each worker's DestCounters array (nullptr past the last worker): where
  // bump_dest_gen updates the workers' copies of a slot's generation.
  DestCounters* dest_counters[kMaxWorkers]{};
  uint32_t max_dests = 0;
  uint32_t max_services = 0;
  NeighborTable neigh;
  PortInfo ports[kMaxPorts];
  uint16_t n_ports = 0;
  Forward forward = Forward::kFnat;
  uint32_t local_addrs[kMaxLocalAddrs]{};
  uint32_t n_local_addrs = 0;
  uint32_t n_workers = 1;
  rte_ring* rings[kMaxWorkers]{};
  // RSS steering of full-NAT replies (rss_steer.h); off (tcp and udp false)
  // unless every port hashes with vipd's key and redirection table. The
  // workers' FnatPools are bucketed when it is on.
  RssSteer rss;
  uint64_t tsc_hz = 0;
  uint64_t t_syn = 0, t_est = 0, t_fin = 0, t_close = 0, t_udp = 0;  // TSC
  uint64_t t_dead = 0;  // grace for connections whose destination was removed
  uint64_t t_time_wait = 0, t_close_wait = 0, t_last_ack = 0;  // TSC
  uint32_t mh_table_size = 65537;
  bool expire_quiescent_template = true;
  // Re-steering (resteer.h): how many times a TCP connection whose backend
  // did not answer its SYN may be sent to another one (0 = never), and how
  // long vipd waits for the SYN-ACK before it does (TSC; 0 = no timer, only
  // RST, ICMP and the client's retransmission re-steer).
  uint32_t resteer_attempts = 0;
  uint64_t t_resteer = 0;
  // Outlier ejection (eject.h): k = 0 off. Failures are what re-steering
  // sees, so it needs resteer_attempts too.
  EjectParams eject;
  uint64_t arp_retry = 0, arp_give_up = 0;                           // TSC
  uint32_t idle_sleep_us = 0;
  // Kernel exception path (docs/gateway.md); both nullptr when it is off.
  // to_kernel: frames for the kernel (workers enqueue, MP; the exception
  // thread dequeues). from_kernel: frames the kernel sent, mbuf->port set to
  // the port index (the exception thread enqueues; worker 0 sends them).
  rte_ring* exc_to_kernel = nullptr;
  rte_ring* exc_from_kernel = nullptr;
  // IPv6 forwarding (v6_tables.h); nullptr: IPv6 is only answered for the
  // ports' own addresses (NDP, echo), never forwarded.
  Shared6* v6 = nullptr;
  // Connection hand-over (docs/gateway.md, "Hand-over"; full NAT only): the
  // peer gateways' addresses (host order, on a port's subnet), and each
  // worker's rate as a token bucket in TSC: one packet per
  // handover_interval, up to handover_tau ahead (the burst). No peers: off.
  uint32_t handover_peers[kMaxHandoverPeers]{};
  uint32_t n_handover_peers = 0;
  uint64_t handover_interval = 0, handover_tau = 0;
  std::atomic<bool> stop{false};
};

// Creates Shared::vip_table and Shared::vip_addrs (lock-free readers, one
// writer) named PREFIX + "vips" / "vip_addrs", with `entries` entries each.
// The one place their parameters (key, hash function, flags) are set: the
// daemon, the unit tests and the benchmarks all call it. Control thread, at
// set-up. False (rte_errno set) when DPDK cannot allocate them.
bool create_vip_tables(Shared& sh, const std::string& prefix, uint32_t entries, int socket);

// Whether an IPv4 address (host order) is one of the ports' own addresses.
inline bool is_port_ip(const Shared& sh, uint32_t ip) noexcept {
  for (uint16_t i = 0; i < sh.n_ports; ++i)
    if (sh.ports[i].ip == ip) return true;
  return false;
}

// Which full-NAT local address `ip` is (its index in local_addrs), or -1.
inline int local_addr_index(const Shared& sh, uint32_t ip) noexcept {
  for (uint32_t i = 0; i < sh.n_local_addrs; ++i)
    if (sh.local_addrs[i] == ip) return static_cast<int>(i);
  return -1;
}

// A removed destination's slot gets a new generation, in DestSlot and in
// every worker's copy; that expires every connection still pinned to it.
// Publisher thread, after no worker can still read the destination.
inline void bump_dest_gen(Shared& sh, uint32_t slot) noexcept {
  const uint32_t g = sh.dest_slots[slot].gen.fetch_add(1, std::memory_order_release) + 1;
  sh.dest_slots[slot].eject.reset();
  for (DestCounters* dc : sh.dest_counters)
    if (dc) dc[slot].gen.store(g, std::memory_order_release);
}

struct PendingPkt {
  rte_mbuf* m;
  uint32_t nexthop;
  uint16_t port;  // index into Shared::ports
  uint64_t since;
};

// Diagnostics mailbox (vipctl explain): the control side writes `q` and then
// bumps `req`; the worker answers in its loop and sets `done = req`. One
// relaxed load per poll when idle.
struct ExplainQuery {
  uint8_t proto;
  uint8_t v6;                // 1: an IPv6 flow (src6, dst6); 0: IPv4 (src, dst)
  uint32_t src, dst;
  uint16_t sport, dport;
  uint8_t src6[16], dst6[16];  // network order
};
// Addresses in the query's family: IPv4 in the *_ip fields, IPv6 in *_ip6.
struct ExplainAnswer {
  uint8_t service_found, vip_address, conn_found, conn_reply, conn_alive, state;
  uint8_t sched, drop_when_empty;
  uint32_t n_dests, n_weighted;
  uint32_t conn_dest_ip, conn_local_ip;
  uint16_t conn_dest_port, conn_local_port;
  uint64_t conn_expires_in_tsc;
  int32_t next_idx;
  uint32_t next_ip;
  uint16_t next_port;
  uint8_t tmpl_found;  // a live persistence template decides instead of the scheduler
  uint64_t tmpl_expires_in_tsc;
  uint8_t conn_dest_ip6[16], conn_local_ip6[16], next_ip6[16];
};
struct alignas(64) Mailbox {
  std::atomic<uint64_t> req{0};
  std::atomic<uint64_t> done{0};
  ExplainQuery q{};
  ExplainAnswer a{};
};

struct Worker {
  uint32_t index = 0;  // 0..n_workers-1, also the rx/tx queue and QSBR id
  unsigned lcore = 0;
  Shared* sh = nullptr;
  rte_mempool* pool = nullptr;
  ConnTable conns;
  TemplateTable tmpls;  // persistence templates
  ProxyPool proxy;      // PROXY protocol state of the connections that send a header
  SynPool syn;          // saved SYNs of the connections waiting for their SYN-ACK (re-steering)
  SchedState* sched = nullptr;          // [max_services]
  DestCounters* dest_counters = nullptr;  // [max_dests]
  FnatPool fnat[kMaxLocalAddrs];
  uint32_t fnat_cursor = 0;
  PendingPkt pending[kPendingMax];
  uint32_t n_pending = 0;
  rte_mbuf* txbuf[kMaxPorts][kBurst * 2];
  uint16_t n_tx[kMaxPorts]{};
  uint64_t now = 0;
  uint64_t sweep_last = 0;  // TSC up to which the paced sweep has done its share
  // now + Shared::t_est, set by process_burst for its packets: the expiry an
  // established TCP packet gives its connection (one load instead of three).
  uint64_t est_expires = 0;
  // The last next hop output() found reachable, valid for one burst
  // (process_burst forgets it; so does this worker's own ARP handling): the
  // packets of a burst mostly share their next hop.
  // nh_key: which next hop, as worker.cc's nh_key_of makes it from a route
  // code (egress port, and whether the next hop is its gateway) and the
  // destination, so that a connection whose entry keeps its route code
  // checks it with one compare; 0 (never a key): none.
  // nh_hdr: the Ethernet addresses to write for it (its MAC, then the MAC of
  // the egress port), one 12-byte copy a packet; nh_pidx: that port's index
  // (what the key's route code says, without decoding it).
  uint64_t nh_key = 0;
  uint8_t nh_hdr[12]{};
  uint16_t nh_pidx = 0;
  PktInfo burst[2][kBurst];  // what prepare_burst found: the burst in hand, the next one
  Worker6* v6 = nullptr;     // IPv6 forwarding state (v6_tables.h), with Shared::v6
  // Connection hand-over (docs/gateway.md, "Hand-over"): the rate's token
  // bucket as the time it is full again (TSC); frames from peers that
  // matched a connection here, waiting for serve_peer_frames (beyond
  // kPeerFramesMax per poll: redirect_ring_full); set while it runs them.
  uint64_t handover_tat = 0;
  uint64_t peers_arp_next = 0;  // worker 0: when resolve_peers runs next (TSC)
  uint16_t n_peer_frames = 0;
  bool peer_frames_now = false;
  rte_mbuf* peer_frames[kPeerFramesMax];
  WorkerCounters counters;
  Mailbox mailbox;
};
// Workers never share a cache line: each Worker is its own (64-byte aligned)
// allocation, and the parts other threads touch (counters, read on scrape;
// the explain mailbox) start lines of their own.
static_assert(alignof(Worker) >= 64 && sizeof(Worker) % 64 == 0);

// The current generation of a destination slot, as this worker sees it.
inline uint32_t dest_gen(const Worker& w, uint32_t slot) noexcept {
  return w.dest_counters[slot].gen.load(std::memory_order_acquire);
}

// Which worker owns the flows of a client. Only the client address counts
// (not its port), so that one worker sees all of a client's flows and its
// persistence templates apply to all of them; full-NAT replies are owned by
// local port instead (see worker.cc).
inline uint32_t flow_owner(uint32_t client, uint16_t /*cport*/, uint32_t n_workers) {
  uint32_t h = client * 0x9e3779b1u;
  h ^= h >> 16;
  return (h * 0x85ebca6bu >> 16) % n_workers;
}

// Processes a burst (takes ownership of every mbuf: sent, queued or freed).
// from_ring: the packets were redirected by another worker (never redirect
// them again).
void process_burst(Worker& w, rte_mbuf** pkts, uint16_t n, bool from_ring) noexcept;
// Connection hand-over: runs the frames from peers that matched a
// connection here (Worker::peer_frames) through the per-packet path. The
// poll loop calls it after the bursts when there are any.
void serve_peer_frames(Worker& w) noexcept;
// Connection hand-over: ARP for the peers that are not (or no longer)
// reachable. Worker 0's poll loop calls it every arp_retry from the start.
void resolve_peers(Worker& w) noexcept;
// Sends what is buffered; retries and expires packets waiting for ARP.
void flush_tx(Worker& w) noexcept;
void service_pending(Worker& w) noexcept;
// Re-steers the connections whose backend did not answer their SYN in time
// (resteer.h); at most `budget` of them per call.
void resteer_timers(Worker& w, uint32_t budget) noexcept;
// Worker 0, when the exception path is on: queues what the kernel sent for
// tx on the ports (Shared::exc_from_kernel). Once per poll, not per packet.
void send_from_kernel(Worker& w) noexcept;
// Answers a pending explain query, if any.
void serve_mailbox(Worker& w) noexcept;
// The worker whose mailbox answers an explain query: the one that owns the
// flow in the query's direction, as process_one / forward6 pick it (a reply
// in nat mode: the worker of its destination, the client). Control thread;
// reads Shared's VIP address tables (lock-free readers).
uint32_t explain_owner(const Shared& sh, const ExplainQuery& q) noexcept;
// Visits up to `budget` of the connection table's entries (ConnTable::
// slots(), one per connection of capacity) and expires what is due.
void sweep_conns(Worker& w, uint32_t budget) noexcept;
// The poll loop's sweep: visits the whole connection table once per
// kSweepPeriodS whatever the packet rate, a slice per call sized by the time
// since the last one (at most the larger of kSweepMaxSlice slots and 1/64
// of the table: a long pause is made up over the following calls). An expired
// connection lives on about that long at most; a busy worker spends a
// fraction of a slot per packet on it.
// Returns the number of slots visited.
constexpr uint64_t kSweepPeriodS = 1;
constexpr uint32_t kSweepMaxSlice = 256;
uint32_t sweep_conns_paced(Worker& w) noexcept;
// The lcore entry point (arg: Worker*). Polls until sh->stop.
int worker_main(void* arg);

}  // namespace vipd::dp
