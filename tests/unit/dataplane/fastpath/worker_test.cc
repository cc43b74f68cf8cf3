// The whole per-packet pipeline on real mbufs and ethdev ports: the net_ring0
// and net_ring1 vdevs (created by main.cc's EAL arguments) loop every tx
// queue back into the rx queue of the same index, so what a worker transmits
// is read back with rte_eth_rx_burst. Shared and Worker are set up like
// DpdkDataplane::init does; no lcore is launched: the test calls
// process_burst/flush_tx/service_pending/sweep_conns with w.now set.
#include "dataplane/fastpath/worker.h"

#include <gtest/gtest.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include <algorithm>
#include <map>
#include <set>

#include "dataplane/fastpath/packet.h"
#include "dataplane/publish/publisher.h"
#include "tests/unit/dataplane/shared_fixture.h"

namespace vipd::dp {
namespace {

using namespace test;
using cp::Protocol;

// Topology: port 0 faces clients (10.0.0.1/24), port 1 faces backends
// (10.1.0.1/24); fnat local address 10.1.0.100.
const uint32_t kPort0Ip = ip4(10, 0, 0, 1), kPort1Ip = ip4(10, 1, 0, 1);
const uint32_t kLocal = ip4(10, 1, 0, 100);
const uint32_t kClient = ip4(10, 0, 0, 10), kClient2 = ip4(10, 0, 0, 20);
const uint32_t kVip = ip4(10, 96, 0, 100), kVipEmpty = ip4(10, 96, 0, 101), kVipArp = ip4(10, 96, 0, 102);
const uint32_t kB1 = ip4(10, 1, 0, 11), kB2 = ip4(10, 1, 0, 12), kB3 = ip4(10, 1, 0, 13), kB4 = ip4(10, 1, 0, 14);
const MacAddr kPortMac[2] = {{0x02, 0x00, 0x00, 0x00, 0xa0, 0x00}, {0x02, 0x00, 0x00, 0x00, 0xa1, 0x00}};
const MacAddr kClientMac{0x02, 0xc1, 0, 0, 0, 0x10};
const MacAddr kB1Mac{0x02, 0xb0, 0, 0, 0, 0x11}, kB2Mac{0x02, 0xb0, 0, 0, 0, 0x12}, kB3Mac{0x02, 0xb0, 0, 0, 0, 0x13};
const MacAddr kBcast{0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
constexpr uint16_t kQueues = 2;
constexpr unsigned kPoolSize = 4095;

using Frame = std::vector<uint8_t>;

bool mac_is(const uint8_t* p, const MacAddr& m) { return std::equal(m.begin(), m.end(), p); }

class WorkerTest : public ::testing::Test {
 protected:
  // Once per process (also called for the derived parameterised suite): the
  // mempool and the two ports stay up until EAL cleanup in main().
  static void SetUpTestSuite() {
    if (!g_eal_ok || ports_ok_ || pool_) return;
    pool_ = rte_pktmbuf_pool_create("dpt_pool", kPoolSize, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, 0);
    if (!pool_) {
      suite_error_ = std::string("rte_pktmbuf_pool_create: ") + rte_strerror(rte_errno);
      return;
    }
    const char* names[2] = {"net_ring0", "net_ring1"};
    for (int i = 0; i < 2; ++i) {
      if (rte_eth_dev_get_port_by_name(names[i], &pid_[i]) != 0) {
        suite_error_ = std::string("no ethdev ") + names[i] + " (is the net_ring PMD available?)";
        return;
      }
      rte_eth_conf conf{};
      int rc = rte_eth_dev_configure(pid_[i], kQueues, kQueues, &conf);
      for (uint16_t q = 0; rc == 0 && q < kQueues; ++q) {
        rc = rte_eth_rx_queue_setup(pid_[i], q, 512, 0, nullptr, pool_);
        if (rc == 0) rc = rte_eth_tx_queue_setup(pid_[i], q, 512, 0, nullptr);
      }
      if (rc == 0) rc = rte_eth_dev_start(pid_[i]);
      if (rc != 0) {
        suite_error_ = std::string("port setup of ") + names[i] + ": " + rte_strerror(-rc);
        return;
      }
    }
    ports_ok_ = true;
  }

  void SetUp() override {
    VIPD_REQUIRE_EAL();
    if (!ports_ok_) GTEST_SKIP() << "ports unavailable: " << suite_error_;
    drain_all();
    ASSERT_EQ(rte_mempool_avail_count(pool_), kPoolSize) << "mbufs leaked by an earlier test";
  }

  // Builds Shared (+ the given number of workers) and the publisher.
  void build(Forward fwd, uint32_t n_workers = 1, uint32_t conn_capacity = 1024) {
    holder_ = std::make_unique<SharedHolder>();
    std::string err;
    ASSERT_TRUE(holder_->init(16, 64, n_workers, &err)) << err;
    Shared& s = holder_->sh;
    for (int i = 0; i < 2; ++i) {
      s.ports[i].port_id = pid_[i];
      std::copy(kPortMac[i].begin(), kPortMac[i].end(), s.ports[i].mac);
      s.ports[i].ip = i == 0 ? kPort0Ip : kPort1Ip;
      s.ports[i].mask = 0xffffff00u;
    }
    s.n_ports = 2;
    s.forward = fwd;
    s.n_local_addrs = fwd == Forward::kFnat ? 1 : 0;
    s.local_addrs[0] = kLocal;
    for (uint32_t i = 0; i < n_workers; ++i) {
      auto w = std::make_unique<Worker>();
      w->index = i;
      w->sh = &s;
      w->pool = pool_;
      ASSERT_TRUE(w->conns.init(uniq("tconns_"), conn_capacity, 0, &err)) << err;
      ASSERT_TRUE(w->tmpls.init(uniq("ttmpl_"), std::max<uint32_t>(conn_capacity / 4, 1024), 0, &err)) << err;
      w->sched = static_cast<SchedState*>(rte_zmalloc("t_sched", sizeof(SchedState) * s.max_services, 64));
      w->dest_counters = static_cast<DestCounters*>(rte_zmalloc("t_dctr", sizeof(DestCounters) * s.max_dests, 64));
      ASSERT_NE(w->sched, nullptr);
      ASSERT_NE(w->dest_counters, nullptr);
      for (uint32_t a = 0; a < s.n_local_addrs; ++a) {
        FnatPool& fp = w->fnat[a];
        fp.ports = static_cast<uint16_t*>(rte_zmalloc("t_fnat", sizeof(uint16_t) * 65536, 64));
        ASSERT_NE(fp.ports, nullptr);
        for (uint32_t port = 65535; port >= 1024; --port)
          if (port % n_workers == i) fp.ports[fp.top++] = static_cast<uint16_t>(port);
      }
      if (n_workers > 1) {
        s.rings[i] = rte_ring_create(uniq("tredir_").c_str(), 1024, 0, RING_F_SC_DEQ);
        ASSERT_NE(s.rings[i], nullptr);
      }
      w->now = kT0;
      workers_.push_back(std::move(w));
    }
    pub_ = std::make_unique<Publisher>(s);
    // Services.
    put(table_, vsvc(kVip, 8080, Protocol::kTcp, {rs(kB1, 80), rs(kB2, 80)}));
    put(table_, vsvc(kVip, 5353, Protocol::kUdp, {rs(kB1, 53)}));
    put(table_, vsvc(kVipEmpty, 80, Protocol::kTcp, {}));
    put(table_, vsvc(kVipEmpty, 53, Protocol::kUdp, {}));
    auto dropper = vsvc(kVipEmpty, 81, Protocol::kTcp, {});
    dropper.when_empty = cp::WhenEmpty::kDrop;
    put(table_, dropper);
    put(table_, vsvc(kVipArp, 80, Protocol::kTcp, {rs(kB3, 80)}));
    put(table_, vsvc(kVipArp, 81, Protocol::kTcp, {rs(kB4, 80)}));
    ASSERT_TRUE(pub_->apply(table_, cp::TableDiff{}, true, &err)) << err;
    // Neighbours: the client and two backends (not kB3/kB4).
    s.neigh.update(kClient, kClientMac.data(), kT0);
    s.neigh.update(kB1, kB1Mac.data(), kT0);
    s.neigh.update(kB2, kB2Mac.data(), kT0);
  }

  void TearDown() override {
    for (auto& w : workers_) {
      for (uint32_t i = 0; i < w->n_pending; ++i) rte_pktmbuf_free(w->pending[i].m);
      w->n_pending = 0;
      for (uint16_t p = 0; p < kMaxPorts; ++p) {
        for (uint16_t k = 0; k < w->n_tx[p]; ++k) rte_pktmbuf_free(w->txbuf[p][k]);
        w->n_tx[p] = 0;
      }
      rte_free(w->sched);
      rte_free(w->dest_counters);
      for (auto& fp : w->fnat) rte_free(fp.ports);
    }
    if (holder_) {
      for (auto* r : holder_->sh.rings) {
        if (!r) continue;
        void* m;
        while (rte_ring_dequeue(r, &m) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
        rte_ring_free(r);
      }
    }
    if (ports_ok_) {
      drain_all();
      EXPECT_EQ(rte_mempool_avail_count(pool_), kPoolSize) << "mbufs leaked (neither sent nor freed)";
    }
    pub_.reset();
    workers_.clear();
    holder_.reset();
  }

  Worker& w(unsigned i = 0) { return *workers_[i]; }
  Shared& sh() { return holder_->sh; }
  uint64_t drops(DropReason r, unsigned wi = 0) { return w(wi).counters.drops[r].load(); }
  uint64_t total_drops(unsigned wi = 0) {
    uint64_t n = 0;
    for (unsigned r = 0; r < kNumDropReasons; ++r) n += w(wi).counters.drops[r].load();
    return n;
  }
  std::string drop_summary(unsigned wi = 0) {
    std::string s;
    for (unsigned r = 0; r < kNumDropReasons; ++r)
      if (uint64_t v = w(wi).counters.drops[r].load()) s += std::string(" ") + drop_reason_name(r) + "=" + std::to_string(v);
    return s.empty() ? " none" : s;
  }

  rte_mbuf* mbuf_of(const Frame& f, uint16_t port_index) {
    rte_mbuf* m = rte_pktmbuf_alloc(pool_);
    EXPECT_NE(m, nullptr);
    if (!m) return nullptr;
    char* d = rte_pktmbuf_append(m, static_cast<uint16_t>(f.size()));
    EXPECT_NE(d, nullptr);
    std::memcpy(d, f.data(), f.size());
    m->port = pid_[port_index];
    return m;
  }
  // Receives `f` on a port: runs it through worker `wi` and flushes tx.
  void rx(const Frame& f, uint16_t port_index, unsigned wi = 0) {
    rte_mbuf* m = mbuf_of(f, port_index);
    if (!m) return;
    process_burst(w(wi), &m, 1, false);
    flush_tx(w(wi));
  }
  // Frames transmitted on a port (all queues), in order.
  std::vector<Frame> tx(uint16_t port_index) {
    std::vector<Frame> out;
    for (uint16_t q = 0; q < kQueues; ++q) {
      rte_mbuf* b[32];
      uint16_t n;
      while ((n = rte_eth_rx_burst(pid_[port_index], q, b, 32)) > 0) {
        for (uint16_t i = 0; i < n; ++i) {
          EXPECT_EQ(b[i]->nb_segs, 1);
          EXPECT_EQ(b[i]->pkt_len, b[i]->data_len) << "pkt_len and data_len disagree";
          const uint8_t* d = rte_pktmbuf_mtod(b[i], const uint8_t*);
          out.emplace_back(d, d + rte_pktmbuf_data_len(b[i]));
          rte_pktmbuf_free(b[i]);
        }
      }
    }
    return out;
  }
  // Frames on one queue only.
  std::vector<Frame> tx_queue(uint16_t port_index, uint16_t q) {
    std::vector<Frame> out;
    rte_mbuf* b[32];
    uint16_t n;
    while ((n = rte_eth_rx_burst(pid_[port_index], q, b, 32)) > 0) {
      for (uint16_t i = 0; i < n; ++i) {
        const uint8_t* d = rte_pktmbuf_mtod(b[i], const uint8_t*);
        out.emplace_back(d, d + rte_pktmbuf_data_len(b[i]));
        rte_pktmbuf_free(b[i]);
      }
    }
    return out;
  }
  void drain_all() {
    for (int p = 0; p < 2; ++p) tx(static_cast<uint16_t>(p));
  }
  // Sends `f` in on `in_port` and expects exactly one frame out on `out_port`
  // and nothing on the other port.
  Frame one_out(const Frame& f, uint16_t in_port, uint16_t out_port, unsigned wi = 0) {
    rx(f, in_port, wi);
    auto a = tx(out_port), b = tx(static_cast<uint16_t>(1 - out_port));
    EXPECT_EQ(a.size(), 1u) << "frames out on port " << out_port << "; drops:" << drop_summary(wi);
    EXPECT_EQ(b.size(), 0u) << "frames out on port " << 1 - out_port;
    return a.empty() ? Frame{} : a[0];
  }
  void expect_nothing_out(const char* what) {
    EXPECT_EQ(tx(0).size(), 0u) << what;
    EXPECT_EQ(tx(1).size(), 0u) << what;
  }

  // Frames the test sends.
  FrameSpec from_client(uint16_t cport, uint8_t flags, uint32_t vip = kVip, uint16_t vport = 8080) {
    FrameSpec s;
    s.dmac = kPortMac[0];
    s.smac = kClientMac;
    s.src = kClient;
    s.dst = vip;
    s.proto = kProtoTcp;
    s.sport = cport;
    s.dport = vport;
    s.tcp_flags = flags;
    s.seq = 1000;
    s.ack = flags & kTcpAck ? 5000 : 0;
    s.ttl = 64;
    return s;
  }
  FrameSpec from_backend(uint32_t b, const MacAddr& bmac, uint16_t bport, uint32_t to, uint16_t to_port,
                         uint8_t flags) {
    FrameSpec s;
    s.dmac = kPortMac[1];
    s.smac = bmac;
    s.src = b;
    s.dst = to;
    s.proto = kProtoTcp;
    s.sport = bport;
    s.dport = to_port;
    s.tcp_flags = flags;
    s.seq = 5000;
    s.ack = 1001;
    s.ttl = 64;
    return s;
  }

  // A forwarded IPv4 frame: checksums exactly as from scratch, parses.
  void expect_valid_ipv4(const Frame& f, const char* what) {
    ASSERT_GE(f.size(), 34u) << what;
    EXPECT_EQ(get16(&f[12]), 0x0800) << what;
    EXPECT_TRUE(ip_cksum_exact(f.data())) << what << ": IP checksum";
    if (ip_proto(f.data()) == kProtoTcp || ip_proto(f.data()) == kProtoUdp) {
      EXPECT_TRUE(l4_cksum_exact(f.data(), true)) << what << ": L4 checksum";
    }
    if (ip_proto(f.data()) == kProtoIcmp) {
      EXPECT_TRUE(icmp_cksum_ok(f.data())) << what << ": ICMP checksum";
    }
    Parsed p = parse_frame(f.data(), f.size());
    EXPECT_EQ(p.kind, FrameKind::kIpv4) << what << ": " << drop_reason_name(p.drop);
  }

  int64_t slot_of(uint32_t vip, uint16_t port, Protocol proto, uint32_t ip, uint16_t dport) {
    return pub_->dest_slot(cp::ServiceKey{vip, port, proto}, ip, dport);
  }

  static constexpr uint64_t kT0 = 1'000'000'000'000ull;
  static inline rte_mempool* pool_ = nullptr;
  static inline uint16_t pid_[2] = {0, 0};
  static inline bool ports_ok_ = false;
  static inline std::string suite_error_ = "EAL not initialised";

  std::unique_ptr<SharedHolder> holder_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::unique_ptr<Publisher> pub_;
  cp::ServiceTable table_;
};

class WorkerModeTest : public WorkerTest, public ::testing::WithParamInterface<Forward> {};

// SYN -> DNAT to a backend; the backend's reply -> reverse-translated; the
// handshake's ACK and data follow the same connection.
TEST_P(WorkerModeTest, SynForwardedAndReplyReverseTranslated) {
  const Forward mode = GetParam();
  build(mode);
  if (HasFatalFailure()) return;
  FrameSpec syn = from_client(40000, kTcpSyn);
  syn.tcp_opts = {2, 4, 0x05, 0xb4};
  const Frame in = build_frame(syn);
  const Frame out = one_out(in, 0, 1);
  ASSERT_FALSE(out.empty());
  const uint8_t* o = out.data();
  expect_valid_ipv4(out, "forwarded SYN");
  EXPECT_TRUE(mac_is(o, kB1Mac)) << "eth dst = first backend's MAC (rr starts at the first)";
  EXPECT_TRUE(mac_is(o + 6, kPortMac[1])) << "eth src = egress port MAC";
  EXPECT_EQ(ip_dst(o), kB1);
  EXPECT_EQ(l4_dport(o), 80);
  uint16_t lport;
  if (mode == Forward::kFnat) {
    EXPECT_EQ(ip_src(o), kLocal) << "fnat: source is the local address";
    lport = l4_sport(o);
    EXPECT_GE(lport, 1024);
  } else {
    EXPECT_EQ(ip_src(o), kClient) << "nat: source kept";
    lport = l4_sport(o);
    EXPECT_EQ(lport, 40000);
  }
  EXPECT_EQ(ip_ttl(o), 63);
  EXPECT_EQ(tcp_flags(o), kTcpSyn);
  EXPECT_EQ(tcp_seq(o), 1000u);
  EXPECT_EQ(out.size(), in.size());
  EXPECT_TRUE(std::equal(out.begin() + 34 + 4, out.begin() + 34 + 16, in.begin() + 34 + 4)) << "seq/ack/flags/window";
  EXPECT_TRUE(std::equal(out.begin() + 34 + 18, out.end(), in.begin() + 34 + 18)) << "options/payload";
  EXPECT_EQ(w().counters.new_flows.load(), 1u);
  EXPECT_EQ(w().counters.active_flows.load(), 1u);
  EXPECT_EQ(w().counters.tx.load(), 1u);
  EXPECT_EQ(w().conns.size(), 1u);
  const int64_t slot = slot_of(kVip, 8080, Protocol::kTcp, kB1, 80);
  ASSERT_GE(slot, 0);
  EXPECT_EQ(w().dest_counters[slot].conns, 1u);
  EXPECT_EQ(w().dest_counters[slot].inpkts, 1u);
  EXPECT_EQ(w().dest_counters[slot].inbytes, in.size() - 14);
  EXPECT_EQ(w().dest_counters[slot].inactive, 1);
  EXPECT_EQ(w().dest_counters[slot].active, 0);

  // SYN-ACK from the backend to (local address or client):lport.
  const uint32_t to = mode == Forward::kFnat ? kLocal : kClient;
  const Frame reply = build_frame(from_backend(kB1, kB1Mac, 80, to, lport, kTcpSyn | kTcpAck));
  const Frame back = one_out(reply, 1, 0);
  ASSERT_FALSE(back.empty());
  const uint8_t* b = back.data();
  expect_valid_ipv4(back, "reverse-translated SYN-ACK");
  EXPECT_TRUE(mac_is(b, kClientMac));
  EXPECT_TRUE(mac_is(b + 6, kPortMac[0]));
  EXPECT_EQ(ip_src(b), kVip);
  EXPECT_EQ(l4_sport(b), 8080);
  EXPECT_EQ(ip_dst(b), kClient);
  EXPECT_EQ(l4_dport(b), 40000);
  EXPECT_EQ(ip_ttl(b), 63);
  EXPECT_EQ(tcp_flags(b), kTcpSyn | kTcpAck);
  EXPECT_EQ(tcp_seq(b), 5000u);
  EXPECT_EQ(tcp_ack(b), 1001u);
  EXPECT_EQ(w().dest_counters[slot].outpkts, 1u);

  // ACK completes the handshake: established.
  const Frame ack_out = one_out(build_frame(from_client(40000, kTcpAck)), 0, 1);
  ASSERT_FALSE(ack_out.empty());
  expect_valid_ipv4(ack_out, "ACK");
  EXPECT_EQ(ip_dst(ack_out.data()), kB1);
  EXPECT_EQ(l4_sport(ack_out.data()), lport) << "same connection, same local port";
  EXPECT_EQ(w().dest_counters[slot].active, 1);
  EXPECT_EQ(w().dest_counters[slot].inactive, 0);

  // Data with payload, odd length.
  FrameSpec data = from_client(40000, kTcpAck | kTcpPsh);
  data.payload.assign(333, 0x5c);
  data.payload[0] = 0x01;
  const Frame din = build_frame(data);
  const Frame dout = one_out(din, 0, 1);
  ASSERT_FALSE(dout.empty());
  expect_valid_ipv4(dout, "data");
  EXPECT_TRUE(std::equal(dout.end() - 333, dout.end(), din.end() - 333));
  EXPECT_EQ(w().conns.size(), 1u);
  EXPECT_EQ(w().counters.new_flows.load(), 1u);
  EXPECT_EQ(total_drops(), 0u) << drop_summary();
}

TEST_P(WorkerModeTest, RoundRobinAcrossBackends) {
  build(GetParam());
  if (HasFatalFailure()) return;
  std::vector<uint32_t> got;
  std::set<uint16_t> lports;
  for (uint16_t k = 0; k < 6; ++k) {
    const Frame out = one_out(build_frame(from_client(41000 + k, kTcpSyn)), 0, 1);
    ASSERT_FALSE(out.empty());
    got.push_back(ip_dst(out.data()));
    lports.insert(l4_sport(out.data()));
    EXPECT_TRUE(mac_is(out.data(), ip_dst(out.data()) == kB1 ? kB1Mac : kB2Mac)) << "MAC of the chosen backend";
  }
  EXPECT_EQ(got, (std::vector<uint32_t>{kB1, kB2, kB1, kB2, kB1, kB2}));
  EXPECT_EQ(lports.size(), 6u) << "each connection has its own source port";
  EXPECT_EQ(w().conns.size(), 6u);
}

TEST_P(WorkerModeTest, UdpFlowBothDirections) {
  const Forward mode = GetParam();
  build(mode);
  if (HasFatalFailure()) return;
  FrameSpec u = from_client(5000, 0, kVip, 5353);
  u.proto = kProtoUdp;
  u.payload = {'q', 'u', 'e', 'r', 'y'};
  const Frame out = one_out(build_frame(u), 0, 1);
  ASSERT_FALSE(out.empty());
  expect_valid_ipv4(out, "udp out");
  EXPECT_EQ(ip_dst(out.data()), kB1);
  EXPECT_EQ(l4_dport(out.data()), 53);
  const uint32_t to = ip_src(out.data());
  const uint16_t tport = l4_sport(out.data());
  EXPECT_EQ(to, mode == Forward::kFnat ? kLocal : kClient);
  FrameSpec r = from_backend(kB1, kB1Mac, 53, to, tport, 0);
  r.proto = kProtoUdp;
  r.payload = {'a', 'n', 's'};
  const Frame back = one_out(build_frame(r), 1, 0);
  ASSERT_FALSE(back.empty());
  expect_valid_ipv4(back, "udp back");
  EXPECT_EQ(ip_src(back.data()), kVip);
  EXPECT_EQ(l4_sport(back.data()), 5353);
  EXPECT_EQ(ip_dst(back.data()), kClient);
  EXPECT_EQ(l4_dport(back.data()), 5000);
  // A datagram without checksum keeps none.
  u.udp_checksum = false;
  const Frame out2 = one_out(build_frame(u), 0, 1);
  ASSERT_FALSE(out2.empty());
  EXPECT_EQ(get16(l4_of(out2.data()) + 6), 0);
  EXPECT_TRUE(ip_cksum_exact(out2.data()));
  EXPECT_EQ(w().conns.size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Modes, WorkerModeTest, ::testing::Values(Forward::kFnat, Forward::kNat),
                         [](const ::testing::TestParamInfo<Forward>& i) {
                           return i.param == Forward::kFnat ? std::string("fnat") : std::string("nat");
                         });

TEST_F(WorkerTest, NonSynWithoutConnectionIsDropped) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  rx(build_frame(from_client(42000, kTcpAck)), 0);
  expect_nothing_out("ACK without connection");
  EXPECT_EQ(drops(kNoConn), 1u);
  rx(build_frame(from_client(42001, kTcpSyn | kTcpAck)), 0);
  rx(build_frame(from_client(42002, kTcpRst)), 0);
  rx(build_frame(from_client(42003, kTcpSyn | kTcpRst)), 0);
  rx(build_frame(from_client(42004, kTcpFin | kTcpAck)), 0);
  expect_nothing_out("non-SYN");
  EXPECT_EQ(drops(kNoConn), 5u);
  EXPECT_EQ(w().conns.size(), 0u);
  EXPECT_EQ(w().counters.new_flows.load(), 0u);
  EXPECT_EQ(total_drops(), 5u) << drop_summary();
}

TEST_F(WorkerTest, SynToServiceWithoutBackendsGetsRst) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  FrameSpec syn = from_client(43000, kTcpSyn, kVipEmpty, 80);
  syn.seq = 0x11223344;
  syn.tcp_opts = {2, 4, 0x05, 0xb4};
  const Frame out = one_out(build_frame(syn), 0, 0);
  ASSERT_FALSE(out.empty());
  const uint8_t* o = out.data();
  expect_valid_ipv4(out, "RST");
  EXPECT_EQ(out.size(), 54u);
  EXPECT_TRUE(mac_is(o, kClientMac)) << "back to the sender's MAC";
  EXPECT_TRUE(mac_is(o + 6, kPortMac[0]));
  EXPECT_EQ(ip_src(o), kVipEmpty);
  EXPECT_EQ(ip_dst(o), kClient);
  EXPECT_EQ(l4_sport(o), 80);
  EXPECT_EQ(l4_dport(o), 43000);
  EXPECT_EQ(tcp_flags(o), kTcpRst | kTcpAck);
  EXPECT_EQ(tcp_seq(o), 0u);
  EXPECT_EQ(tcp_ack(o), 0x11223345u);
  EXPECT_EQ(w().counters.rst_sent.load(), 1u);
  EXPECT_EQ(w().conns.size(), 0u);
  EXPECT_EQ(total_drops(), 0u) << drop_summary();
}

TEST_F(WorkerTest, UdpToServiceWithoutBackendsGetsPortUnreachable) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  FrameSpec u = from_client(6000, 0, kVipEmpty, 53);
  u.proto = kProtoUdp;
  u.payload.assign(40, 0x33);
  const Frame in = build_frame(u);
  const Frame out = one_out(in, 0, 0);
  ASSERT_FALSE(out.empty());
  const uint8_t* o = out.data();
  expect_valid_ipv4(out, "ICMP unreachable");
  EXPECT_EQ(out.size(), 14u + 20 + 8 + 20 + 8);
  EXPECT_TRUE(mac_is(o, kClientMac));
  EXPECT_TRUE(mac_is(o + 6, kPortMac[0]));
  EXPECT_EQ(ip_proto(o), kProtoIcmp);
  EXPECT_EQ(ip_src(o), kVipEmpty);
  EXPECT_EQ(ip_dst(o), kClient);
  EXPECT_EQ(o[34], 3);
  EXPECT_EQ(o[35], 3);
  EXPECT_TRUE(std::equal(o + 42, o + 42 + 28, in.begin() + 14)) << "quotes the original IP header + 8 bytes";
  EXPECT_EQ(w().counters.icmp_unreach_sent.load(), 1u);
  EXPECT_EQ(total_drops(), 0u) << drop_summary();
}

TEST_F(WorkerTest, WhenEmptyDropDropsSilently) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  rx(build_frame(from_client(44000, kTcpSyn, kVipEmpty, 81)), 0);
  expect_nothing_out("when_empty drop");
  EXPECT_EQ(drops(kNoEndpointsDrop), 1u);
  EXPECT_EQ(w().counters.rst_sent.load(), 0u);
}

// A mid-flow packet of an mh service without endpoints (a restarted vipd
// whose first sync came before the endpoints were listed): dropped, not reset,
// so the connection lives on once they are back; a SYN is still refused.
TEST_F(WorkerTest, MhMidFlowWithoutEndpointsIsDroppedNotReset) {
  build(Forward::kNat);
  if (HasFatalFailure()) return;
  cp::ServiceTable next = table_;
  put(next, vsvc(kVipEmpty, 8090, Protocol::kTcp, {}, "mh"));
  const cp::TableDiff d = cp::TableDiff::compute(table_, next);
  std::string err;
  ASSERT_TRUE(pub_->apply(next, d, false, &err)) << err;
  rx(build_frame(from_client(48000, kTcpAck | kTcpPsh, kVipEmpty, 8090)), 0);
  expect_nothing_out("mid-flow packet, no endpoints");
  EXPECT_EQ(drops(kNoConn), 1u) << drop_summary();
  EXPECT_EQ(w().counters.rst_sent.load(), 0u);
  const Frame r = one_out(build_frame(from_client(48001, kTcpSyn, kVipEmpty, 8090)), 0, 0);
  ASSERT_FALSE(r.empty()) << drop_summary();
  EXPECT_EQ(tcp_flags(r.data()) & kTcpRst, kTcpRst);
  EXPECT_EQ(w().counters.rst_sent.load(), 1u);
}

TEST_F(WorkerTest, RemovedBackendMidFlowGetsRst) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  // Connection A -> B1, connection B -> B2.
  const Frame a = one_out(build_frame(from_client(45000, kTcpSyn)), 0, 1);
  const Frame b = one_out(build_frame(from_client(45001, kTcpSyn)), 0, 1);
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  ASSERT_EQ(ip_dst(a.data()), kB1);
  ASSERT_EQ(ip_dst(b.data()), kB2);
  const uint16_t lport_b = l4_sport(b.data());
  one_out(build_frame(from_client(45000, kTcpAck)), 0, 1);
  const uint32_t top_before = w().fnat[0].top;
  const int64_t slot1 = slot_of(kVip, 8080, Protocol::kTcp, kB1, 80);
  const uint32_t gen_before = sh().dest_slots[slot1].gen.load();

