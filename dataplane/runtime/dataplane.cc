// Thread: control.
#include "dataplane/runtime/dataplane.h"

#include <arpa/inet.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_hash.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_rcu_qsbr.h>
#include <rte_ring.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

#include "common/log.h"
#include "dataplane/fastpath/worker.h"
#include "dataplane/publish/publisher.h"
#include "dataplane/runtime/exception_path.h"

namespace vipd::dp {
namespace {

std::string mac_str(const uint8_t m[6]) {
  char b[32];
  snprintf(b, sizeof b, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
  return b;
}

bool has_arg(const std::vector<std::string>& a, std::initializer_list<const char*> names) {
  for (const auto& s : a)
    for (const char* n : names)
      if (s == n || s.rfind(std::string(n) + "=", 0) == 0) return true;
  return false;
}

// Adds the queue count to vdevs whose drivers take it as a devarg.
std::string vdev_with_queues(const std::string& dev, unsigned nq) {
  auto add = [&](const char* prefix, const char* key) -> std::string {
    if (dev.rfind(prefix, 0) != 0 || dev.find(std::string(key) + "=") != std::string::npos) return {};
    return dev + (dev.find(',') == std::string::npos ? "," : ",") + key + "=" + std::to_string(nq);
  };
  if (nq <= 1) return dev;
  for (auto [p, k] : {std::pair{"net_af_packet", "qpairs"}, std::pair{"net_af_xdp", "queue_count"},
                      std::pair{"net_tap", "queues"}}) {
    std::string s = add(p, k);
    if (!s.empty()) return s;
  }
  return dev;
}

class DpdkDataplane final : public Dataplane {
 public:
  explicit DpdkDataplane(const DataplaneConfig& cfg) : cfg_(cfg) {}
  ~DpdkDataplane() override { stop(); }

  bool init(std::string* error);
  bool start(std::string* error) override;
  void stop() override;
  bool apply(const cp::ServiceTable& next, const cp::TableDiff& diff, bool full, std::string* error) override {
    std::lock_guard<std::mutex> g(mu_);
    return pub_->apply(next, diff, full, error);
  }
  std::vector<WorkerSnapshot> workers() const override;
  std::vector<PortSnapshot> ports() const override;
  DestSnapshot dest(const cp::ServiceKey& svc, uint32_t ip, uint16_t port) const override {
    return dest_at(svc, cp::IpAddr(ip), port);
  }
  DestSnapshot dest_at(const cp::ServiceKey& svc, const cp::IpAddr& ip, uint16_t port) const override;
  uint32_t neighbor_entries() const override { return sh_.neigh.size() + (sh_.v6 ? sh_.v6->neigh.size() : 0); }
  bool forwards_ipv6() const override { return sh_.v6 != nullptr; }
  ExplainResult explain(uint8_t proto, const cp::IpAddr& src, uint16_t sport, const cp::IpAddr& dst,
                        uint16_t dport) const override;

 private:
  bool init_eal(std::string* error);
  bool init_port(size_t i, std::string* error);
  // RSS steering (rss_steer.h): reads back what port i hashes with after it
  // started; false with *why when steering cannot rely on it.
  bool probe_rss(size_t i, std::string* why);
  void init_rss_steering();

  // What each port hashes with (probe_rss), for init_rss_steering.
  struct PortRss {
    std::vector<uint16_t> reta;
    bool tcp = false, udp = false;
  };
  std::vector<PortRss> port_rss_;
  std::string rss_off_;  // why steering is off ("" = not ruled out yet)
  bool init_ipv6(int sock, std::string* error);

  DestSnapshot sum_dest(uint32_t slot) const;
  void watch_ejections();

  DataplaneConfig cfg_;
  Shared sh_;
  rte_mempool* pool_ = nullptr;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::unique_ptr<Publisher> pub_;
  std::unique_ptr<Shared6> v6_;                    // IPv6 forwarding; null when off
  std::vector<std::unique_ptr<Worker6>> workers6_;
  std::unique_ptr<ExceptionRelay> exc_;  // --exception-path tap; null when off
  std::vector<DestSnapshot> dest_base_;  // per slot, guarded by mu_
  mutable std::mutex mu_;
  mutable std::mutex explain_mu_;  // one explain query at a time
  bool eal_ = false, started_ = false, stopped_ = false;
  // Outlier ejection log lines (docs/scheduling.md): a control-side thread
  // that reads the slots' EjectState once a second; runs while ejection is on.
  std::thread eject_watch_;
  std::atomic<bool> eject_stop_{false};
};

bool DpdkDataplane::init_eal(std::string* error) {
  std::vector<std::string> args{cfg_.program};
  for (const auto& a : cfg_.eal_args) args.push_back(a);
  if (!has_arg(cfg_.eal_args, {"-l", "--lcores", "-c"})) {
    std::string l = std::to_string(cfg_.main_lcore);
    for (unsigned w : cfg_.worker_lcores) {
      l += ',';
      l += std::to_string(w);
    }
    args.push_back("-l");
    args.push_back(l);
  }
  if (!has_arg(cfg_.eal_args, {"--main-lcore"})) {
    args.push_back("--main-lcore");
    args.push_back(std::to_string(cfg_.main_lcore));
  }
  bool any_pci = false;
  for (const auto& p : cfg_.ports) {
    if (p.is_pci) {
      any_pci = true;
      args.push_back("-a");
      args.push_back(p.device);
    } else {
      args.push_back("--vdev");
      args.push_back(vdev_with_queues(p.device, static_cast<unsigned>(cfg_.worker_lcores.size())));
    }
  }
  if (cfg_.exception_path == vipd::ExceptionPath::kTap) {
    for (const auto& v : ExceptionRelay::eal_vdevs(cfg_.exception_ifnames, cfg_.ports.size())) {
      args.push_back("--vdev");
      args.push_back(v);
    }
  }
  if (!any_pci && !has_arg(cfg_.eal_args, {"--no-pci", "-a", "--allow", "-b", "--block"}))
    args.push_back("--no-pci");
  std::string line;
  for (const auto& a : args) line += " " + a;
  log_info("dpdk: EAL arguments:" + line);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int rc = rte_eal_init(static_cast<int>(args.size()), argv.data());
  if (rc < 0) {
    *error = std::string("dpdk: EAL initialisation failed: ") + rte_strerror(rte_errno) +
             " (EAL arguments:" + line + ")";
    return false;
  }
  eal_ = true;
  if (rte_get_main_lcore() != cfg_.main_lcore) {
    *error = "dpdk: main lcore is " + std::to_string(rte_get_main_lcore()) + ", config says " +
             std::to_string(cfg_.main_lcore);
    return false;
  }
  for (unsigned w : cfg_.worker_lcores) {
    if (w == cfg_.main_lcore || !rte_lcore_is_enabled(w)) {
      *error = "dpdk: worker lcore " + std::to_string(w) +
               " is not an enabled EAL lcore other than the main lcore (check --worker-lcores and -l/--lcores)";
      return false;
    }
  }
  return true;
}

bool DpdkDataplane::init_port(size_t i, std::string* error) {
  const PortSpec& spec = cfg_.ports[i];
  std::string name = spec.device.substr(0, spec.device.find(','));
  uint16_t pid;
  if (rte_eth_dev_get_port_by_name(name.c_str(), &pid) != 0) {
    *error = "dpdk: port '" + spec.device + "': no such device after EAL probe (is the driver available and the interface present?)";
    return false;
  }
  const uint16_t nq = static_cast<uint16_t>(workers_.size());
  rte_eth_dev_info info{};
  if (rte_eth_dev_info_get(pid, &info) != 0) {
    *error = "dpdk: port '" + name + "': cannot read device info";
    return false;
  }
  if (info.max_rx_queues < nq || info.max_tx_queues < nq) {
    *error = "dpdk: port '" + name + "' supports " + std::to_string(info.max_rx_queues) + " rx / " +
             std::to_string(info.max_tx_queues) + " tx queues, " + std::to_string(nq) +
             " workers need one each (add qpairs=/queues= to the vdev)";
    return false;
  }
  rte_eth_conf conf{};
  // vipd's RSS key (rss_steer.h) when steering may use it: the NIC must have
  // a key of 16..52 bytes; otherwise the driver's own.
  static uint8_t key[kRssKeyMax];
  const bool own_key = cfg_.rss_steering && sh_.forward == Forward::kFnat && info.hash_key_size >= 16 &&
                       info.hash_key_size <= kRssKeyMax;
  if (nq > 1 && info.flow_type_rss_offloads) {
    conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
    conf.rx_adv_conf.rss_conf.rss_hf = info.flow_type_rss_offloads & (RTE_ETH_RSS_IP | RTE_ETH_RSS_TCP | RTE_ETH_RSS_UDP);
    if (own_key) {
      std::memcpy(key, kRssKey, sizeof key);
      conf.rx_adv_conf.rss_conf.rss_key = key;
      conf.rx_adv_conf.rss_conf.rss_key_len = info.hash_key_size;
    }
  }
  int rc = rte_eth_dev_configure(pid, nq, nq, &conf);
  if (rc != 0) {
    *error = "dpdk: port '" + name + "': configure failed: " + rte_strerror(-rc);
    return false;
  }
  uint16_t nrx = cfg_.rx_desc, ntx = cfg_.tx_desc;
  rte_eth_dev_adjust_nb_rx_tx_desc(pid, &nrx, &ntx);
  const int sock = rte_eth_dev_socket_id(pid) < 0 ? 0 : rte_eth_dev_socket_id(pid);
  for (uint16_t q = 0; q < nq; ++q) {
    if ((rc = rte_eth_rx_queue_setup(pid, q, nrx, sock, nullptr, pool_)) != 0 ||
        (rc = rte_eth_tx_queue_setup(pid, q, ntx, sock, nullptr)) != 0) {
      *error = "dpdk: port '" + name + "': queue setup failed: " + rte_strerror(-rc);
      return false;
    }
  }
  if ((rc = rte_eth_dev_start(pid)) != 0) {
    *error = "dpdk: port '" + name + "': start failed: " + rte_strerror(-rc);
    return false;
  }
  if (rss_off_.empty()) {
    std::string why;
    if (!own_key || !conf.rxmode.mq_mode) {
      why = !cfg_.rss_steering                 ? "off (--rss-steering false)"
            : sh_.forward != Forward::kFnat    ? "not used (nat mode)"
            : nq < 2                           ? "not needed (one worker)"
            : !info.flow_type_rss_offloads     ? "port '" + name + "' has no RSS"
                                               : "port '" + name + "' has an RSS key of " +
                                                     std::to_string(info.hash_key_size) + " bytes (16..52 needed)";
    } else {
      probe_rss(i, &why);
    }
    if (!why.empty()) rss_off_ = why;
  }
  PortInfo& p = sh_.ports[i];
  p.port_id = pid;
  rte_ether_addr mac{};
  rte_eth_macaddr_get(pid, &mac);
  std::memcpy(p.mac, mac.addr_bytes, 6);
  p.ip = spec.ip;
  p.mask = spec.prefix_len == 0 ? 0 : ~uint32_t{0} << (32 - spec.prefix_len);
  p.gateway = spec.gateway;
  uint16_t mtu = 0;
  if (rte_eth_dev_get_mtu(pid, &mtu) == 0 && mtu >= 576) p.mtu = mtu;  // else the default 1500
  std::string v6;
  if (i < cfg_.port_ipv6.size() && cfg_.port_ipv6[i] != "-") {
    if (inet_pton(AF_INET6, cfg_.port_ipv6[i].c_str(), p.ip6) != 1) {
      *error = "dpdk: port '" + name + "': '" + cfg_.port_ipv6[i] + "' is not an IPv6 address";
      return false;
    }
    p.has_ip6 = true;
    v6 = " ipv6 " + cfg_.port_ipv6[i] + "/" +
         std::to_string(i < cfg_.port_ipv6_prefix.size() ? cfg_.port_ipv6_prefix[i] : 64);
    if (i < cfg_.port_ipv6_gateway.size() && !cfg_.port_ipv6_gateway[i].empty())
      v6 += " via " + cfg_.port_ipv6_gateway[i];
  }
  log_info("dpdk: port " + std::to_string(pid) + " " + spec.device + " mac " + mac_str(p.mac) + " ip " +
           cp::ipv4_to_string(spec.ip) + "/" + std::to_string(spec.prefix_len) +
           (spec.gateway ? " via " + cp::ipv4_to_string(spec.gateway) : "") + v6 + ", " + std::to_string(nq) +
           " queue(s)");
  return true;
}

bool DpdkDataplane::probe_rss(size_t i, std::string* why) {
  const PortSpec& spec = cfg_.ports[i];
  const std::string name = spec.device.substr(0, spec.device.find(','));
  uint16_t port;
  rte_eth_dev_info info{};
  if (rte_eth_dev_get_port_by_name(name.c_str(), &port) != 0 || rte_eth_dev_info_get(port, &info) != 0) {
    *why = "port '" + name + "': no device info";
    return false;
  }
  const uint32_t nq = static_cast<uint32_t>(workers_.size());
  const uint32_t rs = info.reta_size;
  if (rs == 0 || rs > kRssMaxReta || (rs & (rs - 1))) {
    *why = "port '" + name + "' has a redirection table of " + std::to_string(rs) + " entries (a power of two up to " +
           std::to_string(kRssMaxReta) + " needed)";
    return false;
  }
  // The redirection table: entry e -> queue e % workers, then read back.
  std::vector<rte_eth_rss_reta_entry64> rc((rs + RTE_ETH_RETA_GROUP_SIZE - 1) / RTE_ETH_RETA_GROUP_SIZE);
  for (uint32_t e = 0; e < rs; ++e) {
    rc[e / RTE_ETH_RETA_GROUP_SIZE].mask |= uint64_t{1} << (e % RTE_ETH_RETA_GROUP_SIZE);
    rc[e / RTE_ETH_RETA_GROUP_SIZE].reta[e % RTE_ETH_RETA_GROUP_SIZE] = static_cast<uint16_t>(e % nq);
  }
  const int up = rte_eth_dev_rss_reta_update(port, rc.data(), static_cast<uint16_t>(rs));
  PortRss pr;
  pr.reta.resize(rs);
  for (auto& g : rc) std::memset(g.reta, 0xff, sizeof g.reta);
  const int qr = rte_eth_dev_rss_reta_query(port, rc.data(), static_cast<uint16_t>(rs));
  for (uint32_t e = 0; e < rs; ++e)
    pr.reta[e] = qr == 0 ? rc[e / RTE_ETH_RETA_GROUP_SIZE].reta[e % RTE_ETH_RETA_GROUP_SIZE] : static_cast<uint16_t>(e % nq);
  if (qr != 0 && up != 0) {
    *why = "port '" + name + "': cannot set nor read the redirection table (" + rte_strerror(-up) + ")";
    return false;
  }
  // The key and hash types, read back.
  uint8_t key[64]{};
  rte_eth_rss_conf rss{};
  rss.rss_key = key;
  rss.rss_key_len = info.hash_key_size;
  int kr = rte_eth_dev_rss_hash_conf_get(port, &rss);
  if (kr != 0) {
    *why = "port '" + name + "': cannot read the RSS key back (" + rte_strerror(-kr) + ")";
    return false;
  }
  if (std::memcmp(key, kRssKey, info.hash_key_size) != 0) {
    *why = "port '" + name + "' did not take vipd's RSS key";
    return false;
  }
  pr.tcp = (rss.rss_hf & RTE_ETH_RSS_NONFRAG_IPV4_TCP) != 0;
  pr.udp = (rss.rss_hf & RTE_ETH_RSS_NONFRAG_IPV4_UDP) != 0;
  if (!pr.tcp && !pr.udp) {
    *why = "port '" + name + "' does not hash TCP/UDP ports (IPv4 4-tuple)";
    return false;
  }
  if (!port_rss_.empty() && (port_rss_[0].reta != pr.reta || port_rss_[0].tcp != pr.tcp || port_rss_[0].udp != pr.udp)) {
    *why = "port '" + name + "' hashes unlike the first port (redirection table or hash types)";
    return false;
  }
  port_rss_.push_back(std::move(pr));
  return true;
}

void DpdkDataplane::init_rss_steering() {
  if (rss_off_.empty() && !port_rss_.empty()) {
    const PortRss& pr = port_rss_[0];
    if (rss_steer_init(sh_.rss, kRssKey, kRssKeyMax, pr.reta.data(), static_cast<uint32_t>(pr.reta.size()),
                       static_cast<uint32_t>(workers_.size()), pr.tcp, pr.udp)) {
      log_info("dpdk: RSS steering of full-NAT replies on (" + std::string(pr.tcp ? "tcp" : "") +
               (pr.tcp && pr.udp ? "+" : "") + (pr.udp ? "udp" : "") + ", redirection table of " +
               std::to_string(pr.reta.size()) + " entries)");
      return;
    }
    rss_off_ = "the redirection table names a queue past the workers'";
  }
  if (sh_.forward == Forward::kFnat && workers_.size() > 1)
    log_info("dpdk: RSS steering of full-NAT replies " + rss_off_ + "; replies on another worker's queue take the redirect ring");
}

// IPv6 forwarding (v6_tables.h): on when a port has an IPv6 address and, in
// full NAT, IPv6 local addresses are given; else IPv6 entries stay behind the
// daemon's FamilyGate.
bool DpdkDataplane::init_ipv6(int sock, std::string* error) {
  bool any_port = false;
  for (uint16_t i = 0; i < sh_.n_ports; ++i) any_port |= sh_.ports[i].has_ip6;
  if (!cfg_.fnat_local_addrs6.empty() && !cfg_.fnat) {
    log_warn("dpdk: --fnat-local-addrs6 is only used with --forward-method fnat");
  }
  if (!any_port || (cfg_.fnat && cfg_.fnat_local_addrs6.empty())) {
    if (any_port || !cfg_.fnat_local_addrs6.empty())
      log_info(std::string("dpdk: IPv6 is not forwarded (") +
               (any_port ? "fnat needs --fnat-local-addrs6" : "no port has an IPv6 address (--port-ipv6)") + ")");
    return true;
  }
  std::vector<std::array<uint8_t, 16>> locals;
  if (cfg_.fnat) {
    for (const std::string& a : cfg_.fnat_local_addrs6) {
      std::array<uint8_t, 16> b{};
      if (inet_pton(AF_INET6, a.c_str(), b.data()) != 1) {
        *error = "dpdk: '" + a + "' is not an IPv6 address";
        return false;
      }
      locals.push_back(b);
    }
  }
  v6_ = std::make_unique<Shared6>();
  std::string err;
  if (!init_v6(sh_, *v6_, "vipd_", std::max<uint32_t>(cfg_.max_services, 64), 4096,
               uint64_t{cfg_.neighbor_timeout_s} * sh_.tsc_hz, locals, sock, &err)) {
    *error = "dpdk: " + err;
    return false;
  }
  for (uint16_t i = 0; i < sh_.n_ports && i < cfg_.port_ipv6.size(); ++i) {
    if (!sh_.ports[i].has_ip6) continue;
    if (i < cfg_.port_ipv6_prefix.size()) v6_->port_prefix[i] = cfg_.port_ipv6_prefix[i];
    if (i < cfg_.port_ipv6_gateway.size() && !cfg_.port_ipv6_gateway[i].empty()) {
      if (inet_pton(AF_INET6, cfg_.port_ipv6_gateway[i].c_str(), v6_->port_gw[i]) != 1) {
        *error = "dpdk: '" + cfg_.port_ipv6_gateway[i] + "' is not an IPv6 address";
        return false;
      }
      v6_->port_has_gw[i] = true;
    }
  }
  // IPv6 connections: a quarter of the IPv4 table's size (128 bytes each).
  const uint32_t cap6 = std::max<uint32_t>(cfg_.conn_table_size / 4, 1024);
  for (auto& w : workers_) {
    workers6_.push_back(std::make_unique<Worker6>());
    init_worker6(*w, *workers6_.back(), cap6);
    // Re-steering: room for an IPv6 SYN's extension headers (kSynExtMax
    // bytes per saved SYN), re-sent with it.
    if (!w->syn.init_ext6("vipd_" + std::to_string(w->index), sock, error)) return false;
  }
  log_info("dpdk: IPv6 forwarding on (" + std::to_string(locals.size()) + " IPv6 local address(es), " +
           std::to_string(cap6) + " IPv6 connections per worker)");
  return true;
}

bool DpdkDataplane::init(std::string* error) {
  if (cfg_.worker_lcores.empty() || cfg_.worker_lcores.size() > kMaxWorkers) {
    *error = "dpdk: between 1 and " + std::to_string(kMaxWorkers) + " worker lcores are needed";
    return false;
  }
  if (cfg_.port_ipv6.size() > cfg_.ports.size()) {
    *error = "dpdk: --port-ipv6 lists more addresses than there are ports";
    return false;
  }
  if (cfg_.ports.empty() || cfg_.ports.size() > kMaxPorts) {
    *error = "dpdk: between 1 and " + std::to_string(kMaxPorts) + " ports are needed";
    return false;
  }
  if (cfg_.fnat && (cfg_.local_addrs.empty() || cfg_.local_addrs.size() > kMaxLocalAddrs)) {
    *error = "dpdk: fnat needs between 1 and " + std::to_string(kMaxLocalAddrs) + " local addresses";
    return false;
  }
  if (cfg_.handover_peers.size() > kMaxHandoverPeers) {
    *error = "dpdk: at most " + std::to_string(kMaxHandoverPeers) + " --handover-peers";
    return false;
  }
  for (uint32_t peer : cfg_.handover_peers) {  // on a port's subnet, not a port's own address
    bool on_link = false;
    for (const PortSpec& p : cfg_.ports) {
      const uint32_t mask = p.prefix_len ? ~uint32_t{0} << (32 - p.prefix_len) : 0;
      if (peer == p.ip) {
        *error = "dpdk: --handover-peers lists this gateway's own port address";
        return false;
      }
      if ((peer & mask) == (p.ip & mask)) on_link = true;
    }
    if (!on_link) {
      *error = "dpdk: every --handover-peers address must be on a port's subnet (handed-over frames are not routed)";
      return false;
    }
  }
  if (!init_eal(error)) return false;
  const int sock = static_cast<int>(rte_socket_id());
  const uint32_t nw = static_cast<uint32_t>(cfg_.worker_lcores.size());
  pool_ = rte_pktmbuf_pool_create("vipd_mbufs", cfg_.mbuf_count, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE, sock);
  if (!pool_) {
    *error = std::string("dpdk: cannot create mbuf pool of ") + std::to_string(cfg_.mbuf_count) +
             " mbufs: " + rte_strerror(rte_errno) + " (raise -m or use hugepages)";
    return false;
  }
  sh_.n_workers = nw;
  sh_.max_services = cfg_.max_services;
  sh_.max_dests = cfg_.max_dests;
  sh_.forward = cfg_.fnat ? Forward::kFnat : Forward::kNat;
  sh_.n_local_addrs = cfg_.fnat ? static_cast<uint32_t>(cfg_.local_addrs.size()) : 0;
  for (uint32_t i = 0; i < sh_.n_local_addrs; ++i) sh_.local_addrs[i] = cfg_.local_addrs[i];
  sh_.tsc_hz = rte_get_tsc_hz();
  sh_.t_syn = 60 * sh_.tsc_hz;
  sh_.t_est = uint64_t{cfg_.tcp_established_timeout_s} * sh_.tsc_hz;
  sh_.t_fin = uint64_t{cfg_.tcp_fin_timeout_s} * sh_.tsc_hz;
  sh_.t_close = 10 * sh_.tsc_hz;
  sh_.t_udp = uint64_t{cfg_.udp_timeout_s} * sh_.tsc_hz;
  sh_.t_dead = 60 * sh_.tsc_hz;
  sh_.t_time_wait = 120 * sh_.tsc_hz;
  sh_.t_close_wait = 60 * sh_.tsc_hz;
  sh_.t_last_ack = 30 * sh_.tsc_hz;
  sh_.mh_table_size = cfg_.mh_table_size;
  sh_.expire_quiescent_template = cfg_.expire_quiescent_template;
  sh_.resteer_attempts = cfg_.resteer_pool ? cfg_.resteer_attempts : 0;
  sh_.t_resteer = uint64_t{cfg_.resteer_timeout_ms} * sh_.tsc_hz / 1000;
  sh_.eject.k = sh_.resteer_attempts ? cfg_.eject_failures : 0;
  sh_.eject.t_base = uint64_t{cfg_.eject_time_ms} * sh_.tsc_hz / 1000;
  sh_.eject.t_max = uint64_t{cfg_.eject_max_time_s} * sh_.tsc_hz;
  if (sh_.eject.t_max < sh_.eject.t_base) sh_.eject.t_max = sh_.eject.t_base;
  sh_.eject.max_pct = cfg_.eject_max_percent;
  sh_.arp_retry = sh_.tsc_hz / 5;  // 200 ms
  sh_.arp_give_up = sh_.tsc_hz;    // 1 s
  sh_.idle_sleep_us = cfg_.idle_sleep_us;
  // Hand-over (full NAT only): a token bucket per worker of a tenth of a
  // second's packets, at least one.
  sh_.n_handover_peers = cfg_.fnat ? static_cast<uint32_t>(cfg_.handover_peers.size()) : 0;
  for (uint32_t i = 0; i < sh_.n_handover_peers; ++i) sh_.handover_peers[i] = cfg_.handover_peers[i];
  {
    const uint64_t pps = std::max<uint32_t>(cfg_.handover_pps, 1);
    sh_.handover_interval = std::max<uint64_t>(sh_.tsc_hz / pps, 1);
    sh_.handover_tau = sh_.handover_interval * (std::max<uint64_t>(pps / 10, 1) - 1);
  }

  create_vip_tables(sh_, "vipd_", std::max<uint32_t>(cfg_.max_services, 64), sock);
  const size_t qsz = rte_rcu_qsbr_get_memsize(nw);
  sh_.qsbr = static_cast<rte_rcu_qsbr*>(rte_zmalloc("vipd_qsbr", qsz, RTE_CACHE_LINE_SIZE));
  sh_.dest_slots = static_cast<DestSlot*>(rte_zmalloc("vipd_dest_slots", sizeof(DestSlot) * cfg_.max_dests, 64));
  constexpr uint32_t kNeigh = 8192;
  void* nmem = rte_zmalloc("vipd_neigh", NeighborTable::bytes_for(kNeigh), 64);
  if (!sh_.vip_table || !sh_.vip_addrs || !sh_.qsbr || !sh_.dest_slots || !nmem) {
    *error = std::string("dpdk: cannot allocate the VIP tables: ") + rte_strerror(rte_errno) + " (raise -m)";
    return false;
  }
  rte_rcu_qsbr_init(sh_.qsbr, nw);
  // An address that never answers keeps its slot for 3 s after its last ARP
  // request (a flood of spoofed sources cannot fill the table for good).
  sh_.neigh.init(nmem, kNeigh, uint64_t{cfg_.neighbor_timeout_s} * sh_.tsc_hz,
                 uint64_t{cfg_.neighbor_timeout_s} * 4 * sh_.tsc_hz, 3 * sh_.tsc_hz);

  for (uint32_t i = 0; i < nw; ++i) {
    auto w = std::make_unique<Worker>();
    w->index = i;
    w->lcore = cfg_.worker_lcores[i];
    w->sh = &sh_;
    w->pool = pool_;
    if (!w->conns.init("vipd_conns_" + std::to_string(i), cfg_.conn_table_size, sock, error, sh_.local_addrs,
                       sh_.n_local_addrs)) return false;
    const uint32_t tcap = cfg_.template_table_size ? cfg_.template_table_size
                                                   : std::max<uint32_t>(cfg_.conn_table_size / 4, 1024);
    if (!w->tmpls.init("vipd_tmpl_" + std::to_string(i), tcap, sock, error)) return false;
    // PROXY protocol state (full NAT only): for a quarter of the connections,
    // 12 bytes each; past that, new connections of PROXY services are dropped
    // (proxy_pool_full) while the others go on.
    const uint32_t pcap = sh_.forward == Forward::kFnat ? std::max<uint32_t>(cfg_.conn_table_size / 4, 1024) : 0;
    if (!w->proxy.init("vipd_" + std::to_string(i), pcap, sock, error)) return false;
    // Re-steering: the SYNs of the connections waiting for their SYN-ACK
    // (about 130 bytes each); past that, new connections go without.
    if (!w->syn.init("vipd_" + std::to_string(i), sh_.resteer_attempts ? cfg_.resteer_pool : 0, sock, error))
      return false;
    w->sched = static_cast<SchedState*>(rte_zmalloc("vipd_sched", sizeof(SchedState) * cfg_.max_services, 64));
    w->dest_counters = static_cast<DestCounters*>(rte_zmalloc("vipd_dctr", sizeof(DestCounters) * cfg_.max_dests, 64));
    if (!w->sched || !w->dest_counters) {
      *error = "dpdk: out of memory for worker state (lower --conn-table-size or raise -m)";
      return false;
    }
    sh_.dest_counters[i] = w->dest_counters;
    if (nw > 1) {
      std::string rn = "vipd_redir_" + std::to_string(i);
      sh_.rings[i] = rte_ring_create(rn.c_str(), 4096, sock, RING_F_SC_DEQ);
      if (!sh_.rings[i]) {
        *error = "dpdk: cannot create redirect ring: " + std::string(rte_strerror(rte_errno));
        return false;
      }
    }
    workers_.push_back(std::move(w));
  }
  for (size_t i = 0; i < cfg_.ports.size(); ++i)
    if (!init_port(i, error)) return false;
  sh_.n_ports = static_cast<uint16_t>(cfg_.ports.size());
  // The local-port pools, after the ports: with RSS steering, bucketed by
  // the redirection-table index their bits select.
  init_rss_steering();
  for (uint32_t i = 0; i < nw; ++i) {
    for (uint32_t a = 0; a < sh_.n_local_addrs; ++a) {
      if (!fnat_pool_init(workers_[i]->fnat[a], &sh_.rss, i, nw, sh_.local_addrs[a], "vipd_fnat")) {
        *error = "dpdk: out of memory for fnat port pools";
        return false;
      }
    }
  }
  if (!init_ipv6(sock, error)) return false;
  if (cfg_.exception_path == vipd::ExceptionPath::kTap) {
    exc_ = std::make_unique<ExceptionRelay>();
    if (!exc_->init(sh_, pool_, cfg_.exception_ifnames, cfg_.exception_pps, error)) return false;
  }
  pub_ = std::make_unique<Publisher>(sh_);
  // A freed slot's cumulative counts become its baseline: the destination that
  // reuses the slot starts from zero (apply() holds mu_, as dest() does).
  dest_base_.assign(cfg_.max_dests, DestSnapshot{});
  pub_->set_slot_released([this](uint32_t slot) { dest_base_[slot] = sum_dest(slot); });
  return true;
}

bool DpdkDataplane::start(std::string* error) {
  for (auto& w : workers_) {
    int rc = rte_eal_remote_launch(worker_main, w.get(), w->lcore);
    if (rc != 0) {
      *error = "dpdk: cannot launch worker on lcore " + std::to_string(w->lcore) + ": " + rte_strerror(-rc);
      return false;
    }
    log_info("dpdk: worker " + std::to_string(w->index) + " running on lcore " + std::to_string(w->lcore));
  }
  started_ = true;
  if (exc_) exc_->start();
  if (sh_.eject.k) eject_watch_ = std::thread([this] { watch_ejections(); });
  return true;
}

// One log line per ejection and per readmission of a backend. The workers
// only update EjectState (eject.h); this reads it once a second, up to the
// highest slot ever used, and names the backend through the publisher.
void DpdkDataplane::watch_ejections() {
  const uint32_t n = sh_.max_dests;
  std::vector<uint64_t> last_ej(n, 0), last_readmit(n, 0);
  std::vector<uint8_t> last_out(n, 0);
  while (!eject_stop_.load()) {
    for (int i = 0; i < 10 && !eject_stop_.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    uint32_t hw = 0;
    {
      std::lock_guard<std::mutex> g(mu_);
      hw = pub_ ? std::min(pub_->slot_high_water(), n) : 0;
    }
    const uint64_t now = rte_rdtsc();
    for (uint32_t s = 0; s < hw; ++s) {
      const EjectState& e = sh_.dest_slots[s].eject;
      const uint64_t ej = e.ejections.load(std::memory_order_relaxed);
      const uint64_t readmit = e.readmissions.load(std::memory_order_relaxed);
      const bool out = e.ejected(now);
      const bool ejected_now = ej > last_ej[s];
      const bool back = (last_out[s] || ejected_now) && !out;
      if (ejected_now || back) {
        std::string who;
        {
          std::lock_guard<std::mutex> g(mu_);
          if (pub_) who = pub_->slot_owner(s);
        }
        if (who.empty()) who = "slot " + std::to_string(s);
        if (ejected_now) {
          const uint64_t until = e.until.load(std::memory_order_relaxed);
          const uint64_t ms = until > now && sh_.tsc_hz ? (until - now) * 1000 / sh_.tsc_hz : 0;
          log_warn("dpdk: backend " + who + " ejected: " + std::to_string(sh_.eject.k) +
                   " consecutive failed connections (ejection " +
                   std::to_string(e.streak.load(std::memory_order_relaxed)) + " in a row, " +
                   std::to_string(ms) + " ms left)");
        }
        if (back)
          log_info("dpdk: backend " + who + " readmitted: " +
                   (readmit > last_readmit[s] ? "a connection through it succeeded" : "its ejection time is up"));
      }
      last_ej[s] = ej;
      last_readmit[s] = readmit;
      last_out[s] = out;
    }
  }
}

void DpdkDataplane::stop() {
  if (stopped_) return;
  stopped_ = true;
  eject_stop_.store(true);
  if (eject_watch_.joinable()) eject_watch_.join();
  sh_.stop.store(true);
  if (started_) rte_eal_mp_wait_lcore();
  exc_.reset();  // after the workers: they enqueue to its rings
  if (!eal_) return;
  for (uint16_t i = 0; i < sh_.n_ports; ++i) {
    rte_eth_dev_stop(sh_.ports[i].port_id);
    rte_eth_dev_close(sh_.ports[i].port_id);
  }
  pub_.reset();
  for (auto& x : workers6_) free_worker6_pending(*x);
  workers6_.clear();
  sh_.v6 = nullptr;
  v6_.reset();
  workers_.clear();
  rte_eal_cleanup();
}

std::vector<WorkerSnapshot> DpdkDataplane::workers() const {
  std::vector<WorkerSnapshot> out;
  auto ld = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  for (const auto& w : workers_) {
    const WorkerCounters& c = w->counters;
    WorkerSnapshot s;
    s.lcore = w->lcore;
    s.rx = ld(c.rx);
    s.tx = ld(c.tx);
    s.new_flows = ld(c.new_flows);
    s.active_flows = ld(c.active_flows);
    s.redirects_out = ld(c.redirects_out);
    s.redirects_in = ld(c.redirects_in);
    s.reply_redirects = ld(c.reply_redirects);
    s.fnat_unsteered = ld(c.fnat_unsteered);
    s.polls = ld(c.polls);
    s.busy_polls = ld(c.busy_polls);
    s.rst_sent = ld(c.rst_sent);
    s.icmp_unreach_sent = ld(c.icmp_unreach_sent);
    s.arp_replies = ld(c.arp_replies);
    s.arp_requests = ld(c.arp_requests);
    s.proxy_headers = ld(c.proxy_headers);
    s.proxy_header_retransmits = ld(c.proxy_header_retransmits);
    for (unsigned r = 0; r < kNumResteerReasons; ++r) s.resteers[r] = ld(c.resteers[r]);
    s.resteer_pool_full = ld(c.resteer_pool_full);
    s.resteer_gave_up = ld(c.resteer_gave_up);
    s.handovers = ld(c.handovers);
    s.handover_matched = ld(c.handover_matched);
    s.handover_not_held = ld(c.drops[kHandoverNotHeld]);
    s.handover_rate_limited = ld(c.drops[kHandoverRateLimited]);
    s.handover_not_peer = ld(c.drops[kHandoverNotPeer]);
    s.handover_no_mbuf = ld(c.drops[kHandoverNoMbuf]);
    s.conn_entries = w->conns.size();
    s.conn_capacity = w->conns.capacity();
    for (unsigned r = 0; r < kNumDropReasons; ++r) {
      uint64_t v = ld(c.drops[r]);
      s.drops += v;
      s.drop_reasons.emplace_back(drop_reason_name(r), v);
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<PortSnapshot> DpdkDataplane::ports() const {
  std::vector<PortSnapshot> out;
  for (uint16_t i = 0; i < sh_.n_ports; ++i) {
    PortSnapshot p;
    p.device = cfg_.ports[i].device;
    p.port_id = sh_.ports[i].port_id;
    p.mac = mac_str(sh_.ports[i].mac);
    p.ip = cfg_.ports[i].ip;
    p.prefix_len = cfg_.ports[i].prefix_len;
    rte_eth_stats st{};
    if (rte_eth_stats_get(p.port_id, &st) == 0) {
      p.ipackets = st.ipackets;
      p.opackets = st.opackets;
      p.ierrors = st.ierrors;
      p.oerrors = st.oerrors;
      p.imissed = st.imissed;
    }
    if (exc_ && i < exc_->ports().size()) {
      const ExceptionRelay::Port& e = *exc_->ports()[i];
      auto ld = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
      p.exception_ifname = e.ifname;
      p.exc_to_kernel = ld(e.counters.to_kernel);
      p.exc_from_kernel = ld(e.counters.from_kernel);
      p.exc_rate_limited = ld(e.counters.rate_limited);
      p.exc_kernel_full = ld(e.counters.kernel_full);
      p.exc_from_kernel_full = ld(e.counters.from_kernel_full);
    }
    out.push_back(p);
  }
  return out;
}

// The workers' counters of one slot, summed (plain reads of other threads'
// counters: values may be a moment old).
DestSnapshot DpdkDataplane::sum_dest(uint32_t slot) const {
  DestSnapshot s;
  for (const auto& w : workers_) {
    const volatile DestCounters& d = w->dest_counters[slot];
    s.conns += d.conns;
    s.inpkts += d.inpkts;
    s.outpkts += d.outpkts;
    s.inbytes += d.inbytes;
    s.outbytes += d.outbytes;
    s.active += d.active;
    s.inactive += d.inactive;
  }
  return s;
}

DestSnapshot DpdkDataplane::dest_at(const cp::ServiceKey& svc, const cp::IpAddr& ip, uint16_t port) const {
  DestSnapshot base;
  int64_t slot;
  {
    std::lock_guard<std::mutex> g(mu_);
    slot = pub_ ? pub_->dest_slot(svc, ip, port) : -1;
    if (slot >= 0) base = dest_base_[static_cast<size_t>(slot)];
  }
  if (slot < 0) return {};
  DestSnapshot s = sum_dest(static_cast<uint32_t>(slot));
  const EjectState& e = sh_.dest_slots[slot].eject;
  s.ejections = e.ejections.load(std::memory_order_relaxed);
  s.ejected = e.ejected(rte_rdtsc());
  // Counters count from the slot's last release; the gauges (active, inactive)
  // are not rebased: connections of the slot's previous destination still
  // count there until they expire, at their next packet or by timeout.
  s.conns -= base.conns;
  s.inpkts -= base.inpkts;
  s.outpkts -= base.outpkts;
  s.inbytes -= base.inbytes;
  s.outbytes -= base.outbytes;
  return s;
}

ExplainResult DpdkDataplane::explain(uint8_t proto, const cp::IpAddr& src, uint16_t sport, const cp::IpAddr& dst,
                                     uint16_t dport) const {
  ExplainResult r;
  if (workers_.empty() || !started_ || stopped_) return r;
  const bool v6 = dst.is_v6();
  ExplainQuery q{proto, v6, src.v4(), dst.v4(), sport, dport, {}, {}};
  std::memcpy(q.src6, src.v6_bytes().data(), 16);
  std::memcpy(q.dst6, dst.v6_bytes().data(), 16);
  // The worker that owns the flow in the query's direction answers.
  Worker& w = *workers_[explain_owner(sh_, q)];
  r.worker_lcore = w.lcore;
  std::lock_guard<std::mutex> g(explain_mu_);
  Mailbox& mb = w.mailbox;
  mb.q = q;
  const uint64_t seq = mb.req.load(std::memory_order_relaxed) + 1;
  mb.req.store(seq, std::memory_order_release);
  const uint64_t deadline = rte_get_tsc_cycles() + rte_get_tsc_hz() / 5;
  while (mb.done.load(std::memory_order_acquire) != seq) {
    if (rte_get_tsc_cycles() > deadline) return r;
    rte_delay_us_sleep(100);
  }
  const ExplainAnswer& a = mb.a;
  r.answered = true;
  r.service_found = a.service_found;
  r.vip_address = a.vip_address;
  r.scheduler = static_cast<Sched>(a.sched);
  r.n_dests = a.n_dests;
  r.n_weighted = a.n_weighted;
  r.drop_when_empty = a.drop_when_empty;
  r.conn_found = a.conn_found;
  r.conn_reply = a.conn_reply;
  r.conn_dest_alive = a.conn_alive;
  r.conn_state = conn_state_name(static_cast<ConnState>(a.state));
  static constexpr uint8_t kNone6[16] = {};
  r.conn_dest_ip = v6 ? cp::IpAddr::v6(a.conn_dest_ip6) : cp::IpAddr(a.conn_dest_ip);
  if (!v6) r.conn_local_ip = a.conn_local_ip;
  else if (std::memcmp(a.conn_local_ip6, kNone6, 16) != 0) r.conn_local_ip = cp::IpAddr::v6(a.conn_local_ip6);
  r.conn_dest_port = a.conn_dest_port;
  r.conn_local_port = a.conn_local_port;
  r.conn_expires_in_s = static_cast<double>(a.conn_expires_in_tsc) / static_cast<double>(sh_.tsc_hz);
  r.would_schedule = a.next_idx >= 0;
  r.next_dest_ip = v6 ? cp::IpAddr::v6(a.next_ip6) : cp::IpAddr(a.next_ip);
  r.next_dest_port = a.next_port;
  r.affinity_found = a.tmpl_found;
  r.affinity_expires_in_s = static_cast<double>(a.tmpl_expires_in_tsc) / static_cast<double>(sh_.tsc_hz);
  return r;
}

}  // namespace

std::unique_ptr<Dataplane> Dataplane::create(const DataplaneConfig& cfg, std::string* error) {
  auto dp = std::make_unique<DpdkDataplane>(cfg);
  if (!dp->init(error)) return nullptr;
  return dp;
}

}  // namespace vipd::dp
