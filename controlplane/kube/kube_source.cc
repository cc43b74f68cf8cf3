// Thread: reflector threads (Reflector::run, reflector.h) and the SyncLoop thread (load/wait).
// KubeSource: its two reflectors (Services, EndpointSlices) and the DeltaBuilder
// (delta_builder.cc) that turns what they drained into a LoadResult.
#include "controlplane/kube/kube_source.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include "common/log.h"
#include "controlplane/kube/reflector.h"

namespace vipd::cp::kube {

using detail::Reflector;
using detail::decode_object;
using detail::kServices;
using detail::kSlices;

std::optional<k8s::Service> decode_service(simdjson::dom::element obj, std::string* reason) {
  return decode_object(kServices, obj, reason);
}
std::optional<k8s::EndpointSlice> decode_endpoint_slice(simdjson::dom::element obj, std::string* reason) {
  return decode_object(kSlices, obj, reason);
}

std::string proxy_label_selector(const std::string& name) {
  if (!name.empty()) return std::string(k8s::kServiceProxyNameLabel) + "=" + name;
  return std::string("!") + k8s::kHeadlessLabel + ",!" + k8s::kServiceProxyNameLabel;
}

struct KubeSource::Impl {
  Impl(ClientConfig cfg, KubeSourceOptions o, std::unique_ptr<ApiTransport> t,
       std::function<void(int64_t)> notify)
      : opts(std::move(o)),
        api(std::move(cfg)),
        transport(std::move(t)),
        limiter(std::max(0.1, opts.qps), std::max(1.0, 2 * opts.qps)),
        services(kServices, transport ? *transport : api, limiter, opts, notify),
        slices(kSlices, transport ? *transport : api, limiter, opts, notify) {}
  KubeSourceOptions opts;
  ApiClient api;                            // the configuration; the transport unless replaced
  std::unique_ptr<ApiTransport> transport;  // a replacement (unit tests); null = api
  RateLimiter limiter;
  Reflector<k8s::Service> services;
  Reflector<k8s::EndpointSlice> slices;
  DeltaBuilder delta{opts.build};  // SyncLoop thread only (load())
};

KubeSource::KubeSource(ClientConfig cfg, KubeSourceOptions opts)
    : KubeSource(std::move(cfg), std::move(opts), nullptr) {}

KubeSource::KubeSource(ClientConfig cfg, KubeSourceOptions opts, std::unique_ptr<ApiTransport> transport)
    : impl_(std::make_unique<Impl>(std::move(cfg), std::move(opts), std::move(transport),
                                   [this](int64_t t) { notify(t); })) {}

KubeSource::~KubeSource() { stop(); }

void KubeSource::start() {
  log_info("kube: connecting to " + impl_->api.config().server + " (" + impl_->api.config().origin +
           "), label selector '" + proxy_label_selector(impl_->opts.build.service_proxy_name) + "'" +
           (impl_->api.config().insecure ? "; TLS verification OFF (insecure-skip-tls-verify)" : ""));
  impl_->services.start();
  impl_->slices.start();
}

void KubeSource::stop() {
  impl_->services.stop();
  impl_->slices.stop();
}

void KubeSource::notify(int64_t change_unix_ns) {
  {
    std::lock_guard<std::mutex> g(mu_);
    dirty_ = true;
    pending_change_ns_ = std::max(pending_change_ns_, change_unix_ns);
  }
  cv_.notify_all();
}

bool KubeSource::ready() const { return impl_->services.synced() && impl_->slices.synced(); }

const ClientConfig& KubeSource::client_config() const { return impl_->api.config(); }

std::string KubeSource::describe() const { return "kubernetes API " + impl_->api.config().server; }

std::vector<Source::RuntimeFile> KubeSource::runtime_files() const {
  std::vector<RuntimeFile> out;
  for (auto& [what, path] : kube::runtime_files(impl_->api.config())) out.push_back({what, path, false});
  return out;
}

bool KubeSource::wait(int timeout_ms) {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait_for(l, std::chrono::milliseconds(std::max(0, timeout_ms)), [&] { return dirty_; });
  const bool changed = dirty_;
  dirty_ = false;
  return changed;
}

bool KubeSource::wait_ready(int timeout_ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!ready() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return ready();
}

int64_t KubeSource::take_newest_change() {
  std::lock_guard<std::mutex> g(mu_);
  return std::exchange(pending_change_ns_, 0);
}

LoadResult KubeSource::load() {
  const int64_t newest = take_newest_change();
  // Only the objects that changed since the previous load are handed on; the
  // index rebuilds only their services, so the cost of a sync follows the size
  // of the change, not of the cluster.
  ObjectChanges changes;
  std::vector<SourceError> invalid_svc, invalid_slices;
  const bool inv1 = impl_->services.drain(&changes.services, &invalid_svc);
  const bool inv2 = impl_->slices.drain(&changes.slices, &invalid_slices);
  LoadResult r = impl_->delta.load(std::move(changes), inv1 ? &invalid_svc : nullptr,
                                   inv2 ? &invalid_slices : nullptr);
  r.newest_change_unix_ns = newest;
  return r;
}

LoadResult KubeSource::load_full() {
  const int64_t newest = take_newest_change();
  ObjectChanges changes;
  ObjectSnapshot all;
  std::vector<SourceError> invalid_svc, invalid_slices;
  impl_->services.drain_all(&changes.services, &all.services, &invalid_svc);
  impl_->slices.drain_all(&changes.slices, &all.slices, &invalid_slices);
  LoadResult r = impl_->delta.rebuild(std::move(changes), std::move(all), std::move(invalid_svc),
                                      std::move(invalid_slices));
  if (r.diverged)
    log_warn("kube: full sync: " + std::to_string(r.diverged) +
             " service key(s) of the incremental table differed from a rebuild from the "
             "reflector caches; the rebuild is applied");
  r.newest_change_unix_ns = newest;
  return r;
}

void KubeSource::discard_pending_changes_for_test() {
  impl_->services.discard_pending();
  impl_->slices.discard_pending();
}

KubeSourceStats KubeSource::stats() const {
  return {impl_->services.stats(), impl_->slices.stats()};
}

}  // namespace vipd::cp::kube
