// Thread: control (start/stop); handlers run on the server's own thread.
#include "controlplane/metrics/admin_server.h"

#include <httplib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <utility>

#include "common/log.h"

namespace vipd::cp {
namespace {

constexpr int kUnusedPort = 80;  // httplib wants a port; AF_UNIX ignores it
constexpr time_t kIoTimeoutS = 5;
constexpr size_t kMaxRequestBody = 64 * 1024;
// httplib listens with a backlog of 5; a unix socket refuses (EAGAIN) a
// non-blocking connect beyond it, so a few concurrent vipctl/scrapers could fail.
constexpr int kListenBacklog = 128;
constexpr const char* kJsonType = "application/json";

std::string errno_text(int e) { return std::strerror(e); }

// sun_path must hold the path plus a terminating NUL.
bool fits_sun_path(const std::string& p) { return !p.empty() && p.size() < sizeof(sockaddr_un{}.sun_path); }

sockaddr_un unix_addr(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, path.data(), path.size());
  return a;
}

// connect() to an existing socket file: 0 if someone is listening, else errno.
int probe_connect(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  sockaddr_un a = unix_addr(path);
  int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  int e = rc == 0 ? 0 : errno;
  ::close(fd);
  return e;
}

// httplib does not report why bind failed; redo the bind to learn errno.
std::string diagnose_bind(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "socket: " + errno_text(errno);
  sockaddr_un a = unix_addr(path);
  std::string why;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    why = errno_text(errno);
  } else {
    why = "unknown error";
    ::unlink(path.c_str());
  }
  ::close(fd);
  return why;
}

// mkdir -p with mode 0755 for every directory it creates.
bool make_dirs(const std::string& dir, std::string* why) {
  if (dir.empty()) return true;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    std::string part = dir.substr(0, pos);
    if (part.empty()) continue;
    struct stat st{};
    if (::stat(part.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode)) {
        *why = part + " exists and is not a directory";
        return false;
      }
      continue;
    }
    if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) {
      *why = "cannot create directory " + part + ": " + errno_text(errno);
      return false;
    }
    ::chmod(part.c_str(), 0755);  // independent of the umask
  }
  return true;
}

