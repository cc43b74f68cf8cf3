// libFuzzer target: whole worker bursts on fuzzed frames.
//
// Set up once per process like the dataplane unit tests do (EAL with
// --no-huge --no-pci and two net_ring vdevs that loop every tx queue back to
// the rx queue of the same index; Shared, two real Workers, the real
// Publisher with a published ServiceTable). No lcore is launched: the harness
// calls process_burst / flush_tx / service_pending / sweep_conns itself with a
// controlled clock, and moves redirected packets between the workers' rings.
//
// Input: one byte selecting the setup (bit 0: 0 = fnat, 1 = nat; bit 1: after
// the first burst the control plane removes backend 10.1.0.12 from every
// service, so connections pinned to it expire: expire_nodest_conn), then
// records [meta:1][len:2, big endian][len bytes] (the last one may be short):
//   meta bit 0   received on port 0 (clients) or port 1 (backends)
//   meta bit 1   received by worker 0 or 1
//   meta bit 2   harness fixes the IPv4 header checksum
//   meta bit 3   harness fixes the TCP/UDP/ICMP checksum (IPv6: TCP/UDP/ICMPv6)
//   meta bit 4   the burst ends after this frame
//   meta bits 5-7 clock advance before the next burst (0 .. 1000 s)
// At most kMaxFrames frames per input; at most kBurst per worker and burst.
//
// Invariants checked after every input (abort() on violation):
//  - every frame that comes out is Ethernet with vipd's MAC as source and is
//    either ARP, IPv4 that parses, or IPv6 that parses and is TCP/UDP or an
//    ICMPv6 echo reply, Neighbor Advertisement or Solicitation, or error
//    (destination unreachable, packet too big, time exceeded, parameter
//    problem: originated or translated for a flow) whose checksum verifies; IPv4 header checksum verifies; TCP/UDP/
//    ICMP checksum verifies unless an input with the same IP id and protocol
//    had a bad one (NAT updates checksums incrementally, so it keeps a bad
//    one bad: that is correct);
//  - accounting: frames out - ARP requests vipd originated + drops (all
//    reasons) + ARP replies consumed by learning == frames in; the tx counter
//    equals the frames read back; ARP requests seen == arp_requests counter;
//  - nothing left behind: no pending packet, no buffered tx, rings empty,
//    every mbuf back in the pool; after expiring all connections the
//    connection table is empty, active_flows is 0 and no PROXY protocol
//    entry is in use (services 10.96.0.100:8443 and 10.96.0.102:8444 send
//    the header), nor any saved SYN (re-steering).
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_ring.h>
#include <sched.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/fastpath/ipv6.h"
#include "dataplane/fastpath/packet.h"
#include "dataplane/fastpath/worker.h"
#include "dataplane/fastpath/worker_internal.h"
#include "dataplane/publish/publisher.h"
#include "tests/unit/dataplane/shared_fixture.h"

namespace vipd::dp::test {
// test_util.h declares these for the unit tests' main.cc.
bool g_eal_ok = false;
std::string g_eal_error;
}  // namespace vipd::dp::test

