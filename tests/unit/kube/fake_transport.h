// Thread: any (FakeApi is shared by the reflector threads, which call it
// through FakeTransport, and the test thread, which scripts it; one mutex).
//
// A scripted, in-memory Kubernetes API server for KubeSource unit tests, so
// that a test drives the exact interleaving of API changes, list pages and
// watch reconnects instead of hoping for it with sleeps:
// - objects of two resources (services, endpointslices) with one global
//   resourceVersion counter and an event history per resource;
// - paged lists (limit/continue) served from a snapshot pinned by the first
//   page, as the real API server does, or (live_later_pages) from the live
//   state after the last key, as an API server without that guarantee would;
//   later_pages_current_rv: later pages report the current resourceVersion;
// - watches from a resourceVersion: ERROR 410 Expired when it is older than
//   the last compaction, otherwise the events after it, then new ones as they
//   happen, until drop_watches() or the client stops;
// - hold(true): new list and watch requests wait until hold(false), so a test
//   can make a change "before vipd reconnects" and know it did;
// - a one-shot hook run after a given page of a list (a change between pages);
// - faults: HTTP 500 for the next N requests, garbage in the next watch,
//   410 for every watch.
// Every wait of the test side is on a condition with a deadline.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "controlplane/kube/api_client.h"

namespace vipd::cp::kube::fake {

enum Res { kServices = 0, kSlices = 1 };

class FakeApi {
 public:
  // Server behaviour; may be changed at any time (takes effect at the next request).
  struct Faults {
    bool later_pages_current_rv = false;
    bool live_later_pages = false;
    bool gone_watches = false;  // every watch: ERROR 410
  };

  // --- the test side -------------------------------------------------------

  // Creates or replaces an object; `json_template` is the whole object with
  // "@RV@" where its metadata.resourceVersion goes.
  void put(Res r, const std::string& key, const std::string& json_template) {
    std::lock_guard<std::mutex> g(mu_);
    put_locked(r, key, json_template);
  }
  void erase(Res r, const std::string& key) {
    std::lock_guard<std::mutex> g(mu_);
    auto it = st_[r].objs.find(key);
    if (it == st_[r].objs.end()) return;
    const uint64_t rv = ++rv_;
    st_[r].hist.push_back({rv, "DELETED", stamp(templates_[r][key], rv)});
    st_[r].objs.erase(it);
    templates_[r].erase(key);
    cv_.notify_all();
  }
  // The history before now is forgotten: watches from an older
  // resourceVersion get 410 (so do continue tokens of older lists). Other
  // objects changed meanwhile, so the resourceVersion moves on.
  void compact() {
    std::lock_guard<std::mutex> g(mu_);
    compacted_ = ++rv_;
    cv_.notify_all();
  }
  // Ends every open watch (the client sees the server close the stream).
  void drop_watches() {
    std::lock_guard<std::mutex> g(mu_);
    ++epoch_;
    cv_.notify_all();
  }
  void hold(bool on) {
    std::lock_guard<std::mutex> g(mu_);
    hold_ = on;
    cv_.notify_all();
  }
  void set_faults(const Faults& f) {
    std::lock_guard<std::mutex> g(mu_);
    faults_ = f;
    cv_.notify_all();
  }
  void fail_next(int n) {
    std::lock_guard<std::mutex> g(mu_);
    fail_next_ += n;
  }
  void garbage_next_watch() {
    std::lock_guard<std::mutex> g(mu_);
    garbage_next_watch_ = true;
  }
  // Runs `fn` (without the lock: it may call put/erase) once, right after
  // page `page` (1-based) of a list of `r` has been answered.
  void after_page(Res r, int page, std::function<void()> fn) {
    std::lock_guard<std::mutex> g(mu_);
    hook_res_ = r;
    hook_page_ = page;
    hook_ = std::move(fn);
    hook_armed_ = true;
  }
  // Cancels a hook that has not run; waits for one that is running.
  bool disarm_hook(std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    std::unique_lock<std::mutex> l(mu_);
    if (hook_) {
      hook_ = nullptr;
      hook_armed_ = false;
    }
    return cv_.wait_for(l, timeout, [&] { return !hook_armed_; });
  }
  // Waits until the hook has run, or a watch of `r` has caught up (its list,
  // which did not reach the hook's page, is over).
  bool wait_hook_or_caught_up(Res r, std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    return wait_until([&] { return !hook_armed_ || caught_up_locked(r); }, timeout);
  }
  bool wait_hook_fired(std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    return wait_until([&] { return !hook_armed_; }, timeout);
  }