std::string parent_dir(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

AdminServer::AdminServer(std::string socket_path) : socket_path_(std::move(socket_path)) {}

AdminServer::~AdminServer() { stop(); }

void AdminServer::add(const std::string& path, BodyFn fn) {
  std::lock_guard<std::mutex> g(mu_);
  handlers_[path] = std::move(fn);
}

void AdminServer::handle(const std::string& path, std::function<nlohmann::json()> handler) {
  add(path, [h = std::move(handler)](const Query&) {
    return h().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  });
}

void AdminServer::handle_ordered(const std::string& path,
                                 std::function<nlohmann::ordered_json()> handler) {
  add(path, [h = std::move(handler)](const Query&) {
    return h().dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  });
}

void AdminServer::handle_query(const std::string& path,
                               std::function<nlohmann::ordered_json(const Query&)> handler) {
  add(path, [h = std::move(handler)](const Query& q) {
    return h(q).dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  });
}

std::vector<std::string> AdminServer::paths() const {
  std::lock_guard<std::mutex> g(mu_);
  std::vector<std::string> out;
  out.reserve(handlers_.size());
  for (const auto& [p, fn] : handlers_) out.push_back(p);
  return out;
}

bool AdminServer::prepare_path(std::string* error) {
  const std::string& p = socket_path_;
  if (p.empty()) {
    *error = "admin socket: empty path";
    return false;
  }
  if (!fits_sun_path(p)) {
    *error = "admin socket " + p + ": path too long (max " +
             std::to_string(sizeof(sockaddr_un{}.sun_path) - 1) + " bytes)";
    return false;
  }
  std::string why;
  if (!make_dirs(parent_dir(p), &why)) {
    *error = "admin socket " + p + ": " + why;
    return false;
  }
  struct stat st{};
  if (::lstat(p.c_str(), &st) != 0) {
    if (errno == ENOENT) return true;
    *error = "admin socket " + p + ": " + errno_text(errno);
    return false;
  }
  if (!S_ISSOCK(st.st_mode)) {
    *error = "admin socket " + p + ": file exists and is not a socket";
    return false;
  }
  int e = probe_connect(p);
  if (e == 0) {
    *error = "admin socket " + p + ": another process is listening on it (is vipd already running?)";
    return false;
  }
  if (e != ECONNREFUSED && e != ENOENT) {
    *error = "admin socket " + p + ": cannot check existing socket: " + errno_text(e);
    return false;
  }
  if (::unlink(p.c_str()) != 0 && errno != ENOENT) {
    *error = "admin socket " + p + ": cannot remove stale socket: " + errno_text(errno);
    return false;
  }
  log_info("admin: removed stale socket " + p);
  return true;
}

bool AdminServer::bind_socket(std::string* error) {
  const std::string& p = socket_path_;
  // Bind inside a private 0700 directory, chmod, then rename into place, so the
  // socket is never reachable with the umask's permissions. If the temporary
  // name would not fit in sun_path, bind in place and chmod right after.
  std::string tmp_dir = parent_dir(p) + "/.vipd-admin.XXXXXX";
  std::string bind_path = tmp_dir + "/s";
  bool use_tmp = fits_sun_path(bind_path);
  if (use_tmp) {
    if (::mkdtemp(tmp_dir.data()) == nullptr) {
      *error = "admin socket " + p + ": cannot create temporary directory: " + errno_text(errno);
      return false;
    }
    bind_path = tmp_dir + "/s";
  } else {
    bind_path = p;
  }
  auto cleanup_tmp = [&] {
    if (!use_tmp) return;
    ::unlink(bind_path.c_str());
    ::rmdir(tmp_dir.c_str());
  };

  if (!server_->bind_to_port(bind_path, kUnusedPort)) {
    std::string why = diagnose_bind(bind_path);
    cleanup_tmp();
    *error = "admin socket " + p + ": bind failed: " + why;
    return false;
  }
  if (listen_fd_ >= 0) ::listen(listen_fd_, kListenBacklog);  // raises the backlog
  if (::chmod(bind_path.c_str(), 0600) != 0) {
    *error = "admin socket " + p + ": chmod 0600 failed: " + errno_text(errno);
    cleanup_tmp();
    return false;
  }
  if (use_tmp) {
    if (::rename(bind_path.c_str(), p.c_str()) != 0) {
      *error = "admin socket " + p + ": rename into place failed: " + errno_text(errno);
      cleanup_tmp();
      return false;
    }
    ::rmdir(tmp_dir.c_str());
  }
  bound_ = true;
  return true;
}

bool AdminServer::start(std::string* error) {
  std::string local_error;
  std::string* err = error ? error : &local_error;
  if (server_) {
    *err = "admin socket " + socket_path_ + ": already started";
    return false;
  }
  if (!prepare_path(err)) return false;

  server_ = std::make_unique<httplib::Server>();
  httplib::Server& s = *server_;
  // One worker: handlers run one at a time. One request per connection, so a
  // slow or idle client cannot hold the worker beyond the I/O timeouts.
  s.new_task_queue = [] { return new httplib::ThreadPool(1); };
  s.set_address_family(AF_UNIX);
  // Called with the listening socket before bind; remember it to raise the
  // backlog afterwards. (Replaces httplib's SO_REUSEADDR, moot for AF_UNIX.)
  listen_fd_ = -1;
  s.set_socket_options([this](int fd) { listen_fd_ = fd; });
  s.set_keep_alive_max_count(1);
  s.set_read_timeout(kIoTimeoutS, 0);
  s.set_write_timeout(kIoTimeoutS, 0);
  s.set_payload_max_length(kMaxRequestBody);

  s.Get(".*", [this](const httplib::Request& req, httplib::Response& res) {
    BodyFn fn;
    {
      std::lock_guard<std::mutex> g(mu_);
      auto it = handlers_.find(req.path);
      if (it != handlers_.end()) fn = it->second;
    }
    if (!fn) {
      nlohmann::json body = {{"error", "not found"}, {"paths", paths()}};
      res.status = 404;
      res.set_content(body.dump(), kJsonType);
      return;
    }
    try {
      Query query;
      for (const auto& [k, v] : req.params) query.emplace(k, v);  // first value wins
      res.set_content(fn(query), kJsonType);
      res.status = 200;
    } catch (const HttpError& e) {
      nlohmann::json body = {{"error", e.what()}};
      res.status = e.status();
      res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), kJsonType);
    } catch (const std::exception& e) {
      log_warn("admin: GET " + req.path + " failed: " + e.what());
      nlohmann::json body = {{"error", e.what()}};
      res.status = 500;
      res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), kJsonType);
    } catch (...) {
      log_warn("admin: GET " + req.path + " failed: unknown exception");
      res.status = 500;
      res.set_content(R"({"error":"unknown exception"})", kJsonType);
    }
  });
  auto not_allowed = [](const httplib::Request&, httplib::Response& res) {
    res.status = 405;
    res.set_header("Allow", "GET, HEAD");
    res.set_content(R"({"error":"method not allowed"})", kJsonType);
  };
  s.Post(".*", not_allowed);
  s.Put(".*", not_allowed);
  s.Patch(".*", not_allowed);
  s.Delete(".*", not_allowed);
  s.Options(".*", not_allowed);

  if (!bind_socket(err)) {
    // If httplib bound the listening socket, it is closed only by a listen/stop
    // cycle; run one so no descriptor leaks.
    listen_returned_ = false;
    thread_ = std::thread([this] {
      server_->listen_after_bind();
      listen_returned_ = true;
    });
    shutdown_server();
    return false;
  }

  // The socket is already listening (connections queue in the kernel), so
  // start() can return at once.
  listen_returned_ = false;
  thread_ = std::thread([this] {
    server_->listen_after_bind();
    listen_returned_ = true;
  });
  running_ = true;
  log_info("admin: listening on " + socket_path_);
  return true;
}

void AdminServer::shutdown_server() {
  if (thread_.joinable()) {
    // httplib's stop() is a no-op until the listen loop has marked itself
    // running, and must be called only once after that.
    while (!server_->is_running() && !listen_returned_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (!listen_returned_) server_->stop();
    thread_.join();
  }
  server_.reset();
}

void AdminServer::stop() {
  if (!server_) return;
  bool was_running = running_.exchange(false);
  shutdown_server();
  if (bound_) {
    ::unlink(socket_path_.c_str());
    bound_ = false;
  }
  if (was_running) log_info("admin: stopped");
}

}  // namespace vipd::cp