  // The control plane removes B1 (diff apply).
  cp::ServiceTable next = table_;
  put(next, vsvc(kVip, 8080, Protocol::kTcp, {rs(kB2, 80)}));
  const cp::TableDiff d = cp::TableDiff::compute(table_, next);
  ASSERT_EQ(d.changed.size(), 1u);
  std::string err;
  ASSERT_TRUE(pub_->apply(next, d, false, &err)) << err;
  EXPECT_EQ(sh().dest_slots[slot1].gen.load(), gen_before + 1);

  // Mid-flow ACK with data on A: RST back to the client, from the VIP.
  FrameSpec mid = from_client(45000, kTcpAck | kTcpPsh);
  mid.seq = 2000;
  mid.ack = 0xabcdef01;
  mid.payload = {1, 2, 3};
  const Frame rst = one_out(build_frame(mid), 0, 0);
  ASSERT_FALSE(rst.empty());
  const uint8_t* r = rst.data();
  expect_valid_ipv4(rst, "RST for removed backend");
  EXPECT_TRUE(mac_is(r, kClientMac));
  EXPECT_TRUE(mac_is(r + 6, kPortMac[0]));
  EXPECT_EQ(ip_src(r), kVip);
  EXPECT_EQ(l4_sport(r), 8080);
  EXPECT_EQ(ip_dst(r), kClient);
  EXPECT_EQ(l4_dport(r), 45000);
  EXPECT_EQ(tcp_flags(r), kTcpRst) << "ACK was set: plain RST";
  EXPECT_EQ(tcp_seq(r), 0xabcdef01u) << "seq = the segment's ack";
  EXPECT_EQ(w().counters.rst_sent.load(), 1u);
  EXPECT_EQ(w().conns.size(), 1u) << "connection A removed, B kept";
  EXPECT_EQ(w().fnat[0].top, top_before + 1) << "A's local port returned to the pool";
  EXPECT_EQ(w().dest_counters[slot1].active, 0);
  EXPECT_EQ(w().dest_counters[slot1].inactive, 0);

