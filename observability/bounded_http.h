// Thread: start/stop on the control thread; connections and handlers on the
// server's own thread (one per server).
//
// BoundedHttpServer: the small HTTP/1.1 server behind vipd's local listeners
// (/healthz and /livez, /metrics, the admin socket). It is built so that slow
// or idle clients cannot stall it or starve the process of descriptors:
//
// - one poll() loop serves every connection; a client that sends slowly only
//   holds its own connection, never the thread, so other requests are answered
//   while it trickles (requests are answered in the order they complete);
// - at most `max_connections` connections at once; when a new one arrives at
//   the cap, the oldest connection that has not finished sending its request
//   is closed to make room (if every connection is being answered, the new one
//   is closed instead);
// - the whole request header must arrive within `header_timeout_ms` of the
//   accept (a deadline, not a per-byte timeout) and within `max_header_bytes`;
// - the whole response must be sent within `write_timeout_ms`;
// - one request per connection ("Connection: close"); a request body is never
//   read (only GET and HEAD are served; other methods get 405);
// - when accept() fails for lack of descriptors, the oldest unfinished
//   connection is closed and accepting pauses briefly, instead of spinning.
//
// Every connection closed early is counted per listener and reason in a
// process-wide table (http_connection_drops(); exported as
// vipd_http_connections_dropped_total, see docs/metrics.md):
//   "limit"           closed to make room at the connection cap
//   "header_timeout"  the request header did not arrive in time
//   "write_timeout"   the response could not be sent in time
//   "descriptors"     closed because accept() ran out of descriptors
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace vipd::cp {

struct HttpRequest {
  std::string method;  // "GET" or "HEAD" (others never reach a handler)
  std::string path;    // percent-decoded, without the query
  // Query parameters, percent-decoded ('+' is a space); a repeated name keeps
  // its first value.
  std::map<std::string, std::string> query;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers
  std::string body;
};

struct BoundedHttpOptions {
  std::string listener;  // label in logs and in the drop counters ("health", ...)
  size_t max_connections = 64;
  int header_timeout_ms = 2000;
  int write_timeout_ms = 5000;
  size_t max_header_bytes = 8192;
};

class BoundedHttpServer {
 public:
  // Called on the server thread for GET and HEAD; may throw (500 with
  // {"error": what()}).
  using Handler = std::function<HttpResponse(const HttpRequest&)>;

  BoundedHttpServer(BoundedHttpOptions opts, Handler handler);
  ~BoundedHttpServer();  // stop()
  BoundedHttpServer(const BoundedHttpServer&) = delete;
  BoundedHttpServer& operator=(const BoundedHttpServer&) = delete;

  // Serves `listen_fd` (a bound, listening stream socket, TCP or unix; the
  // server owns it from now on, also on failure) on a background thread.
  bool start(int listen_fd, std::string* error);
  void stop();  // idempotent; closes the listening socket and every connection

  size_t connections() const { return open_.load(); }  // currently open

 private:
  struct Conn;
  void run();
  void accept_all(std::vector<Conn>* conns, int64_t now_ms, int64_t* accept_pause_until);
  bool evict_oldest_unfinished(std::vector<Conn>* conns, const char* reason);
  void on_readable(Conn* c, int64_t now_ms);
  void on_writable(Conn* c, int64_t now_ms);
  void respond(Conn* c, const HttpResponse& r, bool head, int64_t now_ms);
  void answer(Conn* c, int64_t now_ms);

  const BoundedHttpOptions opts_;
  const Handler handler_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<size_t> open_{0};
};

// A listening TCP socket on host:port (IPv4; port 0: kernel-chosen), -1 with
// *why = strerror text on failure. *bound_port gets the port.
int listen_tcp(const std::string& host, int port, int* bound_port, std::string* why);

// Counts of connections closed early, by (listener, reason); every listener
// that was started appears with all four reasons (zeros included).
struct HttpDropCount {
  std::string listener;
  std::string reason;
  uint64_t count = 0;
};
std::vector<HttpDropCount> http_connection_drops();
// The count of one (listener, reason); 0 if none.
uint64_t http_connection_drops(const std::string& listener, const std::string& reason);

}  // namespace vipd::cp
