// Thread: main (the benchmark thread is the worker; no lcore is launched).
//
// Benchmark 1: the per-core dataplane pipeline. Synthetic 60-byte IPv4
// TCP/UDP frames go through the real fast path — process_burst, then
// service_pending / flush_tx / sweep_conns / rte_rcu_qsbr_quiescent exactly
// as one poll of worker_main does (dataplane/fastpath/worker.cc; keep
// poll_once() below in step with it) — on the net_ring0 vdev, whose queue is
// an rte_ring looped back onto itself.
//
// Each chunk: the generator (untimed) writes kChunk fresh frames and puts them
// into the ring with rte_eth_tx_burst; the timed part then runs kChunk/64
// polls (rx of kRxBurst = 64 -> pipeline -> tx burst), which consume exactly the
// fresh frames while the forwarded ones queue up behind them; the generator
// then takes the forwarded frames back and rewrites them. The I/O-only
// baseline times the same polls with rx burst -> tx burst and nothing else;
// the l3fwd baseline with what DPDK's l3fwd does to each packet in between
// (bench/l3fwd.h: parse Ethernet/IPv4, rewrite the MACs, TTL - 1 with an
// incremental checksum update), so the pipeline can be read against a loop
// that touches the packet too.
//
// Phases (each timed with rdtsc around the polls only):
//   fill      one SYN (or UDP datagram) per flow until F flows exist
//             (TCP: then, untimed, each flow's SYN-ACK from its endpoint
//             and the client's ACK, the rest of the handshake)
//   est       established flows: a packet of a uniformly random flow (ACK|PSH)
//   reply     established flows, the backend's direction: a packet from the
//             endpoint to the full-NAT local address (nat: to the client)
//   newconn   every packet a SYN of a new flow, on top of the F flows; new
//             flows are expired (untimed) between rounds
//   baseline  rx burst -> tx burst on the same port and frames
//   l3fwd     rx burst -> l3fwd_frame() on each -> tx burst, the same frames
//
// --family 6: the same topology in IPv6 (every address is fd00::/64 plus
// the IPv4 one in its low 32 bits, all on-link, as IPv6 next hops must be;
// the VIP, endpoints and full-NAT local addresses likewise), 74-byte frames
// (40-byte IPv6 header), the IPv6 tables of v6_tables.h set up as
// DpdkDataplane::init_ipv6 does; the l3fwd phase is IPv4 only.
//
// Under valgrind --tool=callgrind --collect-atstart=no, collection is
// toggled around the timed polls only and one dump is written per phase
// (CALLGRIND_DUMP_STATS_AT("phase")), so instructions/packet come out exact.
//
// The worker's clock (w.now, which connection timeouts, the paced sweep and
// the neighbour caches read): timed runs read the TSC at each poll, as
// worker_main does (--clock tsc). Under valgrind the default is --clock
// virtual: the bench drives w.now itself, kVirtualPollNs per poll, so what
// the measured phases execute never depends on how fast the machine runs
// them (with the TSC, a 1M-flow fill that takes longer than the 60 s
// SYN_RECV timeout under valgrind lets the paced sweep expire the first
// flows before the handshakes and the measured phases reach them).
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_rcu_qsbr.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "bench/l3fwd.h"
#include "dataplane/fastpath/packet.h"
#include "dataplane/fastpath/v6_tables.h"
#include "dataplane/fastpath/worker_internal.h"
#include "model/ip_addr.h"

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define BENCH_HAVE_VALGRIND 1
#else
#define BENCH_HAVE_VALGRIND 0
#define RUNNING_ON_VALGRIND 0
#define CALLGRIND_TOGGLE_COLLECT
#define CALLGRIND_ZERO_STATS
#define CALLGRIND_DUMP_STATS_AT(x)
#endif

namespace vipd::bench {

using dp::kBurst;

namespace {

constexpr unsigned kChunk = 256;          // fresh frames per timed chunk
constexpr unsigned kPolls = kChunk / dp::kRxBurst;
constexpr uint16_t kFrameLen = 60;        // 64-byte frames on the wire, less FCS
constexpr uint16_t kFrameLen6 = 74;      // Ethernet + IPv6 + TCP (UDP: 12 bytes of payload)
constexpr uint16_t kFlowsPerIp = 60000;   // client ports 1024.. per client address

enum class Poll { kPipeline, kIo, kL3fwd };

// --clock virtual: the time one poll of kRxBurst packets takes, about what
// the timed runs measure (100 ns a packet), so the paced sweep keeps the
// pace it has there.
constexpr uint64_t kVirtualPollNs = 100 * dp::kRxBurst;

// --family 6: fd00::/64 with the IPv4 address of the same role in the low
// 32 bits (network order).
std::array<uint8_t, 16> v6_of(uint32_t ip4) {
  std::array<uint8_t, 16> a{};
  a[0] = 0xfd;
  a[12] = static_cast<uint8_t>(ip4 >> 24);
  a[13] = static_cast<uint8_t>(ip4 >> 16);
  a[14] = static_cast<uint8_t>(ip4 >> 8);
  a[15] = static_cast<uint8_t>(ip4);
  return a;
}
uint32_t v4_of(const uint8_t a[16]) {
  return uint32_t{a[12]} << 24 | uint32_t{a[13]} << 16 | uint32_t{a[14]} << 8 | a[15];
}

struct Flow {
  uint32_t src;
  uint16_t sport;
  uint32_t dst;
  uint16_t dport = kVipPort;
};

class Bench {
 public:
  Bench(BenchDataplane& d, uint32_t services, uint8_t proto, bool v6, bool virtual_clock)
      : d_(d), services_(services), proto_(proto), v6_(v6), virtual_clock_(virtual_clock),
        poll_ticks_(d.sh.tsc_hz * kVirtualPollNs / 1000000000) {
    // The virtual clock starts from the TSC (the neighbour entries were
    // stamped with it) and lives in w.now, which every Bench on this worker
    // shares; it only moves forward.
    dp::Worker& w = *d_.w;
    if (virtual_clock_ && w.now < rte_rdtsc()) w.now = rte_rdtsc();
  }