  // Connection B (on the kept backend) is unaffected.
  FrameSpec bm = from_client(45001, kTcpAck);
  const Frame bout = one_out(build_frame(bm), 0, 1);
  ASSERT_FALSE(bout.empty());
  EXPECT_EQ(ip_dst(bout.data()), kB2);
  EXPECT_EQ(l4_sport(bout.data()), lport_b);

  // A new SYN on A's 4-tuple is scheduled to the remaining backend.
  const Frame again = one_out(build_frame(from_client(45000, kTcpSyn)), 0, 1);
  ASSERT_FALSE(again.empty());
  EXPECT_EQ(ip_dst(again.data()), kB2);
  EXPECT_EQ(total_drops(), 0u) << drop_summary();
}

TEST_F(WorkerTest, ReplyFromRemovedBackendIsDropped) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  const Frame a = one_out(build_frame(from_client(46000, kTcpSyn)), 0, 1);
  ASSERT_FALSE(a.empty());
  ASSERT_EQ(ip_dst(a.data()), kB1);
  const uint16_t lport = l4_sport(a.data());
  cp::ServiceTable next = table_;
  put(next, vsvc(kVip, 8080, Protocol::kTcp, {rs(kB2, 80)}));
  std::string err;
  ASSERT_TRUE(pub_->apply(next, cp::TableDiff::compute(table_, next), false, &err)) << err;
  rx(build_frame(from_backend(kB1, kB1Mac, 80, kLocal, lport, kTcpSyn | kTcpAck)), 1);
  expect_nothing_out("reply from removed backend");
  EXPECT_EQ(drops(kDestExpired), 1u) << drop_summary();
  EXPECT_EQ(w().conns.size(), 0u);
  EXPECT_EQ(w().counters.active_flows.load(), 0u);
}