namespace {

using namespace vipd::dp;
using namespace vipd::dp::test;
using vipd::cp::Protocol;

constexpr unsigned kMaxFrames = 64;
constexpr unsigned kPoolSize = 4095;
constexpr uint16_t kQueues = 2;
constexpr uint32_t kWorkers = 2;
constexpr uint64_t kT0 = 1ull << 40;

const uint32_t kPort0Ip = ip4(10, 0, 0, 1), kPort1Ip = ip4(10, 1, 0, 1);
const uint32_t kGw0 = ip4(10, 0, 0, 254);
const uint8_t kPort0Ip6[16] = {0xfd, 0x00, 0, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};  // fd00:10::1
// IPv6 forwarding: port 1 fd00:244::1, full-NAT local address fd00:244::ff:1,
// backends fd00:244::1:15 and ::2:88 (known neighbours) and ::3:12 (never
// answers), VIPs fd00:10:96::100 and ::101 (no endpoints).
vipd::cp::IpAddr a6(std::initializer_list<uint16_t> g) {
  std::array<uint8_t, 16> b{};
  size_t i = 0;
  for (uint16_t x : g) {
    b[i++] = static_cast<uint8_t>(x >> 8);
    b[i++] = static_cast<uint8_t>(x);
  }
  return vipd::cp::IpAddr::v6(b);
}
const vipd::cp::IpAddr kPort1Ip6 = a6({0xfd00, 0x244, 0, 0, 0, 0, 0, 1}), kLocal6 = a6({0xfd00, 0x244, 0, 0, 0, 0, 0xff, 1});
const vipd::cp::IpAddr kClient6 = a6({0xfd00, 0x10, 0, 0, 0, 0, 0, 0x10});
const vipd::cp::IpAddr kVip6 = a6({0xfd00, 0x10, 0x96, 0, 0, 0, 0, 0x100}), kVipEmpty6 = a6({0xfd00, 0x10, 0x96, 0, 0, 0, 0, 0x101});
const vipd::cp::IpAddr kB16 = a6({0xfd00, 0x244, 0, 0, 0, 0, 1, 0x15}), kB26 = a6({0xfd00, 0x244, 0, 0, 0, 0, 2, 0x88}),
                 kB36 = a6({0xfd00, 0x244, 0, 0, 0, 0, 3, 0x12});
const uint32_t kLocal = ip4(10, 1, 0, 100), kLocal2 = ip4(10, 1, 0, 101);
const uint32_t kClient = ip4(10, 0, 0, 10);
const uint32_t kVip = ip4(10, 96, 0, 100), kVipEmpty = ip4(10, 96, 0, 101), kVipMh = ip4(10, 96, 0, 102),
               kVipPersist = ip4(10, 96, 0, 103);
const uint32_t kB1 = ip4(10, 1, 0, 11), kB2 = ip4(10, 1, 0, 12), kB3 = ip4(10, 1, 0, 13);
const MacAddr kPortMac[2] = {{0x02, 0x00, 0x00, 0x00, 0xa0, 0x00}, {0x02, 0x00, 0x00, 0x00, 0xa1, 0x00}};
const MacAddr kClientMac{0x02, 0xc1, 0, 0, 0, 0x10};
const MacAddr kB1Mac{0x02, 0xb0, 0, 0, 0, 0x11}, kB2Mac{0x02, 0xb0, 0, 0, 0, 0x12};

[[noreturn]] void fail(const char* what, const std::string& detail = "") {
  fprintf(stderr, "\n*** fuzz_packet invariant violated: %s %s\n", what, detail.c_str());
  abort();
}
#define CHECK(cond, detail)                 \
  do {                                      \
    if (!(cond)) fail(#cond, (detail));     \
  } while (0)

rte_mempool* g_pool = nullptr;
uint16_t g_pid[2];

struct Setup {
  std::unique_ptr<SharedHolder> holder;
  std::vector<std::unique_ptr<Worker>> workers;
  std::unique_ptr<Publisher> pub;
  std::vector<uint16_t> fnat_init[kWorkers][kMaxLocalAddrs];  // fresh pool stacks
  uint32_t fnat_top[kWorkers][kMaxLocalAddrs]{};
  std::unique_ptr<Shared6> v6;  // IPv6 forwarding
  std::vector<std::unique_ptr<Worker6>> w6;
  std::vector<uint16_t> fnat6_init[kWorkers];
  uint32_t fnat6_top[kWorkers]{};
  vipd::cp::ServiceTable full, reduced;  // reduced: without kB2
  bool is_reduced = false;
  Shared& sh() { return holder->sh; }
  void publish(bool want_reduced) {
    const auto& prev = is_reduced ? reduced : full;
    const auto& next = want_reduced ? reduced : full;
    std::string err;
    if (!pub->apply(next, vipd::cp::TableDiff::compute(prev, next), false, &err)) fail("publish", err);
    is_reduced = want_reduced;
  }
};
Setup g_setup[2];

std::vector<std::string> lcore_args() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0 || CPU_ISSET(0, &set)) return {"-l", "0"};
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) return {"--lcores", "0@" + std::to_string(c)};
  return {"-l", "0"};
}

void init_eal_and_ports() {
  std::vector<std::string> args{"fuzz_packet", "--no-huge", "-m", "256", "--no-shconf", "--no-pci",
                                "--no-telemetry", "--log-level=*:error", "--vdev", "net_ring0",
                                "--vdev", "net_ring1"};
  for (auto& a : lcore_args()) args.push_back(a);
  std::vector<char*> av;
  for (auto& a : args) av.push_back(a.data());
  av.push_back(nullptr);
  if (getuid() != 0 && getenv("XDG_RUNTIME_DIR") == nullptr) {
    static char tmpl[] = "/tmp/fuzz_packet.XXXXXX";
    if (mkdtemp(tmpl) != nullptr) setenv("XDG_RUNTIME_DIR", tmpl, 1);
  }
  if (rte_eal_init(static_cast<int>(args.size()), av.data()) < 0)
    fail("rte_eal_init failed", rte_strerror(rte_errno));
  g_pool = rte_pktmbuf_pool_create("fz_pool", kPoolSize, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, 0);
  if (!g_pool) fail("rte_pktmbuf_pool_create", rte_strerror(rte_errno));
  const char* names[2] = {"net_ring0", "net_ring1"};
  for (int i = 0; i < 2; ++i) {
    if (rte_eth_dev_get_port_by_name(names[i], &g_pid[i]) != 0) fail("no ethdev", names[i]);
    rte_eth_conf conf{};
    int rc = rte_eth_dev_configure(g_pid[i], kQueues, kQueues, &conf);
    for (uint16_t q = 0; rc == 0 && q < kQueues; ++q) {
      rc = rte_eth_rx_queue_setup(g_pid[i], q, 1024, 0, nullptr, g_pool);
      if (rc == 0) rc = rte_eth_tx_queue_setup(g_pid[i], q, 1024, 0, nullptr);
    }
    if (rc == 0) rc = rte_eth_dev_start(g_pid[i]);
    if (rc != 0) fail("port setup", names[i]);
  }
}

