// Thread: any (implementations must be safe to call from the metrics and
// health server threads, concurrently with the control thread).
// StatsSource: everything the Prometheus collector and the health endpoints
// read, as snapshots: per-worker and per-destination dataplane counters, the
// last applied ServiceTable, the sync loop's status and the source's
// list/watch counters. An interface, so that unit tests can feed fakes;
// DataplaneStatsSource is the real one (a Dataplane plus a SyncLoop).
//
// Only the snapshot structs of dataplane/runtime/dataplane.h are used here (that
// header has no DPDK in it); nothing in this directory links the dataplane.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/service_table.h"
#include "controlplane/sync/sync_loop.h"
#include "dataplane/runtime/dataplane.h"

namespace vipd::cp {

// List/watch counters of one resource of a watching source (the Kubernetes
// API source: "services", "endpointslices"). All monotonic.
struct SourceResourceStats {
  std::string resource;
  uint64_t watch_restarts = 0;  // watches started again after the first one
  uint64_t relists = 0;         // full lists after the initial one: the sum of
  uint64_t relists_gone = 0;    //   after a 410 Gone/Expired of the watch
  uint64_t relists_malformed = 0;  // after an undecodable watch stream
};

// The resources reported when the source does not watch anything (manifests):
// the families exist with zero values, so dashboards and alerts work unchanged
// when the Kubernetes source is switched on.
inline std::vector<SourceResourceStats> default_source_stats() {
  return {{"endpointslices", 0, 0, 0, 0}, {"services", 0, 0, 0, 0}};
}

struct DrainStats {
  uint64_t announced_vips = 0;
  bool draining = false;
};

class StatsSource {
 public:
  virtual ~StatsSource() = default;

  virtual std::vector<dp::WorkerSnapshot> workers() const = 0;
  virtual std::vector<dp::PortSnapshot> ports() const = 0;
  // Counters of one destination (IPv4 or IPv6) of one service, summed over
  // the workers.
  virtual dp::DestSnapshot dest(const ServiceKey& svc, const IpAddr& ip, uint16_t port) const = 0;
  virtual uint32_t neighbor_entries() const = 0;
  // The last applied table (null before the first successful sync).
  virtual std::shared_ptr<const ServiceTable> table() const = 0;
  virtual SyncStatus sync_status() const = 0;
  virtual std::vector<SourceResourceStats> source_stats() const { return default_source_stats(); }
  // VIP announcement (docs/gateway.md): routes in place now, and whether the
  // gateway is draining (vipctl drain).
  virtual DrainStats drain_stats() const { return {}; }
};

// The daemon's StatsSource. `set_source_stats` lets a watching source (the
// Kubernetes source) report its list/watch counters:
//   stats.set_source_stats([&] { return ...from kube.stats()...; });
class DataplaneStatsSource : public StatsSource {
 public:
  DataplaneStatsSource(const dp::Dataplane& dp, const SyncLoop& sync) : dp_(dp), sync_(sync) {}

  // Set before the servers start.
  void set_source_stats(std::function<std::vector<SourceResourceStats>()> fn) {
    source_stats_ = std::move(fn);
  }

  // Set before the servers start; called on the metrics thread.
  void set_drain_stats(std::function<DrainStats()> fn) { drain_stats_ = std::move(fn); }

  std::vector<dp::WorkerSnapshot> workers() const override { return dp_.workers(); }
  std::vector<dp::PortSnapshot> ports() const override { return dp_.ports(); }
  dp::DestSnapshot dest(const ServiceKey& svc, const IpAddr& ip, uint16_t port) const override {
    return dp_.dest_at(svc, ip, port);
  }
  uint32_t neighbor_entries() const override { return dp_.neighbor_entries(); }
  std::shared_ptr<const ServiceTable> table() const override { return sync_.table(); }
  SyncStatus sync_status() const override { return sync_.status(); }
  std::vector<SourceResourceStats> source_stats() const override {
    return source_stats_ ? source_stats_() : default_source_stats();
  }
  DrainStats drain_stats() const override { return drain_stats_ ? drain_stats_() : DrainStats{}; }

 private:
  const dp::Dataplane& dp_;
  const SyncLoop& sync_;
  std::function<std::vector<SourceResourceStats>()> source_stats_;
  std::function<DrainStats()> drain_stats_;
};

}  // namespace vipd::cp