// An established flow's packets do not look its Service up (burst.h), except
// to refresh a persistence template: the refresh must still happen.
TEST_F(WorkerTest, EstablishedFlowRefreshesItsPersistenceTemplate) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  cp::ServiceTable next = table_;
  cp::VirtualService v = vsvc(kVipEmpty, 8443, Protocol::kTcp, {rs(kB1, 443), rs(kB2, 443)});
  v.persistence_timeout_s = 100;
  put(next, v);
  std::string err;
  ASSERT_TRUE(pub_->apply(next, cp::TableDiff::compute(table_, next), false, &err)) << err;
  ASSERT_FALSE(one_out(build_frame(from_client(47000, kTcpSyn, kVipEmpty, 8443)), 0, 1).empty());
  Template* t = w().tmpls.lookup(TemplateKey{kVipEmpty, kClient, 8443, kProtoTcp, 0});
  ASSERT_NE(t, nullptr) << "the SYN made a template";
  EXPECT_EQ(t->expires, kT0 + 100 * sh().tsc_hz);
  w().now = kT0 + 60 * sh().tsc_hz;
  ASSERT_FALSE(one_out(build_frame(from_client(47000, kTcpAck, kVipEmpty, 8443)), 0, 1).empty());
  EXPECT_EQ(t->expires, kT0 + 160 * sh().tsc_hz) << "refreshed by the established flow's packet";
  EXPECT_EQ(total_drops(), 0u) << drop_summary();
}

// A connection whose Service was removed: its next packet is one to no
// service (the VIP still has other ports here), and the entry stays for the
// sweep, as before the Service was removed.
TEST_F(WorkerTest, EstablishedFlowOfARemovedServiceIsDropped) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  ASSERT_FALSE(one_out(build_frame(from_client(47100, kTcpSyn)), 0, 1).empty());
  ASSERT_FALSE(one_out(build_frame(from_client(47100, kTcpAck)), 0, 1).empty());
  cp::ServiceTable next = table_;
  next.services.erase(cp::ServiceKey{kVip, 8080, Protocol::kTcp});
  std::string err;
  ASSERT_TRUE(pub_->apply(next, cp::TableDiff::compute(table_, next), false, &err)) << err;
  rx(build_frame(from_client(47100, kTcpAck | kTcpPsh)), 0);
  expect_nothing_out("packet of a removed service");
  EXPECT_EQ(drops(kVipNoPort), 1u) << drop_summary();
  EXPECT_EQ(w().counters.rst_sent.load(), 0u);
  EXPECT_EQ(w().conns.size(), 1u) << "left to the sweep";
}

// Full NAT: a packet to a local address and port that match a connection's
// reply direction is that connection's reply, even when a Service claims the
// same address and port (a misconfiguration): full-NAT replies do not consult
// the VIP table.
TEST_F(WorkerTest, FnatReplyWinsOverAServiceOnTheLocalAddress) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  const Frame a = one_out(build_frame(from_client(47200, kTcpSyn)), 0, 1);
  ASSERT_FALSE(a.empty());
  const uint16_t lport = l4_sport(a.data());
  const uint32_t b = ip_dst(a.data());
  cp::ServiceTable next = table_;
  put(next, vsvc(kLocal, lport, Protocol::kTcp, {rs(kB3, 80)}));
  std::string err;
  ASSERT_TRUE(pub_->apply(next, cp::TableDiff::compute(table_, next), false, &err)) << err;
  const Frame r = one_out(build_frame(from_backend(b, b == kB1 ? kB1Mac : kB2Mac, 80, kLocal, lport, kTcpSyn | kTcpAck)), 1, 0);
  ASSERT_FALSE(r.empty()) << drop_summary();
  EXPECT_EQ(ip_src(r.data()), kVip);
  EXPECT_EQ(l4_sport(r.data()), 8080);
  EXPECT_EQ(ip_dst(r.data()), kClient);
  EXPECT_EQ(l4_dport(r.data()), 47200);
  EXPECT_EQ(total_drops(), 0u) << drop_summary();
}

// A connection whose destination was removed stays until its next packet
// (which gets a RST) or, at the latest, for t_dead; then the sweep frees it.
TEST_F(WorkerTest, SweepReclaimsConnectionsOfRemovedDestAfterGrace) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  const uint32_t top0 = w().fnat[0].top;
  const Frame a = one_out(build_frame(from_client(46500, kTcpSyn)), 0, 1);
  ASSERT_FALSE(a.empty());
  ASSERT_EQ(ip_dst(a.data()), kB1);
  one_out(build_frame(from_client(46500, kTcpAck)), 0, 1);  // established: 900 s timeout
  cp::ServiceTable next = table_;
  put(next, vsvc(kVip, 8080, Protocol::kTcp, {rs(kB2, 80)}));
  std::string err;
  ASSERT_TRUE(pub_->apply(next, cp::TableDiff::compute(table_, next), false, &err)) << err;
  sweep_conns(w(), 4096);
  EXPECT_EQ(w().conns.size(), 1u) << "kept for the grace period";
  w().now = kT0 + sh().t_dead - 1;
  sweep_conns(w(), 4096);
  EXPECT_EQ(w().conns.size(), 1u);
  w().now = kT0 + sh().t_dead + 1;
  sweep_conns(w(), 4096);
  EXPECT_EQ(w().conns.size(), 0u) << "reclaimed after t_dead, long before the established timeout";
  EXPECT_EQ(w().fnat[0].top, top0);
  EXPECT_EQ(w().counters.active_flows.load(), 0u);
}