  // Resets `m` to one zeroed frame of `len` bytes with its Ethernet header
  // (from the peer to our port's MAC, `ethertype`); returns the frame.
  uint8_t* start_frame(rte_mbuf* m, uint16_t len, uint16_t ethertype) {
    rte_pktmbuf_reset(m);
    m->port = d_.port_id;
    m->data_len = len;
    m->pkt_len = len;
    uint8_t* p = rte_pktmbuf_mtod(m, uint8_t*);
    std::memset(p, 0, len);
    auto* eth = reinterpret_cast<rte_ether_hdr*>(p);
    std::memcpy(eth->dst_addr.addr_bytes, d_.sh.ports[0].mac, 6);
    std::memcpy(eth->src_addr.addr_bytes, kPeerMac, 6);
    eth->ether_type = rte_cpu_to_be_16(ethertype);
    return p;
  }

  // Writes one frame addressed to our port's MAC.
  void write_frame(rte_mbuf* m, const Flow& f, uint8_t flags) {
    if (v6_) return write_frame6(m, f, flags);
    uint8_t* p = start_frame(m, kFrameLen, RTE_ETHER_TYPE_IPV4);
    auto* ip = reinterpret_cast<rte_ipv4_hdr*>(p + sizeof(rte_ether_hdr));
    const uint16_t ip_len = kFrameLen - sizeof(rte_ether_hdr);
    ip->version_ihl = 0x45;
    ip->total_length = rte_cpu_to_be_16(ip_len);
    ip->packet_id = 0;
    ip->fragment_offset = rte_cpu_to_be_16(RTE_IPV4_HDR_DF_FLAG);
    ip->time_to_live = 64;
    ip->next_proto_id = proto_;
    ip->src_addr = rte_cpu_to_be_32(f.src);
    ip->dst_addr = rte_cpu_to_be_32(f.dst);
    ip->hdr_checksum = 0;
    ip->hdr_checksum = rte_ipv4_cksum(ip);
    write_l4(reinterpret_cast<uint8_t*>(ip) + 20, f, flags, static_cast<uint16_t>(ip_len - 20),
             [ip](const void* l4) { return rte_ipv4_udptcp_cksum(ip, l4); });
  }

  // The TCP or UDP header after the IP header, its checksum by `cksum` (over
  // the family's pseudo header) once the header is written.
  template <class Cksum>
  void write_l4(uint8_t* l4, const Flow& f, uint8_t flags, uint16_t l4_len, Cksum cksum) {
    if (proto_ == dp::kProtoTcp) {
      auto* t = reinterpret_cast<rte_tcp_hdr*>(l4);
      t->src_port = rte_cpu_to_be_16(f.sport);
      t->dst_port = rte_cpu_to_be_16(f.dport);
      t->sent_seq = rte_cpu_to_be_32(1000);
      t->recv_ack = rte_cpu_to_be_32(flags & dp::kTcpAck ? 2000 : 0);
      t->data_off = 5 << 4;
      t->tcp_flags = flags;
      t->rx_win = rte_cpu_to_be_16(65535);
      t->cksum = 0;
      t->cksum = cksum(t);
    } else {
      auto* u = reinterpret_cast<rte_udp_hdr*>(l4);
      u->src_port = rte_cpu_to_be_16(f.sport);
      u->dst_port = rte_cpu_to_be_16(f.dport);
      u->dgram_len = rte_cpu_to_be_16(l4_len);
      u->dgram_cksum = 0;
      u->dgram_cksum = cksum(u);
    }
  }

  // The same frame in IPv6 (--family 6).
  void write_frame6(rte_mbuf* m, const Flow& f, uint8_t flags) {
    uint8_t* p = start_frame(m, kFrameLen6, RTE_ETHER_TYPE_IPV6);
    auto* ip = reinterpret_cast<rte_ipv6_hdr*>(p + sizeof(rte_ether_hdr));
    const uint16_t l4_len = kFrameLen6 - sizeof(rte_ether_hdr) - sizeof(rte_ipv6_hdr);
    ip->vtc_flow = rte_cpu_to_be_32(6u << 28);
    ip->payload_len = rte_cpu_to_be_16(l4_len);
    ip->proto = proto_;
    ip->hop_limits = 64;
    const auto s6 = v6_of(f.src), d6 = v6_of(f.dst);
    std::memcpy(&ip->src_addr, s6.data(), 16);
    std::memcpy(&ip->dst_addr, d6.data(), 16);
    write_l4(p + sizeof(rte_ether_hdr) + sizeof(rte_ipv6_hdr), f, flags, l4_len,
             [ip](const void* l4) { return rte_ipv6_udptcp_cksum(ip, l4); });
  }

