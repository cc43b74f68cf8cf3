// Thread: see bounded_http.h.
#include "observability/bounded_http.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <mutex>

#include "common/clock.h"
#include "common/log.h"

namespace vipd::cp {
namespace {

constexpr const char* kReasons[] = {"limit", "header_timeout", "write_timeout", "descriptors"};
constexpr int kDrainMs = 1000;              // after the response: read what the client still sends
constexpr size_t kMaxDrainBytes = 64 * 1024;
constexpr int kAcceptPauseMs = 100;         // after accept() ran out of descriptors
constexpr int kMaxAcceptsPerRound = 256;
constexpr int kMaxPollMs = 1000;

std::mutex& drops_mu() {
  static std::mutex mu;
  return mu;
}
std::map<std::pair<std::string, std::string>, uint64_t>& drops() {
  // vipd's three listeners are always listed, so the family is complete from
  // the first scrape on (started or not).
  static auto* m = [] {
    auto* init = new std::map<std::pair<std::string, std::string>, uint64_t>();
    for (const char* l : {"admin", "health", "metrics"})
      for (const char* r : kReasons) init->emplace(std::make_pair(std::string(l), std::string(r)), 0);
    return init;
  }();
  return *m;
}

void register_listener(const std::string& listener) {
  std::lock_guard<std::mutex> g(drops_mu());
  for (const char* r : kReasons) drops().emplace(std::make_pair(listener, std::string(r)), 0);
}

void count_drop(const std::string& listener, const char* reason) {
  std::lock_guard<std::mutex> g(drops_mu());
  ++drops()[{listener, reason}];
}

const char* reason_phrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return status < 400 ? "OK" : "Error";
  }
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decoding; false on a malformed escape.
bool decode(const std::string& in, bool plus_is_space, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    if (c == '%') {
      if (i + 2 >= in.size()) return false;
      const int hi = hex_value(in[i + 1]);
      const int lo = hex_value(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      out->push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out->push_back(' ');
    } else {
      out->push_back(c);
    }
  }
  return true;
}

HttpResponse json_error(int status, const std::string& msg) {
  HttpResponse r;
  r.status = status;
  std::string esc;
  for (char c : msg) {
    if (c == '"' || c == '\\') esc.push_back('\\');
    if (static_cast<unsigned char>(c) < 0x20) continue;
    esc.push_back(c);
  }
  r.body = "{\"error\":\"" + esc + "\"}";
  return r;
}

}  // namespace

struct BoundedHttpServer::Conn {
  enum Phase { kReading, kWriting, kDraining };
  int fd = -1;
  Phase phase = kReading;
  std::string in;
  std::string out;
  size_t sent = 0;
  size_t drained = 0;
  int64_t accepted_ms = 0;
  int64_t deadline_ms = 0;
};

BoundedHttpServer::BoundedHttpServer(BoundedHttpOptions opts, Handler handler)
    : opts_(std::move(opts)), handler_(std::move(handler)) {}

BoundedHttpServer::~BoundedHttpServer() { stop(); }

bool BoundedHttpServer::start(int listen_fd, std::string* error) {
  std::string local;
  std::string* err = error ? error : &local;
  if (thread_.joinable()) {
    if (listen_fd >= 0) ::close(listen_fd);
    *err = "already started";
    return false;
  }
  listen_fd_ = listen_fd;
  if (listen_fd_ < 0) {
    *err = "no listening socket";
    return false;
  }
  const int fl = ::fcntl(listen_fd_, F_GETFL);
  if (fl < 0 || ::fcntl(listen_fd_, F_SETFL, fl | O_NONBLOCK) != 0) {
    *err = std::string("cannot make the listening socket non-blocking: ") + std::strerror(errno);
    ::close(listen_fd_);
    listen_fd_ = -1;
    return false;
  }
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) {
    *err = std::string("eventfd: ") + std::strerror(errno);
    ::close(listen_fd_);
    listen_fd_ = -1;
    return false;
  }
  register_listener(opts_.listener);
  stop_ = false;
  thread_ = std::thread([this] { run(); });
  return true;
}

void BoundedHttpServer::stop() {
  if (thread_.joinable()) {
    stop_ = true;
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
    thread_.join();
  }
  if (wake_fd_ >= 0) ::close(wake_fd_);
  wake_fd_ = -1;
  if (listen_fd_ >= 0) ::close(listen_fd_);
  listen_fd_ = -1;
}

bool BoundedHttpServer::evict_oldest_unfinished(std::vector<Conn>* conns, const char* reason) {
  Conn* oldest = nullptr;
  for (auto& c : *conns) {
    if (c.fd < 0 || c.phase == Conn::kWriting) continue;
    // A connection draining after its answer is done already: close it first.
    const bool better = !oldest || (c.phase == Conn::kDraining && oldest->phase != Conn::kDraining) ||
                        (c.phase == oldest->phase && c.accepted_ms < oldest->accepted_ms);
    if (better) oldest = &c;
  }
  if (!oldest) return false;
  if (oldest->phase == Conn::kReading) count_drop(opts_.listener, reason);
  ::close(oldest->fd);
  oldest->fd = -1;
  --open_;
  return true;
}