TEST_F(WorkerTest, SweepExpiresConnections) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  const uint32_t top0 = w().fnat[0].top;
  for (uint16_t k = 0; k < 5; ++k) one_out(build_frame(from_client(47000 + k, kTcpSyn)), 0, 1);
  one_out(build_frame(from_client(47000, kTcpAck)), 0, 1);  // established: longer timeout
  EXPECT_EQ(w().conns.size(), 5u);
  EXPECT_EQ(w().fnat[0].top, top0 - 5);
  // Not yet expired.
  w().now = kT0 + sh().t_syn - 1;
  sweep_conns(w(), 4096);
  EXPECT_EQ(w().conns.size(), 5u);
  // SYN_RECV ones expire, the established one stays.
  w().now = kT0 + sh().t_syn + 1;
  sweep_conns(w(), 4096);
  EXPECT_EQ(w().conns.size(), 1u);
  EXPECT_EQ(w().counters.active_flows.load(), 1u);
  EXPECT_EQ(w().fnat[0].top, top0 - 1);
  const int64_t s1 = slot_of(kVip, 8080, Protocol::kTcp, kB1, 80), s2 = slot_of(kVip, 8080, Protocol::kTcp, kB2, 80);
  EXPECT_EQ(w().dest_counters[s1].inactive + w().dest_counters[s2].inactive, 0);
  EXPECT_EQ(w().dest_counters[s1].active + w().dest_counters[s2].active, 1);
  // Packets of an expired flow are no longer forwarded.
  rx(build_frame(from_client(47001, kTcpAck)), 0);
  expect_nothing_out("expired flow");
  EXPECT_EQ(drops(kNoConn), 1u);
  // Established connections expire after their own, longer timeout.
  w().now = kT0 + sh().t_est - 1;
  sweep_conns(w(), 4096);
  EXPECT_EQ(w().conns.size(), 1u);
  w().now = kT0 + sh().t_est + 1;
  sweep_conns(w(), 4096);
  EXPECT_EQ(w().conns.size(), 0u);
  EXPECT_EQ(w().fnat[0].top, top0);
  EXPECT_EQ(w().counters.active_flows.load(), 0u);
}

TEST_F(WorkerTest, SynAfterFinStartsNewConnection) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  const Frame a = one_out(build_frame(from_client(48000, kTcpSyn)), 0, 1);
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(ip_dst(a.data()), kB1);
  one_out(build_frame(from_client(48000, kTcpAck)), 0, 1);
  one_out(build_frame(from_client(48000, kTcpFin | kTcpAck)), 0, 1);
  const Frame b = one_out(build_frame(from_client(48000, kTcpSyn)), 0, 1);
  ASSERT_FALSE(b.empty());
  EXPECT_EQ(ip_dst(b.data()), kB2) << "a new connection, scheduled again";
  EXPECT_EQ(w().counters.new_flows.load(), 2u);
  EXPECT_EQ(w().conns.size(), 1u);
  EXPECT_EQ(w().counters.active_flows.load(), 1u);
}

TEST_F(WorkerTest, ArpRequestForVipGetsReply) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  const MacAddr newmac{0x02, 0xc1, 0, 0, 0, 0x99};
  struct Case {
    uint32_t target;
    uint16_t port;
    const char* what;
  } cases[] = {{kVip, 0, "VIP"}, {kPort0Ip, 0, "port address"}, {kLocal, 1, "fnat local address"}};
  for (const auto& c : cases) {
    const uint32_t sender = c.port == 0 ? kClient : kB1;
    const Frame req = build_arp(1, newmac, sender, MacAddr{}, c.target, kBcast);
    const Frame out = one_out(req, c.port, c.port);
    ASSERT_FALSE(out.empty()) << c.what;
    const uint8_t* o = out.data();
    EXPECT_EQ(out.size(), 42u);
    EXPECT_TRUE(mac_is(o, newmac)) << c.what << ": eth dst = requester";
    EXPECT_TRUE(mac_is(o + 6, kPortMac[c.port])) << c.what;
    ArpInfo ai;
    ASSERT_TRUE(parse_arp(o, out.size(), &ai));
    EXPECT_EQ(ai.op, 2);
    EXPECT_TRUE(std::equal(ai.sha, ai.sha + 6, kPortMac[c.port].begin())) << c.what << ": sha = port MAC";
    EXPECT_EQ(ai.spa, c.target) << c.what;
    EXPECT_EQ(ai.tpa, sender);
    EXPECT_TRUE(mac_is(o + 14 + 18, newmac)) << "tha";
    // The requester (on the port's subnet) was learned.
    uint8_t mac[6];
    ASSERT_NE(sh().neigh.lookup(sender, mac, w().now), NeighState::kMissing);
    EXPECT_TRUE(std::equal(mac, mac + 6, newmac.begin()));
  }
  EXPECT_EQ(w().counters.arp_replies.load(), 3u);
  // Not ours: ignored, nothing sent.
  rx(build_arp(1, kClientMac, kClient, MacAddr{}, ip4(10, 0, 0, 77), kBcast), 0);
  expect_nothing_out("ARP for someone else");
  EXPECT_EQ(drops(kArpIgnored), 1u);
  // ARP between others (and gratuitous ARP) creates no entry, so spoofed
  // senders cannot fill the cache; it only refreshes an entry we have.
  const uint32_t stranger = ip4(10, 0, 0, 66);
  uint8_t seen[6];
  rx(build_arp(1, newmac, stranger, MacAddr{}, ip4(10, 0, 0, 77), kBcast), 0);
  rx(build_arp(2, newmac, stranger, MacAddr{}, stranger, kBcast), 0);
  EXPECT_EQ(sh().neigh.lookup(stranger, seen, w().now), NeighState::kMissing) << "learned from ARP not for us";
  const MacAddr moved{0x02, 0xc1, 0, 0, 0, 0x42};
  rx(build_arp(1, moved, kClient, MacAddr{}, ip4(10, 0, 0, 77), kBcast), 0);
  ASSERT_NE(sh().neigh.lookup(kClient, seen, w().now), NeighState::kMissing);
  EXPECT_TRUE(std::equal(seen, seen + 6, moved.begin())) << "a known neighbour's new MAC is taken";
  EXPECT_EQ(drops(kArpIgnored), 3u);
  // An ARP reply is consumed (learned), not counted as a drop.
  rx(build_arp(2, kClientMac, kClient2, kPortMac[0], kPort0Ip, kPortMac[0]), 0);
  expect_nothing_out("ARP reply");
  uint8_t mac[6];
  EXPECT_EQ(sh().neigh.lookup(kClient2, mac, w().now), NeighState::kReachable);
  EXPECT_TRUE(std::equal(mac, mac + 6, kClientMac.begin()));
  EXPECT_EQ(drops(kArpIgnored), 3u);
  // A sender outside the port's subnet is not learned.
  rx(build_arp(2, kClientMac, ip4(192, 168, 9, 9), kPortMac[0], kPort0Ip, kPortMac[0]), 0);
  EXPECT_EQ(sh().neigh.lookup(ip4(192, 168, 9, 9), mac, w().now), NeighState::kMissing);
  // Malformed ARP.
  Frame bad = build_arp(1, kClientMac, kClient, MacAddr{}, kVip, kBcast);
  bad[18] = 8;  // hlen
  rx(bad, 0);
  expect_nothing_out("malformed ARP");
  EXPECT_EQ(drops(kArpIgnored), 4u);
}

TEST_F(WorkerTest, UnresolvedNextHopArpsAndSendsWhenResolved) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  // kVipArp:80 -> kB3, whose MAC is unknown.
  const Frame in = build_frame(from_client(49000, kTcpSyn, kVipArp, 80));
  rx(in, 0);
  auto p1 = tx(1);
  EXPECT_EQ(tx(0).size(), 0u);
  ASSERT_EQ(p1.size(), 1u) << "one ARP request, the packet is held";
  {
    const uint8_t* o = p1[0].data();
    EXPECT_TRUE(mac_is(o, kBcast));
    EXPECT_TRUE(mac_is(o + 6, kPortMac[1]));
    ArpInfo ai;
    ASSERT_TRUE(parse_arp(o, p1[0].size(), &ai));
    EXPECT_EQ(ai.op, 1);
    EXPECT_TRUE(std::equal(ai.sha, ai.sha + 6, kPortMac[1].begin()));
    EXPECT_EQ(ai.spa, kPort1Ip);
    EXPECT_EQ(ai.tpa, kB3);
  }
  EXPECT_EQ(w().n_pending, 1u);
  EXPECT_EQ(w().counters.arp_requests.load(), 1u);
  // Nothing new at the same time (rate limited), packet still held.
  service_pending(w());
  flush_tx(w());
  EXPECT_EQ(tx(1).size(), 0u);
  EXPECT_EQ(w().n_pending, 1u);
  // After the retry interval: another request.
  w().now = kT0 + sh().arp_retry + 1;
  service_pending(w());
  flush_tx(w());
  auto p2 = tx(1);
  ASSERT_EQ(p2.size(), 1u);
  EXPECT_EQ(get16(&p2[0][12]), 0x0806);
  EXPECT_EQ(w().counters.arp_requests.load(), 2u);
  // The backend answers; the held packet goes out with its MAC.
  rx(build_arp(2, kB3Mac, kB3, kPortMac[1], kPort1Ip, kPortMac[1]), 1);
  EXPECT_EQ(tx(1).size(), 0u) << "the ARP reply itself sends nothing";
  service_pending(w());
  flush_tx(w());
  auto p3 = tx(1);
  ASSERT_EQ(p3.size(), 1u);
  const uint8_t* o = p3[0].data();
  expect_valid_ipv4(p3[0], "held packet");
  EXPECT_TRUE(mac_is(o, kB3Mac));
  EXPECT_TRUE(mac_is(o + 6, kPortMac[1]));
  EXPECT_EQ(ip_dst(o), kB3);
  EXPECT_EQ(ip_src(o), kLocal);
  EXPECT_EQ(ip_ttl(o), 63);
  EXPECT_EQ(w().n_pending, 0u);
  // Next packets of the flow go straight out.
  const Frame ack = one_out(build_frame(from_client(49000, kTcpAck, kVipArp, 80)), 0, 1);
  ASSERT_FALSE(ack.empty());
  EXPECT_TRUE(mac_is(ack.data(), kB3Mac));
  EXPECT_EQ(total_drops(), 0u) << drop_summary();
}

