// The whole per-packet pipeline on real mbufs and ethdev ports, for the test
// suites that drive process_burst: a pair of net_ring vdevs (created by
// main.cc's EAL arguments) loops every tx queue back into the rx queue of the
// same index, so what a worker transmits is read back with rte_eth_rx_burst.
// Shared and the workers are set up like DpdkDataplane::init does; no lcore
// is launched: a test calls process_burst / flush_tx / service_pending /
// sweep_conns with w.now set.
//
// Each suite names its own vdev pair and mempool (a Rings type, below), so
// that suites never share ports or mbufs; its build() adds its services and
// neighbours after build_workers().
#pragma once

#include <gtest/gtest.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/fastpath/worker.h"
#include "dataplane/publish/publisher.h"
#include "tests/unit/dataplane/shared_fixture.h"

namespace vipd::dp::test {

using Frame = std::vector<uint8_t>;

// Topology of every suite: port 0 faces clients (10.0.0.1/24), port 1 faces
// backends (10.1.0.1/24); the fnat local address is 10.1.0.100.
inline const uint32_t kPort0Ip = ip4(10, 0, 0, 1), kPort1Ip = ip4(10, 1, 0, 1);
inline const uint32_t kLocal = ip4(10, 1, 0, 100);
constexpr uint16_t kQueues = 2;
constexpr uint64_t kT0 = 1'000'000'000'000ull;

inline bool mac_is(const uint8_t* p, const MacAddr& m) { return std::equal(m.begin(), m.end(), p); }

// Rings: a type with
//   static constexpr const char* kPorts[2];  // the suite's net_ring vdevs
//   static constexpr const char* kPool;      // its mempool's name
//   static constexpr unsigned kPoolSize;
//   static constexpr uint16_t kRingSize;     // rx/tx descriptors per queue
//   static inline const MacAddr kMac[2];     // the two ports' MACs
template <class Rings>
class WorkerFixture : public ::testing::Test {
 protected:
  // Once per process and Rings (also for derived parameterised suites): the
  // mempool and the two ports stay up until EAL cleanup in main().
  static void SetUpTestSuite() {
    if (!g_eal_ok || ports_ok_ || pool_) return;
    pool_ = rte_pktmbuf_pool_create(Rings::kPool, Rings::kPoolSize, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, 0);
    if (!pool_) {
      suite_error_ = std::string("rte_pktmbuf_pool_create: ") + rte_strerror(rte_errno);
      return;
    }
    for (int i = 0; i < 2; ++i) {
      if (rte_eth_dev_get_port_by_name(Rings::kPorts[i], &pid_[i]) != 0) {
        suite_error_ = std::string("no ethdev ") + Rings::kPorts[i] + " (is the net_ring PMD available?)";
        return;
      }
      rte_eth_conf conf{};
      int rc = rte_eth_dev_configure(pid_[i], kQueues, kQueues, &conf);
      for (uint16_t q = 0; rc == 0 && q < kQueues; ++q) {
        rc = rte_eth_rx_queue_setup(pid_[i], q, Rings::kRingSize, 0, nullptr, pool_);
        if (rc == 0) rc = rte_eth_tx_queue_setup(pid_[i], q, Rings::kRingSize, 0, nullptr);
      }
      if (rc == 0) rc = rte_eth_dev_start(pid_[i]);
      if (rc != 0) {
        suite_error_ = std::string("port setup of ") + Rings::kPorts[i] + ": " + rte_strerror(-rc);
        return;
      }
    }
    ports_ok_ = true;
  }

  void SetUp() override {
    VIPD_REQUIRE_EAL();
    if (!ports_ok_) GTEST_SKIP() << "ports unavailable: " << suite_error_;
    drain_all();
    ASSERT_EQ(rte_mempool_avail_count(pool_), Rings::kPoolSize) << "mbufs leaked by an earlier test";
  }

