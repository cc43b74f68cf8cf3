// Thread: control, and the exception thread (run() and what it calls).
#include "dataplane/runtime/exception_path.h"

#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <time.h>

#include <algorithm>

#include "common/log.h"
#include "dataplane/fastpath/worker.h"

namespace vipd::dp {
namespace {

constexpr unsigned kExcBurst = 32;
constexpr unsigned kRingSize = 1024;
constexpr uint64_t kNanoToken = 1000000000ull;  // one frame, in nano-tokens

std::string tap_vdev_name(size_t i) { return "net_tap_vipdexc" + std::to_string(i); }

uint64_t mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

inline void add(std::atomic<uint64_t>& c, uint64_t n) { c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed); }

}  // namespace

std::string exception_ifname(const std::vector<std::string>& names, size_t i) {
  if (i < names.size() && !names[i].empty() && names[i] != "-") return names[i];
  return "vipd-" + std::to_string(i);
}

std::vector<std::string> ExceptionRelay::eal_vdevs(const std::vector<std::string>& ifnames, size_t n_ports) {
  std::vector<std::string> out;
  for (size_t i = 0; i < n_ports; ++i) out.push_back(tap_vdev_name(i) + ",iface=" + exception_ifname(ifnames, i));
  return out;
}

bool ExceptionRelay::init(Shared& sh, rte_mempool* pool, const std::vector<std::string>& ifnames, uint32_t pps,
                         std::string* error) {
  sh_ = &sh;
  pps_ = pps;
  // A burst of a tenth of a second's worth (at least 32 frames): a BGP
  // session's handshake or a few pings never wait, a flood is cut to pps.
  bucket_ = std::max<uint64_t>(pps / 10, 32) * kNanoToken;
  tokens_ = bucket_;
  for (uint16_t i = 0; i < sh.n_ports; ++i) {
    auto port = std::make_unique<Port>();
    port->ifname = exception_ifname(ifnames, i);
    const std::string vdev = tap_vdev_name(i);
    uint16_t pid = 0;
    if (rte_eth_dev_get_port_by_name(vdev.c_str(), &pid) != 0) {
      *error = "dpdk: exception path: tap device for interface '" + port->ifname +
               "' was not created (is /dev/net/tun there, the name free, and CAP_NET_ADMIN held?)";
      return false;
    }
    port->tap_port_id = pid;
    rte_eth_conf conf{};
    int rc = rte_eth_dev_configure(pid, 1, 1, &conf);
    if (rc == 0) rc = rte_eth_rx_queue_setup(pid, 0, 512, static_cast<unsigned>(rte_eth_dev_socket_id(pid) < 0 ? 0 : rte_eth_dev_socket_id(pid)), nullptr, pool);
    if (rc == 0) rc = rte_eth_tx_queue_setup(pid, 0, 512, static_cast<unsigned>(rte_eth_dev_socket_id(pid) < 0 ? 0 : rte_eth_dev_socket_id(pid)), nullptr);
    rte_ether_addr mac{};
    std::copy(sh.ports[i].mac, sh.ports[i].mac + 6, mac.addr_bytes);
    // net_tap sets the kernel interface's address too.
    if (rc == 0) rc = rte_eth_dev_default_mac_addr_set(pid, &mac);
    if (rc == 0) rc = rte_eth_dev_start(pid);  // brings the interface up
    if (rc != 0) {
      *error = "dpdk: exception path: interface '" + port->ifname + "': " + rte_strerror(-rc);
      return false;
    }
    log_info("dpdk: exception path: port " + std::to_string(sh.ports[i].port_id) + " <-> kernel interface " +
             port->ifname + " (tap port " + std::to_string(pid) + ")");
    ports_.push_back(std::move(port));
  }
  const int sock = 0;
  sh.exc_to_kernel = rte_ring_create("vipd_exc_in", kRingSize, sock, RING_F_SC_DEQ);
  sh.exc_from_kernel = rte_ring_create("vipd_exc_out", kRingSize, sock, RING_F_SP_ENQ | RING_F_SC_DEQ);
  if (!sh.exc_to_kernel || !sh.exc_from_kernel) {
    *error = std::string("dpdk: exception path: cannot create its rings: ") + rte_strerror(rte_errno);
    return false;
  }
  return true;
}