void build_setup(Setup& s, Forward fwd, uint32_t conn_capacity) {
  s.holder = std::make_unique<SharedHolder>();
  std::string err;
  if (!s.holder->init(32, 64, kWorkers, &err)) fail("shared init", err);
  Shared& sh = s.sh();
  for (int i = 0; i < 2; ++i) {
    sh.ports[i].port_id = g_pid[i];
    std::copy(kPortMac[i].begin(), kPortMac[i].end(), sh.ports[i].mac);
    sh.ports[i].ip = i == 0 ? kPort0Ip : kPort1Ip;
    sh.ports[i].mask = 0xffffff00u;
  }
  sh.ports[0].has_ip6 = true;
  std::copy(kPort0Ip6, kPort0Ip6 + 16, sh.ports[0].ip6);
  sh.ports[0].gateway = kGw0;  // clients outside 10.0.0.0/24 go via an unresolved gateway
  sh.n_ports = 2;
  sh.forward = fwd;
  sh.n_local_addrs = fwd == Forward::kFnat ? 2 : 0;
  sh.local_addrs[0] = kLocal;
  sh.local_addrs[1] = kLocal2;
  sh.mh_table_size = 251;
  sh.resteer_attempts = 3;
  for (uint32_t i = 0; i < kWorkers; ++i) {
    auto w = std::make_unique<Worker>();
    w->index = i;
    w->sh = &sh;
    w->pool = g_pool;
    if (!w->conns.init(uniq("fzconns_"), conn_capacity, 0, &err, sh.local_addrs, sh.n_local_addrs)) fail("conns", err);
    if (!w->tmpls.init(uniq("fztmpl_"), 1024, 0, &err)) fail("tmpls", err);
    // A small PROXY protocol pool: proxy_pool_full is reachable.
    if (!w->proxy.init(uniq("fzproxy_"), 4, 0, &err)) fail("proxy pool", err);
    // Re-steering on, with a small pool (resteer_pool_full reachable) and no
    // timer calls (resteer_timers sends SYNs no input frame accounts for):
    // RSTs, ICMP errors and retransmitted SYNs of connections waiting for
    // their SYN-ACK re-steer them, one frame in, one out.
    if (!w->syn.init(uniq("fzsyn_"), 4, 0, &err)) fail("syn pool", err);
    // With the IPv6 extension area (IPv6 forwarding is on below): a SYN's
    // extension headers are kept and re-sent.
    if (!w->syn.init_ext6(uniq("fzsynx_"), 0, &err)) fail("syn pool ext6", err);
    w->sched = static_cast<SchedState*>(rte_zmalloc("fz_sched", sizeof(SchedState) * sh.max_services, 64));
    w->dest_counters = static_cast<DestCounters*>(rte_zmalloc("fz_dctr", sizeof(DestCounters) * sh.max_dests, 64));
    if (!w->sched || !w->dest_counters) fail("rte_zmalloc");
    sh.dest_counters[i] = w->dest_counters;
    for (uint32_t a = 0; a < sh.n_local_addrs; ++a) {
      FnatPool& fp = w->fnat[a];
      fp.ports = static_cast<uint16_t*>(rte_zmalloc("fz_fnat", sizeof(uint16_t) * 65536, 64));
      if (!fp.ports) fail("rte_zmalloc fnat");
      // Small pools (16 + 8 ports per worker) so that exhaustion is reachable.
      const uint32_t lo = a == 0 ? 65504 : 65520;
      for (uint32_t port = 65535; port >= lo; --port)
        if (port % kWorkers == i) fp.ports[fp.top++] = static_cast<uint16_t>(port);
      s.fnat_init[i][a].assign(fp.ports, fp.ports + fp.top);
      s.fnat_top[i][a] = fp.top;
    }
    sh.rings[i] = rte_ring_create(uniq("fzredir_").c_str(), 1024, 0, RING_F_SC_DEQ);
    if (!sh.rings[i]) fail("rte_ring_create");
    s.workers.push_back(std::move(w));
  }
  // IPv6 forwarding (v6_tables.h), with a small full-NAT port pool.
  sh.ports[1].has_ip6 = true;
  std::copy(kPort1Ip6.v6_bytes().begin(), kPort1Ip6.v6_bytes().end(), sh.ports[1].ip6);
  s.v6 = std::make_unique<Shared6>();
  if (!init_v6(sh, *s.v6, uniq("fz6_"), 64, 256, 60 * sh.tsc_hz, {kLocal6.v6_bytes()}, 0, &err)) fail("init_v6", err);
  for (uint32_t i = 0; i < kWorkers; ++i) {
    s.w6.push_back(std::make_unique<Worker6>());
    init_worker6(*s.workers[i], *s.w6.back(), conn_capacity);
    FnatPool6& fp = s.w6.back()->fnat[0];
    fp.top = 0;
    for (uint32_t port = 65535; port >= 65520; --port)
      if (port % kWorkers == i) fp.ports[fp.top++] = static_cast<uint16_t>(port);
    s.fnat6_init[i].assign(fp.ports.begin(), fp.ports.begin() + fp.top);
    s.fnat6_top[i] = fp.top;
  }
  s.pub = std::make_unique<Publisher>(sh);
  vipd::cp::ServiceTable t;
  put(t, vsvc(kVip6, 8080, Protocol::kTcp, {rs(kB16, 80), rs(kB26, 80)}));
  put(t, vsvc(kVip6, 5353, Protocol::kUdp, {rs(kB16, 53)}));
  put(t, vsvc(kVip6, 81, Protocol::kTcp, {rs(kB36, 80)}));
  auto persist6 = vsvc(kVip6, 443, Protocol::kTcp, {rs(kB16, 443), rs(kB26, 443)}, Sched::kSh);
  persist6.persistence_timeout_s = 30;
  put(t, persist6);
  put(t, vsvc(kVipEmpty6, 80, Protocol::kTcp, {}));
  put(t, vsvc(kVipEmpty6, 53, Protocol::kUdp, {}));
  auto b3 = rs(kB3, 80);
  auto quiesced = rs(kB3, 8443, 0);  // terminating: weight 0
  put(t, vsvc(kVip, 8080, Protocol::kTcp, {rs(kB1, 80), rs(kB2, 80)}));
  put(t, vsvc(kVip, 5353, Protocol::kUdp, {rs(kB1, 53), rs(kB2, 53, 3)}, Sched::kWrr));
  put(t, vsvc(kVipEmpty, 80, Protocol::kTcp, {}));
  put(t, vsvc(kVipEmpty, 53, Protocol::kUdp, {}));
  auto dropper = vsvc(kVipEmpty, 81, Protocol::kTcp, {});
  dropper.when_empty = vipd::cp::WhenEmpty::kDrop;
  put(t, dropper);
  put(t, vsvc(kVipMh, 80, Protocol::kTcp, {rs(kB1, 80), rs(kB2, 80), b3}, Sched::kMh));
  put(t, vsvc(kVipMh, 443, Protocol::kTcp, {rs(kB1, 443), quiesced}, Sched::kLc));
  auto persist = vsvc(kVipPersist, 443, Protocol::kTcp, {rs(kB1, 443), rs(kB2, 443, 2)}, Sched::kWlc);
  persist.persistence_timeout_s = 30;
  put(t, persist);
  auto persist_udp = vsvc(kVipPersist, 53, Protocol::kUdp, {rs(kB1, 53), rs(kB2, 53)}, Sched::kSh);
  persist_udp.persistence_timeout_s = 10;
  put(t, persist_udp);
  // PROXY protocol (full NAT, TCP: the header in front of the first client
  // segment; seq/ack/SACK shifted; the MSS of SYN-ACKs lowered).
  auto proxy_v1 = vsvc(kVip, 8443, Protocol::kTcp, {rs(kB1, 80), rs(kB2, 80)});
  proxy_v1.proxy_protocol = vipd::cp::ProxyProtocol::kV1;
  put(t, proxy_v1);
  auto proxy_v2 = vsvc(kVipMh, 8444, Protocol::kTcp, {rs(kB1, 80), rs(kB2, 80)}, Sched::kMh);
  proxy_v2.proxy_protocol = vipd::cp::ProxyProtocol::kV2;
  put(t, proxy_v2);
  if (!s.pub->apply(t, vipd::cp::TableDiff{}, true, &err)) fail("publish", err);
  s.full = t;
  s.reduced = t;
  for (auto& [k, v] : s.reduced.services)
    std::erase_if(v.backends, [](const vipd::cp::RealServer& r) { return r.ip == kB2 || r.ip == kB26; });
}

