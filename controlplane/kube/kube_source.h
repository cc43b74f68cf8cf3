// Thread: see below. KubeSource: the Kubernetes API server as a Source for the
// SyncLoop (list+watch of Services and EndpointSlices, docs/contract.md C8-C13).
//
// Threading: start() runs one reflector thread per resource (services,
// endpointslices). Each reflector lists (limit/continue pages), then watches
// from the list's resourceVersion, and keeps its cache of parsed objects under
// its own mutex; every change wakes wait(). load() and wait() run on the
// SyncLoop's thread, which alone builds and applies tables: load() copies both
// caches under their locks and builds the ServiceTable outside them.
// ready() is false until both initial lists have completed (nothing is
// programmed before). On API trouble the caches, and so the applied table,
// stay as they were; the reflectors retry with exponential backoff and jitter.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <simdjson.h>

#include "controlplane/kube/api_client.h"
#include "controlplane/sources/k8s_index.h"
#include "controlplane/sources/k8s_objects.h"
#include "controlplane/sources/source.h"

namespace vipd::cp::kube {

struct KubeSourceOptions {
  k8s::BuildOptions build;             // scheduler, node identity, proxy name
  double qps = 5;                      // --api-qps (burst = 2 x qps)
  uint32_t backoff_initial_ms = 500;   // --api-backoff-initial-ms
  uint32_t backoff_max_ms = 30000;     // --api-backoff-max-ms
  uint32_t watch_timeout_min_s = 300;  // timeoutSeconds is drawn from [min, max]
  uint32_t watch_timeout_max_s = 600;
  uint32_t list_page_size = 500;       // limit= of list requests
};

// Counters of one reflector (all monotonic).
struct ReflectorStats {
  uint64_t lists = 0;           // completed (full) lists
  uint64_t list_pages = 0;
  uint64_t watches = 0;         // watch requests started
  uint64_t events = 0;          // ADDED/MODIFIED/DELETED applied
  uint64_t bookmarks = 0;
  uint64_t gone = 0;            // 410 Expired/Gone -> relist
  uint64_t errors = 0;          // transport errors, bad statuses
  uint64_t malformed = 0;       // undecodable streams/bodies -> relist
  uint64_t invalid_objects = 0; // objects skipped by the object rules
  uint64_t objects = 0;         // in the cache now
  // Completed relists (lists after the initial one) by what caused them: a
  // 410 Gone/Expired of the watch, or an undecodable watch stream.
  uint64_t relists_gone = 0;
  uint64_t relists_malformed = 0;
  // The bound of the next retry delay (the delay is drawn from [d/2, d]); back
  // to --api-backoff-initial-ms once a watch is accepted.
  uint64_t retry_delay_ms = 0;
  std::string resource_version; // last seen
  bool synced = false;          // initial list done
};

struct KubeSourceStats {
  ReflectorStats services, endpointslices;
};

// Object changes drained from the reflectors: "ns/name" -> the new object, or
// nullopt for a deletion.
struct ObjectChanges {
  std::map<std::string, std::optional<k8s::Service>> services;
  std::map<std::string, std::optional<k8s::EndpointSlice>> slices;
};

// Every object the reflectors hold ("ns/name" -> object): the input of a
// rebuild from scratch.
struct ObjectSnapshot {
  std::map<std::string, k8s::Service> services;
  std::map<std::string, k8s::EndpointSlice> slices;
};

// Thread: the SyncLoop's. The part of KubeSource::load() after draining the
// reflectors: feeds the changes to a TableIndex and answers in delta form
// (LoadResult::delta), with the issues only when they changed. Separate so that
// the control-plane benchmark drives exactly this code.
class DeltaBuilder {
 public:
  explicit DeltaBuilder(k8s::BuildOptions options) : opts_(options), index_(std::move(options)) {}
  // `invalid_*`: the reflectors' invalid objects when they changed; null = unchanged.
  LoadResult load(ObjectChanges changes, const std::vector<SourceError>* invalid_services,
                  const std::vector<SourceError>* invalid_slices);
  // For a full sync: feeds `changes` as load() does, then throws the index
  // away and builds a new one from `all` (every object, what a fresh start
  // would build from them). `touched` lists every key whose entry changed;
  // `diverged` counts the keys where the incremental index differed from the
  // rebuild, i.e. how far it had drifted from the objects.
  LoadResult rebuild(ObjectChanges changes, ObjectSnapshot all, std::vector<SourceError> invalid_services,
                     std::vector<SourceError> invalid_slices);
  const k8s::TableIndex& index() const { return index_; }

 private:
  void feed(ObjectChanges& changes);
  LoadResult answer(LoadResult r);

  k8s::BuildOptions opts_;
  k8s::TableIndex index_;
  std::vector<SourceError> invalid_services_, invalid_slices_;
  uint64_t reported_issues_version_ = ~uint64_t{0};
  bool invalid_changed_ = true;
};

// The decoding of one API object (list item or watch object) into the typed
// value, with the object rules of k8s_objects. nullopt + *reason when invalid.
std::optional<k8s::Service> decode_service(simdjson::dom::element obj, std::string* reason);
std::optional<k8s::EndpointSlice> decode_endpoint_slice(simdjson::dom::element obj, std::string* reason);

// The label selector of both watches: kube-proxy's, or opting in to a named proxy.
std::string proxy_label_selector(const std::string& service_proxy_name);

class KubeSource : public Source {
 public:
  KubeSource(ClientConfig cfg, KubeSourceOptions opts);
  // With another transport than the libcurl client (unit tests script the API
  // server with it); `cfg` then only names the server in log lines.
  KubeSource(ClientConfig cfg, KubeSourceOptions opts, std::unique_ptr<ApiTransport> transport);
  ~KubeSource() override;  // stops and joins the reflector threads
  KubeSource(const KubeSource&) = delete;
  KubeSource& operator=(const KubeSource&) = delete;

  void start();
  void stop();

  LoadResult load() override;
  // For full syncs (the periodic resync, retries after a failed apply): the
  // table rebuilt from scratch from the reflectors' caches (every object they
  // hold now), not the incremental index, so that a change the incremental
  // path lost is repaired. Pending changes are consumed with it.
  LoadResult load_full() override;
  bool wait(int timeout_ms) override;
  bool ready() const override;
  std::string describe() const override;
  // runtime_files(ClientConfig) of its client (api_client.h).
  std::vector<RuntimeFile> runtime_files() const override;

  // Blocks until ready() or timeout (dry-run).
  bool wait_ready(int timeout_ms);
  KubeSourceStats stats() const;
  // The client's connection settings (server, TLS verification), for status.
  const ClientConfig& client_config() const;

  // Test hook: forgets the changes the reflectors hold for the next load(),
  // as a lost change would, so that a test can check that load_full() repairs
  // the divergence. Never called by vipd itself.
  void discard_pending_changes_for_test();

  struct Impl;  // reflectors (kube_source.cc, reflector.h)

 private:
  void notify(int64_t change_unix_ns);
  // The newest change time noted since the last load (0 if none), and reset.
  int64_t take_newest_change();

  std::unique_ptr<Impl> impl_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool dirty_ = false;
  int64_t pending_change_ns_ = 0;
};

}  // namespace vipd::cp::kube
