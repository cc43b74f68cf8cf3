// Thread: control (start/stop); handlers run on the server's own thread.
// AdminServer: a small read-only HTTP/1.1 JSON API on a unix domain socket
// (default /run/vipd/admin.sock), used by `vipctl`. Built on BoundedHttpServer
// (listener "admin"): at most 64 connections, the request header within 2 s,
// the answer sent within 5 s, so a slow or idle client never delays another.
//
// - Only GET (and HEAD) is served; any other method gets 405.
// - Handlers run one at a time on the server's single thread, so a
//   handler never races another handler, but it does run concurrently with the
//   control thread: it must only read state that is safe to read from there.
// - A handler that throws produces 500 {"error": "<what()>"}; one that throws
//   AdminServer::HttpError produces its status (e.g. 400 for a bad query).
// - An unknown path produces 404 {"error": "not found", "paths": [...]}.
// - The socket file is created mode 0600 (bound under a temporary name, chmod'ed,
//   then renamed into place, so it is never reachable with looser permissions).
//   A missing parent directory is created 0755. A stale socket file (nobody
//   listening) is replaced; a live one or a non-socket file makes start() fail.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "observability/bounded_http.h"

namespace vipd::cp {

class AdminServer {
 public:
  static constexpr const char* kDefaultSocketPath = "/run/vipd/admin.sock";

  // Query parameters of a request ("?proto=tcp&src=..."); a repeated name
  // keeps its first value.
  using Query = std::map<std::string, std::string>;

  // Thrown by a handler to answer with `status` and {"error": what()}.
  class HttpError : public std::runtime_error {
   public:
    HttpError(int status, const std::string& msg) : std::runtime_error(msg), status_(status) {}
    int status() const { return status_; }

   private:
    int status_;
  };

  explicit AdminServer(std::string socket_path);
  ~AdminServer();  // stop()

  AdminServer(const AdminServer&) = delete;
  AdminServer& operator=(const AdminServer&) = delete;

  // Registers a GET handler for an exact path ("/v1/services"). Registering the
  // same path again replaces the handler. May be called before or after start().
  void handle(const std::string& path, std::function<nlohmann::json()> handler);
  // Same, for documents whose key order matters (e.g. the dry-run table, which
  // has a fixed key order): the object is serialized in insertion order.
  void handle_ordered(const std::string& path, std::function<nlohmann::ordered_json()> handler);
  // Same, for a handler that reads the query parameters (e.g. /v1/explain).
  void handle_query(const std::string& path,
                    std::function<nlohmann::ordered_json(const Query&)> handler);

  // Binds the socket and starts serving on a background thread. On failure
  // returns false and, if `error` is non-null, sets it to one line such as
  // "admin socket /run/vipd/admin.sock: bind failed: Permission denied".
  // Returns false (with a message) if already started.
  bool start(std::string* error);

  // Stops serving, joins the server thread and unlinks the socket file.
  // Idempotent; safe to call if start() failed or was never called.
  void stop();

  bool running() const { return running_.load(); }
  const std::string& socket_path() const { return socket_path_; }

  // Paths with a handler, sorted.
  std::vector<std::string> paths() const;

 private:
  // Returns the serialized JSON body; may throw.
  using BodyFn = std::function<std::string(const Query&)>;

  void add(const std::string& path, BodyFn fn);
  bool prepare_path(std::string* error);  // parent dir, stale socket
  // bind, listen, chmod 0600, move into place; the listening socket or -1
  int bind_socket(std::string* error);
  HttpResponse serve(const HttpRequest& req);

  const std::string socket_path_;
  mutable std::mutex mu_;  // guards handlers_
  std::map<std::string, BodyFn> handlers_;

  std::unique_ptr<BoundedHttpServer> server_;
  std::atomic<bool> running_{false};
  bool bound_ = false;  // socket_path_ is ours to unlink
};

}  // namespace vipd::cp