// Receiver-side checks (RFC 1071): the sum over the covered bytes, checksum
// field included, folds to 0xffff.
bool ip_header_ok(const uint8_t* f) { return ref_fold(ref_add(0, f + kEth, ihl_of(f))) == 0xffff; }

// L4 checksum of a frame that parse_frame accepted as IPv4 (p gives bounds).
bool l4_ok(const uint8_t* f, const Parsed& p) {
  const uint8_t* l4 = f + p.l4_off;
  if (p.proto == kProtoIcmp) return ref_fold(ref_add(0, l4, p.l4_len)) == 0xffff;
  if (p.proto != kProtoTcp && p.proto != kProtoUdp) return true;
  if (p.proto == kProtoUdp && get16(l4 + 6) == 0) return true;  // no checksum
  uint8_t ph[12];
  put32(ph, p.src);
  put32(ph + 4, p.dst);
  ph[8] = 0;
  ph[9] = p.proto;
  put16(ph + 10, p.l4_len);
  return ref_fold(ref_add(ref_add(0, ph, 12), l4, p.l4_len)) == 0xffff;
}

// The sum over the IPv6 pseudo header of a parsed packet (RFC 8200 8.1).
uint64_t ref_pseudo6(const Parsed6& p) {
  uint8_t ph[40] = {};
  std::memcpy(ph, p.src, 16);
  std::memcpy(ph + 16, p.dst, 16);
  put32(ph + 32, p.l4_len);
  ph[39] = p.proto;
  return ref_add(0, ph, sizeof ph);
}
size_t cksum_off6(uint8_t proto) {
  return proto == kProtoTcp ? 16 : proto == kProtoUdp ? 6 : proto == kProtoIcmp6 ? 2 : 0;
}

