// Thread: see health.h.
#include "observability/health.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "common/log.h"

namespace vipd::cp {
namespace {

double round3(double v) { return std::round(v * 1000.0) / 1000.0; }

std::string fmt_s(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

}  // namespace

std::string rfc3339(int64_t unix_ns) {
  const time_t secs = static_cast<time_t>(unix_ns / 1'000'000'000);
  const int ms = static_cast<int>((unix_ns / 1'000'000) % 1000);
  tm t{};
  gmtime_r(&secs, &t);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", t.tm_year + 1900, t.tm_mon + 1,
                t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec, ms);
  return buf;
}

HealthChecker::HealthChecker(HealthOptions opts, int64_t start_unix_ns)
    : opts_(opts), start_ns_(start_unix_ns) {}

double HealthChecker::loop_age_s(const SyncStatus& s, int64_t now) const {
  const int64_t ref = s.last_loop_unix_ns > 0 ? s.last_loop_unix_ns : start_ns_;
  return std::max<int64_t>(0, now - ref) / 1e9;
}

std::vector<std::string> HealthChecker::stalled_workers(const std::vector<dp::WorkerSnapshot>& workers,
                                                        int64_t now) {
  std::vector<std::string> out;
  std::lock_guard<std::mutex> g(mu_);
  for (const auto& w : workers) {
    auto it = progress_.find(w.lcore);
    if (it == progress_.end() || it->second.first != w.polls) {
      progress_[w.lcore] = {w.polls, now};
      continue;
    }
    const double still = std::max<int64_t>(0, now - it->second.second) / 1e9;
    if (still > opts_.worker_stall_s)
      out.push_back("worker lcore " + std::to_string(w.lcore) + " has not completed a poll round for " +
                    fmt_s(still) + " s (limit " + fmt_s(opts_.worker_stall_s) + " s)");
  }
  return out;
}

HealthResult HealthChecker::healthz(const SyncStatus& s, const std::vector<dp::WorkerSnapshot>& workers,
                                    int64_t now) {
  std::vector<std::string> reasons;
  if (s.syncs == 0)
    reasons.push_back(s.sync_errors ? "no table applied yet (every sync so far failed)"
                                    : "no table applied yet");
  if (!s.last_error.empty()) reasons.push_back("last sync failed (retrying): " + s.last_error);
  const double age = loop_age_s(s, now);
  if (age > opts_.fresh_s)
    reasons.push_back("the sync loop has not checked its source for " + fmt_s(age) + " s (limit " +
                      fmt_s(opts_.fresh_s) + " s)");
  for (auto& r : stalled_workers(workers, now)) reasons.push_back(std::move(r));

  HealthResult res;
  res.status = reasons.empty() ? 200 : 503;
  auto& j = res.body;
  j["status"] = reasons.empty() ? "ok" : "unhealthy";
  j["reasons"] = reasons;
  j["warnings"] = s.source_errors;
  // kube-proxy's two fields, for tools that read them.
  j["lastUpdated"] = s.last_sync_unix_ns > 0 ? rfc3339(s.last_sync_unix_ns) : "";
  j["currentTime"] = rfc3339(now);
  j["generation"] = s.generation;
  j["syncs"] = s.syncs;
  j["sync_errors"] = s.sync_errors;
  j["last_sync_unix_ns"] = s.last_sync_unix_ns;
  if (s.last_sync_unix_ns > 0) j["last_sync_age_s"] = round3(std::max<int64_t>(0, now - s.last_sync_unix_ns) / 1e9);
  else j["last_sync_age_s"] = nullptr;
  j["source_checked_age_s"] = round3(age);
  j["fresh_limit_s"] = opts_.fresh_s;
  j["workers"] = workers.size();
  return res;
}

HealthResult HealthChecker::livez(const SyncStatus& s, const std::vector<dp::WorkerSnapshot>& workers,
                                  int64_t now) {
  std::vector<std::string> reasons;
  const double age = loop_age_s(s, now);
  if (age > opts_.live_s)
    reasons.push_back("the sync loop has not run for " + fmt_s(age) + " s (limit " + fmt_s(opts_.live_s) +
                      " s)");
  for (auto& r : stalled_workers(workers, now)) reasons.push_back(std::move(r));
  HealthResult res;
  res.status = reasons.empty() ? 200 : 503;
  res.body["status"] = reasons.empty() ? "ok" : "unhealthy";
  res.body["reasons"] = reasons;
  res.body["currentTime"] = rfc3339(now);
  res.body["source_checked_age_s"] = round3(age);
  res.body["workers"] = workers.size();
  return res;
}

bool split_host_port(const std::string& address, std::string* host, int* port) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  const std::string h = address.substr(0, colon);
  const std::string p = address.substr(colon + 1);
  in_addr a{};
  if (::inet_pton(AF_INET, h.c_str(), &a) != 1) return false;
  int v = -1;
  auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), v);
  if (ec != std::errc() || end != p.data() + p.size() || v < 0 || v > 65535) return false;
  *host = h;
  *port = v;
  return true;
}

std::string diagnose_tcp_bind(const std::string& host, int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::strerror(errno);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  std::string why = "unknown error";
  if (::inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) {
    why = "not an IPv4 address";
  } else if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    why = std::strerror(errno);
  }
  ::close(fd);
  return why;
}

HealthServer::HealthServer(std::string address, Handler healthz, Handler livez)
    : address_(std::move(address)), healthz_(std::move(healthz)), livez_(std::move(livez)) {}

HealthServer::~HealthServer() { stop(); }

bool HealthServer::start(std::string* error) {
  std::string local;
  std::string* err = error ? error : &local;
  if (server_) {
    *err = "health address " + address_ + ": already started";
    return false;
  }
  std::string host;
  int port = 0;
  if (!split_host_port(address_, &host, &port)) {
    *err = "health address " + address_ + ": expected IPv4:PORT";
    return false;
  }
  std::string why;
  int bound = 0;
  const int fd = listen_tcp(host, port, &bound, &why);
  if (fd < 0) {
    *err = "health address " + address_ + ": bind failed: " + why;
    return false;
  }
  BoundedHttpOptions o;
  o.listener = "health";
  server_ = std::make_unique<BoundedHttpServer>(o, [this](const HttpRequest& req) {
    HttpResponse res;
    const Handler* h = req.path == "/healthz" ? &healthz_ : req.path == "/livez" ? &livez_ : nullptr;
    if (!h) {
      res.status = 404;
      res.body = R"({"error":"not found","paths":["/healthz","/livez"]})" "\n";
      return res;
    }
    HealthResult r;
    try {
      r = (*h)();
    } catch (const std::exception& e) {
      r.status = 503;
      r.body = {{"status", "unhealthy"}, {"reasons", {std::string("health check failed: ") + e.what()}}};
    }
    res.status = r.status;
    res.headers = {{"Cache-Control", "no-cache, no-store"}, {"X-Content-Type-Options", "nosniff"}};
    res.body = r.body.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
    return res;
  });
  if (!server_->start(fd, &why)) {
    *err = "health address " + address_ + ": " + why;
    server_.reset();
    return false;
  }
  port_ = bound;
  log_info("health: serving /healthz and /livez on " + host + ":" + std::to_string(port_));
  return true;
}

void HealthServer::stop() {
  if (!server_) return;
  server_->stop();
  server_.reset();
}

}  // namespace vipd::cp