// A stale neighbour is still used, and refreshed with one ARP request.
TEST_F(WorkerTest, StaleNeighbourIsUsedAndRefreshed) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  w().now = kT0 + 61 * sh().tsc_hz;  // B1 confirmed at kT0; reachable time is 60 s
  uint8_t mac[6];
  ASSERT_EQ(sh().neigh.lookup(kB1, mac, w().now), NeighState::kStale);
  rx(build_frame(from_client(49500, kTcpSyn)), 0);
  auto out = tx(1);
  ASSERT_EQ(out.size(), 2u) << "the packet and one ARP request; drops:" << drop_summary();
  int data = 0, arp = 0;
  for (const auto& f : out) {
    if (get16(&f[12]) == 0x0806) {
      ++arp;
      ArpInfo ai;
      ASSERT_TRUE(parse_arp(f.data(), f.size(), &ai));
      EXPECT_EQ(ai.tpa, kB1);
    } else {
      ++data;
      EXPECT_TRUE(mac_is(f.data(), kB1Mac)) << "the stale MAC is still used";
    }
  }
  EXPECT_EQ(data, 1);
  EXPECT_EQ(arp, 1);
  // The next packet in the same interval does not ARP again.
  rx(build_frame(from_client(49500, kTcpAck)), 0);
  EXPECT_EQ(tx(1).size(), 1u);
  EXPECT_EQ(w().counters.arp_requests.load(), 1u);
}

TEST_F(WorkerTest, UnresolvedNextHopGivesUp) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  rx(build_frame(from_client(50000, kTcpSyn, kVipArp, 81)), 0);  // -> kB4, never answers
  tx(1);
  EXPECT_EQ(w().n_pending, 1u);
  w().now = kT0 + sh().arp_give_up / 2;
  service_pending(w());
  flush_tx(w());
  tx(1);
  EXPECT_EQ(w().n_pending, 1u);
  w().now = kT0 + sh().arp_give_up + 1;
  service_pending(w());
  flush_tx(w());
  EXPECT_EQ(w().n_pending, 0u);
  EXPECT_EQ(drops(kNeighUnresolved), 1u) << drop_summary();
  auto rest = tx(1);
  for (const auto& f : rest) EXPECT_EQ(get16(&f[12]), 0x0806) << "only ARP requests, never the packet";
}

TEST_F(WorkerTest, MalformedFramesCountedByReason) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  struct Case {
    Frame f;
    DropReason r;
  };
  std::vector<Case> cases;
  const Frame good = build_frame(from_client(51000, kTcpSyn));
  cases.push_back({Frame(good.begin(), good.begin() + 10), kTruncated});
  {
    FrameSpec s = from_client(51000, kTcpSyn);
    s.ethertype = 0x86dd;
    cases.push_back({build_frame(s), kBadEthertype});
  }
  {
    Frame f = good;
    f[14] = 0x65;  // version 6
    fix_ip_cksum(f);
    cases.push_back({f, kBadIpHeader});
  }
  {
    Frame f = good;
    f[24] ^= 0xff;
    cases.push_back({f, kBadIpChecksum});
  }
  {
    FrameSpec s = from_client(51000, kTcpSyn);
    s.frag = 0x2000;
    cases.push_back({build_frame(s), kFragment});
  }
  {
    FrameSpec s = from_client(51000, kTcpSyn);
    s.ttl = 1;
    cases.push_back({build_frame(s), kTtlExceeded});
  }
  {
    Frame f = good;
    f[34 + 12] = 0x30;  // data offset 3
    cases.push_back({f, kBadL4Header});
  }
  {
    FrameSpec s = from_client(51000, kTcpSyn);
    s.proto = 47;
    s.payload = {0, 0, 8, 0};
    cases.push_back({build_frame(s), kUnsupportedProto});
  }
  cases.push_back({build_frame(from_client(51000, kTcpSyn, kVip, 9999)), kVipNoPort});
  cases.push_back({build_frame(from_client(51000, kTcpSyn, ip4(10, 0, 0, 99), 80)), kNoService});
  cases.push_back({build_frame(from_client(51000, kTcpSyn, kPort0Ip, 22)), kLocalUnhandled});
  {
    FrameSpec s = from_client(51000, kTcpSyn);
    s.proto = kProtoIcmp;
    s.icmp_type = 13;  // timestamp: not handled
    cases.push_back({build_frame(s), kLocalUnhandled});
  }
  std::map<DropReason, uint64_t> want;
  for (const auto& c : cases) {
    rx(c.f, 0);
    ++want[c.r];
    EXPECT_EQ(drops(c.r), want[c.r]) << "expected " << drop_reason_name(c.r) << "; drops:" << drop_summary();
  }
  expect_nothing_out("malformed frames");
  EXPECT_EQ(total_drops(), cases.size()) << drop_summary();
  EXPECT_EQ(w().conns.size(), 0u);
}

TEST_F(WorkerTest, WrongMacIsNotForUs) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  FrameSpec s = from_client(52000, kTcpSyn);
  s.dmac = {0x02, 0x12, 0x34, 0x56, 0x78, 0x9a};
  rx(build_frame(s), 0);
  EXPECT_EQ(drops(kNotForUs), 1u);
  s.dmac = kPortMac[1];  // the other port's MAC
  rx(build_frame(s), 0);
  EXPECT_EQ(drops(kNotForUs), 2u);
  s.dmac = kBcast;  // IP to broadcast
  rx(build_frame(s), 0);
  EXPECT_EQ(drops(kNotForUs), 3u);
  s.dmac = {0x01, 0x00, 0x5e, 0x00, 0x00, 0x01};  // IP multicast
  rx(build_frame(s), 0);
  EXPECT_EQ(drops(kNotForUs), 4u);
  // A packet from a port the dataplane does not own.
  rte_mbuf* m = mbuf_of(build_frame(from_client(52000, kTcpSyn)), 0);
  ASSERT_NE(m, nullptr);
  m->port = 31;
  process_burst(w(), &m, 1, false);
  flush_tx(w());
  EXPECT_EQ(drops(kNotForUs), 5u);
  expect_nothing_out("not for us");
  EXPECT_EQ(w().conns.size(), 0u);
  EXPECT_EQ(total_drops(), 5u) << drop_summary();
}

TEST_F(WorkerTest, MultiSegmentMbufIsDropped) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  const Frame f = build_frame(from_client(52500, kTcpSyn));
  rte_mbuf* a = mbuf_of(Frame(f.begin(), f.begin() + 30), 0);
  rte_mbuf* b = mbuf_of(Frame(f.begin() + 30, f.end()), 0);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(rte_pktmbuf_chain(a, b), 0);
  process_burst(w(), &a, 1, false);
  flush_tx(w());
  expect_nothing_out("chained mbuf");
  EXPECT_EQ(drops(kTruncated), 1u);
}

TEST_F(WorkerTest, IcmpEchoToVipGetsReply) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  FrameSpec s = from_client(0, 0);
  s.proto = kProtoIcmp;
  s.icmp_type = 8;
  s.icmp_id = 0x77;
  s.payload.assign(56, 0x61);
  const Frame in = build_frame(s);
  const Frame out = one_out(in, 0, 0);
  ASSERT_FALSE(out.empty());
  const uint8_t* o = out.data();
  expect_valid_ipv4(out, "echo reply");
  EXPECT_TRUE(mac_is(o, kClientMac));
  EXPECT_TRUE(mac_is(o + 6, kPortMac[0]));
  EXPECT_EQ(ip_src(o), kVip);
  EXPECT_EQ(ip_dst(o), kClient);
  EXPECT_EQ(o[34], 0);
  EXPECT_EQ(out.size(), in.size());
  EXPECT_TRUE(std::equal(out.begin() + 38, out.end(), in.begin() + 38));
  // To a port address too; elsewhere: no service.
  s.dst = kPort0Ip;
  EXPECT_FALSE(one_out(build_frame(s), 0, 0).empty());
  s.dst = ip4(8, 8, 8, 8);
  rx(build_frame(s), 0);
  expect_nothing_out("echo to a foreign address");
  EXPECT_EQ(drops(kNoService), 1u);
}

TEST_F(WorkerTest, ConnTableFull) {
  build(Forward::kFnat, 1, 16);
  if (HasFatalFailure()) return;
  for (uint16_t k = 0; k < 16; ++k) one_out(build_frame(from_client(53000 + k, kTcpSyn)), 0, 1);
  const uint32_t top = w().fnat[0].top;
  rx(build_frame(from_client(53100, kTcpSyn)), 0);
  expect_nothing_out("table full");
  EXPECT_EQ(drops(kConnTableFull), 1u) << drop_summary();
  EXPECT_EQ(w().fnat[0].top, top) << "the local port taken for the refused flow is returned";
  EXPECT_EQ(w().counters.active_flows.load(), 16u);
}

// The poll loop's sweep visits the whole table once per kSweepPeriodS, in
// slices sized by the time since its last call, whatever the packet rate.
TEST_F(WorkerTest, PacedSweepVisitsTheTableOncePerPeriod) {
  build(Forward::kNat, 1, 1000);
  if (HasFatalFailure()) return;
  const uint32_t cap = w().conns.capacity();
  for (uint32_t k = 0; k < cap; ++k) rx(build_frame(from_client(static_cast<uint16_t>(20000 + k), kTcpSyn)), 0);
  drain_all();
  ASSERT_EQ(w().conns.size(), cap) << "every entry in use, so each one visited is one reclaimed;" << drop_summary();
  const uint64_t period = sh().tsc_hz * kSweepPeriodS;
  uint64_t t = kT0 + 61 * sh().tsc_hz;  // past every entry's SYN_RECV timeout (60 s)
  w().now = t;
  sweep_conns_paced(w());  // the first call starts the clock
  EXPECT_EQ(w().conns.size(), cap);
  for (int i = 0; i < 100; ++i) {  // a tenth of the period, in 1 ms steps
    t += period / 1000;
    w().now = t;
    sweep_conns_paced(w());
  }
  const uint32_t tenth = cap - w().conns.size();
  EXPECT_GE(tenth, cap / 10 - 2);
  EXPECT_LE(tenth, cap / 10 + 2);
  // A pause of ten periods: one call visits at most a slice.
  t += 10 * period;
  w().now = t;
  sweep_conns_paced(w());
  EXPECT_EQ(cap - w().conns.size(), tenth + std::min(kSweepMaxSlice, cap - tenth));
  // Within one period in all, every entry was visited.
  for (int i = 0; i < 1000 && w().conns.size() > 0; ++i) {
    t += period / 1000;
    w().now = t;
    sweep_conns_paced(w());
  }
  EXPECT_EQ(w().conns.size(), 0u);
  EXPECT_EQ(w().counters.active_flows.load(), 0u);
}

