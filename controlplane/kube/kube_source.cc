// Thread: reflector threads (Reflector::run) and the SyncLoop thread (load/wait).
#include "controlplane/kube/kube_source.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <random>
#include <thread>
#include <utility>

#include "common/clock.h"
#include "common/log.h"
#include "controlplane/kube/watch_decoder.h"
#include "controlplane/sources/k8s_rules.h"

namespace vipd::cp::kube {
namespace {

template <typename T>
struct Kind {
  const char* kind;         // "Service"
  const char* api_version;  // "v1"
  const char* resource;     // "services"
  const char* path;         // "/api/v1/services"
  // The object rules (k8s_rules.h, shared with manifests) on a JSON object;
  // the third argument is the apiVersion of an object that has none.
  std::optional<T> (*decode)(const JsonNode&, k8s::ObjectError*, const char*);
};

const Kind<k8s::Service> kServices{"Service", "v1", "services", "/api/v1/services",
                                   &k8s::rules::decode_service<JsonNode>};
const Kind<k8s::EndpointSlice> kSlices{"EndpointSlice", "discovery.k8s.io/v1", "endpointslices",
                                       "/apis/discovery.k8s.io/v1/endpointslices",
                                       &k8s::rules::decode_endpoint_slice<JsonNode>};

// Object -> typed value, with the rules of k8s_objects (shared with manifests),
// read straight from the JSON.
template <typename T>
std::optional<T> decode_object(const Kind<T>& kind, simdjson::dom::element obj, std::string* reason) {
  if (!obj.is_object()) {
    *reason = "not an object";
    return std::nullopt;
  }
  // List items carry no apiVersion; watch objects do.
  k8s::ObjectError err;
  auto v = kind.decode(JsonNode(obj), &err, kind.api_version);
  if (!v) *reason = err.reason;
  return v;
}

std::pair<std::string, std::string> split_key(const std::string& key) {
  const auto slash = key.find('/');
  return {key.substr(0, slash), slash == std::string::npos ? "" : key.substr(slash + 1)};
}

}  // namespace

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

template <typename T>
class Reflector {
 public:
  Reflector(const Kind<T>& kind, ApiTransport& api, RateLimiter& limiter, const KubeSourceOptions& opts,
            std::function<void(int64_t)> notify)
      : kind_(kind), api_(api), limiter_(limiter), opts_(opts), notify_(std::move(notify)),
        rng_(std::random_device{}()) {}

  ~Reflector() { stop(); }

  void start() {
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  void stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  bool synced() const { return synced_.load(); }

  // The changes since the previous drain ("ns/name" -> new object, or nullopt
  // for a deletion; the latest change of a key wins). Returns true when the set
  // of invalid objects changed; *invalid then holds it.
  bool drain(std::map<std::string, std::optional<T>>* changes, std::vector<SourceError>* invalid) {
    std::lock_guard<std::mutex> g(mu_);
    changes->swap(pending_);
    pending_.clear();
    if (!invalid_changed_) return false;
    invalid_changed_ = false;
    for (const auto& [k, why] : invalid_)
      invalid->push_back({kind_.resource, std::string(kind_.kind) + " " + k, why});
    return true;
  }

  // drain() and, atomically with it, every object of the cache (for a
  // rebuild from scratch): the cache is what the drained changes lead to.
  // *invalid: the invalid objects, always.
  void drain_all(std::map<std::string, std::optional<T>>* changes, std::map<std::string, T>* all,
                 std::vector<SourceError>* invalid) {
    std::lock_guard<std::mutex> g(mu_);
    changes->swap(pending_);
    pending_.clear();
    *all = cache_;
    invalid_changed_ = false;
    for (const auto& [k, why] : invalid_)
      invalid->push_back({kind_.resource, std::string(kind_.kind) + " " + k, why});
  }

  void discard_pending() {
    std::lock_guard<std::mutex> g(mu_);
    pending_.clear();
  }

  ReflectorStats stats() const {
    std::lock_guard<std::mutex> g(mu_);
    ReflectorStats s = stats_;
    s.objects = cache_.size();
    s.synced = synced_.load();
    return s;
  }

 private:
  enum class End { kClosed, kGone, kError, kMalformed, kStopped };

  std::string selector_query() const {
    return "labelSelector=" + url_encode(proxy_label_selector(opts_.build.service_proxy_name));
  }

  std::optional<T> decode(simdjson::dom::element obj, std::string* reason) {
    return decode_object(kind_, obj, reason);
  }

  void sleep_ms(uint64_t ms) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (!stop_.load() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min<uint64_t>(ms, 20)));
  }