// IPv6: the L4 checksum of a packet that parse_ipv6 accepts (it locates the
// L4 header behind the extension chain; the sum is the harness's own).
void fix_checksums6(uint8_t* f, size_t len) {
  Parsed6 p;
  if (!parse_ipv6(f, len, &p)) return;
  const size_t off = cksum_off6(p.proto);
  if (off == 0 || p.l4_len < off + 2) return;
  uint8_t* l4 = f + p.l4_off;
  l4[off] = l4[off + 1] = 0;
  uint16_t c = static_cast<uint16_t>(~ref_fold(ref_add(ref_pseudo6(p), l4, p.l4_len)));
  if (p.proto == kProtoUdp && c == 0) c = 0xffff;
  put16(l4 + off, c);
}

// Harness fix-ups (bounds checked: the frame is arbitrary).
void fix_checksums(uint8_t* f, size_t len, bool fix_ip, bool fix_l4) {
  if (len >= kEth && get16(f + 12) == 0x86dd) {
    if (fix_l4) fix_checksums6(f, len);
    return;
  }
  if (len < kEth + 20 || get16(f + 12) != 0x0800) return;
  const size_t ihl = (f[kEth] & 0x0f) * 4u;
  if (ihl < 20 || kEth + ihl > len) return;
  if (fix_l4) {
    const size_t total = get16(f + kEth + 2);
    if (total >= ihl && kEth + total <= len) {
      uint8_t* l4 = f + kEth + ihl;
      const size_t l4len = total - ihl;
      const uint8_t proto = f[kEth + 9];
      const uint32_t src = get32(f + kEth + 12), dst = get32(f + kEth + 16);
      if (proto == kProtoTcp && l4len >= 18) {
        put16(l4 + 16, ref_l4_cksum(src, dst, proto, l4, l4len, 16));
      } else if (proto == kProtoUdp && l4len >= 8) {
        put16(l4 + 6, ref_l4_cksum(src, dst, proto, l4, l4len, 6));
      } else if (proto == kProtoIcmp && l4len >= 4) {
        l4[2] = l4[3] = 0;
        put16(l4 + 2, ref_cksum(l4, l4len));
      }
    }
  }
  if (fix_ip) put16(f + kEth + 10, ref_ip_cksum(f + kEth, ihl));
}

struct InputInfo {
  uint16_t ip_id;
  uint8_t proto;
  bool l4_valid;
};

struct Totals {
  uint64_t tx = 0, drops = 0, arp_requests = 0, nd_learned = 0;
};
Totals totals(Setup& s) {
  Totals t;
  for (auto& w : s.workers) {
    t.tx += w->counters.tx.load();
    t.arp_requests += w->counters.arp_requests.load();
    t.nd_learned += w->counters.nd_learned.load();
    for (unsigned r = 0; r < kNumDropReasons; ++r) t.drops += w->counters.drops[r].load();
  }
  return t;
}

std::string drop_summary(Setup& s) {
  std::string out;
  for (unsigned r = 0; r < kNumDropReasons; ++r) {
    uint64_t v = 0;
    for (auto& w : s.workers) v += w->counters.drops[r].load();
    if (v) out += std::string(" ") + drop_reason_name(r) + "=" + std::to_string(v);
  }
  return out;
}

std::string hex(const uint8_t* f, size_t len) {
  static const char* d = "0123456789abcdef";
  std::string out = "\n  frame:";
  for (size_t i = 0; i < len && i < 256; ++i) {
    if (i % 32 == 0) out += "\n   ";
    out += d[f[i] >> 4];
    out += d[f[i] & 15];
  }
  return out;
}