  // Current objects of `r` as stored (key -> JSON).
  std::map<std::string, std::string> objects(Res r) const {
    std::lock_guard<std::mutex> g(mu_);
    return st_[r].objs;
  }
  uint64_t resource_version() const {
    std::lock_guard<std::mutex> g(mu_);
    return rv_;
  }
  int lists_started(Res r) const {
    std::lock_guard<std::mutex> g(mu_);
    return st_[r].lists;
  }

  // True when a watch of `r` that is still open (not dropped) has handed
  // every event up to the current resourceVersion to the client (whose
  // reflector has then applied them: the client consumes events inside the
  // data callback).
  bool caught_up(Res r) const {
    std::lock_guard<std::mutex> g(mu_);
    return caught_up_locked(r);
  }
  int held(Res r) const {
    std::lock_guard<std::mutex> g(mu_);
    return st_[r].held;
  }

  // Waits (up to `timeout`) for `pred`, evaluated under the lock and after
  // every change of the server's state.
  bool wait_until(const std::function<bool()>& pred,
                  std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, timeout, pred);
  }
  bool wait_caught_up(std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    return wait_until([&] { return caught_up_locked(kServices) && caught_up_locked(kSlices); }, timeout);
  }
  bool wait_held(std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    return wait_until([&] { return st_[kServices].held > 0 && st_[kSlices].held > 0; }, timeout);
  }
  // For predicates passed to wait_until (the lock is held there).
  bool caught_up_locked(Res r) const {
    for (const auto& [id, w] : st_[r].watches)
      if (w.epoch == epoch_ && w.sent_through == rv_) return true;
    return false;
  }
  // Wakes wait_until() after a change the server does not see (a test's own state).
  void poke() {
    std::lock_guard<std::mutex> g(mu_);
    cv_.notify_all();
  }

  // --- the transport side ---------------------------------------------------

  HttpResult get(const std::string& pq, std::string* body, const std::atomic<bool>& stop) {
    const int r = res_of(pq);
    std::function<void()> hook;
    HttpResult out;
    {
      std::unique_lock<std::mutex> l(mu_);
      if (!wait_unheld(l, r, stop)) return aborted();
      if (fail_next_ > 0) {
        --fail_next_;
        *body = status_json(500, "InternalError", "scripted failure");
        out.status = 500;
        return out;
      }
      const size_t limit = static_cast<size_t>(std::stoul(param(pq, "limit", "500")));
      const std::string cont = param(pq, "continue", "");
      State& s = st_[r];
      Snapshot* snap = nullptr;
      int page = 1;
      std::string after;  // the last key of the previous page
      if (cont.empty()) {
        ++s.lists;
        const int id = next_snap_++;
        snaps_.erase(snaps_.begin(), snaps_.lower_bound(id - 8));  // keep the recent ones
        Snapshot& n = snaps_[id];
        n.id = id;
        n.rv = rv_;
        n.objs = s.objs;
        snap = &n;
      } else {
        // "<snapshot id>:<page>:<last key>"
        const size_t a = cont.find(':'), b = cont.find(':', a + 1);
        auto it = snaps_.find(std::stoi(cont.substr(0, a)));
        if (it == snaps_.end() || it->second.rv < compacted_) {
          *body = status_json(410, "Expired", "The provided continue parameter is too old");
          out.status = 410;
          return out;
        }
        snap = &it->second;
        page = std::stoi(cont.substr(a + 1, b - a - 1));
        after = cont.substr(b + 1);
      }
      const std::map<std::string, std::string>& src =
          page > 1 && faults_.live_later_pages ? s.objs : snap->objs;
      auto it = after.empty() ? src.begin() : src.upper_bound(after);
      std::string items;
      std::string last;
      size_t n = 0;
      for (; it != src.end() && n < limit; ++it, ++n) {
        if (!items.empty()) items += ",";
        items += it->second;
        last = it->first;
      }
      const uint64_t page_rv = page > 1 && faults_.later_pages_current_rv ? rv_ : snap->rv;
      std::string meta = "\"resourceVersion\":\"" + std::to_string(page_rv) + "\"";
      if (it != src.end()) {
        meta += ",\"continue\":\"" + std::to_string(snap->id) + ":" + std::to_string(page + 1) + ":" + last + "\"";
      }
      *body = "{\"kind\":\"List\",\"metadata\":{" + meta + "},\"items\":[" + items + "]}";
      out.status = 200;
      if (hook_ && hook_res_ == r && hook_page_ == page) {
        hook.swap(hook_);
      }
    }
    // The answer is complete; the change lands before the client asks for
    // the next page.
    if (hook) {
      hook();
      std::lock_guard<std::mutex> g(mu_);
      hook_armed_ = false;  // (poke() below wakes the waiters)
    }
    poke();
    return out;
  }