void ExceptionRelay::start() {
  if (!sh_ || started_) return;
  started_ = true;
  last_ns_ = mono_ns();
  thread_ = std::thread([this] { run(); });
}

// Workers -> kernel: each frame pays a token; without one it is dropped
// (rate_limited) before it costs the kernel anything.
bool ExceptionRelay::pump_to_kernel(uint64_t now_ns) {
  if (now_ns > last_ns_) {
    const uint64_t dt = std::min<uint64_t>(now_ns - last_ns_, 1000000000ull);  // no overflow
    tokens_ = std::min(bucket_, tokens_ + dt * pps_);
    last_ns_ = now_ns;
  }
  rte_mbuf* pkts[kExcBurst];
  const unsigned n = rte_ring_sc_dequeue_burst(sh_->exc_to_kernel, reinterpret_cast<void**>(pkts), kExcBurst, nullptr);
  for (unsigned i = 0; i < n; ++i) {
    rte_mbuf* m = pkts[i];
    Port* port = nullptr;
    for (uint16_t k = 0; k < sh_->n_ports; ++k)
      if (sh_->ports[k].port_id == m->port) port = ports_[k].get();
    if (!port) {
      rte_pktmbuf_free(m);
      continue;
    }
    if (tokens_ < kNanoToken) {
      add(port->counters.rate_limited, 1);
      rte_pktmbuf_free(m);
      continue;
    }
    tokens_ -= kNanoToken;
    m->ol_flags = 0;
    if (rte_eth_tx_burst(port->tap_port_id, 0, &m, 1) == 1) {
      add(port->counters.to_kernel, 1);
    } else {
      add(port->counters.kernel_full, 1);
      rte_pktmbuf_free(m);
    }
  }
  return n > 0;
}

// Kernel -> ports: what the kernel sent on the interface, tagged with its
// port's index, for worker 0 to send (it owns a tx queue on every port).
bool ExceptionRelay::pump_from_kernel() {
  bool any = false;
  for (uint16_t k = 0; k < ports_.size(); ++k) {
    Port& port = *ports_[k];
    rte_mbuf* pkts[kExcBurst];
    const uint16_t n = rte_eth_rx_burst(port.tap_port_id, 0, pkts, kExcBurst);
    if (!n) continue;
    any = true;
    for (uint16_t i = 0; i < n; ++i) {
      pkts[i]->port = k;
      pkts[i]->ol_flags = 0;
    }
    const unsigned q = rte_ring_sp_enqueue_burst(sh_->exc_from_kernel, reinterpret_cast<void**>(pkts), n, nullptr);
    add(port.counters.from_kernel, q);
    if (q < n) add(port.counters.from_kernel_full, n - q);
    for (unsigned i = q; i < n; ++i) rte_pktmbuf_free(pkts[i]);
  }
  return any;
}

void ExceptionRelay::run() {
  while (!stop_.load(std::memory_order_relaxed)) {
    const bool a = pump_to_kernel(mono_ns());
    const bool b = pump_from_kernel();
    // Idle: sleep 100 us (a BGP/BFD/ping exchange waits that at most).
    if (!a && !b) {
      timespec ts{0, 100000};
      nanosleep(&ts, nullptr);
    }
  }
}

void ExceptionRelay::stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  if (closed_ || !sh_) return;
  closed_ = true;
  for (auto& p : ports_) {
    rte_eth_dev_stop(p->tap_port_id);
    rte_eth_dev_close(p->tap_port_id);
  }
  // Frames still queued either way go back to the pool.
  for (rte_ring* r : {sh_->exc_to_kernel, sh_->exc_from_kernel}) {
    if (!r) continue;
    void* m = nullptr;
    while (rte_ring_sc_dequeue(r, &m) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
    rte_ring_free(r);
  }
  sh_->exc_to_kernel = sh_->exc_from_kernel = nullptr;
}

}  // namespace vipd::dp