struct OutStats {
  uint64_t frames = 0, arp_requests = 0;
};
// Whether an IPv6 TCP/UDP input of this run had a bad L4 checksum (NAT keeps
// a bad one bad: the IPv6 outputs' checksums are then not checked).
bool g_v6_bad_l4 = false;

// Reads back and checks everything the workers transmitted.
void collect_output(const std::vector<InputInfo>& inputs, OutStats* st) {
  for (int port = 0; port < 2; ++port) {
    for (uint16_t q = 0; q < kQueues; ++q) {
      rte_mbuf* b[32];
      uint16_t n;
      while ((n = rte_eth_rx_burst(g_pid[port], q, b, 32)) > 0) {
        for (uint16_t i = 0; i < n; ++i) {
          rte_mbuf* m = b[i];
          ++st->frames;
          CHECK(m->nb_segs == 1, "");
          CHECK(m->pkt_len == m->data_len, "");
          const uint8_t* f = rte_pktmbuf_mtod(m, const uint8_t*);
          const size_t len = m->data_len;
          CHECK(len >= kEth, std::to_string(len));
          CHECK(std::memcmp(f + 6, kPortMac[port].data(), 6) == 0, "source MAC is not the port's");
          const uint16_t et = get16(f + 12);
          if (et == 0x0806) {
            ArpInfo a;
            CHECK(parse_arp(f, len, &a), "malformed ARP out");
            if (a.op == 1) ++st->arp_requests;
          } else if (et == 0x86dd) {
            // vipd forwards TCP and UDP and ICMPv6 errors about its flows,
            // and originates echo replies, Neighbor Advertisements and
            // Solicitations, and destination unreachable.
            Parsed6 p6;
            CHECK(parse_ipv6(f, len, &p6), std::string("IPv6 output does not parse: ") + drop_reason_name(p6.drop) + hex(f, len));
            if (p6.proto == kProtoTcp || p6.proto == kProtoUdp) {
              CHECK(p6.hop_limit >= 1, "");
              if (!g_v6_bad_l4)
                CHECK(ref_fold(ref_add(ref_pseudo6(p6), f + p6.l4_off, p6.l4_len)) == 0xffff,
                      "IPv6 TCP/UDP checksum of an output frame" + hex(f, len));
              rte_pktmbuf_free(m);
              continue;
            }
            CHECK(p6.proto == kProtoIcmp6, "IPv6 output is not TCP, UDP or ICMPv6" + hex(f, len));
            const uint8_t type = f[p6.l4_off];
            // The errors: vipd's own destination unreachable, and the four
            // error types translated for a flow (their checksum verifies
            // below; quoted L4 checksums are not checked: a quote may be cut).
            CHECK(type == kIcmp6EchoReply || type == kNdNeighborAdvert || type == kNdNeighborSolicit ||
                      type == kIcmp6DestUnreach || type == kIcmp6PacketTooBig || type == kIcmp6TimeExceeded ||
                      type == kIcmp6ParamProblem,
                  "ICMPv6 type out " + std::to_string(type));
            if (type == kNdNeighborSolicit) ++st->arp_requests;
            CHECK(ref_fold(ref_add(ref_pseudo6(p6), f + p6.l4_off, p6.l4_len)) == 0xffff,
                  "ICMPv6 checksum of an output frame" + hex(f, len));
            if (type == kNdNeighborAdvert || type == kNdNeighborSolicit) {
              NdInfo nd;
              CHECK(parse_nd(f, p6, &nd) == kNumDropReasons, "an NA out that is not valid" + hex(f, len));
            }
          } else {
            CHECK(et == 0x0800, "ethertype out " + std::to_string(et));
            const Parsed p = parse_frame(f, len);
            CHECK(p.kind == FrameKind::kIpv4, std::string("output does not parse: ") + drop_reason_name(p.drop) + hex(f, len));
            CHECK(ip_header_ok(f), "IPv4 header checksum of an output frame" + hex(f, len));
            CHECK(p.ttl >= 1, "");
            bool expect_valid = true;
            const uint16_t id = get16(f + kEth + 4);
            for (const auto& in : inputs)
              if (in.ip_id == id && in.proto == p.proto && !in.l4_valid) expect_valid = false;
            if (expect_valid)
              CHECK(l4_ok(f, p), "L4 checksum of an output frame (proto " + std::to_string(p.proto) + ")" + hex(f, len));
          }
          rte_pktmbuf_free(m);
        }
      }
    }
  }
}

void drain_rings(Setup& s) {
  bool again = true;
  while (again) {
    again = false;
    for (auto& w : s.workers) {
      rte_mbuf* pkts[kBurst];
      unsigned n = rte_ring_sc_dequeue_burst(s.sh().rings[w->index], reinterpret_cast<void**>(pkts), kBurst, nullptr);
      if (n) {
        again = true;
        bump(w->counters.redirects_in, n);
        process_burst(*w, pkts, static_cast<uint16_t>(n), true);
      }
    }
  }
}

