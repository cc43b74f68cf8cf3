// Thread: the metrics listener's thread (Collect), serialized by mu_.
#include "observability/collector.h"

#include <algorithm>
#include <limits>
#include <set>
#include <utility>

#include "common/text.h"
#include "observability/bounded_http.h"

#ifndef VIPD_VERSION
#define VIPD_VERSION "0.1.0"
#endif

namespace vipd::cp {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;
using Labels = std::vector<ClientMetric::Label>;

// The order of this enum is the order of kFamilies and of the output.
enum Fam : size_t {
  kBuildInfo,
  kStartTime,
  kServiceConns,
  kServicePackets,
  kServiceBytes,
  kServiceActive,
  kServiceInactive,
  kServiceBackends,
  kBackendConns,
  kBackendPackets,
  kBackendBytes,
  kBackendActive,
  kBackendInactive,
  kBackendWeight,
  kBackendEjections,
  kBackendEjected,
  kWorkerRx,
  kWorkerTx,
  kWorkerDrops,
  kWorkerRedirects,
  kWorkerReplyRedirects,
  kWorkerFnatUnsteered,
  kWorkerPolls,
  kWorkerBusyPolls,
  kWorkerNewConns,
  kWorkerActiveConns,
  kWorkerResets,
  kWorkerIcmpUnreach,
  kWorkerArpReplies,
  kWorkerArpRequests,
  kWorkerProxyHeaders,
  kWorkerProxyHeaderRetransmits,
  kWorkerResteered,
  kWorkerResteerPoolFull,
  kWorkerResteerGaveUp,
  kWorkerHandover,
  kConnTableEntries,
  kConnTableCapacity,
  kPortRx,
  kPortTx,
  kPortRxErrors,
  kPortTxErrors,
  kPortRxMissed,
  kExceptionPackets,
  kExceptionDrops,
  kNeighborEntries,
  kAnnouncedVips,
  kDraining,
  kServices,
  kBackends,
  kTableGeneration,
  kSyncs,
  kSyncErrors,
  kLastSync,
  kSourceErrors,
  kProgrammingLatency,
  kSyncDuration,
  kWatchRestarts,
  kRelists,
  kResyncRepairs,
  kOmittedServices,
  kOmittedBackends,
  kServiceConflicts,
  kHttpDrops,
  kNumFamilies
};

const std::vector<FamilyInfo> kFamilies = {
    {"vipd_build_info", "gauge", "version", "Always 1; the label says which vipd is running."},
    {"vipd_start_time_seconds", "gauge", "", "Start time of the vipd process since the Unix epoch, in seconds."},
    {"vipd_service_connections_total", "counter", "service,protocol,vip",
     "Connections (flows) scheduled to the backends of the virtual service."},
    {"vipd_service_packets_total", "counter", "service,protocol,vip,direction",
     "Packets of the virtual service's connections; direction in = client to backend, out = backend to client."},
    {"vipd_service_bytes_total", "counter", "service,protocol,vip,direction",
     "L3 bytes of the virtual service's connections; direction in = client to backend, out = backend to client."},
    {"vipd_service_active_connections", "gauge", "service,protocol,vip",
     "Established TCP connections of the virtual service in the connection tables."},
    {"vipd_service_inactive_connections", "gauge", "service,protocol,vip",
     "Other connections of the virtual service in the tables (TCP opening or closing, UDP)."},
    {"vipd_service_backends", "gauge", "service,protocol,vip",
     "Backends of the virtual service in the applied table (weight 0 included)."},
    {"vipd_backend_connections_total", "counter", "service,protocol,vip,backend",
     "Connections (flows) scheduled to the backend."},
    {"vipd_backend_packets_total", "counter", "service,protocol,vip,backend,direction",
     "Packets of the backend's connections; direction in = client to backend, out = backend to client."},
    {"vipd_backend_bytes_total", "counter", "service,protocol,vip,backend,direction",
     "L3 bytes of the backend's connections; direction in = client to backend, out = backend to client."},
    {"vipd_backend_active_connections", "gauge", "service,protocol,vip,backend",
     "Established TCP connections to the backend in the connection tables."},
    {"vipd_backend_inactive_connections", "gauge", "service,protocol,vip,backend",
     "Other connections to the backend in the tables (TCP opening or closing, UDP)."},
    {"vipd_backend_weight", "gauge", "service,protocol,vip,backend",
     "Scheduling weight of the backend; 0 = no new connections (e.g. terminating)."},
    {"vipd_backend_ejections_total", "counter", "service,protocol,vip,backend",
     "Outlier ejections of the backend (dpdk mode: consecutive failed connections)."},
    {"vipd_backend_ejected", "gauge", "service,protocol,vip,backend",
     "1 while the backend is ejected from scheduling new connections (outlier ejection)."},
    {"vipd_worker_rx_packets_total", "counter", "worker", "Packets received by the worker (ports and redirect ring)."},
    {"vipd_worker_tx_packets_total", "counter", "worker", "Packets sent by the worker."},
    {"vipd_worker_dropped_packets_total", "counter", "worker,reason", "Packets the worker did not forward, by reason."},
    {"vipd_worker_redirected_packets_total", "counter", "worker,direction",
     "Packets passed between workers; direction out = handed to the owning worker, in = received from another worker."},
    {"vipd_worker_reply_redirects_total", "counter", "worker",
     "Replies (backend to client) that arrived on this worker's queue but belong to another worker's connection "
     "and were passed to it (part of the redirected packets out)."},
    {"vipd_worker_fnat_unsteered_total", "counter", "worker",
     "New full-NAT connections whose local port could not be chosen for RSS steering (no suitable port free); "
     "their replies may take the redirect ring."},
    {"vipd_worker_polls_total", "counter", "worker", "Poll rounds of the worker."},
    {"vipd_worker_busy_polls_total", "counter", "worker",
     "Poll rounds that found packets; busy ratio = rate(busy_polls) / rate(polls)."},
    {"vipd_worker_new_connections_total", "counter", "worker", "Connections created by the worker."},
    {"vipd_worker_active_connections", "gauge", "worker", "Connections in the worker's table that are not expired."},
    {"vipd_worker_tcp_resets_sent_total", "counter", "worker",
     "TCP RSTs sent by the worker (no endpoints, removed backend)."},
    {"vipd_worker_icmp_unreachable_sent_total", "counter", "worker",
     "ICMP port unreachable messages sent by the worker (UDP to a service without endpoints)."},
    {"vipd_worker_arp_replies_sent_total", "counter", "worker", "ARP replies sent by the worker."},
    {"vipd_worker_arp_requests_sent_total", "counter", "worker", "ARP requests sent by the worker."},
    {"vipd_worker_proxy_headers_sent_total", "counter", "worker",
     "PROXY protocol headers sent to backends (full NAT), once per connection."},
    {"vipd_worker_proxy_header_retransmits_total", "counter", "worker",
     "PROXY protocol headers sent again with a retransmitted first client segment."},
    {"vipd_worker_resteered_connections_total", "counter", "worker,reason",
     "TCP connections sent to another backend before their handshake completed, by what the first one did "
     "(rst, icmp, timeout, retransmit)."},
    {"vipd_worker_resteer_pool_full_total", "counter", "worker",
     "New TCP connections that found the worker's saved-SYN pool full (or whose IPv6 SYN's extension headers "
     "did not fit an entry) and went without re-steering."},
    {"vipd_worker_resteer_gave_up_total", "counter", "worker",
     "Connections that failed to get through and had no re-steering attempt or backend left."},
    {"vipd_worker_handover_packets_total", "counter", "worker,result",
     "Full-NAT connection hand-over between gateways: packets of no connection here handed over to the peers "
     "(sent), from a peer and forwarded by a connection here (matched), from a peer and dropped (not_held), "
     "dropped over --handover-pps (rate_limited), with the hand-over ethertype but not from a peer (not_peer), "
     "copies to a peer the mbuf pool could not give (no_mbuf)."},
    {"vipd_conn_table_entries", "gauge", "worker", "Entries in use in the worker's connection table."},
    {"vipd_conn_table_capacity", "gauge", "worker", "Capacity of the worker's connection table."},
    {"vipd_port_rx_packets_total", "counter", "port,device", "Packets received by the port (NIC statistics)."},
    {"vipd_port_tx_packets_total", "counter", "port,device", "Packets sent by the port (NIC statistics)."},
    {"vipd_port_rx_errors_total", "counter", "port,device", "Erroneous received packets (NIC statistics)."},
    {"vipd_port_tx_errors_total", "counter", "port,device", "Failed transmissions (NIC statistics)."},
    {"vipd_port_rx_missed_packets_total", "counter", "port,device",
     "Packets dropped by the NIC because no receive buffer was free."},
    {"vipd_exception_packets_total", "counter", "port,device,interface,direction",
     "Frames through the port's kernel exception interface (direction to_kernel or from_kernel)."},
    {"vipd_exception_drops_total", "counter", "port,device,interface,reason",
     "Frames the exception path dropped (rate_limited, kernel_full, from_kernel_full)."},
    {"vipd_neighbor_entries", "gauge", "", "Entries in the ARP cache."},
    {"vipd_announced_vips", "gauge", "", "VIPs announced now as /32 and /128 routes, both families (--announce-table; 0 while draining)."},
    {"vipd_draining", "gauge", "", "1 while the gateway is draining (vipctl drain, --drain-on-sigterm), else 0."},
    {"vipd_services", "gauge", "", "Virtual services in the applied table."},
    {"vipd_backends", "gauge", "", "Backends (service, backend pairs) in the applied table."},
    {"vipd_table_generation", "gauge", "", "Generation of the applied service table (0: none applied yet)."},
    {"vipd_syncs_total", "counter", "", "Successful syncs (table applied to the dataplane)."},
    {"vipd_sync_errors_total", "counter", "", "Syncs whose apply failed (retried as a full sync)."},
    {"vipd_sync_last_success_timestamp_seconds", "gauge", "",
     "End of the last successful sync since the Unix epoch, in seconds (0: never)."},
    {"vipd_source_errors", "gauge", "", "Current problems reported by the source (broken manifests, objects)."},
    {"vipd_network_programming_duration_seconds", "histogram", "",
     "Time from a change in the source to the table being published in the dataplane."},
    {"vipd_sync_duration_seconds", "histogram", "", "Duration of one sync: load, build and apply."},
    {"vipd_source_watch_restarts_total", "counter", "resource",
     "Watches of the resource that were started again (Kubernetes API source; 0 otherwise)."},
    {"vipd_source_relists_total", "counter", "resource,reason",
     "Full lists of the resource after the initial one, by cause: gone (410 Gone/Expired), "
     "malformed (undecodable watch stream) (Kubernetes API source; 0 otherwise)."},
    {"vipd_source_resync_repairs_total", "counter", "",
     "Full syncs that repaired a divergence between the applied table and the source's objects "
     "(the table rebuilt from scratch differed)."},
    {"vipd_metrics_omitted_services", "gauge", "",
     "Services without per-service series because of --metrics-max-service-series."},
    {"vipd_metrics_omitted_backends", "gauge", "",
     "Backends without per-backend series because of --metrics-max-backend-series or the per-service cap."},
    {"vipd_service_conflicts", "gauge", "reason",
     "Service entries now skipped because another entry holds their address, port and protocol; reason precedence = "
     "a ClusterIP or NodePort outranks an external or load balancer address, order = same kind, namespace/name "
     "order."},
    {"vipd_http_connections_dropped_total", "counter", "listener,reason",
     "Connections to vipd's HTTP listeners (health, metrics, admin) closed before an answer: limit, "
     "header_timeout, write_timeout, descriptors."},
};

MetricType type_of(const FamilyInfo& f) {
  const std::string t = f.type;
  if (t == "counter") return MetricType::Counter;
  if (t == "gauge") return MetricType::Gauge;
  return MetricType::Histogram;
}

class Builder {
 public:
  Builder() {
    fams_.resize(kNumFamilies);
    for (size_t i = 0; i < kNumFamilies; ++i) {
      fams_[i].name = kFamilies[i].name;
      fams_[i].help = kFamilies[i].help;
      fams_[i].type = type_of(kFamilies[i]);
    }
  }
  void add(Fam f, Labels labels, double v) {
    ClientMetric m;
    // Label values carry names from outside (services, devices). The text
    // format must be UTF-8: one invalid byte fails the whole scrape in
    // Prometheus, so such bytes become U+FFFD. (prometheus-cpp's text serializer
    // escapes \\, " and newline itself.)
    for (auto& l : labels)
      if (!is_valid_utf8(l.value)) l.value = utf8_repair(l.value);
    m.label = std::move(labels);
    if (fams_[f].type == MetricType::Counter) m.counter.value = v;
    else m.gauge.value = v;
    fams_[f].metric.push_back(std::move(m));
  }
  void add_histogram(Fam f, const HistogramSnapshot& h) {
    ClientMetric m;
    m.histogram.sample_count = h.count;
    m.histogram.sample_sum = h.sum;
    for (size_t i = 0; i < h.bounds.size(); ++i)
      m.histogram.bucket.push_back({h.cumulative[i], h.bounds[i]});
    m.histogram.bucket.push_back({h.count, std::numeric_limits<double>::infinity()});
    fams_[f].metric.push_back(std::move(m));
  }
  std::vector<MetricFamily> finish() {
    std::vector<MetricFamily> out;
    for (auto& f : fams_)
      if (!f.metric.empty()) out.push_back(std::move(f));
    return out;
  }

