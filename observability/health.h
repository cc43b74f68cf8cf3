// Thread: HealthChecker: any (a mutex guards its worker-progress memory).
// HealthServer: start/stop on the control thread; requests on its own thread.
//
// vipd's health endpoints, like kube-proxy's (default 127.0.0.1:10256):
//
//   /healthz  200 when vipd is programming the dataplane with fresh data:
//               - a table has been applied (at least one successful sync),
//               - the last apply succeeded (no failed sync waiting for its retry),
//               - the sync loop looked at its source within `fresh_s` (10 s),
//               - every worker ran a poll round within `worker_stall_s` (10 s);
//             503 otherwise. The JSON body says why ("reasons"); current source
//             problems (a broken manifest whose last good version is in force)
//             are listed as "warnings" and do not make it fail.
//   /livez    200 while the process runs its loops: the sync loop looked at its
//             source within `live_s` (60 s) and every worker ran a poll round
//             within `worker_stall_s`; 503 otherwise.
//
// Worker progress is judged from the workers' poll counters: a counter that has
// not moved for longer than `worker_stall_s` (between any two checks) means a
// stuck worker. The first check of a worker only records its counter.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "observability/bounded_http.h"
#include "controlplane/sync/sync_loop.h"
#include "dataplane/runtime/dataplane.h"

namespace vipd::cp {

struct HealthOptions {
  double fresh_s = 10;         // /healthz: max age of the sync loop's last look at its source
  double live_s = 60;          // /livez: same, for liveness
  double worker_stall_s = 10;  // both: max time a worker's poll counter may stand still
};

struct HealthResult {
  int status = 200;  // 200 or 503
  nlohmann::ordered_json body;
};

class HealthChecker {
 public:
  // `start_unix_ns`: when the process started (the reference before the sync
  // loop's first heartbeat).
  HealthChecker(HealthOptions opts, int64_t start_unix_ns);

  HealthResult healthz(const SyncStatus& s, const std::vector<dp::WorkerSnapshot>& workers,
                       int64_t now_unix_ns);
  HealthResult livez(const SyncStatus& s, const std::vector<dp::WorkerSnapshot>& workers,
                     int64_t now_unix_ns);

  const HealthOptions& options() const { return opts_; }

 private:
  // Updates the progress memory; returns one reason per stalled worker.
  std::vector<std::string> stalled_workers(const std::vector<dp::WorkerSnapshot>& workers,
                                           int64_t now_unix_ns);
  double loop_age_s(const SyncStatus& s, int64_t now_unix_ns) const;

  const HealthOptions opts_;
  const int64_t start_ns_;
  std::mutex mu_;
  std::map<unsigned, std::pair<uint64_t, int64_t>> progress_;  // lcore -> (polls, since)
};

// RFC 3339 UTC with milliseconds, "2024-05-01T12:00:00.123Z".
std::string rfc3339(int64_t unix_ns);

// Serves /healthz and /livez over TCP (BoundedHttpServer, listener "health":
// slow clients cannot delay the answers). GET and HEAD only.
class HealthServer {
 public:
  using Handler = std::function<HealthResult()>;

  HealthServer(std::string address, Handler healthz, Handler livez);  // "IPv4:PORT"
  ~HealthServer();  // stop()
  HealthServer(const HealthServer&) = delete;
  HealthServer& operator=(const HealthServer&) = delete;

  // Binds and serves on a background thread. On failure returns false with one
  // line in *error, e.g. "health address 127.0.0.1:10256: bind failed: Address already in use".
  bool start(std::string* error);
  void stop();  // idempotent
  int port() const { return port_; }  // the bound port (useful with port 0)

 private:
  const std::string address_;
  Handler healthz_, livez_;
  std::unique_ptr<BoundedHttpServer> server_;
  int port_ = 0;
};

// Splits "IPv4:PORT"; false when malformed.
bool split_host_port(const std::string& address, std::string* host, int* port);
// Why binding a TCP socket to host:port fails ("Address already in use"), for
// error messages; "unknown error" if it does not fail now.
std::string diagnose_tcp_bind(const std::string& host, int port);

}  // namespace vipd::cp