// Back to a known state: every connection and template expired, scheduler
// state and counters per destination zeroed, fnat pools refilled, neighbour
// cache holding the client and two backends only.
void reset(Setup& s) {
  const uint64_t far = kT0 + (1ull << 50);
  for (auto& w : s.workers) {
    w->now = far;
    sweep_conns(*w, w->conns.slots());  // every entry
    Worker6& x = *s.w6[w->index];
    sweep_conns6(*w, x.conns.capacity());
    w->tmpls.sweep(far, w->tmpls.capacity());
    CHECK(w->conns.size() == 0, "connections left after expiring all: " + std::to_string(w->conns.size()));
    CHECK(w->tmpls.size() == 0, "templates left after expiring all");
    CHECK(w->proxy.in_use() == 0, "PROXY protocol entries left after expiring all");
    CHECK(w->syn.in_use() == 0 && w->syn.head() == 0, "saved SYNs left after expiring all");
    CHECK(w->counters.active_flows.load() == 0,
          "active_flows after expiring all: " + std::to_string(int64_t(w->counters.active_flows.load())));
    CHECK(x.conns.size() == 0, "IPv6 connections left after expiring all: " + std::to_string(x.conns.size()));
    if (s.sh().forward == Forward::kFnat) {
      CHECK(x.fnat[0].top == s.fnat6_top[w->index], "IPv6 fnat ports leaked or doubled");
      std::copy(s.fnat6_init[w->index].begin(), s.fnat6_init[w->index].end(), x.fnat[0].ports.begin());
    }
    x.fnat_cursor = 0;
    for (uint32_t d = 0; d < s.sh().max_dests; ++d)
      CHECK(w->dest_counters[d].active == 0 && w->dest_counters[d].inactive == 0,
            "per-destination active/inactive not zero after expiring all (slot " + std::to_string(d) + ")");
    std::memset(w->sched, 0, sizeof(SchedState) * s.sh().max_services);
    std::memset(w->dest_counters, 0, sizeof(DestCounters) * s.sh().max_dests);
    for (uint32_t a = 0; a < s.sh().n_local_addrs; ++a) {
      CHECK(w->fnat[a].top == s.fnat_top[w->index][a], "fnat ports leaked or doubled");
      std::memcpy(w->fnat[a].ports, s.fnat_init[w->index][a].data(), s.fnat_top[w->index][a] * sizeof(uint16_t));
    }
    w->fnat_cursor = 0;
    w->now = kT0;
  }
  if (s.is_reduced) s.publish(false);
  Shared& sh = s.sh();
  std::memset(s.holder->neigh_mem, 0, NeighborTable::bytes_for(1024));
  sh.neigh.init(s.holder->neigh_mem, 1024, 60 * sh.tsc_hz, 240 * sh.tsc_hz);
  sh.neigh.update(kClient, kClientMac.data(), kT0);
  sh.neigh.update(kB1, kB1Mac.data(), kT0);
  sh.neigh.update(kB2, kB2Mac.data(), kT0);
  s.v6->neigh.init(256, 60 * sh.tsc_hz, 240 * sh.tsc_hz, 3 * sh.tsc_hz);
  s.v6->neigh.update(kClient6.v6_bytes().data(), kClientMac.data(), kT0);
  s.v6->neigh.update(kB16.v6_bytes().data(), kB1Mac.data(), kT0);
  s.v6->neigh.update(kB26.v6_bytes().data(), kB2Mac.data(), kT0);
}