 private:
  std::vector<MetricFamily> fams_;
};

double d(uint64_t v) { return static_cast<double>(v); }
double nonneg(int64_t v) { return v < 0 ? 0.0 : static_cast<double>(v); }

std::string ip_port(const IpAddr& ip, uint16_t port) { return host_port(ip, port); }

}  // namespace

const std::vector<FamilyInfo>& metric_families() { return kFamilies; }

void MetricsCollector::Totals::add(const Totals& o) {
  conns += o.conns;
  inpkts += o.inpkts;
  outpkts += o.outpkts;
  inbytes += o.inbytes;
  outbytes += o.outbytes;
}

MetricsCollector::MetricsCollector(const StatsSource& src, const SyncMetrics* sync, CollectorOptions opts)
    : src_(src), sync_(sync), opts_(std::move(opts)) {}

std::vector<MetricFamily> MetricsCollector::Collect() const {
  std::lock_guard<std::mutex> g(mu_);
  Builder b;

  b.add(kBuildInfo, {{"version", opts_.version.empty() ? VIPD_VERSION : opts_.version}}, 1);
  if (opts_.start_time_unix_ns > 0) b.add(kStartTime, {}, static_cast<double>(opts_.start_time_unix_ns) / 1e9);

  // ---- services and backends (from the last applied table) ----
  const std::shared_ptr<const ServiceTable> table = src_.table();
  uint64_t n_backends = 0, omitted_services = 0, omitted_backends = 0;
  uint32_t services_out = 0, backends_out = 0;
  std::set<ServiceKey> seen;
  if (table) {
    for (const auto& [key, svc] : table->services) {
      n_backends += svc.backends.size();
      if (services_out >= opts_.max_service_series) {
        ++omitted_services;
        if (opts_.per_backend) omitted_backends += svc.backends.size();
        continue;
      }
      ++services_out;
      seen.insert(key);
      const std::string proto = name(key.protocol);
      const std::string vip = ip_port(key.vip, key.port);
      const Labels sl = {{"service", svc.name}, {"protocol", proto}, {"vip", vip}};
      auto with = [](Labels l, const char* name, std::string value) {
        l.push_back({name, std::move(value)});
        return l;
      };

      ServiceState& st = state_[key];
      std::vector<std::pair<std::pair<IpAddr, uint16_t>, Totals>> now;
      now.reserve(svc.backends.size());
      Totals sum;
      double active = 0, inactive = 0;
      for (const auto& be : svc.backends) {
        const dp::DestSnapshot ds = src_.dest(key, be.ip, be.port);
        const Totals t{ds.conns, ds.inpkts, ds.outpkts, ds.inbytes, ds.outbytes};
        now.emplace_back(std::make_pair(be.ip, be.port), t);
        sum.add(t);
        active += nonneg(ds.active);
        inactive += nonneg(ds.inactive);
        if (!opts_.per_backend) continue;
        if (backends_out >= opts_.max_backend_series) {
          ++omitted_backends;
          continue;
        }
        ++backends_out;
        const Labels bl = with(sl, "backend", ip_port(be.ip, be.port));
        b.add(kBackendConns, bl, d(t.conns));
        b.add(kBackendPackets, with(bl, "direction", "in"), d(t.inpkts));
        b.add(kBackendPackets, with(bl, "direction", "out"), d(t.outpkts));
        b.add(kBackendBytes, with(bl, "direction", "in"), d(t.inbytes));
        b.add(kBackendBytes, with(bl, "direction", "out"), d(t.outbytes));
        b.add(kBackendActive, bl, nonneg(ds.active));
        b.add(kBackendInactive, bl, nonneg(ds.inactive));
        b.add(kBackendWeight, bl, d(be.weight));
        // Outlier ejection: only for backends ejected at least once (the
        // series stay within the per-backend budget of the caps).
        if (ds.ejections) {
          b.add(kBackendEjections, bl, d(ds.ejections));
          b.add(kBackendEjected, bl, ds.ejected ? 1 : 0);
        }
      }
      // Backends that went away since the last scrape keep counting in the
      // service's totals (both lists are sorted by ip, port).
      std::sort(now.begin(), now.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
      size_t j = 0;
      for (const auto& [id, t] : st.last) {
        while (j < now.size() && now[j].first < id) ++j;
        if (j == now.size() || now[j].first != id) st.retired.add(t);
      }
      st.last = std::move(now);
      Totals tot = st.retired;
      tot.add(sum);
      b.add(kServiceConns, sl, d(tot.conns));
      b.add(kServicePackets, with(sl, "direction", "in"), d(tot.inpkts));
      b.add(kServicePackets, with(sl, "direction", "out"), d(tot.outpkts));
      b.add(kServiceBytes, with(sl, "direction", "in"), d(tot.inbytes));
      b.add(kServiceBytes, with(sl, "direction", "out"), d(tot.outbytes));
      b.add(kServiceActive, sl, active);
      b.add(kServiceInactive, sl, inactive);
      b.add(kServiceBackends, sl, d(svc.backends.size()));
    }
  }
  // Services no longer exported (removed, or pushed past the cap) start afresh.
  for (auto it = state_.begin(); it != state_.end();) {
    if (seen.count(it->first)) ++it;
    else it = state_.erase(it);
  }

  // ---- workers ----
  for (const auto& w : src_.workers()) {
    const Labels wl = {{"worker", std::to_string(w.lcore)}};
    b.add(kWorkerRx, wl, d(w.rx));
    b.add(kWorkerTx, wl, d(w.tx));
    for (const auto& [reason, v] : w.drop_reasons) b.add(kWorkerDrops, {wl[0], {"reason", reason}}, d(v));
    b.add(kWorkerRedirects, {wl[0], {"direction", "out"}}, d(w.redirects_out));
    b.add(kWorkerRedirects, {wl[0], {"direction", "in"}}, d(w.redirects_in));
    b.add(kWorkerReplyRedirects, wl, d(w.reply_redirects));
    b.add(kWorkerFnatUnsteered, wl, d(w.fnat_unsteered));
    b.add(kWorkerPolls, wl, d(w.polls));
    b.add(kWorkerBusyPolls, wl, d(w.busy_polls));
    b.add(kWorkerNewConns, wl, d(w.new_flows));
    b.add(kWorkerActiveConns, wl, d(w.active_flows));
    b.add(kWorkerResets, wl, d(w.rst_sent));
    b.add(kWorkerIcmpUnreach, wl, d(w.icmp_unreach_sent));
    b.add(kWorkerArpReplies, wl, d(w.arp_replies));
    b.add(kWorkerArpRequests, wl, d(w.arp_requests));
    b.add(kWorkerProxyHeaders, wl, d(w.proxy_headers));
    b.add(kWorkerProxyHeaderRetransmits, wl, d(w.proxy_header_retransmits));
    static constexpr const char* kReasons[] = {"rst", "icmp", "timeout", "retransmit"};
    for (unsigned r = 0; r < 4; ++r) b.add(kWorkerResteered, {wl[0], {"reason", kReasons[r]}}, d(w.resteers[r]));
    b.add(kWorkerResteerPoolFull, wl, d(w.resteer_pool_full));
    b.add(kWorkerResteerGaveUp, wl, d(w.resteer_gave_up));
    b.add(kWorkerHandover, {wl[0], {"result", "sent"}}, d(w.handovers));
    b.add(kWorkerHandover, {wl[0], {"result", "matched"}}, d(w.handover_matched));
    b.add(kWorkerHandover, {wl[0], {"result", "not_held"}}, d(w.handover_not_held));
    b.add(kWorkerHandover, {wl[0], {"result", "rate_limited"}}, d(w.handover_rate_limited));
    b.add(kWorkerHandover, {wl[0], {"result", "not_peer"}}, d(w.handover_not_peer));
    b.add(kWorkerHandover, {wl[0], {"result", "no_mbuf"}}, d(w.handover_no_mbuf));
    b.add(kConnTableEntries, wl, d(w.conn_entries));
    b.add(kConnTableCapacity, wl, d(w.conn_capacity));
  }
  for (const auto& p : src_.ports()) {
    const Labels pl = {{"port", std::to_string(p.port_id)}, {"device", p.device}};
    b.add(kPortRx, pl, d(p.ipackets));
    b.add(kPortTx, pl, d(p.opackets));
    b.add(kPortRxErrors, pl, d(p.ierrors));
    b.add(kPortTxErrors, pl, d(p.oerrors));
    b.add(kPortRxMissed, pl, d(p.imissed));
    if (p.exception_ifname.empty()) continue;
    const Labels el = {pl[0], pl[1], {"interface", p.exception_ifname}};
    auto with = [&](const char* k, const char* v) {
      Labels l = el;
      l.push_back({k, v});
      return l;
    };
    b.add(kExceptionPackets, with("direction", "to_kernel"), d(p.exc_to_kernel));
    b.add(kExceptionPackets, with("direction", "from_kernel"), d(p.exc_from_kernel));
    b.add(kExceptionDrops, with("reason", "rate_limited"), d(p.exc_rate_limited));
    b.add(kExceptionDrops, with("reason", "kernel_full"), d(p.exc_kernel_full));
    b.add(kExceptionDrops, with("reason", "from_kernel_full"), d(p.exc_from_kernel_full));
  }
  b.add(kNeighborEntries, {}, d(src_.neighbor_entries()));
  const DrainStats ds = src_.drain_stats();
  b.add(kAnnouncedVips, {}, d(ds.announced_vips));
  b.add(kDraining, {}, ds.draining ? 1.0 : 0.0);

  // ---- table and sync ----
  const SyncStatus s = src_.sync_status();
  b.add(kServices, {}, table ? d(table->services.size()) : 0.0);
  b.add(kBackends, {}, d(n_backends));
  b.add(kTableGeneration, {}, d(s.generation));
  b.add(kSyncs, {}, d(s.syncs));
  b.add(kSyncErrors, {}, d(s.sync_errors));
  b.add(kLastSync, {}, static_cast<double>(s.last_sync_unix_ns) / 1e9);
  b.add(kSourceErrors, {}, d(s.source_errors.size()));
  b.add(kResyncRepairs, {}, d(s.resync_repairs));
  if (sync_) {
    b.add_histogram(kProgrammingLatency, sync_->programming_latency());
    b.add_histogram(kSyncDuration, sync_->sync_duration());
  }
  for (const auto& r : src_.source_stats()) {
    b.add(kWatchRestarts, {{"resource", r.resource}}, d(r.watch_restarts));
    b.add(kRelists, {{"resource", r.resource}, {"reason", "gone"}}, d(r.relists_gone));
    b.add(kRelists, {{"resource", r.resource}, {"reason", "malformed"}}, d(r.relists_malformed));
  }
  b.add(kOmittedServices, {}, d(omitted_services));
  b.add(kOmittedBackends, {}, d(omitted_backends));
  for (const char* reason : {"order", "precedence"}) {
    const auto it = s.service_conflicts.find(reason);
    b.add(kServiceConflicts, {{"reason", reason}}, it == s.service_conflicts.end() ? 0.0 : d(it->second));
  }
  for (const auto& c : http_connection_drops())
    b.add(kHttpDrops, {{"listener", c.listener}, {"reason", c.reason}}, d(c.count));
  return b.finish();
}

}  // namespace vipd::cp