  Flow established_flow(uint32_t f) const {
    return Flow{kClientBase + f / kFlowsPerIp, static_cast<uint16_t>(1024 + f % kFlowsPerIp),
                kVipBase + f % services_};
  }
  Flow new_flow(uint32_t g) const {
    return Flow{kNewClientBase + g / kFlowsPerIp, static_cast<uint16_t>(1024 + g % kFlowsPerIp),
                kVipBase + g % services_};
  }

  uint64_t sweep_visits = 0;  // connection entries the paced sweep visited

  // One poll of worker_main (dataplane/fastpath/worker.cc), port 0 / queue 0,
  // no redirect ring (one worker). kVirtualClock: w.now is the bench's
  // clock, advanced by poll_ticks_ in the uncounted part of each poll; the
  // poll still reads the TSC (into tsc_sink_), so that it executes the same
  // instructions with either clock.
  template <bool kVirtualClock>
  inline void poll_once() {
    dp::Worker& w = *d_.w;
    dp::Shared& sh = d_.sh;
    rte_mbuf* pkts[dp::kRxBurst];
    if constexpr (kVirtualClock) {
      tsc_sink_ = rte_rdtsc();
    } else {
      w.now = rte_rdtsc();
    }
    uint16_t n = rte_eth_rx_burst(sh.ports[0].port_id, 0, pkts, dp::kRxBurst);
    if (n) {
      dp::bump(w.counters.rx, n);
      dp::process_burst(w, pkts, n, false);
    }
    if (w.n_pending) dp::service_pending(w);
    dp::serve_mailbox(w);
    dp::flush_tx(w);
    // The sweep's work follows time, not packets: under callgrind (where
    // time runs tens of times slower) it is left out of the count, and the
    // timed runs report how many entries it visited per packet.
    if (RUNNING_ON_VALGRIND) CALLGRIND_TOGGLE_COLLECT;
    if constexpr (kVirtualClock) w.now += poll_ticks_;
    sweep_visits += dp::sweep_conns_paced(w);
    if (RUNNING_ON_VALGRIND) CALLGRIND_TOGGLE_COLLECT;
    w.tmpls.sweep(w.now, 16);
    rte_rcu_qsbr_quiescent(sh.qsbr, w.index);
    dp::bump(w.counters.polls);
    if (n) dp::bump(w.counters.busy_polls);
  }

  // The I/O-only baseline: rx burst -> tx burst, nothing else.
  inline void poll_io() {
    rte_mbuf* pkts[dp::kRxBurst];
    uint16_t n = rte_eth_rx_burst(d_.port_id, 0, pkts, dp::kRxBurst);
    uint16_t s = rte_eth_tx_burst(d_.port_id, 0, pkts, n);
    for (uint16_t i = s; i < n; ++i) rte_pktmbuf_free(pkts[i]);
  }

  // The l3fwd baseline: rx burst -> l3fwd_frame() on each frame -> tx burst
  // (next hop: the generator's MAC; a frame not forwarded is freed).
  inline void poll_l3fwd() {
    rte_mbuf* pkts[dp::kRxBurst];
    const uint16_t n = rte_eth_rx_burst(d_.port_id, 0, pkts, dp::kRxBurst);
    uint16_t k = 0;
    for (uint16_t i = 0; i < n; ++i) {
      rte_mbuf* m = pkts[i];
      if (l3fwd_frame(rte_pktmbuf_mtod(m, uint8_t*), m->data_len, kPeerMac, d_.sh.ports[0].mac) ==
          L3fwdVerdict::kForward) {
        pkts[k++] = m;
      } else {
        rte_pktmbuf_free(m);
        ++l3fwd_drops;
      }
    }
    const uint16_t s = rte_eth_tx_burst(d_.port_id, 0, pkts, k);
    for (uint16_t i = s; i < k; ++i) rte_pktmbuf_free(pkts[i]);
  }
  uint64_t l3fwd_drops = 0;

  // Takes every frame out of the ring (untimed) into spare_.
  void drain() {
    rte_mbuf* b[kBurst];
    for (;;) {
      uint16_t n = rte_eth_rx_burst(d_.port_id, 0, b, kBurst);
      if (!n) break;
      for (uint16_t i = 0; i < n; ++i) spare_.push_back(b[i]);
    }
  }

  rte_mbuf* take() {
    if (!spare_.empty()) {
      rte_mbuf* m = spare_.back();
      spare_.pop_back();
      return m;
    }
    return rte_pktmbuf_alloc(d_.pool);
  }

