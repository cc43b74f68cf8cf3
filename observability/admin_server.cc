// Thread: control (start/stop); handlers run on the server's own thread.
#include "observability/admin_server.h"

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

// A unix socket refuses (EAGAIN) a non-blocking connect beyond the backlog, so
// a small one could fail a few concurrent vipctl calls.
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

int AdminServer::bind_socket(std::string* error) {
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
      return -1;
    }
    bind_path = tmp_dir + "/s";
  } else {
    bind_path = p;
  }
  int fd = -1;
  auto fail = [&](const std::string& what) {
    *error = "admin socket " + p + ": " + what;
    if (fd >= 0) ::close(fd);
    if (use_tmp) {
      ::unlink(bind_path.c_str());
      ::rmdir(tmp_dir.c_str());
    }
    return -1;
  };
  fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return fail("socket: " + errno_text(errno));
  const sockaddr_un a = unix_addr(bind_path);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
    const int e = errno;
    ::close(fd);
    fd = -1;
    if (!use_tmp) {  // nothing of ours to remove
      *error = "admin socket " + p + ": bind failed: " + errno_text(e);
      return -1;
    }
    return fail("bind failed: " + errno_text(e));
  }
  if (::listen(fd, kListenBacklog) != 0) return fail("listen failed: " + errno_text(errno));
  if (::chmod(bind_path.c_str(), 0600) != 0) return fail("chmod 0600 failed: " + errno_text(errno));
  if (use_tmp) {
    if (::rename(bind_path.c_str(), p.c_str()) != 0) return fail("rename into place failed: " + errno_text(errno));
    ::rmdir(tmp_dir.c_str());
  }
  bound_ = true;
  return fd;
}

HttpResponse AdminServer::serve(const HttpRequest& req) {
  HttpResponse res;
  BodyFn fn;
  {
    std::lock_guard<std::mutex> g(mu_);
    auto it = handlers_.find(req.path);
    if (it != handlers_.end()) fn = it->second;
  }
  if (!fn) {
    nlohmann::json body = {{"error", "not found"}, {"paths", paths()}};
    res.status = 404;
    res.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return res;
  }
  try {
    res.body = fn(req.query);
    res.status = 200;
  } catch (const HttpError& e) {
    nlohmann::json body = {{"error", e.what()}};
    res.status = e.status();
    res.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } catch (const std::exception& e) {
    log_warn("admin: GET " + req.path + " failed: " + e.what());
    nlohmann::json body = {{"error", e.what()}};
    res.status = 500;
    res.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } catch (...) {
    log_warn("admin: GET " + req.path + " failed: unknown exception");
    res.status = 500;
    res.body = R"({"error":"unknown exception"})";
  }
  return res;
}

bool AdminServer::start(std::string* error) {
  std::string local_error;
  std::string* err = error ? error : &local_error;
  if (server_) {
    *err = "admin socket " + socket_path_ + ": already started";
    return false;
  }
  if (!prepare_path(err)) return false;
  const int fd = bind_socket(err);
  if (fd < 0) return false;
  BoundedHttpOptions o;
  o.listener = "admin";
  server_ = std::make_unique<BoundedHttpServer>(o, [this](const HttpRequest& req) { return serve(req); });
  std::string why;
  if (!server_->start(fd, &why)) {
    server_.reset();
    ::unlink(socket_path_.c_str());
    bound_ = false;
    *err = "admin socket " + socket_path_ + ": " + why;
    return false;
  }
  // The socket is already listening (connections queue in the kernel), so
  // start() can return at once.
  running_ = true;
  log_info("admin: listening on " + socket_path_);
  return true;
}

void AdminServer::stop() {
  if (!server_) return;
  bool was_running = running_.exchange(false);
  server_->stop();
  server_.reset();
  if (bound_) {
    ::unlink(socket_path_.c_str());
    bound_ = false;
  }
  if (was_running) log_info("admin: stopped");
}

}  // namespace vipd::cp