  // Shared (ports, forwarding method, local address) + n_workers workers and
  // the publisher, with no service yet (table_ empty).
  void build_workers(Forward fwd, uint32_t n_workers, uint32_t conn_capacity, uint32_t tmpl_capacity,
                     uint32_t max_services, uint32_t max_dests, unsigned redirect_ring_size) {
    free_workers();  // a test may build again
    table_ = cp::ServiceTable{};
    holder_ = std::make_unique<SharedHolder>();
    std::string err;
    ASSERT_TRUE(holder_->init(max_services, max_dests, n_workers, &err)) << err;
    Shared& s = holder_->sh;
    for (int i = 0; i < 2; ++i) {
      s.ports[i].port_id = pid_[i];
      std::copy(Rings::kMac[i].begin(), Rings::kMac[i].end(), s.ports[i].mac);
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
      ASSERT_TRUE(w->conns.init(uniq("tconns_"), conn_capacity, 0, &err, s.local_addrs, s.n_local_addrs)) << err;
      ASSERT_TRUE(w->tmpls.init(uniq("ttmpl_"), tmpl_capacity, 0, &err)) << err;
      ASSERT_TRUE(w->proxy.init(uniq("tproxy_"), proxy_capacity_ ? proxy_capacity_ : conn_capacity, 0, &err)) << err;
      w->sched = static_cast<SchedState*>(rte_zmalloc("t_sched", sizeof(SchedState) * s.max_services, 64));
      w->dest_counters = static_cast<DestCounters*>(rte_zmalloc("t_dctr", sizeof(DestCounters) * s.max_dests, 64));
      ASSERT_NE(w->sched, nullptr);
      ASSERT_NE(w->dest_counters, nullptr);
      s.dest_counters[i] = w->dest_counters;
      for (uint32_t a = 0; a < s.n_local_addrs; ++a) {
        FnatPool& fp = w->fnat[a];
        fp.ports = static_cast<uint16_t*>(rte_zmalloc("t_fnat", sizeof(uint16_t) * 65536, 64));
        ASSERT_NE(fp.ports, nullptr);
        for (uint32_t port = 65535; port >= 1024; --port)
          if (port % n_workers == i) fp.ports[fp.top++] = static_cast<uint16_t>(port);
      }
      if (n_workers > 1) {
        s.rings[i] = rte_ring_create(uniq("tredir_").c_str(), redirect_ring_size, 0, RING_F_SC_DEQ);
        ASSERT_NE(s.rings[i], nullptr);
      }
      w->now = kT0;
      workers_.push_back(std::move(w));
    }
    pub_ = std::make_unique<Publisher>(s);
  }

  void TearDown() override {
    free_workers();
    if (ports_ok_) {
      drain_all();
      EXPECT_EQ(rte_mempool_avail_count(pool_), Rings::kPoolSize) << "mbufs leaked (neither sent nor freed)";
    }
    holder_.reset();
  }

  // Frees what the workers hold (mbufs waiting in their queues and redirect
  // rings, their memory) and the publisher.
  void free_workers() {
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
      for (auto*& dc : holder_->sh.dest_counters) dc = nullptr;
      for (auto*& r : holder_->sh.rings) {
        if (!r) continue;
        void* m;
        while (rte_ring_dequeue(r, &m) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
        rte_ring_free(r);
        r = nullptr;
      }
    }
    pub_.reset();
    workers_.clear();
  }

  Worker& w(unsigned i = 0) { return *workers_[i]; }
  Shared& sh() { return holder_->sh; }
  uint64_t drops(DropReason r, unsigned wi = 0) { return w(wi).counters.drops[r].load(); }
  uint64_t total_drops(unsigned wi = 0) {
    uint64_t n = 0;
    for (unsigned r = 0; r < kNumDropReasons; ++r) n += w(wi).counters.drops[r].load();
    return n;
  }
  uint64_t drops_of_all_workers() {
    uint64_t n = 0;
    for (unsigned i = 0; i < workers_.size(); ++i) n += total_drops(i);
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
  // Receives `f` on a port: runs it through worker `wi`; with serve_rings_,
  // then lets every worker serve its redirect ring; flushes tx.
  void rx(const Frame& f, uint16_t port_index, unsigned wi = 0) {
    rte_mbuf* m = mbuf_of(f, port_index);
    if (!m) return;
    process_burst(w(wi), &m, 1, false);
    if (!serve_rings_) {
      flush_tx(w(wi));
      return;
    }
    for (auto& wk : workers_) {
      if (wk->sh->n_workers > 1) {
        rte_mbuf* b[8];
        unsigned n = rte_ring_sc_dequeue_burst(wk->sh->rings[wk->index], reinterpret_cast<void**>(b), 8, nullptr);
        if (n) process_burst(*wk, b, static_cast<uint16_t>(n), true);
      }
      flush_tx(*wk);
    }
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

  static inline rte_mempool* pool_ = nullptr;
  static inline uint16_t pid_[2] = {0, 0};
  static inline bool ports_ok_ = false;
  static inline std::string suite_error_ = "EAL not initialised";

  uint32_t proxy_capacity_ = 0;  // PROXY protocol pool per worker; 0 = conn_capacity
  bool serve_rings_ = false;  // rx(): also serve every worker's redirect ring
  std::unique_ptr<SharedHolder> holder_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::unique_ptr<Publisher> pub_;
  cp::ServiceTable table_;
};

}  // namespace vipd::dp::test