uint64_t advance_of(uint8_t meta, uint64_t hz) {
  switch (meta >> 5) {
    case 0: return 0;
    case 1: return hz / 1000;
    case 2: return hz / 5;
    case 3: return hz + hz / 10;
    case 4: return 61 * hz;
    case 5: return 121 * hz;
    case 6: return 301 * hz;
    default: return 1000 * hz;
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  init_eal_and_ports();
  build_setup(g_setup[0], Forward::kFnat, 1024);
  build_setup(g_setup[1], Forward::kNat, 32);  // small: conn_table_full reachable
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  Setup& s = g_setup[data[0] & 1];
  Shared& sh = s.sh();
  reset(s);
  const Totals before = totals(s);
  size_t pos = 1;
  uint64_t frames_in = 0, arp_consumed = 0;
  g_v6_bad_l4 = false;
  std::vector<InputInfo> inputs;
  OutStats out;
  rte_mbuf* burst[kWorkers][kBurst];
  uint16_t nb[kWorkers] = {0, 0};
  uint64_t now = kT0;
  const bool remove_b2 = data[0] & 2;

  auto run_burst = [&](uint64_t advance) {
    for (auto& w : s.workers) {
      w->now = now;
      if (nb[w->index]) {
        bump(w->counters.rx, nb[w->index]);
        process_burst(*w, burst[w->index], nb[w->index], false);
        nb[w->index] = 0;
      }
    }
    drain_rings(s);
    for (auto& w : s.workers) {
      if (w->n_pending || w->v6->n_pending) service_pending(*w);
      flush_tx(*w);
      sweep_conns(*w, 64);
      w->tmpls.sweep(w->now, 16);
    }
    collect_output(inputs, &out);
    now += advance;
    if (remove_b2 && !s.is_reduced) s.publish(true);
  };

  while (pos + 3 <= size && frames_in < kMaxFrames) {
    const uint8_t meta = data[pos];
    size_t len = (size_t{data[pos + 1]} << 8) | data[pos + 2];
    pos += 3;
    if (len > size - pos) len = size - pos;
    const uint8_t* src = data + pos;
    pos += len;
    if (len > RTE_MBUF_DEFAULT_DATAROOM) len = RTE_MBUF_DEFAULT_DATAROOM;
    const unsigned wi = (meta >> 1) & 1;
    const uint16_t port = meta & 1;
    if (nb[wi] == kBurst) run_burst(0);
    rte_mbuf* m = rte_pktmbuf_alloc(g_pool);
    CHECK(m != nullptr, "mempool empty: mbufs leaked");
    uint8_t* d = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, static_cast<uint16_t>(len)));
    CHECK(d != nullptr || len == 0, "append");
    if (len) std::memcpy(d, src, len);
    fix_checksums(d, len, meta & 4, meta & 8);
    m->port = g_pid[port];
    ++frames_in;
    // What the worker will see: remember the L4 checksum state of IPv4
    // frames, and predict ARP replies that are consumed by learning (the
    // one outcome that is neither a transmission nor a counted drop).
    const Parsed p = len ? parse_frame(d, len) : Parsed{};
    const bool mac_ok = len >= kEth && ((d[0] & 1) || std::memcmp(d, kPortMac[port].data(), 6) == 0);
    if (p.kind == FrameKind::kIpv4) inputs.push_back({get16(d + kEth + 4), p.proto, l4_ok(d, p)});
    if (p.kind == FrameKind::kIpv6) {
      Parsed6 p6;
      if (parse_ipv6(d, len, &p6) && (p6.proto == kProtoTcp || p6.proto == kProtoUdp) &&
          ref_fold(ref_add(ref_pseudo6(p6), d + p6.l4_off, p6.l4_len)) != 0xffff)
        g_v6_bad_l4 = true;
    }
    ArpInfo a;
    if (mac_ok && p.kind == FrameKind::kArp && parse_arp(d, len, &a) && a.op == 2) ++arp_consumed;
    burst[wi][nb[wi]++] = m;
    if (meta & 0x10) run_burst(advance_of(meta, sh.tsc_hz));
  }
  run_burst(0);
  // Let every packet still waiting for ARP time out (neigh_unresolved).
  now += 2 * sh.arp_give_up + 1;
  run_burst(0);

  const Totals after = totals(s);
  const uint64_t drops = after.drops - before.drops;
  const uint64_t arp_req = after.arp_requests - before.arp_requests;
  const std::string acct = "in=" + std::to_string(frames_in) + " out=" + std::to_string(out.frames) +
                           " arp_req_out=" + std::to_string(out.arp_requests) + " arp_req_ctr=" +
                           std::to_string(arp_req) + " drops=" + std::to_string(drops) + " arp_consumed=" +
                           std::to_string(arp_consumed) + " tx_ctr=" + std::to_string(after.tx - before.tx) +
                           " drops:" + drop_summary(s);
  static const bool verbose = getenv("VIPD_FUZZ_VERBOSE") != nullptr;
  if (verbose) fprintf(stderr, "fuzz_packet: %s %s\n", data[0] & 1 ? "nat" : "fnat", acct.c_str());
  for (auto& w : s.workers) {
    CHECK(w->n_pending == 0, acct);
    CHECK(w->v6->n_pending == 0, acct);
    for (uint16_t p = 0; p < kMaxPorts; ++p) CHECK(w->n_tx[p] == 0, acct);
    CHECK(rte_ring_count(sh.rings[w->index]) == 0, acct);
  }
  CHECK(after.tx - before.tx == out.frames, "tx counter != frames read back: " + acct);
  CHECK(arp_req == out.arp_requests, "arp_requests counter != ARP requests read back: " + acct);
  CHECK(out.frames - out.arp_requests + drops + arp_consumed + (after.nd_learned - before.nd_learned) == frames_in,
        "packets unaccounted for (out - arp requests + drops + arp replies consumed != in): " + acct);
  CHECK(rte_mempool_avail_count(g_pool) == kPoolSize,
        "mbufs not back in the pool: " + std::to_string(rte_mempool_avail_count(g_pool)) + " " + acct);
  return 0;
}