  // Exponential backoff with jitter: a delay drawn from [d/2, d], d doubling up to the max.
  void backoff(const std::string& why) {
    const uint64_t d = backoff_ms_;
    std::uniform_int_distribution<uint64_t> dist(d / 2, d);
    const uint64_t ms = dist(rng_);
    log_warn(std::string("kube: ") + kind_.resource + ": " + why + "; retrying in " +
             std::to_string(ms) + " ms (last applied state stays in force)");
    set_backoff(std::min<uint64_t>(opts_.backoff_max_ms, std::max<uint64_t>(1, d * 2)));
    sleep_ms(ms);
  }
  void reset_backoff() { set_backoff(std::max<uint32_t>(1, opts_.backoff_initial_ms)); }
  void set_backoff(uint64_t ms) {
    backoff_ms_ = ms;
    std::lock_guard<std::mutex> g(mu_);
    stats_.retry_delay_ms = ms;
  }

  // Full list (all pages); on success replaces the cache atomically and sets *rv.
  bool list(std::string* rv, std::string* why) {
    std::map<std::string, T> fresh;
    std::map<std::string, std::string> invalid;
    std::string cont, list_rv;
    uint64_t pages = 0;
    simdjson::dom::parser parser;
    for (int restarts = 0;;) {
      if (!limiter_.acquire(stop_)) return false;
      std::string q = std::string(kind_.path) + "?" + selector_query() +
                      "&limit=" + std::to_string(opts_.list_page_size);
      if (!cont.empty()) q += "&continue=" + url_encode(cont);
      std::string body;
      const HttpResult r = api_.get(q, &body, stop_, 120);
      if (stop_.load()) return false;
      if (!r.error.empty()) {
        *why = "list failed: " + r.error;
        std::lock_guard<std::mutex> g(mu_);
        ++stats_.errors;
        return false;
      }
      if (r.status == 410 && !cont.empty() && restarts < 3) {
        // The continue token expired: start the list again from scratch.
        log_info(std::string("kube: ") + kind_.resource + ": list continue token expired; listing again");
        ++restarts;
        cont.clear();
        list_rv.clear();
        pages = 0;
        fresh.clear();
        invalid.clear();
        continue;
      }
      if (r.status < 200 || r.status >= 300) {
        auto st = parse_status_body(body);
        *why = "list: HTTP " + std::to_string(r.status) + (st && !st->message.empty() ? ": " + st->message : "");
        std::lock_guard<std::mutex> g(mu_);
        ++stats_.errors;
        return false;
      }
      simdjson::dom::element doc;
      simdjson::dom::array items;
      if (auto err = parser.parse(body).get(doc); err) {
        *why = std::string("list: invalid JSON: ") + simdjson::error_message(err);
        std::lock_guard<std::mutex> g(mu_);
        ++stats_.malformed;
        return false;
      }
      auto items_field = doc["items"];
      if (items_field.get(items) != simdjson::SUCCESS) {
        if (!items_field.is_null()) {
          *why = "list: no items array";
          std::lock_guard<std::mutex> g(mu_);
          ++stats_.malformed;
          return false;
        }
      } else {
        for (simdjson::dom::element item : items) {
          const std::string key = key_of(item);
          if (key.empty()) {
            invalid["<unnamed>"] = "metadata.name is missing";
            continue;
          }
          std::string reason;
          if (auto v = decode(item, &reason)) fresh[key] = std::move(*v);
          else invalid[key] = reason;
        }
      }
      ++pages;
      std::string_view sv;
      const std::string page_rv =
          doc["metadata"]["resourceVersion"].get(sv) == simdjson::SUCCESS ? std::string(sv) : "";
      // The list is the snapshot the first page was served from (the continue
      // token pins it): the watch must start from its resourceVersion. A later
      // page that reports a newer one (an API server or proxy that does not
      // pin it) must not move the watch past changes this list never saw;
      // events the list did include are replayed by the watch, harmlessly.
      if (pages == 1) list_rv = page_rv;
      else if (page_rv != list_rv)
        log_debug(std::string("kube: ") + kind_.resource + ": list page " + std::to_string(pages) +
                  " reports resourceVersion " + page_rv + ", the first " + list_rv +
                  "; watching from the first");
      cont = doc["metadata"]["continue"].get(sv) == simdjson::SUCCESS ? std::string(sv) : "";
      if (cont.empty()) break;
    }
    size_t vanished = 0;
    const bool first_list = !synced_.load();
    {
      std::lock_guard<std::mutex> g(mu_);
      // An object that is listed but invalid keeps its last good version, as
      // it does when a watch event brings the invalid version: a bad edit must
      // not delete a working service. Only objects missing from the list go.
      for (const auto& [k, why_invalid] : invalid)
        if (auto good = cache_.find(k); good != cache_.end()) fresh.emplace(k, good->second);
      for (const auto& [k, v] : cache_)
        if (!fresh.count(k)) ++vanished;
      for (const auto& [k, why_invalid] : invalid)
        if (!invalid_.count(k) || invalid_[k] != why_invalid)
          log_warn(std::string("kube: ") + kind_.resource + ": " + kind_.kind + " " + k + ": " +
                   why_invalid + "; skipped");
      stats_.invalid_objects += invalid.size();
      cache_.swap(fresh);  // atomic replacement: vanished objects are deletions
      // Only what differs from the previous cache is handed on as a change.
      for (const auto& [k, v] : cache_) {
        auto o = fresh.find(k);
        if (o == fresh.end() || !(o->second == v)) pending_[k] = v;
      }
      for (const auto& [k, v] : fresh)
        if (!cache_.count(k)) pending_[k] = std::nullopt;
      if (invalid != invalid_) invalid_changed_ = true;
      invalid_.swap(invalid);
      ++stats_.lists;
      if (!first_list) {
        if (relist_reason_ == Relist::kMalformed) ++stats_.relists_malformed;
        else ++stats_.relists_gone;
      }
      stats_.list_pages += pages;
      stats_.resource_version = list_rv;
    }
    const bool first = !synced_.exchange(true);
    log_info(std::string("kube: ") + kind_.resource + ": listed " + std::to_string(cache_size()) +
             " object(s) in " + std::to_string(pages) + " page(s) at resourceVersion " + list_rv +
             (first ? " (initial list)" : "") +
             (vanished ? "; " + std::to_string(vanished) + " vanished (deleted)" : ""));
    *rv = list_rv;
    notify_(now_unix_ns());
    return true;
  }