void BoundedHttpServer::accept_all(std::vector<Conn>* conns, int64_t now, int64_t* accept_pause_until) {
  for (int i = 0; i < kMaxAcceptsPerRound; ++i) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      const int e = errno;
      if (e == EINTR || e == ECONNABORTED) continue;
      if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) {
        // Make room by closing the oldest unfinished connection; with none,
        // stop polling the listening socket for a moment (it stays readable).
        if (evict_oldest_unfinished(conns, "descriptors")) continue;
        *accept_pause_until = now + kAcceptPauseMs;
      }
      return;
    }
    if (open_.load() >= opts_.max_connections && !evict_oldest_unfinished(conns, "limit")) {
      count_drop(opts_.listener, "limit");
      ::close(fd);
      continue;
    }
    Conn c;
    c.fd = fd;
    c.accepted_ms = now;
    c.deadline_ms = now + opts_.header_timeout_ms;
    conns->push_back(std::move(c));
    ++open_;
  }
}

void BoundedHttpServer::respond(Conn* c, const HttpResponse& r, bool head, int64_t now) {
  std::string& o = c->out;
  o = "HTTP/1.1 " + std::to_string(r.status) + " " + reason_phrase(r.status) + "\r\n";
  o += "Content-Type: " + r.content_type + "\r\n";
  o += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
  o += "Connection: close\r\n";
  for (const auto& [k, v] : r.headers) o += k + ": " + v + "\r\n";
  o += "\r\n";
  if (!head) o += r.body;
  c->in.clear();
  c->in.shrink_to_fit();
  c->sent = 0;
  c->phase = Conn::kWriting;
  c->deadline_ms = now + opts_.write_timeout_ms;
  on_writable(c, now);  // most answers fit in the socket buffer at once
}

void BoundedHttpServer::answer(Conn* c, int64_t now) {
  const std::string& in = c->in;
  size_t eol = in.find('\n');
  std::string line = in.substr(0, eol);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string::npos ? std::string::npos : line.find(' ', sp1 + 1);
  if (sp1 == std::string::npos || sp2 == std::string::npos || line.compare(sp2 + 1, 7, "HTTP/1.") != 0) {
    respond(c, json_error(400, "bad request line"), false, now);
    return;
  }
  const std::string method = line.substr(0, sp1);
  const std::string target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const bool head = method == "HEAD";
  if (method != "GET" && !head) {
    HttpResponse r = json_error(405, "method not allowed");
    r.headers.emplace_back("Allow", "GET, HEAD");
    respond(c, r, false, now);
    return;
  }
  HttpRequest req;
  req.method = method;
  const size_t q = target.find('?');
  bool ok = !target.empty() && target[0] == '/' && decode(target.substr(0, q), false, &req.path);
  if (ok && q != std::string::npos) {
    const std::string qs = target.substr(q + 1);
    size_t pos = 0;
    while (ok && pos <= qs.size()) {
      size_t amp = qs.find('&', pos);
      if (amp == std::string::npos) amp = qs.size();
      const std::string kv = qs.substr(pos, amp - pos);
      pos = amp + 1;
      if (kv.empty()) continue;
      const size_t eq = kv.find('=');
      std::string k, v;
      ok = decode(kv.substr(0, eq), true, &k) &&
           (eq == std::string::npos || decode(kv.substr(eq + 1), true, &v));
      if (ok) req.query.emplace(std::move(k), std::move(v));  // the first value wins
    }
  }
  if (!ok) {
    respond(c, json_error(400, "bad request target"), head, now);
    return;
  }
  HttpResponse r;
  try {
    r = handler_(req);
  } catch (const std::exception& e) {
    log_warn(opts_.listener + ": GET " + req.path + " failed: " + e.what());
    r = json_error(500, e.what());
  } catch (...) {
    r = json_error(500, "unknown exception");
  }
  respond(c, r, head, now);
}