  // Runs one chunk: `gen(i)` gives flow and flags of frame i. Returns the
  // TSC cycles of the timed polls.
  template <typename Gen>
  uint64_t chunk(Poll mode, Gen&& gen) {
    rte_mbuf* fresh[kChunk];
    for (unsigned i = 0; i < kChunk; ++i) {
      rte_mbuf* m = take();
      if (!m) {
        fprintf(stderr, "vipd_bench: mbuf pool exhausted\n");
        std::exit(2);
      }
      auto [f, flags] = gen(i);
      write_frame(m, f, flags);
      fresh[i] = m;
    }
    uint16_t put = 0;
    while (put < kChunk) put += rte_eth_tx_burst(d_.port_id, 0, fresh + put, kChunk - put);
    if (RUNNING_ON_VALGRIND) CALLGRIND_TOGGLE_COLLECT;
    const uint64_t t0 = rte_rdtsc();
    if (mode == Poll::kIo) {
      for (unsigned k = 0; k < kPolls; ++k) poll_io();
    } else if (mode == Poll::kL3fwd) {
      for (unsigned k = 0; k < kPolls; ++k) poll_l3fwd();
    } else if (!virtual_clock_) {
      for (unsigned k = 0; k < kPolls; ++k) poll_once<false>();
    } else {
      for (unsigned k = 0; k < kPolls; ++k) poll_once<true>();
    }
    const uint64_t t1 = rte_rdtsc();
    if (RUNNING_ON_VALGRIND) CALLGRIND_TOGGLE_COLLECT;
    drain();
    return t1 - t0;
  }

  uint64_t tx() const { return d_.w->counters.tx.load(std::memory_order_relaxed); }
  uint64_t drops() const {
    uint64_t s = 0;
    for (unsigned r = 0; r < dp::kNumDropReasons; ++r) s += d_.w->counters.drops[r].load(std::memory_order_relaxed);
    return s;
  }
  std::string drop_detail() const {
    std::string s;
    for (unsigned r = 0; r < dp::kNumDropReasons; ++r) {
      uint64_t v = d_.w->counters.drops[r].load(std::memory_order_relaxed);
      if (v) s += std::string(s.empty() ? "" : ",") + dp::drop_reason_name(r) + "=" + std::to_string(v);
    }
    return s;
  }

  // Expires every connection in SYN_RECV (the new-connection rounds' flows;
  // established flows have 900 s left) — untimed: a full sweep `after_s`
  // ahead of the clock, which then goes back (with the TSC, the next poll
  // reads it again; the virtual clock is set back where it was).
  void expire_new_flows(uint64_t after_s = 100) {
    dp::Worker& w = *d_.w;
    const uint64_t now = virtual_clock_ ? w.now : rte_rdtsc();
    w.now = now + after_s * d_.sh.tsc_hz;
    dp::sweep_conns(w, w.conns.slots());
    if (w.v6) dp::sweep_conns6(w, w.v6->conns.capacity());
    if (virtual_clock_) w.now = now;
  }

  uint32_t rng_pick(uint32_t n) { return rng_.below(n); }

