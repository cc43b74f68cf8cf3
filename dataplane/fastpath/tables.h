// Thread: any. The structures shared between the control-side publisher
// (single writer) and the workers (readers): VIP keys, immutable Service
// objects, destination slots with generations, per-worker counters.
#pragma once

#include <atomic>
#include <cstdint>

#include "dataplane/fastpath/drop_reasons.h"
#include "dataplane/fastpath/eject.h"
#include "model/kinds.h"

struct rte_hash;
struct rte_rcu_qsbr;

namespace vipd::dp {

constexpr unsigned kMaxWorkers = 64;
constexpr unsigned kMaxPorts = 8;

// IPVS schedulers (docs/scheduling.md) and the forwarding method: the model's enums.
using Sched = cp::Scheduler;
constexpr uint32_t kShTableSize = 256;  // sh/dh buckets, as in IPVS
using Forward = cp::ForwardMethod;

// Key of the VIP table: (vip, port, protocol), host order, 8 bytes.
struct VipKey {
  uint32_t vip;
  uint16_t port;
  uint8_t proto;
  uint8_t pad;
};
static_assert(sizeof(VipKey) == 8);
// Initial value of the VIP tables' CRC32 hash (flow_hash.h, vip_tables.cc).
constexpr uint32_t kVipHashInit = 0;

// One real server as seen by the fast path. `slot`/`gen` identify the
// destination across table generations (see DestSlots).
struct DestRef {
  uint32_t ip;
  uint16_t port;
  uint16_t rss;  // RSS steering: rss_dest_bits(ip, port) (rss_steer.h), set by the publisher
  uint32_t weight;
  uint32_t slot;
  uint32_t gen;
};

// Immutable after publication; replaced (never modified) by the publisher and
// freed after every worker went through a quiescent state.
struct SourceRange {
  uint32_t net;   // host order, host bits clear
  uint32_t mask;  // host order
};

struct Service {
  uint32_t id;  // dense id: index into per-worker scheduler state
  uint32_t vip;
  uint16_t port;
  uint8_t proto;
  Sched sched;
  uint8_t drop_when_empty;  // 0 = reject (RST / ICMP unreachable), 1 = drop
  cp::ProxyProtocol proxy_protocol;  // full NAT, TCP: header ahead of the client's bytes
  uint8_t pad[2];
  uint32_t persistence_s;
  uint32_t n_dests;     // all destinations, including weight 0
  uint32_t n_weighted;  // destinations with weight > 0
  int32_t max_weight;
  int32_t gcd_weight;
  uint32_t table_size;    // sh/dh: kShTableSize buckets; mh: the Maglev table size
  const uint16_t* table;  // index into dests per bucket (in the same allocation)
  // Client ranges allowed to open new flows (loadBalancerSourceRanges); none =
  // everyone. Host order, in the same allocation.
  uint32_t n_ranges;
  const SourceRange* ranges;
  DestRef dests[];        // n_dests entries, sorted by (ip, port)
};

// True when `src` (host order) may open a new flow to `svc`.
inline bool source_allowed(const Service& svc, uint32_t src) noexcept {
  for (uint32_t i = 0; i < svc.n_ranges; ++i)
    if ((src & svc.ranges[i].mask) == svc.ranges[i].net) return true;
  return svc.n_ranges == 0;
}

// Destination generations: a conn entry records (slot, gen); when the
// publisher removes a destination it bumps the slot's generation, which
// expires every connection to it at its next packet. The publisher reads it
// here to stamp the destinations it publishes; workers read their own copy
// (DestCounters::gen).
// `eject`: the slot's outlier-ejection state (eject.h), shared by the
// workers; reset with the generation when the slot is released.
struct DestSlot {
  std::atomic<uint32_t> gen;
  EjectState eject;
};

// Per-worker, per-destination counters (indexed by slot). Single writer, but
// for `gen`: the worker's copy of DestSlot::gen, which the publisher bumps
// with the slot's (bump_dest_gen). A packet of a connection checks its
// destination on the line it writes the counters to anyway, instead of
// reading one more random cache line; the publisher writes the line only when
// a destination is removed.
struct alignas(64) DestCounters {
  uint64_t conns;
  uint64_t inpkts, outpkts, inbytes, outbytes;
  int64_t active, inactive;
  std::atomic<uint32_t> gen;
  uint32_t pad;
};
static_assert(sizeof(DestCounters) == 64, "one cache line per destination and worker");

// Per-worker counters: written only by the owning worker, read by the
// control thread with relaxed loads. Cache-line aligned.
struct alignas(64) WorkerCounters {
  std::atomic<uint64_t> rx;
  std::atomic<uint64_t> tx;
  std::atomic<uint64_t> new_flows;
  std::atomic<uint64_t> active_flows;
  std::atomic<uint64_t> redirects_out;
  std::atomic<uint64_t> redirects_in;
  // Full NAT with RSS steering (rss_steer.h): replies that still arrived on
  // another worker's queue (part of redirects_out), and new connections
  // whose local port could not be steered (no suitable port free).
  std::atomic<uint64_t> reply_redirects;
  std::atomic<uint64_t> fnat_unsteered;
  std::atomic<uint64_t> polls;
  std::atomic<uint64_t> busy_polls;
  std::atomic<uint64_t> rst_sent;
  std::atomic<uint64_t> icmp_unreach_sent;
  std::atomic<uint64_t> arp_replies;
  std::atomic<uint64_t> arp_requests;  // ARP requests and IPv6 Neighbor Solicitations sent
  std::atomic<uint64_t> nd_learned;    // Neighbor Advertisements consumed by learning (IPv6)
  std::atomic<uint64_t> template_full;  // persistence template table full
  std::atomic<uint64_t> proxy_headers;              // PROXY protocol headers sent (first time)
  std::atomic<uint64_t> proxy_header_retransmits;   // ... sent again (first segment retransmitted)
  // Re-steering (resteer.h): connections sent to another backend, by
  // reason (ResteerReason order: rst, icmp, timeout, retransmit); new ones
  // that found the SYN pool empty (no re-steering for them); ones that ran
  // out of attempts or of backends (went on as without re-steering).
  std::atomic<uint64_t> resteers[4];
  std::atomic<uint64_t> resteer_pool_full;
  std::atomic<uint64_t> resteer_gave_up;
  // Connection hand-over between gateways (docs/gateway.md, "Hand-over"):
  // packets of no connection sent on to the peers, and packets from a peer
  // that matched a connection here (those that did not are the drop reason
  // handover_not_held; over the rate, handover_rate_limited).
  std::atomic<uint64_t> handovers;
  std::atomic<uint64_t> handover_matched;
  std::atomic<uint64_t> drops[kNumDropReasons];
};

// Single-writer increment without a locked instruction.
inline void bump(std::atomic<uint64_t>& c, uint64_t n = 1) {
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

}  // namespace vipd::dp