void BoundedHttpServer::on_readable(Conn* c, int64_t now) {
  char buf[4096];
  if (c->phase == Conn::kDraining) {
    for (;;) {
      const ssize_t n = ::recv(c->fd, buf, sizeof buf, 0);
      if (n > 0) {
        c->drained += static_cast<size_t>(n);
        if (c->drained <= kMaxDrainBytes) continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        return;
      }
      ::close(c->fd);  // EOF, error or too much
      c->fd = -1;
      --open_;
      return;
    }
  }
  for (;;) {
    const size_t room = opts_.max_header_bytes + 1 - std::min(c->in.size(), opts_.max_header_bytes + 1);
    if (room == 0) break;
    const ssize_t n = ::recv(c->fd, buf, std::min(room, sizeof buf), 0);
    if (n > 0) {
      const size_t from = c->in.size() >= 3 ? c->in.size() - 3 : 0;
      c->in.append(buf, static_cast<size_t>(n));
      const size_t crlf = c->in.find("\r\n\r\n", from);
      const size_t lf = c->in.find("\n\n", from);
      if (crlf != std::string::npos || lf != std::string::npos) {
        answer(c, now);
        return;
      }
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    ::close(c->fd);  // the client went away before finishing its request
    c->fd = -1;
    --open_;
    return;
  }
  respond(c, json_error(431, "request header larger than " + std::to_string(opts_.max_header_bytes) + " bytes"),
          false, now);
}

void BoundedHttpServer::on_writable(Conn* c, int64_t now) {
  while (c->sent < c->out.size()) {
    const ssize_t n = ::send(c->fd, c->out.data() + c->sent, c->out.size() - c->sent, MSG_NOSIGNAL);
    if (n > 0) {
      c->sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    ::close(c->fd);
    c->fd = -1;
    --open_;
    return;
  }
  // Done: half-close, then read what the client still sends until it closes,
  // so an unread request body does not turn the close into a reset that could
  // destroy the answer in flight.
  c->out.clear();
  c->out.shrink_to_fit();
  ::shutdown(c->fd, SHUT_WR);
  c->phase = Conn::kDraining;
  c->deadline_ms = now + kDrainMs;
}

void BoundedHttpServer::run() {
  std::vector<Conn> conns;
  std::vector<pollfd> pfds;
  int64_t accept_pause_until = 0;
  while (!stop_.load()) {
    int64_t now = steady_now_ms();
    int timeout = kMaxPollMs;
    for (auto& c : conns) {
      if (c.fd >= 0 && now >= c.deadline_ms) {
        if (c.phase == Conn::kReading) count_drop(opts_.listener, "header_timeout");
        if (c.phase == Conn::kWriting) count_drop(opts_.listener, "write_timeout");
        ::close(c.fd);
        c.fd = -1;
        --open_;
      }
      if (c.fd >= 0) timeout = static_cast<int>(std::min<int64_t>(timeout, c.deadline_ms - now));
    }
    conns.erase(std::remove_if(conns.begin(), conns.end(), [](const Conn& c) { return c.fd < 0; }),
                conns.end());
    pfds.clear();
    pfds.push_back({wake_fd_, POLLIN, 0});
    const bool accepting = now >= accept_pause_until;
    if (accepting) pfds.push_back({listen_fd_, POLLIN, 0});
    else timeout = static_cast<int>(std::min<int64_t>(timeout, accept_pause_until - now));
    const size_t first_conn = pfds.size();
    for (const auto& c : conns)
      pfds.push_back({c.fd, static_cast<short>(c.phase == Conn::kWriting ? POLLOUT : POLLIN), 0});
    const int n = ::poll(pfds.data(), pfds.size(), std::max(timeout, 0));
    if (n < 0) {
      if (errno == EINTR) continue;
      log_error(opts_.listener + ": poll: " + std::strerror(errno));
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    if (pfds[0].revents) {
      uint64_t v;
      [[maybe_unused]] ssize_t r = ::read(wake_fd_, &v, sizeof v);
    }
    if (stop_.load()) break;
    now = steady_now_ms();
    const size_t existing = conns.size();  // accept_all may append
    for (size_t i = 0; i < existing; ++i) {
      Conn& c = conns[i];
      const short re = pfds[first_conn + i].revents;
      if (!re || c.fd < 0) continue;
      if (c.phase == Conn::kWriting) on_writable(&c, now);
      else on_readable(&c, now);
    }
    if (accepting && pfds[1].revents) accept_all(&conns, now, &accept_pause_until);
  }
  for (auto& c : conns)
    if (c.fd >= 0) ::close(c.fd);
  open_ = 0;
}

int listen_tcp(const std::string& host, int port, int* bound_port, std::string* why) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) {
    *why = "not an IPv4 address";
    return -1;
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    *why = std::strerror(errno);
    return -1;
  }
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 128) != 0) {
    *why = std::strerror(errno);
    ::close(fd);
    return -1;
  }
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  if (bound_port) *bound_port = ntohs(a.sin_port);
  return fd;
}

std::vector<HttpDropCount> http_connection_drops() {
  std::lock_guard<std::mutex> g(drops_mu());
  std::vector<HttpDropCount> out;
  for (const auto& [k, v] : drops()) out.push_back({k.first, k.second, v});
  return out;
}

uint64_t http_connection_drops(const std::string& listener, const std::string& reason) {
  std::lock_guard<std::mutex> g(drops_mu());
  auto it = drops().find({listener, reason});
  return it == drops().end() ? 0 : it->second;
}

}  // namespace vipd::cp