  BenchDataplane& d_;
  Rng rng_{0x5eed};
  uint32_t services_;
  uint8_t proto_;
  bool v6_;
  bool virtual_clock_;
  uint64_t poll_ticks_;  // --clock virtual: TSC ticks one poll advances w.now
  uint64_t tsc_sink_ = 0;  // --clock virtual: where each poll's TSC read goes
  std::vector<rte_mbuf*> spare_;
};

struct PhaseResult {
  std::vector<double> ns_per_pkt;  // one per repetition (cycles / packets)
  std::vector<double> chunk_ns;    // ns/packet of every timed chunk
  uint64_t packets = 0;
  uint64_t cycles = 0;
  uint64_t drops = 0;
  uint64_t sweep = 0;  // connection entries the paced sweep visited
  std::string drop_detail;
  // Records one chunk of kChunk packets; returns its cycles.
  uint64_t add(uint64_t cyc, double ns_per_cycle) {
    chunk_ns.push_back(static_cast<double>(cyc) * ns_per_cycle / kChunk);
    return cyc;
  }
};

std::string vec_json(const std::vector<double>& v) {
  std::string s = "[";
  char b[32];
  for (size_t i = 0; i < v.size(); ++i) {
    snprintf(b, sizeof b, "%s%.3f", i ? "," : "", v[i]);
    s += b;
  }
  return s + "]";
}

// The machine is shared and noisy: a chunk that was preempted is an outlier,
// so the headline is the median chunk (robust), with the mean beside it.
void add_phase(Json& j, const std::string& name, const PhaseResult& r) {
  const double med = median(r.chunk_ns);
  j.num(name + "_ns", med);
  j.num(name + "_ns_p10", percentile(r.chunk_ns, 10));
  j.num(name + "_ns_p90", percentile(r.chunk_ns, 90));
  j.num(name + "_ns_mean", r.packets ? static_cast<double>(r.cycles) * 1e9 / static_cast<double>(tsc_hz()) /
                                           static_cast<double>(r.packets)
                                     : 0);
  j.num(name + "_mpps", med > 0 ? 1e3 / med : 0);
  j.integer(name + "_packets", static_cast<int64_t>(r.packets));
  j.integer(name + "_drops", static_cast<int64_t>(r.drops));
  j.num(name + "_sweep_per_pkt", r.packets ? static_cast<double>(r.sweep) / static_cast<double>(r.packets) : 0);
  if (!r.drop_detail.empty()) j.str(name + "_drop_detail", r.drop_detail);
  j.raw(name + "_reps_ns", vec_json(r.ns_per_pkt));
}

}  // namespace

int run_pipeline(const Args& a) {
  const uint32_t services = static_cast<uint32_t>(a.num("services", 1));
  const uint32_t flows = static_cast<uint32_t>(a.num("flows", 1000));
  const uint64_t packets = a.num("packets", 1000000);  // per repetition
  const uint64_t nc_packets = a.num("newconn-packets", packets / 4);
  const unsigned reps = static_cast<unsigned>(a.num("reps", 5));
  const uint32_t backends = static_cast<uint32_t>(a.num("backends", 4));
  const std::string proto_s = a.str("proto", "tcp");
  const uint8_t proto = proto_s == "udp" ? dp::kProtoUdp : dp::kProtoTcp;
  const auto fwd = cp::parse_forward_method(a.str("fwd", "fnat")).value_or(cp::ForwardMethod::kFnat);
  const bool fnat = fwd == cp::ForwardMethod::kFnat;
  const int family = static_cast<int>(a.num("family", 4));
  if (family != 4 && family != 6) {
    fprintf(stderr, "vipd_bench: --family is 4 or 6\n");
    return 2;
  }
  const bool v6 = family == 6;
  const std::string phases = a.str("phases", v6 ? "fill,est,reply,newconn,baseline" : "fill,est,reply,newconn,baseline,l3fwd");
  auto want = [&](const char* p) { return phases.find(p) != std::string::npos; };
  const std::string clock_s = a.str("clock", RUNNING_ON_VALGRIND ? "virtual" : "tsc");
  if (clock_s != "tsc" && clock_s != "virtual") {
    fprintf(stderr, "vipd_bench: --clock is tsc or virtual\n");
    return 2;
  }
  const bool virtual_clock = clock_s == "virtual";

  EalOptions eo;
  eo.hugepages = a.flag("hugepages") || a.flag("huge-dir");
  eo.huge_dir = a.str("huge-dir", "");
  const uint64_t conn_cap = pipeline_conn_capacity(flows);
  const uint64_t dests = pipeline_dests(services, backends);
  eo.mem_mb = static_cast<unsigned>(
      a.num("mem", 192 + (conn_cap * 200 + dests * 96 + uint64_t{services} * 1024) / (1u << 20)));
  const bool prefault = !a.flag("no-prefault");
  std::string err;
  const int64_t rss_before_eal = rss_kb();
  if (!eal_start(eo, &err)) {
    fprintf(stderr, "vipd_bench: %s\n", err.c_str());
    return 2;
  }
  const int64_t rss_after_eal = rss_kb();

  DpOptions o;
  o.max_services = std::max<uint32_t>(o.max_services, services);
  o.max_dests = static_cast<uint32_t>(dests);
  o.conn_capacity = static_cast<uint32_t>(conn_cap);
  o.fnat = fnat;
  o.n_local_addrs = kPipelineLocalAddrs;
  o.resteer_attempts = static_cast<uint32_t>(a.num("resteer-attempts", o.resteer_attempts));
  o.rss_queues = static_cast<uint32_t>(a.num("rss-queues", 0));
  BenchDataplane d;
  const int64_t heap0 = dpdk_heap_used();
  if (!d.init(o, &err)) {
    fprintf(stderr, "vipd_bench: %s\n", err.c_str());
    return 2;
  }
  // --family 6: the IPv6 tables as DpdkDataplane::init_ipv6 sets them up
  // (a port address, the full-NAT IPv6 local addresses, the connection
  // table sized as the IPv4 one here), the endpoints' and clients'
  // neighbour entries learnt for an hour (never a packet parked on NDP).
  dp::Shared6 sh6;
  dp::Worker6 w6;
  if (v6) {
    dp::PortInfo& p = d.sh.ports[0];
    const auto pa = v6_of(kPortIp);
    std::memcpy(p.ip6, pa.data(), 16);
    p.has_ip6 = true;
    std::vector<std::array<uint8_t, 16>> locals;
    if (fnat)
      for (uint32_t i = 0; i < kPipelineLocalAddrs; ++i) locals.push_back(v6_of(kLocalBase + i));
    const uint64_t clients = flows / kFlowsPerIp + 1 + 16u * 64512u / kFlowsPerIp + 1;
    const uint32_t neigh = static_cast<uint32_t>(std::min<uint64_t>(2 * (dests + clients) + 64, 1u << 22));
    if (!dp::init_v6(d.sh, sh6, "bench6_", std::max<uint32_t>(services, 64), neigh, 3600 * d.sh.tsc_hz, locals, 0,
                     &err)) {
      fprintf(stderr, "vipd_bench: %s\n", err.c_str());
      return 2;
    }
    dp::init_worker6(*d.w, w6, static_cast<uint32_t>(conn_cap));
    const uint64_t now = rte_rdtsc();
    bool ok = true;
    for (uint64_t k = 0; k < uint64_t{services} * backends; ++k)
      ok &= sh6.neigh.update(v6_of(kDestBase + static_cast<uint32_t>(k)).data(), kGwMac, now);
    for (uint64_t c = 0; c < clients; ++c) {
      ok &= sh6.neigh.update(v6_of(kClientBase + static_cast<uint32_t>(c)).data(), kPeerMac, now);
      ok &= sh6.neigh.update(v6_of(kNewClientBase + static_cast<uint32_t>(c)).data(), kPeerMac, now);
    }
    if (!ok) {
      fprintf(stderr, "vipd_bench: IPv6 neighbour cache full\n");
      return 2;
    }
  }
  const int64_t heap_dp = dpdk_heap_used();

  // Publish the services (untimed here; benchmark 2 times the control plane).
  const int64_t libc0 = libc_heap_used();
  cp::ServiceTable table = make_table(services, backends, proto == dp::kProtoUdp ? cp::Protocol::kUdp : cp::Protocol::kTcp);
  if (v6) {
    // The same services with IPv6 addresses (v6_of each IPv4 one).
    cp::ServiceTable t6;
    t6.generation = table.generation;
    for (auto& [k, v] : table.services) {
      cp::VirtualService s = v;
      s.key.vip = cp::IpAddr::v6(v6_of(k.vip.v4()));
      for (auto& r : s.backends) r.ip = cp::IpAddr::v6(v6_of(r.ip.v4()));
      t6.services.emplace(s.key, std::move(s));
    }
    table = std::move(t6);
  }
  const int64_t libc_table = libc_heap_used() - libc0;
  const int64_t heap1 = dpdk_heap_used();
  const uint64_t tp0 = rte_rdtsc();
  {
    const cp::ServiceTable empty;
    cp::TableDiff diff = cp::TableDiff::compute(empty, table);
    if (!d.pub->apply(table, diff, true, &err)) {
      fprintf(stderr, "vipd_bench: publish: %s\n", err.c_str());
      return 2;
    }
  }
  const double publish_ms = static_cast<double>(rte_rdtsc() - tp0) * 1e3 / static_cast<double>(tsc_hz());
  const int64_t heap_services = dpdk_heap_used() - heap1;
  const int64_t libc_publisher = libc_heap_used() - libc0 - libc_table;

  const int64_t rss_setup = rss_kb();
  size_t prefaulted = 0;
  if (prefault && !eo.hugepages) prefaulted = prefault_dpdk_memory();
  const int64_t rss_prefaulted = rss_kb();

  // The benchmark thread is worker 0 for QSBR from here on.
  rte_rcu_qsbr_thread_register(d.sh.qsbr, 0);
  rte_rcu_qsbr_thread_online(d.sh.qsbr, 0);

  Bench b(d, services, proto, v6, virtual_clock);
  const double ns_per_cycle = 1e9 / static_cast<double>(tsc_hz());
  const uint8_t first_flags = proto == dp::kProtoTcp ? dp::kTcpSyn : 0;
  const uint8_t est_flags = proto == dp::kProtoTcp ? (dp::kTcpAck | dp::kTcpPsh) : 0;

  Json j;
  j.str("bench", "pipeline").integer("services", services).integer("flows", flows).integer("family", family);
  j.integer("backends", backends).str("proto", proto_s).str("fwd", cp::name(fwd));
  j.integer("reps", reps).integer("packets_per_rep", static_cast<int64_t>(packets));
  j.integer("hugepages", eo.hugepages ? 1 : 0).integer("valgrind", RUNNING_ON_VALGRIND ? 1 : 0);
  j.str("clock", clock_s);
  j.num("tsc_hz", static_cast<double>(tsc_hz()));
  j.num("publish_ms", publish_ms);
  j.integer("mem_mb", eo.mem_mb).integer("prefaulted_bytes", static_cast<int64_t>(prefaulted));

  // ---- warm-up (untimed): on this VM the first touch of a page costs
  // microseconds even after it was populated, so touch the connection
  // array (one full sweep) and the hash tables (a round of new flows,
  // expired again) before anything is timed. ----
  const uint32_t fnat_room = fnat ? 16u * 64512u - flows : UINT32_MAX;
  const uint32_t room = std::min<uint32_t>(d.w->conns.capacity() - flows, fnat_room);
  const uint32_t round = std::max<uint32_t>(kChunk, std::min<uint32_t>(room, 65536) / kChunk * kChunk - kChunk);
  if (!a.flag("no-warmup")) {
    Bench wb(d, services, proto, v6, virtual_clock);
    const uint8_t first = proto == dp::kProtoTcp ? dp::kTcpSyn : 0;
    for (int pass = 0; pass < 2; ++pass) {
      uint32_t g = 0;
      while (g < round) wb.chunk(Poll::kPipeline, [&](unsigned) { return std::pair{wb.new_flow(g++), first}; });
      wb.expire_new_flows(1000);  // no other flows exist yet: expire them all
    }
    j.integer("warmup_flows", round);
  }

  // ---- fill: one first packet per flow ----
  {
    PhaseResult r;
    const uint64_t tx0 = b.tx(), dr0 = b.drops(), sw0 = b.sweep_visits;
    uint32_t next = 0;
    if (RUNNING_ON_VALGRIND) CALLGRIND_ZERO_STATS;
    while (next < flows) {
      r.cycles += r.add(b.chunk(Poll::kPipeline, [&](unsigned) {
        uint32_t f = next < flows ? next++ : b.rng_pick(flows);
        return std::pair{b.established_flow(f), first_flags};
      }), ns_per_cycle);
      r.packets += kChunk;
    }
    if (RUNNING_ON_VALGRIND) CALLGRIND_DUMP_STATS_AT("fill");
    r.ns_per_pkt.push_back(static_cast<double>(r.cycles) * ns_per_cycle / static_cast<double>(r.packets));
    r.drops = b.drops() - dr0;
    r.sweep = b.sweep_visits - sw0;
    r.drop_detail = b.drop_detail();
    (void)tx0;
    if (want("fill")) {
      add_phase(j, "fill", r);
      std::vector<double> first(r.chunk_ns.begin(), r.chunk_ns.begin() + std::min<size_t>(16, r.chunk_ns.size()));
      j.raw("fill_first_chunks_ns", vec_json(first));
    }
    j.integer("conn_entries", v6 ? w6.conns.size() : d.w->conns.size());
  }
  // The endpoint's direction of flow f (to the full-NAT local address; nat:
  // to the client), from its connection entry; false: it has none.
  auto reverse_flow = [&](uint32_t f, Flow& out) {
    const Flow c = b.established_flow(f);
    bool is_reply = false;
    if (v6) {
      const auto s6 = v6_of(c.src), d6 = v6_of(c.dst);
      const dp::Conn6* conn = w6.conns.lookup(dp::make_key6(s6.data(), c.sport, d6.data(), kVipPort, proto), &is_reply);
      if (!conn || is_reply) return false;
      out = Flow{v4_of(conn->daddr), conn->dport, v4_of(conn->laddr), conn->lport};
      return true;
    }
    const dp::Conn* conn = d.w->conns.lookup(dp::make_key(c.src, c.sport, c.dst, kVipPort, proto), &is_reply);
    if (!conn || is_reply) return false;
    out = Flow{conn->daddr, conn->dport, conn->laddr, conn->lport};
    return true;
  };
  // Complete the handshakes as TCP does (untimed in effect: not reported):
  // the endpoint's SYN-ACK, then the client's ACK.
  if (proto == dp::kProtoTcp) {
    uint32_t missing = flows;  // a flow the fill left without a connection
    for (const uint8_t flags : {uint8_t(dp::kTcpSyn | dp::kTcpAck), uint8_t(dp::kTcpAck)}) {
      uint32_t next = 0;
      while (next < flows && missing == flows)
        b.chunk(Poll::kPipeline, [&](unsigned) {
          const uint32_t f = next < flows ? next++ : b.rng_pick(flows);
          Flow fl = b.established_flow(f);
          if (flags != dp::kTcpAck && !reverse_flow(f, fl)) missing = f;  // its SYN-ACK: the client's flow, dropped
          return std::pair{fl, flags};
        });
    }
    if (missing != flows) {
      fprintf(stderr, "vipd_bench: flow %u has no connection\n", missing);
      return 2;
    }
  }
  const int64_t rss_flows = rss_kb();

  // ---- est ----
  if (want("est")) {
    PhaseResult r;
    const uint64_t dr0 = b.drops();
    const uint64_t sw0 = b.sweep_visits;
    if (RUNNING_ON_VALGRIND) CALLGRIND_ZERO_STATS;
    for (unsigned rep = 0; rep < reps; ++rep) {
      uint64_t cyc = 0, n = 0;
      while (n < packets) {
        cyc += r.add(b.chunk(Poll::kPipeline, [&](unsigned) { return std::pair{b.established_flow(b.rng_pick(flows)), est_flags}; }), ns_per_cycle);
        n += kChunk;
      }
      r.cycles += cyc;
      r.packets += n;
      r.ns_per_pkt.push_back(static_cast<double>(cyc) * ns_per_cycle / static_cast<double>(n));
    }
    if (RUNNING_ON_VALGRIND) CALLGRIND_DUMP_STATS_AT("est");
    r.drops = b.drops() - dr0;
    r.sweep = b.sweep_visits - sw0;
    if (r.drops) r.drop_detail = b.drop_detail();
    add_phase(j, "est", r);
  }

  // ---- reply: the endpoints' packets of the established flows ----
  if (want("reply")) {
    std::vector<Flow> rev(flows);
    for (uint32_t f = 0; f < flows; ++f)
      if (!reverse_flow(f, rev[f])) {
        fprintf(stderr, "vipd_bench: flow %u has no connection\n", f);
        return 2;
      }
    PhaseResult r;
    const uint64_t dr0 = b.drops();
    const uint64_t sw0 = b.sweep_visits;
    if (RUNNING_ON_VALGRIND) CALLGRIND_ZERO_STATS;
    for (unsigned rep = 0; rep < reps; ++rep) {
      uint64_t cyc = 0, n = 0;
      while (n < packets) {
        cyc += r.add(b.chunk(Poll::kPipeline, [&](unsigned) { return std::pair{rev[b.rng_pick(flows)], est_flags}; }), ns_per_cycle);
        n += kChunk;
      }
      r.cycles += cyc;
      r.packets += n;
      r.ns_per_pkt.push_back(static_cast<double>(cyc) * ns_per_cycle / static_cast<double>(n));
    }
    if (RUNNING_ON_VALGRIND) CALLGRIND_DUMP_STATS_AT("reply");
    r.drops = b.drops() - dr0;
    r.sweep = b.sweep_visits - sw0;
    if (r.drops) r.drop_detail = b.drop_detail();
    add_phase(j, "reply", r);
  }

  // ---- newconn (TCP SYNs, or first UDP datagrams, of new flows) ----
  if (want("newconn")) {
    PhaseResult r;
    const uint64_t dr0 = b.drops();
    const uint64_t sw0 = b.sweep_visits;
    if (RUNNING_ON_VALGRIND) CALLGRIND_ZERO_STATS;
    for (unsigned rep = 0; rep < reps; ++rep) {
      uint64_t cyc = 0, n = 0;
      while (n < nc_packets) {
        uint32_t g = 0;
        while (g < round && n < nc_packets) {
          cyc += r.add(b.chunk(Poll::kPipeline, [&](unsigned) { return std::pair{b.new_flow(g++), first_flags}; }), ns_per_cycle);
          n += kChunk;
        }
        if (proto == dp::kProtoTcp) {
          b.expire_new_flows();
        } else {
          // UDP flows cannot be told apart by age: no rounds beyond the first.
          break;
        }
      }
      r.cycles += cyc;
      r.packets += n;
      r.ns_per_pkt.push_back(static_cast<double>(cyc) * ns_per_cycle / static_cast<double>(n));
      if (proto != dp::kProtoTcp) break;
    }
    if (RUNNING_ON_VALGRIND) CALLGRIND_DUMP_STATS_AT("newconn");
    r.drops = b.drops() - dr0;
    r.sweep = b.sweep_visits - sw0;
    if (r.drops) r.drop_detail = b.drop_detail();
    add_phase(j, "newconn", r);
    j.integer("newconn_round", round);
  }

  // ---- baseline: the same frames, rx burst -> tx burst ----
  if (want("baseline")) {
    PhaseResult r;
    if (RUNNING_ON_VALGRIND) CALLGRIND_ZERO_STATS;
    for (unsigned rep = 0; rep < reps; ++rep) {
      uint64_t cyc = 0, n = 0;
      while (n < packets) {
        cyc += r.add(b.chunk(Poll::kIo, [&](unsigned) { return std::pair{b.established_flow(b.rng_pick(flows)), est_flags}; }), ns_per_cycle);
        n += kChunk;
      }
      r.cycles += cyc;
      r.packets += n;
      r.ns_per_pkt.push_back(static_cast<double>(cyc) * ns_per_cycle / static_cast<double>(n));
    }
    if (RUNNING_ON_VALGRIND) CALLGRIND_DUMP_STATS_AT("baseline");
    add_phase(j, "baseline", r);
  }

  // ---- l3fwd: the same frames, what DPDK's l3fwd does to each ----
  if (want("l3fwd")) {
    PhaseResult r;
    const uint64_t dr0 = b.l3fwd_drops;
    if (RUNNING_ON_VALGRIND) CALLGRIND_ZERO_STATS;
    for (unsigned rep = 0; rep < reps; ++rep) {
      uint64_t cyc = 0, n = 0;
      while (n < packets) {
        cyc += r.add(b.chunk(Poll::kL3fwd, [&](unsigned) { return std::pair{b.established_flow(b.rng_pick(flows)), est_flags}; }), ns_per_cycle);
        n += kChunk;
      }
      r.cycles += cyc;
      r.packets += n;
      r.ns_per_pkt.push_back(static_cast<double>(cyc) * ns_per_cycle / static_cast<double>(n));
    }
    if (RUNNING_ON_VALGRIND) CALLGRIND_DUMP_STATS_AT("l3fwd");
    r.drops = b.l3fwd_drops - dr0;
    add_phase(j, "l3fwd", r);
  }

  // ---- memory ----
  const int64_t capacity = d.w->conns.capacity();
  j.integer("conn_capacity", conn_cap);
  j.integer("conn_table_bytes", d.conn_table_bytes);
  j.num("conn_bytes_per_entry", static_cast<double>(d.conn_table_bytes) / static_cast<double>(capacity));
  j.integer("conn_struct_bytes", sizeof(dp::Conn));
  j.integer("service_struct_bytes", sizeof(dp::Service));
  j.integer("destref_struct_bytes", sizeof(dp::DestRef));
  j.integer("worker_state_bytes", d.worker_state_bytes);
  j.integer("dp_heap_setup_bytes", heap_dp - heap0);
  j.integer("service_heap_bytes", heap_services);
  j.num("service_bytes_each", static_cast<double>(heap_services) / services);
  j.integer("cp_table_bytes", libc_table);
  j.integer("cp_publisher_bytes", libc_publisher);
  j.integer("rss_kb_before_eal", rss_before_eal);
  j.integer("rss_kb_after_eal", rss_after_eal);
  j.integer("rss_kb_setup", rss_setup);
  j.integer("rss_kb_prefaulted", rss_prefaulted);
  j.integer("rss_kb_with_flows", rss_flows);
  j.integer("rss_kb_hwm", rss_kb("VmHWM:"));
  if (o.rss_queues > 1) j.integer("fnat_unsteered", static_cast<int64_t>(d.w->counters.fnat_unsteered.load()));
  j.integer("dpdk_heap_total_bytes", dpdk_heap_used());

  printf("%s\n", j.dump().c_str());
  fflush(stdout);
  rte_rcu_qsbr_thread_offline(d.sh.qsbr, 0);
  if (v6) dp::free_worker6_pending(w6);
  return 0;
}

}  // namespace vipd::bench