  size_t cache_size() const {
    std::lock_guard<std::mutex> g(mu_);
    return cache_.size();
  }

  End watch(std::string* rv, std::string* why) {
    if (!limiter_.acquire(stop_)) return End::kStopped;
    std::uniform_int_distribution<uint32_t> dist(opts_.watch_timeout_min_s,
                                                 std::max(opts_.watch_timeout_min_s, opts_.watch_timeout_max_s));
    const uint32_t timeout = dist(rng_);
    const std::string q = std::string(kind_.path) + "?watch=true&" + selector_query() +
                          "&resourceVersion=" + url_encode(*rv) +
                          "&allowWatchBookmarks=true&timeoutSeconds=" + std::to_string(timeout);
    {
      std::lock_guard<std::mutex> g(mu_);
      ++stats_.watches;
    }
    End end = End::kClosed;
    bool healthy = false;    // an object event or a bookmark: the watch was accepted
    WatchDecoder dec([&](const WatchEvent& ev) {
      const int64_t t = now_unix_ns();
      if (ev.type == EventType::kError) {
        auto st = parse_status(ev.object);
        if (st && st->code == 410) {
          end = End::kGone;
          *why = "watch: 410 " + st->reason + (st->message.empty() ? "" : ": " + st->message);
        } else {
          end = End::kError;
          *why = "watch: ERROR event" + (st ? " " + std::to_string(st->code) + " " + st->message : "");
        }
        return false;
      }
      if (!ev.resource_version.empty()) *rv = ev.resource_version;
      if (!healthy) {
        // The watch is accepted: the retry delay and the 410 streak start over.
        healthy = true;
        reset_backoff();
        gone_streak_ = 0;
      }
      if (ev.type == EventType::kBookmark) {
        std::lock_guard<std::mutex> g(mu_);
        ++stats_.bookmarks;
        stats_.resource_version = *rv;
        return true;
      }
      const std::string key = key_of(ev.object);
      if (key.empty()) {
        std::lock_guard<std::mutex> g(mu_);
        ++stats_.invalid_objects;
        log_warn(std::string("kube: ") + kind_.resource + ": " + event_type_name(ev.type) +
                 " event for an object without a name; skipped");
        return true;
      }
      std::string reason;
      std::optional<T> v;
      if (ev.type != EventType::kDeleted) v = decode(ev.object, &reason);
      {
        std::lock_guard<std::mutex> g(mu_);
        ++stats_.events;
        stats_.resource_version = *rv;
        if (ev.type == EventType::kDeleted) {
          if (cache_.erase(key)) pending_[key] = std::nullopt;
          if (invalid_.erase(key)) invalid_changed_ = true;
        } else if (v) {
          pending_[key] = *v;
          cache_[key] = std::move(*v);
          if (invalid_.erase(key)) invalid_changed_ = true;
        } else {
          // Invalid: skipped; a previous good version stays in force.
          ++stats_.invalid_objects;
          invalid_[key] = reason;
          invalid_changed_ = true;
        }
      }
      if (!v && ev.type != EventType::kDeleted)
        log_warn(std::string("kube: ") + kind_.resource + ": " + kind_.kind + " " + key + ": " + reason +
                 "; skipped");
      log_debug(std::string("kube: ") + kind_.resource + ": " + event_type_name(ev.type) + " " + key +
                " rv " + *rv);
      notify_(t);
      return true;
    });
    std::string err_body;
    bool malformed = false;
    const HttpResult r = api_.stream(
        q,
        [&](const char* p, size_t n) {
          if (!dec.feed(p, n)) {
            malformed = true;
            return false;
          }
          return !dec.stopped();
        },
        &err_body, stop_, static_cast<int>(timeout) + 30);
    if (stop_.load()) return End::kStopped;

    if (malformed) {
      *why = "watch: " + dec.error();
      std::lock_guard<std::mutex> g(mu_);
      ++stats_.malformed;
      return End::kMalformed;
    }
    if (end == End::kGone) {
      std::lock_guard<std::mutex> g(mu_);
      ++stats_.gone;
      return end;
    }
    if (end == End::kError) {
      std::lock_guard<std::mutex> g(mu_);
      ++stats_.errors;
      return end;
    }
    if (!r.error.empty()) {
      *why = "watch: " + r.error;
      std::lock_guard<std::mutex> g(mu_);
      ++stats_.errors;
      return End::kError;
    }
    if (r.status == 410) {
      *why = "watch: HTTP 410";
      std::lock_guard<std::mutex> g(mu_);
      ++stats_.gone;
      return End::kGone;
    }
    if (r.status < 200 || r.status >= 300) {
      auto st = parse_status_body(err_body);
      *why = "watch: HTTP " + std::to_string(r.status) + (st && !st->message.empty() ? ": " + st->message : "");
      std::lock_guard<std::mutex> g(mu_);
      ++stats_.errors;
      return End::kError;
    }
    return End::kClosed;
  }

