// ICMP errors quoting a NATed flow (dataplane/fastpath/icmp_error.h), through
// the whole per-packet pipeline on real mbufs: the net_ring2 and net_ring3
// vdevs (main.cc) loop every tx queue back into the rx queue of the same
// index, like worker_test.cc's pair. A flow is opened by a real packet, the
// forwarded packet is read back, and an ICMP error quoting it (as a router or
// the peer would send it) must come out translated: the quote equal to the
// packet the other side sent (but for the TTL vipd decremented), every
// checksum valid (the quoted TCP/UDP one included).
#include "dataplane/fastpath/icmp_error.h"

#include <gtest/gtest.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include <algorithm>

#include "dataplane/fastpath/worker.h"
#include "dataplane/publish/publisher.h"
#include "tests/unit/dataplane/shared_fixture.h"

namespace vipd::dp {
namespace {

using namespace test;
using cp::Protocol;
using Frame = std::vector<uint8_t>;

// Port 0 faces clients (10.0.0.1/24), port 1 backends (10.1.0.1/24); fnat
// local address 10.1.0.100; a router on each side.
const uint32_t kPort0Ip = ip4(10, 0, 0, 1), kPort1Ip = ip4(10, 1, 0, 1);
const uint32_t kLocal = ip4(10, 1, 0, 100);
const uint32_t kClient = ip4(10, 0, 0, 10), kClientRouter = ip4(10, 0, 0, 254);
const uint32_t kVip = ip4(10, 96, 0, 100);
const uint32_t kB1 = ip4(10, 1, 0, 11), kPodRouter = ip4(10, 1, 0, 254);
const MacAddr kPortMac[2] = {{0x02, 0x00, 0x00, 0x00, 0xb0, 0x00}, {0x02, 0x00, 0x00, 0x00, 0xb1, 0x00}};
const MacAddr kClientMac{0x02, 0xc1, 0, 0, 0, 0x10}, kB1Mac{0x02, 0xb0, 0, 0, 0, 0x11};
constexpr uint16_t kQueues = 2;
constexpr unsigned kPoolSize = 1023;
constexpr uint64_t kT0 = 1'000'000'000'000ull;

class IcmpErrorTest : public ::testing::TestWithParam<Forward> {
 protected:
  static void SetUpTestSuite() {
    if (!g_eal_ok || ports_ok_ || pool_) return;
    pool_ = rte_pktmbuf_pool_create("icmpt_pool", kPoolSize, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, 0);
    if (!pool_) {
      suite_error_ = std::string("rte_pktmbuf_pool_create: ") + rte_strerror(rte_errno);
      return;
    }
    const char* names[2] = {"net_ring2", "net_ring3"};
    for (int i = 0; i < 2; ++i) {
      if (rte_eth_dev_get_port_by_name(names[i], &pid_[i]) != 0) {
        suite_error_ = std::string("no ethdev ") + names[i];
        return;
      }
      rte_eth_conf conf{};
      int rc = rte_eth_dev_configure(pid_[i], kQueues, kQueues, &conf);
      for (uint16_t q = 0; rc == 0 && q < kQueues; ++q) {
        rc = rte_eth_rx_queue_setup(pid_[i], q, 256, 0, nullptr, pool_);
        if (rc == 0) rc = rte_eth_tx_queue_setup(pid_[i], q, 256, 0, nullptr);
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
    drain();
    ASSERT_EQ(rte_mempool_avail_count(pool_), kPoolSize) << "mbufs leaked by an earlier test";
    build(GetParam(), 1);
  }

  void build(Forward fwd, uint32_t n_workers) {
    workers_.clear();
    pub_.reset();
    holder_ = std::make_unique<SharedHolder>();
    std::string err;
    ASSERT_TRUE(holder_->init(8, 16, n_workers, &err)) << err;
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
      ASSERT_TRUE(w->conns.init(uniq("icconns_"), 1024, 0, &err)) << err;
      ASSERT_TRUE(w->tmpls.init(uniq("ictmpl_"), 1024, 0, &err)) << err;
      w->sched = static_cast<SchedState*>(rte_zmalloc("ic_sched", sizeof(SchedState) * s.max_services, 64));
      w->dest_counters = static_cast<DestCounters*>(rte_zmalloc("ic_dctr", sizeof(DestCounters) * s.max_dests, 64));
      ASSERT_TRUE(w->sched && w->dest_counters);
      for (uint32_t a = 0; a < s.n_local_addrs; ++a) {
        FnatPool& fp = w->fnat[a];
        fp.ports = static_cast<uint16_t*>(rte_zmalloc("ic_fnat", sizeof(uint16_t) * 65536, 64));
        ASSERT_NE(fp.ports, nullptr);
        for (uint32_t port = 65535; port >= 1024; --port)
          if (port % n_workers == i) fp.ports[fp.top++] = static_cast<uint16_t>(port);
      }
      if (n_workers > 1) {
        s.rings[i] = rte_ring_create(uniq("icredir_").c_str(), 256, 0, RING_F_SC_DEQ);
        ASSERT_NE(s.rings[i], nullptr);
      }
      w->now = kT0;
      workers_.push_back(std::move(w));
    }
    pub_ = std::make_unique<Publisher>(s);
    table_ = cp::ServiceTable{};
    put(table_, vsvc(kVip, 8080, Protocol::kTcp, {rs(kB1, 80)}));
    put(table_, vsvc(kVip, 5353, Protocol::kUdp, {rs(kB1, 53)}));
    ASSERT_TRUE(pub_->apply(table_, cp::TableDiff{}, true, &err)) << err;
    for (uint32_t a : {kClient, kClientRouter}) s.neigh.update(a, kClientMac.data(), kT0);
    s.neigh.update(kB1, kB1Mac.data(), kT0);
  }

  void TearDown() override {
    for (auto& w : workers_) {
      for (uint32_t i = 0; i < w->n_pending; ++i) rte_pktmbuf_free(w->pending[i].m);
      for (uint16_t p = 0; p < kMaxPorts; ++p)
        for (uint16_t k = 0; k < w->n_tx[p]; ++k) rte_pktmbuf_free(w->txbuf[p][k]);
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
      drain();
      EXPECT_EQ(rte_mempool_avail_count(pool_), kPoolSize) << "mbufs leaked (neither sent nor freed)";
    }
    pub_.reset();
    workers_.clear();
    holder_.reset();
  }

  bool fnat() const { return GetParam() == Forward::kFnat; }
  Worker& w(unsigned i = 0) { return *workers_[i]; }
  uint64_t drops(DropReason r, unsigned wi = 0) { return w(wi).counters.drops[r].load(); }
  uint64_t total_drops() {
    uint64_t n = 0;
    for (auto& wk : workers_)
      for (unsigned r = 0; r < kNumDropReasons; ++r) n += wk->counters.drops[r].load();
    return n;
  }

  // Receives `f` on a port through worker `wi`; then lets every worker serve
  // its redirect ring, and flushes.
  void rx(const Frame& f, uint16_t port_index, unsigned wi = 0) {
    rte_mbuf* m = rte_pktmbuf_alloc(pool_);
    ASSERT_NE(m, nullptr);
    std::memcpy(rte_pktmbuf_append(m, static_cast<uint16_t>(f.size())), f.data(), f.size());
    m->port = pid_[port_index];
    process_burst(w(wi), &m, 1, false);
    for (auto& wk : workers_) {
      if (wk->sh->n_workers > 1) {
        rte_mbuf* b[8];
        unsigned n = rte_ring_sc_dequeue_burst(wk->sh->rings[wk->index], reinterpret_cast<void**>(b), 8, nullptr);
        if (n) process_burst(*wk, b, static_cast<uint16_t>(n), true);
      }
      flush_tx(*wk);
    }
  }
  std::vector<Frame> tx(uint16_t port_index) {
    std::vector<Frame> out;
    for (uint16_t q = 0; q < kQueues; ++q) {
      rte_mbuf* b[32];
      uint16_t n;
      while ((n = rte_eth_rx_burst(pid_[port_index], q, b, 32)) > 0) {
        for (uint16_t i = 0; i < n; ++i) {
          const uint8_t* d = rte_pktmbuf_mtod(b[i], const uint8_t*);
          out.emplace_back(d, d + rte_pktmbuf_data_len(b[i]));
          rte_pktmbuf_free(b[i]);
        }
      }
    }
    return out;
  }
  void drain() { tx(0), tx(1); }
  Frame one_out(const Frame& f, uint16_t in_port, uint16_t out_port, unsigned wi = 0) {
    rx(f, in_port, wi);
    auto a = tx(out_port), b = tx(static_cast<uint16_t>(1 - out_port));
    EXPECT_EQ(a.size(), 1u) << "frames out on port " << out_port;
    EXPECT_EQ(b.size(), 0u) << "frames out on port " << 1 - out_port;
    return a.empty() ? Frame{} : a[0];
  }
  void none_out(const Frame& f, uint16_t in_port, DropReason want, const char* what) {
    const uint64_t before = drops(want);
    rx(f, in_port);
    EXPECT_EQ(tx(0).size() + tx(1).size(), 0u) << what;
    EXPECT_EQ(drops(want), before + 1) << what << ": want a drop as " << drop_reason_name(want);
  }

  FrameSpec client_pkt(uint8_t proto, uint16_t cport, uint16_t vport) {
    FrameSpec s;
    s.dmac = kPortMac[0];
    s.smac = kClientMac;
    s.src = kClient;
    s.dst = kVip;
    s.proto = proto;
    s.sport = cport;
    s.dport = vport;
    s.tcp_flags = kTcpSyn;
    s.tcp_opts = {2, 4, 0x05, 0xb4};
    s.payload = proto == kProtoUdp ? std::vector<uint8_t>{'p', 'i', 'n', 'g', '\n'} : std::vector<uint8_t>{};
    return s;
  }
  // The backend's reply to the forwarded packet `fwd` (addresses swapped).
  FrameSpec backend_reply(const Frame& fwd) {
    FrameSpec s;
    s.dmac = kPortMac[1];
    s.smac = kB1Mac;
    s.src = ip_dst(fwd.data());
    s.dst = ip_src(fwd.data());
    s.proto = ip_proto(fwd.data());
    s.sport = l4_dport(fwd.data());
    s.dport = l4_sport(fwd.data());
    s.tcp_flags = kTcpSyn | kTcpAck;
    s.seq = 7000;
    s.ack = 1001;
    s.payload = s.proto == kProtoUdp ? std::vector<uint8_t>{'p', 'o', 'd', '1', '\n'} : std::vector<uint8_t>{};
    return s;
  }
  // An ICMP error from `from` to `to` quoting `quoted_bytes` of the IPv4
  // packet in frame `pkt` (all of it when 0), arriving from the side of port
  // `side`. The type/code/mtu words are the caller's.
  Frame icmp_error(uint16_t side, uint32_t from, uint32_t to, const Frame& pkt, size_t quoted_bytes,
                   uint8_t type = 3, uint8_t code = 4, uint16_t mtu = 1200, uint8_t ttl = 64) {
    FrameSpec s;
    s.dmac = kPortMac[side];
    s.smac = side == 0 ? kClientMac : kB1Mac;
    s.src = from;
    s.dst = to;
    s.proto = kProtoIcmp;
    s.icmp_type = type;
    s.icmp_code = code;
    s.icmp_id = 0;
    s.icmp_seq = mtu;  // "next-hop MTU" (RFC 1191) in the low half of the second word
    s.ttl = ttl;
    const size_t all = pkt.size() - kEth;
    s.payload.assign(pkt.begin() + kEth, pkt.begin() + kEth + (quoted_bytes ? quoted_bytes : all));
    return build_frame(s);
  }

  // The translated error `out`: outer addresses, TTL 63, every checksum
  // valid, type/code/MTU kept, and the quote equal to `orig` (the packet the
  // receiver of the error sent) but for the TTL vipd took off.
  void expect_translated(const Frame& out, uint32_t osrc, uint32_t odst, const Frame& orig, size_t quoted,
                         const char* what) {
    ASSERT_GE(out.size(), kEth + 20 + 8 + 28) << what;
    const uint8_t* f = out.data();
    EXPECT_EQ(ip_src(f), osrc) << what;
    EXPECT_EQ(ip_dst(f), odst) << what;
    EXPECT_EQ(ip_proto(f), kProtoIcmp) << what;
    EXPECT_EQ(ip_ttl(f), 63) << what;
    EXPECT_TRUE(ip_cksum_exact(f)) << what << ": outer IP checksum";
    EXPECT_TRUE(icmp_cksum_ok(f)) << what << ": ICMP checksum over the whole message";
    const uint8_t* icmp = l4_of(f);
    const uint8_t* quote = icmp + 8;
    const size_t qlen = l4_len_of(f) - 8;
    ASSERT_EQ(qlen, quoted ? quoted : orig.size() - kEth) << what;
    std::vector<uint8_t> want(orig.begin() + kEth, orig.begin() + kEth + qlen);
    want[8] = static_cast<uint8_t>(want[8] - 1);  // vipd forwarded it: TTL - 1
    put16(&want[10], ref_ip_cksum(want.data(), (want[0] & 0x0f) * 4u));
    EXPECT_EQ(std::vector<uint8_t>(quote, quote + qlen), want)
        << what << ": the quote is not the original packet (TTL - 1)";
    Parsed p = parse_frame(f, out.size());
    EXPECT_EQ(p.kind, FrameKind::kIpv4) << what;
  }

  static inline rte_mempool* pool_ = nullptr;
  static inline uint16_t pid_[2] = {0, 0};
  static inline bool ports_ok_ = false;
  static inline std::string suite_error_ = "EAL not initialised";
  std::unique_ptr<SharedHolder> holder_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::unique_ptr<Publisher> pub_;
  cp::ServiceTable table_;
};

// Where errors about packets sent to the backend are addressed: the source
// the backend saw (fnat: the local address; nat: the client).
uint32_t backend_side_addr(const Frame& fwd) { return ip_src(fwd.data()); }

// A router next to the pod reports "fragmentation needed" for a UDP datagram
// vipd forwarded: the client gets it from the VIP, quoting its own datagram.
TEST_P(IcmpErrorTest, FragNeededForUdpReachesClientTranslated) {
  const Frame req = build_frame(client_pkt(kProtoUdp, 41000, 5353));
  const Frame fwd = one_out(req, 0, 1);
  ASSERT_FALSE(fwd.empty());
  EXPECT_EQ(ip_src(fwd.data()), fnat() ? kLocal : kClient);
  const Frame err = icmp_error(1, kPodRouter, backend_side_addr(fwd), fwd, 0);
  const Frame out = one_out(err, 1, 0);
  expect_translated(out, kVip, kClient, req, 0, "frag needed (udp, whole datagram quoted)");
  EXPECT_EQ(l4_of(out.data())[0], 3);
  EXPECT_EQ(l4_of(out.data())[1], 4);
  EXPECT_EQ(get16(l4_of(out.data()) + 6), 1200) << "the next-hop MTU is kept";
  EXPECT_TRUE(std::equal(kClientMac.begin(), kClientMac.end(), out.begin())) << "sent to the client's MAC";
  EXPECT_EQ(total_drops(), 0u);
}

// TCP, quoting the IP header + 8 bytes (RFC 792's minimum: no TCP checksum
// in the quote) and the whole SYN (the checksum translated too).
TEST_P(IcmpErrorTest, FragNeededForTcpShortAndLongQuotes) {
  const Frame syn = build_frame(client_pkt(kProtoTcp, 41001, 8080));
  const Frame fwd = one_out(syn, 0, 1);
  ASSERT_FALSE(fwd.empty());
  Frame out = one_out(icmp_error(1, kB1, backend_side_addr(fwd), fwd, 28), 1, 0);
  expect_translated(out, kVip, kClient, syn, 28, "tcp, 28 bytes quoted");
  out = one_out(icmp_error(1, kPodRouter, backend_side_addr(fwd), fwd, 0), 1, 0);
  expect_translated(out, kVip, kClient, syn, 0, "tcp, whole SYN quoted");
  // An odd quote length (IP + 19 bytes of TCP): checksum field quoted.
  out = one_out(icmp_error(1, kPodRouter, backend_side_addr(fwd), fwd, 39), 1, 0);
  expect_translated(out, kVip, kClient, syn, 39, "tcp, 39 bytes quoted");
  // Time exceeded is translated the same way.
  out = one_out(icmp_error(1, kPodRouter, backend_side_addr(fwd), fwd, 0, 11, 0, 0), 1, 0);
  expect_translated(out, kVip, kClient, syn, 0, "time exceeded");
  EXPECT_EQ(total_drops(), 0u);
}

// The client side reports a problem with a reply (port unreachable: the
// client's socket is gone): the backend gets it quoting its own reply.
TEST_P(IcmpErrorTest, ClientSideErrorReachesBackendTranslated) {
  for (uint8_t proto : {kProtoUdp, kProtoTcp}) {
    const uint16_t vport = proto == kProtoUdp ? 5353 : 8080;
    const Frame fwd = one_out(build_frame(client_pkt(proto, 41002, vport)), 0, 1);
    ASSERT_FALSE(fwd.empty());
    const Frame reply = build_frame(backend_reply(fwd));
    const Frame back = one_out(reply, 1, 0);
    ASSERT_FALSE(back.empty());
    ASSERT_EQ(ip_src(back.data()), kVip);
    const Frame out = one_out(icmp_error(0, kClient, kVip, back, 0, 3, 3, 0), 0, 1);
    // fnat: from the local address (the backend knows no client); nat: the
    // outer source stays (the backend routes clients through vipd).
    expect_translated(out, fnat() ? kLocal : kClient, kB1, reply, 0, "port unreachable from the client");
    // From a router on the client side (nat keeps the router as source).
    const Frame out2 = one_out(icmp_error(0, kClientRouter, kVip, back, 28, 11, 0, 0), 0, 1);
    expect_translated(out2, fnat() ? kLocal : kClientRouter, kB1, reply, 28, "time exceeded from a router");
  }
  EXPECT_EQ(total_drops(), 0u);
}

// A bad ICMP checksum stays bad (the receiver drops it), like NAT keeps a bad
// TCP/UDP checksum bad.
TEST_P(IcmpErrorTest, BadIcmpChecksumStaysBad) {
  const Frame fwd = one_out(build_frame(client_pkt(kProtoUdp, 41003, 5353)), 0, 1);
  ASSERT_FALSE(fwd.empty());
  Frame err = icmp_error(1, kPodRouter, backend_side_addr(fwd), fwd, 0);
  err[kEth + 20 + 2] ^= 0x5a;
  const Frame out = one_out(err, 1, 0);
  ASSERT_FALSE(out.empty());
  EXPECT_FALSE(icmp_cksum_ok(out.data()));
  EXPECT_TRUE(ip_cksum_exact(out.data()));
}

// Errors that quote no flow, or cannot be right, are dropped and counted.
TEST_P(IcmpErrorTest, UnmatchedAndMalformedErrorsDropped) {
  const Frame syn = build_frame(client_pkt(kProtoTcp, 41004, 8080));
  const Frame fwd = one_out(syn, 0, 1);
  ASSERT_FALSE(fwd.empty());
  const uint32_t to = backend_side_addr(fwd);
  // A quote of a flow vipd does not know (another source port).
  FrameSpec other = client_pkt(kProtoTcp, 41005, 8080);
  other.src = to;
  other.dst = kB1;
  other.dport = 80;
  none_out(icmp_error(1, kB1, to, build_frame(other), 0), 1, kIcmpErrorNoConn, "unknown flow");
  // The right quote, but from the client side (a spoofed error about
  // someone's flow: the flow's destination is not on that side).
  none_out(icmp_error(0, kClient, to, fwd, 0), 0, kIcmpErrorNoConn, "from the wrong side");
  // The client's packet quoted as if it came back (a reply-direction quote
  // addressed to the VIP matches the flow the wrong way round).
  none_out(icmp_error(0, kClient, kVip, syn, 0), 0, kIcmpErrorNoConn, "wrong direction");
  // Too short: IP header + 4 bytes.
  none_out(icmp_error(1, kB1, to, fwd, 24), 1, kBadL4Header, "quote shorter than IP + 8");
  // A quoted later fragment has no ports.
  Frame frag = fwd;
  put16(&frag[kEth + 6], 0x0010);
  fix_ip_cksum(frag);
  none_out(icmp_error(1, kB1, to, frag, 0), 1, kIcmpErrorNoConn, "quoted later fragment");
  // A quoted ICMP packet (vipd NATs none).
  FrameSpec ping = client_pkt(kProtoIcmp, 0, 0);
  ping.src = to;
  ping.dst = kB1;
  none_out(icmp_error(1, kB1, to, build_frame(ping), 0), 1, kIcmpErrorNoConn, "quoted ICMP");
  // TTL 1: not forwarded.
  none_out(icmp_error(1, kB1, to, fwd, 0, 3, 4, 1200, 1), 1, kTtlExceeded, "ttl 1");
  // To vipd's own port address: not NATed.
  none_out(icmp_error(1, kB1, kPort1Ip, fwd, 0), 1, kLocalUnhandled, "to a port address");
  // The quoted flow's destination was removed by the control plane.
  cp::ServiceTable next = table_;
  put(next, vsvc(kVip, 8080, Protocol::kTcp, {}));
  std::string e;
  ASSERT_TRUE(pub_->apply(next, cp::TableDiff::compute(table_, next), false, &e)) << e;
  none_out(icmp_error(1, kB1, to, fwd, 0), 1, kDestExpired, "destination removed");
}

// fnat with an address that is neither a VIP nor a local address.
TEST_P(IcmpErrorTest, ErrorToUnknownAddress) {
  const Frame fwd = one_out(build_frame(client_pkt(kProtoUdp, 41006, 5353)), 0, 1);
  ASSERT_FALSE(fwd.empty());
  const Frame err = icmp_error(1, kB1, ip4(10, 1, 0, 200), fwd, 0);
  if (fnat()) {
    none_out(err, 1, kNoService, "fnat: not a local address");
  } else {
    // nat: any non-local address may be a client; but an error goes to the
    // source of the packet it quotes (the client), not to 10.1.0.200.
    none_out(err, 1, kIcmpErrorNoConn, "nat: not addressed to the quoted source");
  }
}

// Two workers: the error arrives at the worker that does not own the flow
// and is passed to the owner over the ring, like the flow's packets.
TEST_P(IcmpErrorTest, RedirectedToTheOwningWorker) {
  build(GetParam(), 2);
  if (HasFatalFailure()) return;
  for (uint16_t cport = 42000; cport < 42008; ++cport) {
    const Frame req = build_frame(client_pkt(kProtoUdp, cport, 5353));
    const unsigned owner = flow_owner(kClient, cport, 2);
    const Frame fwd = one_out(req, 0, 1, owner);
    ASSERT_FALSE(fwd.empty());
    // Deliver the error to each worker in turn.
    for (unsigned wi = 0; wi < 2; ++wi) {
      const Frame out = one_out(icmp_error(1, kPodRouter, backend_side_addr(fwd), fwd, 0), 1, 0, wi);
      expect_translated(out, kVip, kClient, req, 0, "two workers");
    }
  }
  EXPECT_GT(w(0).counters.redirects_out.load() + w(1).counters.redirects_out.load(), 0u);
  EXPECT_EQ(total_drops(), 0u);
}

// Not an ICMP case, but part of the same hostile-traffic work (issue 9) and
// this fixture fits: SYN+FIN (and SYN+RST) start no connection, as in IPVS;
// the rr service drops them as no_connection, a plain SYN still works.
TEST_P(IcmpErrorTest, SynWithFinOrRstStartsNoConnection) {
  for (uint8_t fl : {uint8_t(kTcpSyn | kTcpFin), uint8_t(kTcpSyn | kTcpFin | kTcpPsh), uint8_t(kTcpSyn | kTcpRst)}) {
    FrameSpec s = client_pkt(kProtoTcp, 41100, 8080);
    s.tcp_flags = fl;
    none_out(build_frame(s), 0, kNoConn, "SYN with FIN or RST");
  }
  EXPECT_EQ(w().conns.size(), 0u);
  one_out(build_frame(client_pkt(kProtoTcp, 41100, 8080)), 0, 1);
  EXPECT_EQ(w().conns.size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Modes, IcmpErrorTest, ::testing::Values(Forward::kFnat, Forward::kNat),
                         [](const auto& i) { return i.param == Forward::kFnat ? std::string("Fnat") : std::string("Nat"); });

}  // namespace
}  // namespace vipd::dp