TEST_F(WorkerTest, FnatPortsExhausted) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  w().fnat[0].top = 2;  // two local ports left
  one_out(build_frame(from_client(54000, kTcpSyn)), 0, 1);
  one_out(build_frame(from_client(54001, kTcpSyn)), 0, 1);
  rx(build_frame(from_client(54002, kTcpSyn)), 0);
  expect_nothing_out("no local port");
  EXPECT_EQ(drops(kFnatPortsExhausted), 1u) << drop_summary();
  EXPECT_EQ(w().conns.size(), 2u);
}

// loadBalancerSourceRanges: a client outside every range cannot open a flow
// (counted), one inside can; a range the publisher cannot read is refused.
TEST_F(WorkerTest, SourceRangesLimitNewFlows) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  cp::ServiceTable next = table_;
  auto open_to_client = vsvc(ip4(10, 96, 0, 120), 443, Protocol::kTcp, {rs(kB1, 80)});
  open_to_client.kind = "LoadBalancer";
  open_to_client.source_ranges = {"10.0.0.0/24", "192.0.2.0/24"};
  put(next, open_to_client);
  auto closed = vsvc(ip4(10, 96, 0, 121), 443, Protocol::kTcp, {rs(kB1, 80)});
  closed.kind = "LoadBalancer";
  closed.source_ranges = {"10.0.0.11/32", "192.0.2.0/24"};  // kClient is 10.0.0.10
  put(next, closed);
  std::string err;
  ASSERT_TRUE(pub_->apply(next, cp::TableDiff::compute(table_, next), false, &err)) << err;
  const Frame a = one_out(build_frame(from_client(45000, kTcpSyn, ip4(10, 96, 0, 120), 443)), 0, 1);
  ASSERT_FALSE(a.empty()) << drop_summary();
  rx(build_frame(from_client(45001, kTcpSyn, ip4(10, 96, 0, 121), 443)), 0);
  expect_nothing_out("source outside the ranges");
  EXPECT_EQ(drops(kSourceNotAllowed), 1u) << drop_summary();
  EXPECT_STREQ(drop_reason_name(kSourceNotAllowed), "source_not_allowed");

  cp::ServiceTable bad = next;
  auto broken = vsvc(ip4(10, 96, 0, 122), 443, Protocol::kTcp, {rs(kB1, 80)});
  broken.source_ranges = {"10.0.0.0/33"};
  put(bad, broken);
  EXPECT_FALSE(pub_->apply(bad, cp::TableDiff::compute(next, bad), false, &err));
  EXPECT_NE(err.find("not an IPv4 CIDR"), std::string::npos) << err;
}

// nat mode: one client port reaching the same backend through two VIPs gives
// both connections the same reply key; the second one is refused.
TEST_F(WorkerTest, NatReplyKeyCollisionIsRefused) {
  build(Forward::kNat);
  if (HasFatalFailure()) return;
  cp::ServiceTable next = table_;
  put(next, vsvc(ip4(10, 96, 0, 110), 8080, Protocol::kTcp, {rs(kB1, 80)}));
  put(next, vsvc(ip4(10, 96, 0, 111), 8080, Protocol::kTcp, {rs(kB1, 80)}));
  std::string err;
  ASSERT_TRUE(pub_->apply(next, cp::TableDiff::compute(table_, next), false, &err)) << err;
  const Frame a = one_out(build_frame(from_client(55000, kTcpSyn, ip4(10, 96, 0, 110), 8080)), 0, 1);
  ASSERT_FALSE(a.empty());
  rx(build_frame(from_client(55000, kTcpSyn, ip4(10, 96, 0, 111), 8080)), 0);
  expect_nothing_out("colliding reply key");
  EXPECT_EQ(drops(kConnKeyInUse), 1u) << drop_summary();
  // The first connection's replies still come back from its own VIP.
  const Frame back = one_out(build_frame(from_backend(kB1, kB1Mac, 80, kClient, 55000, kTcpSyn | kTcpAck)), 1, 0);
  ASSERT_FALSE(back.empty());
  EXPECT_EQ(ip_src(back.data()), ip4(10, 96, 0, 110));
}

// Two workers: a packet arriving at the worker that does not own its flow is
// handed over through the owner's ring; the owner translates it and sends
// on its own tx queue; the reply comes back to the same owner.
TEST_F(WorkerTest, RedirectToOwningWorker) {
  build(Forward::kFnat, 2);
  if (HasFatalFailure()) return;
  // Find a client (address, port) whose flow belongs to worker 1 and one for
  // worker 0 (bounded search: flow_owner may hash the address only).
  auto find_client = [&](uint32_t owner, uint32_t* addr, uint16_t* port) {
    for (uint32_t a = 10; a < 250; ++a)
      for (uint16_t p = 56000; p < 56016; ++p)
        if (flow_owner(ip4(10, 0, 0, a), p, 2) == owner) {
          *addr = ip4(10, 0, 0, a);
          *port = p;
          return true;
        }
    return false;
  };
  uint32_t c1, c0;
  uint16_t p1, p0;
  ASSERT_TRUE(find_client(1, &c1, &p1));
  ASSERT_TRUE(find_client(0, &c0, &p0));
  sh().neigh.update(c1, kClientMac.data(), kT0);
  sh().neigh.update(c0, kClientMac.data(), kT0);
  FrameSpec syn = from_client(p1, kTcpSyn);
  syn.src = c1;
  rx(build_frame(syn), 0, /*worker*/ 0);
  expect_nothing_out("redirected, not processed by worker 0");
  EXPECT_EQ(w(0).counters.redirects_out.load(), 1u);
  EXPECT_EQ(w(0).conns.size(), 0u);
  rte_mbuf* got[4];
  unsigned n = rte_ring_sc_dequeue_burst(sh().rings[1], reinterpret_cast<void**>(got), 4, nullptr);
  ASSERT_EQ(n, 1u);
  process_burst(w(1), got, 1, true);
  flush_tx(w(1));
  auto q1 = tx_queue(1, 1);
  EXPECT_EQ(tx_queue(1, 0).size(), 0u) << "worker 1 sends on its own queue";
  ASSERT_EQ(q1.size(), 1u) << drop_summary(1);
  const uint16_t lport = l4_sport(q1[0].data());
  EXPECT_EQ(lport % 2, 1) << "worker 1's local ports are the odd ones";
  EXPECT_EQ(w(1).conns.size(), 1u);
  // The reply arrives at worker 0 and is redirected to worker 1 (full-NAT
  // replies are owned by local port).
  const uint32_t b = ip_dst(q1[0].data());
  rx(build_frame(from_backend(b, b == kB1 ? kB1Mac : kB2Mac, 80, kLocal, lport, kTcpSyn | kTcpAck)), 1, 0);
  expect_nothing_out("reply redirected");
  EXPECT_EQ(w(0).counters.redirects_out.load(), 2u);
  n = rte_ring_sc_dequeue_burst(sh().rings[1], reinterpret_cast<void**>(got), 4, nullptr);
  ASSERT_EQ(n, 1u);
  process_burst(w(1), got, 1, true);
  flush_tx(w(1));
  auto back = tx_queue(0, 1);
  ASSERT_EQ(back.size(), 1u) << drop_summary(1);
  EXPECT_EQ(ip_src(back[0].data()), kVip);
  EXPECT_EQ(ip_dst(back[0].data()), c1);
  EXPECT_EQ(l4_dport(back[0].data()), p1);
  // A flow owned by worker 0 is processed in place.
  FrameSpec syn0 = from_client(p0, kTcpSyn);
  syn0.src = c0;
  rx(build_frame(syn0), 0, 0);
  auto q0 = tx_queue(1, 0);
  ASSERT_EQ(q0.size(), 1u) << drop_summary(0);
  EXPECT_EQ(l4_sport(q0[0].data()) % 2, 0);
  EXPECT_EQ(w(0).counters.redirects_out.load(), 2u);
  EXPECT_EQ(total_drops(0) + total_drops(1), 0u);
}

// Replies to a client outside every connected subnet go to the gateway's MAC;
// without a gateway there is no route.
TEST_F(WorkerTest, ClientBehindGatewayAndNoRoute) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  const uint32_t far = ip4(192, 168, 5, 5), gw = ip4(10, 0, 0, 254);
  const MacAddr gw_mac{0x02, 0x99, 0, 0, 0, 0xfe};
  sh().neigh.update(gw, gw_mac.data(), kT0);
  FrameSpec syn = from_client(59000, kTcpSyn);
  syn.src = far;
  syn.smac = gw_mac;
  const Frame out = one_out(build_frame(syn), 0, 1);
  ASSERT_FALSE(out.empty());
  // Without a gateway the reply cannot be routed.
  const Frame reply = build_frame(from_backend(ip_dst(out.data()), ip_dst(out.data()) == kB1 ? kB1Mac : kB2Mac, 80,
                                               kLocal, l4_sport(out.data()), kTcpSyn | kTcpAck));
  rx(reply, 1);
  expect_nothing_out("no route to the client");
  EXPECT_EQ(drops(kNoRoute), 1u) << drop_summary();
  // With a gateway on port 0 it goes there.
  sh().ports[0].gateway = gw;
  const Frame back = one_out(reply, 1, 0);
  ASSERT_FALSE(back.empty());
  EXPECT_TRUE(mac_is(back.data(), gw_mac)) << "next hop is the gateway";
  EXPECT_TRUE(mac_is(back.data() + 6, kPortMac[0]));
  EXPECT_EQ(ip_dst(back.data()), far);
  expect_valid_ipv4(back, "via gateway");
}