  void run() {
    reset_backoff();
    std::string rv, why;
    bool need_list = true;
    while (!stop_.load()) {
      if (need_list) {
        why.clear();
        if (!list(&rv, &why)) {
          if (stop_.load()) break;
          backoff(why);
          continue;
        }
        need_list = false;
        // After a relist for a 410 the backoff keeps growing until a watch
        // is accepted: a watch that gets 410 again at once (the API server
        // compacts faster than vipd lists) must not make vipd relist in a
        // tight loop.
        if (gone_streak_ == 0) reset_backoff();
      }
      const auto t0 = std::chrono::steady_clock::now();
      why.clear();
      switch (watch(&rv, &why)) {
        case End::kStopped: return;
        case End::kClosed:
          // Normal end (timeoutSeconds or the server closed): resume from rv.
          // A watch that ends at once again and again is throttled.
          log_debug(std::string("kube: ") + kind_.resource + ": watch ended; resuming from " + rv);
          if (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(1))
            backoff("watch closed immediately");
          else
            gone_streak_ = 0;  // the watch was accepted (a quiet one sends nothing)
          break;
        case End::kGone:
          need_list = true;
          relist_reason_ = Relist::kGone;
          // The first 410 after a working watch relists at once; another one
          // before a watch has been accepted backs off like any error.
          if (gone_streak_++ == 0)
            log_info(std::string("kube: ") + kind_.resource + ": " + why + "; relisting");
          else
            backoff(why + " again (" + std::to_string(gone_streak_) + " in a row); will relist");
          break;
        case End::kMalformed:
          need_list = true;
          relist_reason_ = Relist::kMalformed;
          backoff(why + "; will relist");
          break;
        case End::kError:
          backoff(why + "; will resume the watch from resourceVersion " + rv);
          break;
      }
    }
  }