  HttpResult stream(const std::string& pq, const std::function<bool(const char*, size_t)>& on_data,
                    std::string* error_body, const std::atomic<bool>& stop) {
    const int r = res_of(pq);
    std::unique_lock<std::mutex> l(mu_);
    if (!wait_unheld(l, r, stop)) return aborted();
    HttpResult out;
    if (fail_next_ > 0) {
      --fail_next_;
      *error_body = status_json(500, "InternalError", "scripted failure");
      out.status = 500;
      return out;
    }
    out.status = 200;
    const uint64_t from = std::stoull(param(pq, "resourceVersion", "0"));
    if (garbage_next_watch_) {
      garbage_next_watch_ = false;
      l.unlock();
      const std::string junk = "this is not JSON\n";
      on_data(junk.data(), junk.size());
      return out;
    }
    if (from < compacted_ || faults_.gone_watches) {
      const std::string ev = "{\"type\":\"ERROR\",\"object\":" +
                             status_json(410, "Expired", "too old resource version: " +
                                                              std::to_string(from) + " (" +
                                                              std::to_string(compacted_) + ")") +
                             "}\n";
      l.unlock();
      on_data(ev.data(), ev.size());
      return out;
    }
    State& s = st_[r];
    const int id = next_watch_++;
    Watch& w = s.watches[id];
    w.epoch = epoch_;
    w.sent_through = from;
    const uint64_t my_epoch = epoch_;
    bool ok = true;
    while (ok && !stop.load() && epoch_ == my_epoch) {
      // Everything after sent_through, in order.
      std::string chunk;
      uint64_t upto = rv_;
      auto e = std::partition_point(s.hist.begin(), s.hist.end(),
                                    [&](const Event& x) { return x.rv <= w.sent_through; });
      for (; e != s.hist.end() && e->rv <= upto; ++e)
        chunk += "{\"type\":\"" + e->type + "\",\"object\":" + e->object + "}\n";
      if (!chunk.empty()) {
        l.unlock();
        ok = on_data(chunk.data(), chunk.size());  // the reflector applies them here
        l.lock();
      }
      w.sent_through = upto;
      cv_.notify_all();
      if (!ok) break;
      // Wait for news; the stop flag is not signalled through cv_, so look
      // at it every few milliseconds.
      cv_.wait_for(l, std::chrono::milliseconds(5), [&] { return rv_ != upto || epoch_ != my_epoch; });
    }
    s.watches.erase(id);
    cv_.notify_all();
    if (!ok) out.aborted = true;
    return out;
  }

  static std::string status_json(int code, const std::string& reason, const std::string& msg) {
    return "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"code\":" +
           std::to_string(code) + ",\"reason\":\"" + reason + "\",\"message\":\"" + msg + "\"}";
  }

