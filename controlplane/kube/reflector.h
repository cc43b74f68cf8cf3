// Thread: its own thread (Reflector::run) and the SyncLoop thread (drain).
// The reflector of one kind of object (Services, EndpointSlices): lists, then
// watches from the list's resourceVersion, keeps a cache of the decoded
// objects and the changes not yet drained. Internal to KubeSource
// (kube_source.cc); a class template, so it is defined here.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/log.h"
#include "controlplane/kube/kube_source.h"
#include "controlplane/kube/watch_decoder.h"
#include "controlplane/sources/k8s_rules.h"

namespace vipd::cp::kube::detail {

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

inline const Kind<k8s::Service> kServices{"Service", "v1", "services", "/api/v1/services",
                                   &k8s::rules::decode_service<JsonNode>};
inline const Kind<k8s::EndpointSlice> kSlices{"EndpointSlice", "discovery.k8s.io/v1", "endpointslices",
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

}  // namespace vipd::cp::kube::detail