  const Kind<T>& kind_;
  ApiTransport& api_;
  RateLimiter& limiter_;
  const KubeSourceOptions& opts_;
  std::function<void(int64_t)> notify_;
  std::mt19937_64 rng_;
  uint64_t backoff_ms_ = 500;
  enum class Relist { kGone, kMalformed };
  Relist relist_reason_ = Relist::kGone;  // why the next list is a relist (run() thread)
  uint32_t gone_streak_ = 0;              // 410s since a watch was last accepted (run() thread)
  std::atomic<bool> stop_{false};
  std::atomic<bool> synced_{false};
  std::thread thread_;

  mutable std::mutex mu_;  // cache_, invalid_, pending_, invalid_changed_, stats_
  std::map<std::string, T> cache_;
  std::map<std::string, std::string> invalid_;  // key -> reason (current version invalid)
  std::map<std::string, std::optional<T>> pending_;  // changes not yet drained
  bool invalid_changed_ = false;
  ReflectorStats stats_;
};

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

void DeltaBuilder::feed(ObjectChanges& changes) {
  for (auto& [key, v] : changes.services) {
    if (v) index_.set_service(*v);
    else {
      auto [ns, name] = split_key(key);
      index_.erase_service(ns, name);
    }
  }
  for (auto& [key, v] : changes.slices) {
    if (v) index_.set_slice(*v);
    else {
      auto [ns, name] = split_key(key);
      index_.erase_slice(ns, name);
    }
  }
}

LoadResult DeltaBuilder::load(ObjectChanges changes, const std::vector<SourceError>* invalid_services,
                              const std::vector<SourceError>* invalid_slices) {
  if (invalid_services) invalid_services_ = *invalid_services;
  if (invalid_slices) invalid_slices_ = *invalid_slices;
  if (invalid_services || invalid_slices) invalid_changed_ = true;
  feed(changes);
  LoadResult r;
  index_.flush(&r.touched);
  return answer(std::move(r));
}

LoadResult DeltaBuilder::rebuild(ObjectChanges changes, ObjectSnapshot all,
                                 std::vector<SourceError> invalid_services,
                                 std::vector<SourceError> invalid_slices) {
  invalid_services_ = std::move(invalid_services);
  invalid_slices_ = std::move(invalid_slices);
  invalid_changed_ = true;
  // First the incremental path, as load() would: what differs between its
  // result and the rebuild is a divergence, not a pending change.
  LoadResult r;
  const bool was_empty = index_.services() == 0 && index_.slices() == 0;
  feed(changes);
  index_.flush(&r.touched);
  // From nothing (the first sync), the incremental path already built from scratch.
  if (was_empty) return answer(std::move(r));
  k8s::TableIndex fresh(opts_);
  for (const auto& [key, v] : all.services) fresh.set_service(v);
  for (const auto& [key, v] : all.slices) fresh.set_slice(v);
  std::vector<ServiceKey> ignored;
  fresh.flush(&ignored);
  // Every key whose entry differs between the incremental index and the rebuild.
  const auto& before = index_.table().services;
  const auto& after = fresh.table().services;
  size_t n_diverged = 0;
  for (const auto& [k, vs] : before) {
    auto n = after.find(k);
    if (n == after.end() || !(n->second == vs)) {
      r.touched.push_back(k);
      ++n_diverged;
    }
  }
  for (const auto& [k, vs] : after)
    if (!before.count(k)) {
      r.touched.push_back(k);
      ++n_diverged;
    }
  r.diverged = n_diverged;
  std::sort(r.touched.begin(), r.touched.end());
  r.touched.erase(std::unique(r.touched.begin(), r.touched.end()), r.touched.end());
  index_ = std::move(fresh);
  return answer(std::move(r));
}

LoadResult DeltaBuilder::answer(LoadResult r) {
  r.delta = true;
  r.current = &index_.table();
  if (!invalid_changed_ && index_.issues_version() == reported_issues_version_) {
    r.issues_unchanged = true;
    return r;
  }
  invalid_changed_ = false;
  reported_issues_version_ = index_.issues_version();
  r.errors = invalid_services_;
  r.errors.insert(r.errors.end(), invalid_slices_.begin(), invalid_slices_.end());
  std::vector<k8s::ObjectError> errors, notes;
  index_.issues(&errors, &notes);
  for (const auto& e : errors) r.errors.push_back({"api", e.object, e.reason, e.conflict});
  for (const auto& n : notes) r.notes.push_back({"api", n.object, n.reason});
  return r;
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