 private:
  struct Event {
    uint64_t rv;
    std::string type;
    std::string object;
  };
  struct Watch {
    uint64_t epoch = 0;
    uint64_t sent_through = 0;
  };
  struct State {
    std::map<std::string, std::string> objs;  // key -> JSON (with its resourceVersion)
    std::vector<Event> hist;
    std::map<int, Watch> watches;
    int held = 0;
    int lists = 0;
  };
  struct Snapshot {
    int id = 0;
    uint64_t rv = 0;
    std::map<std::string, std::string> objs;
  };

  static std::string stamp(const std::string& tmpl, uint64_t rv) {
    std::string out = tmpl;
    const auto p = out.find("@RV@");
    if (p != std::string::npos) out.replace(p, 4, std::to_string(rv));
    return out;
  }

  void put_locked(Res r, const std::string& key, const std::string& tmpl) {
    const uint64_t rv = ++rv_;
    const bool existed = st_[r].objs.count(key) > 0;
    std::string obj = stamp(tmpl, rv);
    st_[r].hist.push_back({rv, existed ? "MODIFIED" : "ADDED", obj});
    st_[r].objs[key] = std::move(obj);
    templates_[r][key] = tmpl;
    cv_.notify_all();
  }

  static int res_of(const std::string& pq) {
    return pq.find("endpointslices") != std::string::npos ? kSlices : kServices;
  }

  // The value of a query parameter (percent-decoded).
  static std::string param(const std::string& pq, const std::string& name, const std::string& def) {
    const std::string needle = name + "=";
    size_t p = pq.find('?');
    while (p != std::string::npos) {
      ++p;
      if (pq.compare(p, needle.size(), needle) == 0) {
        const size_t e = pq.find('&', p);
        const std::string raw = pq.substr(p + needle.size(), e == std::string::npos ? std::string::npos
                                                                                      : e - p - needle.size());
        std::string out;
        for (size_t i = 0; i < raw.size(); ++i) {
          if (raw[i] == '%' && i + 2 < raw.size()) {
            out.push_back(static_cast<char>(std::stoi(raw.substr(i + 1, 2), nullptr, 16)));
            i += 2;
          } else {
            out.push_back(raw[i]);
          }
        }
        return out;
      }
      p = pq.find('&', p);
    }
    return def;
  }

  bool wait_unheld(std::unique_lock<std::mutex>& l, int r, const std::atomic<bool>& stop) {
    if (!hold_) return true;
    ++st_[r].held;
    cv_.notify_all();
    while (hold_ && !stop.load()) cv_.wait_for(l, std::chrono::milliseconds(5));
    --st_[r].held;
    cv_.notify_all();
    return !stop.load();
  }

  static HttpResult aborted() {
    HttpResult h;
    h.error = "stopped";
    h.aborted = true;
    return h;
  }

  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t rv_ = 100;
  uint64_t compacted_ = 0;
  uint64_t epoch_ = 0;
  bool hold_ = false;
  int fail_next_ = 0;
  bool garbage_next_watch_ = false;
  Faults faults_;
  State st_[2];
  std::map<std::string, std::string> templates_[2];
  std::map<int, Snapshot> snaps_;
  int next_snap_ = 1;
  int next_watch_ = 1;
  Res hook_res_ = kServices;
  int hook_page_ = 0;
  std::function<void()> hook_;
  bool hook_armed_ = false;  // set until the hook has run
};

// The ApiTransport a KubeSource is given; forwards to a shared FakeApi.
class FakeTransport : public ApiTransport {
 public:
  explicit FakeTransport(std::shared_ptr<FakeApi> api) : api_(std::move(api)) {}
  HttpResult get(const std::string& pq, std::string* body, const std::atomic<bool>& stop, int) override {
    return api_->get(pq, body, stop);
  }
  HttpResult stream(const std::string& pq, const std::function<bool(const char*, size_t)>& on_data,
                    std::string* error_body, const std::atomic<bool>& stop, int) override {
    return api_->stream(pq, on_data, error_body, stop);
  }

 private:
  std::shared_ptr<FakeApi> api_;
};

}  // namespace vipd::cp::kube::fake