TEST_F(WorkerTest, NeighbourQueueFull) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  for (uint16_t k = 0; k < kPendingMax; ++k) rx(build_frame(from_client(60000 + k, kTcpSyn, kVipArp, 80)), 0);
  EXPECT_EQ(w().n_pending, kPendingMax);
  EXPECT_EQ(total_drops(), 0u) << drop_summary();
  rx(build_frame(from_client(60100, kTcpSyn, kVipArp, 80)), 0);
  EXPECT_EQ(drops(kNeighQueueFull), 1u) << drop_summary();
  EXPECT_EQ(w().n_pending, kPendingMax);
  auto arps = tx(1);
  EXPECT_EQ(arps.size(), 1u) << "one ARP request for the address, however many packets wait";
}

TEST_F(WorkerTest, TxQueueFullIsCountedAndFreed) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  // The loopback ring holds 1023 frames; nothing drains it during the burst.
  FrameSpec u = from_client(61000, 0, kVip, 5353);
  u.proto = kProtoUdp;
  u.payload = {1, 2, 3};
  const Frame f = build_frame(u);
  const unsigned total = 1100;
  for (unsigned k = 0; k < total; k += kBurst) {
    rte_mbuf* ms[kBurst];
    const unsigned n = std::min<unsigned>(kBurst, total - k);
    for (unsigned i = 0; i < n; ++i) ms[i] = mbuf_of(f, 0);
    process_burst(w(), ms, static_cast<uint16_t>(n), false);
    flush_tx(w());
  }
  const uint64_t sent = w().counters.tx.load(), full = drops(kTxFull);
  EXPECT_EQ(sent + full, total) << drop_summary();
  EXPECT_GT(full, 0u);
  EXPECT_EQ(tx(1).size(), sent);
}

TEST_F(WorkerTest, BurstOfManyPacketsAndTxBufferFlushes) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  // More packets than the tx buffer holds (kBurst * 2) in one burst.
  std::vector<rte_mbuf*> ms;
  for (uint16_t k = 0; k < 100; ++k) ms.push_back(mbuf_of(build_frame(from_client(58000 + k, kTcpSyn)), 0));
  for (size_t off = 0; off < ms.size(); off += kBurst) {
    const uint16_t n = static_cast<uint16_t>(std::min<size_t>(kBurst, ms.size() - off));
    process_burst(w(), ms.data() + off, n, false);
  }
  flush_tx(w());
  auto out = tx(1);
  EXPECT_EQ(out.size(), 100u) << drop_summary();
  for (const auto& f : out) {
    expect_valid_ipv4(f, "burst");
    if (HasFailure()) break;
  }
  EXPECT_EQ(w().counters.tx.load(), 100u);
  EXPECT_EQ(w().conns.size(), 100u);
}

// process_burst looks the whole burst up first (burst.h): a packet whose flow
// an earlier packet of the same burst created, or removed and created again,
// must see that, exactly as if the packets came one by one.
class WorkerBurstTest : public WorkerTest {
 protected:
  // Runs the frames through worker 0 as one burst; returns what left on port 1.
  std::vector<Frame> one_burst(const std::vector<Frame>& in) {
    std::vector<rte_mbuf*> ms;
    for (const auto& f : in) ms.push_back(mbuf_of(f, 0));
    process_burst(w(), ms.data(), static_cast<uint16_t>(ms.size()), false);
    flush_tx(w());
    return tx(1);
  }
  static std::vector<uint8_t> tuple_of(const Frame& f) { return Frame(f.begin() + 26, f.begin() + 38); }
};

TEST_F(WorkerBurstTest, PacketsOfANewFlowInOneBurstShareItsConnection) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  // SYN, its retransmission, the handshake's ACK and data: one connection.
  const auto out = one_burst({build_frame(from_client(52000, kTcpSyn)), build_frame(from_client(52000, kTcpSyn)),
                              build_frame(from_client(52000, kTcpAck)),
                              build_frame(from_client(52000, kTcpAck | kTcpPsh)),
                              build_frame(from_client(52001, kTcpSyn))});
  ASSERT_EQ(out.size(), 5u) << drop_summary();
  EXPECT_EQ(total_drops(), 0u) << drop_summary();
  EXPECT_EQ(w().conns.size(), 2u);
  for (size_t i = 1; i < 4; ++i) EXPECT_EQ(tuple_of(out[i]), tuple_of(out[0])) << "packet " << i;
  EXPECT_NE(tuple_of(out[4]), tuple_of(out[0]));
  for (const auto& f : out) expect_valid_ipv4(f, "burst");
}

TEST_F(WorkerBurstTest, PortReuseAfterCloseWithinOneBurst) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  const Frame first = one_out(build_frame(from_client(52100, kTcpSyn)), 0, 1);
  one_out(build_frame(from_client(52100, kTcpRst)), 0, 1);  // closed
  // A new SYN on the same port replaces the closed connection; the ACK right
  // behind it in the same burst must follow the new one.
  const auto out = one_burst({build_frame(from_client(52100, kTcpSyn)), build_frame(from_client(52100, kTcpAck))});
  ASSERT_EQ(out.size(), 2u) << drop_summary();
  EXPECT_EQ(total_drops(), 0u) << drop_summary();
  EXPECT_EQ(tuple_of(out[1]), tuple_of(out[0]));
  EXPECT_EQ(w().conns.size(), 1u);
  bool reply = false;
  const Conn* c = w().conns.lookup(make_key(kClient, 52100, kVip, 8080, kProtoTcp), &reply);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->state, ConnState::kEstablished);
  (void)first;
}

// A connection removed by an earlier packet of the burst, and its entry taken
// by another flow's new connection right after (the free list hands the same
// entry back), must not be used by a later packet of the removed flow: the
// burst's lookup for that packet named the entry, the change log sends it to
// a fresh lookup, which finds nothing (as one packet at a time would).
TEST_F(WorkerBurstTest, EntryReusedByAnotherFlowWithinOneBurst) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  const Frame a = one_out(build_frame(from_client(46000, kTcpSyn)), 0, 1);
  ASSERT_FALSE(a.empty());
  ASSERT_EQ(ip_dst(a.data()), kB1);
  one_out(build_frame(from_client(46000, kTcpAck)), 0, 1);
  bool reply = false;
  const Conn* ca = w().conns.lookup(make_key(kClient, 46000, kVip, 8080, kProtoTcp), &reply);
  ASSERT_NE(ca, nullptr);
  // The control plane removes B1: the flow's next packet expires it.
  cp::ServiceTable next = table_;
  put(next, vsvc(kVip, 8080, Protocol::kTcp, {rs(kB2, 80)}));
  const cp::TableDiff d = cp::TableDiff::compute(table_, next);
  std::string err;
  ASSERT_TRUE(pub_->apply(next, d, false, &err)) << err;
  // One burst: A mid-flow (expired: RST), a new flow B (takes A's entry), A
  // again (no connection any more: dropped, not sent on B's connection).
  std::vector<rte_mbuf*> ms{mbuf_of(build_frame(from_client(46000, kTcpAck)), 0),
                            mbuf_of(build_frame(from_client(46001, kTcpSyn)), 0),
                            mbuf_of(build_frame(from_client(46000, kTcpAck | kTcpPsh)), 0)};
  process_burst(w(), ms.data(), static_cast<uint16_t>(ms.size()), false);
  flush_tx(w());
  const Conn* cb = w().conns.lookup(make_key(kClient, 46001, kVip, 8080, kProtoTcp), &reply);
  ASSERT_NE(cb, nullptr);
  EXPECT_EQ(cb, ca) << "the test needs B to reuse A's entry";
  const auto to_client = tx(0), to_backends = tx(1);
  ASSERT_EQ(to_client.size(), 1u) << drop_summary();
  EXPECT_EQ(tcp_flags(to_client[0].data()), kTcpRst);
  ASSERT_EQ(to_backends.size(), 1u) << drop_summary();
  EXPECT_EQ(l4_sport(to_backends[0].data()), cb->lport) << "only B's SYN went to a backend";
  EXPECT_EQ(ip_dst(to_backends[0].data()), kB2);
  EXPECT_EQ(drops(kNoConn), 1u) << drop_summary();
  EXPECT_EQ(w().conns.size(), 1u);
}

// output() keeps the last reachable next hop for the rest of the burst; an
// ARP reply that moves that neighbour to a new MAC in the middle of a burst
// counts from the next packet on, as it would one packet at a time.
TEST_F(WorkerBurstTest, NeighbourMacChangeWithinOneBurst) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  one_out(build_frame(from_client(47000, kTcpSyn)), 0, 1);  // to B1 (rr starts there)
  const MacAddr moved{0x02, 0xb0, 0, 0, 0, 0x99};
  std::vector<rte_mbuf*> ms{mbuf_of(build_frame(from_client(47000, kTcpAck)), 0),
                            mbuf_of(build_arp(2, moved, kB1, kPortMac[1], kPort1Ip, kPortMac[1]), 1),
                            mbuf_of(build_frame(from_client(47000, kTcpAck | kTcpPsh)), 0)};
  process_burst(w(), ms.data(), static_cast<uint16_t>(ms.size()), false);
  flush_tx(w());
  const auto out = tx(1);
  ASSERT_EQ(out.size(), 2u) << drop_summary();
  EXPECT_TRUE(mac_is(out[0].data(), kB1Mac));
  EXPECT_TRUE(mac_is(out[1].data(), moved)) << "the MAC learned in the burst";
  EXPECT_EQ(total_drops(), 0u) << drop_summary();
}

}  // namespace
}  // namespace vipd::dp
