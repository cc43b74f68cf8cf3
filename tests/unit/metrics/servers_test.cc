// Thread: test main thread (the servers run their own threads).
// The HTTP side: /healthz and /livez over TCP, /metrics, bind errors, and the
// BoundedHttpServer under them (slow clients, connection cap, deadlines).
// Binds 127.0.0.1 on kernel-chosen ports.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "observability/observability.h"
#include "tests/unit/metrics/fake_stats.h"

namespace vipd::cp {
namespace {

httplib::Result get(int port, const std::string& path) {
  httplib::Client cli("127.0.0.1", port);
  cli.set_connection_timeout(2, 0);
  cli.set_read_timeout(5, 0);
  return cli.Get(path.c_str());
}

// A TCP connection to 127.0.0.1:port (blocking), -1 on failure.
int connect_to(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Slow clients: `idle` connections that send nothing and `trickling` ones that
// send a request header one byte per second (the slowloris pattern), all
// opened before the constructor returns. The destructor closes them.
class SlowClients {
 public:
  SlowClients(int port, int idle, int trickling) {
    for (int i = 0; i < idle + trickling; ++i) {
      const int fd = connect_to(port);
      if (fd < 0) continue;
      (i < idle ? idle_ : trickling_).push_back(fd);
    }
    thread_ = std::thread([this] {
      const std::string req = "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: aaaaaaaaaaaaaaaaaaaa\r\n\r\n";
      for (size_t k = 0; !stop_.load(); k = (k + 1) % (req.size() - 4)) {  // never the final CRLF
        for (int fd : trickling_) ::send(fd, &req[k], 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        for (int i = 0; i < 20 && !stop_.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    });
  }
  ~SlowClients() {
    stop_ = true;
    thread_.join();
    for (int fd : idle_) ::close(fd);
    for (int fd : trickling_) ::close(fd);
  }
  size_t opened() const { return idle_.size() + trickling_.size(); }
  const std::vector<int>& all_idle() const { return idle_; }

 private:
  std::vector<int> idle_, trickling_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Waits (up to 30 s) until the server closed `fd`: recv() reports EOF or a reset.
bool closed_by_server(int fd) {
  timeval tv{30, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char buf[256];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n == 0) return true;
    if (n < 0) return errno == ECONNRESET;
  }
}

// Sends `raw` on a new connection and returns everything read until the server closes.
std::string raw_exchange(int port, const std::string& raw) {
  const int fd = connect_to(port);
  if (fd < 0) return "";
  ::send(fd, raw.data(), raw.size(), MSG_NOSIGNAL);
  timeval tv{30, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

// Polls `cond` every 10 ms for up to 30 s.
template <class F>
bool eventually(F cond) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return cond();
}

// A BoundedHttpServer on 127.0.0.1 (kernel-chosen port) answering "ok <path>".
struct TestServer {
  explicit TestServer(BoundedHttpOptions o, BoundedHttpServer::Handler h = nullptr)
      : server(std::move(o), h ? std::move(h) : [](const HttpRequest& r) {
          HttpResponse res;
          res.content_type = "text/plain";
          res.body = "ok " + r.path;
          return res;
        }) {
    std::string why;
    const int fd = listen_tcp("127.0.0.1", 0, &port, &why);
    EXPECT_GE(fd, 0) << why;
    EXPECT_TRUE(server.start(fd, &why)) << why;
  }
  BoundedHttpServer server;
  int port = 0;
};

// A listening TCP socket on 127.0.0.1 (kernel-chosen port); closed by the caller.
int listen_somewhere(int* port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 1) != 0) return -1;
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *port = ntohs(a.sin_port);
  return fd;
}

TEST(HealthServer, ServesHealthzAndLivez) {
  HealthResult ok;
  ok.body = {{"status", "ok"}};
  HealthResult bad;
  bad.status = 503;
  bad.body = {{"status", "unhealthy"}, {"reasons", {"no table applied yet"}}};
  HealthServer s("127.0.0.1:0", [&] { return bad; }, [&] { return ok; });
  std::string err;
  ASSERT_TRUE(s.start(&err)) << err;
  ASSERT_GT(s.port(), 0);
  auto r = get(s.port(), "/healthz");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
  auto j = nlohmann::json::parse(r->body);
  EXPECT_EQ(j["reasons"][0], "no table applied yet");
  r = get(s.port(), "/livez");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(nlohmann::json::parse(r->body)["status"], "ok");
  r = get(s.port(), "/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  httplib::Client cli("127.0.0.1", s.port());
  auto p = cli.Post("/healthz", "", "text/plain");
  ASSERT_TRUE(p);
  EXPECT_NE(p->status, 200);
  s.stop();
  s.stop();  // idempotent
  EXPECT_FALSE(get(s.port(), "/livez"));
}

TEST(HealthServer, BindErrorsSayWhy) {
  int port = 0;
  const int fd = listen_somewhere(&port);
  ASSERT_GE(fd, 0);
  HealthServer s("127.0.0.1:" + std::to_string(port), [] { return HealthResult{}; }, [] { return HealthResult{}; });
  std::string err;
  EXPECT_FALSE(s.start(&err));
  EXPECT_EQ(err, "health address 127.0.0.1:" + std::to_string(port) + ": bind failed: Address already in use");
  ::close(fd);
  HealthServer bad("localhost:80", [] { return HealthResult{}; }, [] { return HealthResult{}; });
  EXPECT_FALSE(bad.start(&err));
  EXPECT_EQ(err, "health address localhost:80: expected IPv4:PORT");
}

TEST(Observability, ServesMetricsAndHealthFromOneSource) {
  testing::FakeStats stats;
  testing::fill_seed(stats);
  stats.status_.last_loop_unix_ns = 0;  // the checker's start time counts
  ObservabilityOptions o;
  o.metrics_address = "127.0.0.1:0";
  o.health_address = "127.0.0.1:0";
  Observability obs(stats, o);
  obs.sync_observer()(SyncEvent{true, true, 3, 0.001, 0.004});
  std::string err;
  ASSERT_TRUE(obs.start(&err)) << err;
  ASSERT_GT(obs.metrics_port(), 0);
  auto r = get(obs.metrics_port(), "/metrics");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(r->body.find("vipd_backend_connections_total{service=\"default/db:http\""), std::string::npos);
  EXPECT_NE(r->body.find("vipd_network_programming_duration_seconds_count 1"), std::string::npos);
  r = get(obs.health_port(), "/healthz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(nlohmann::json::parse(r->body)["generation"], 3);
  obs.stop();
}

TEST(Observability, EmptyAddressesAreOff) {
  testing::FakeStats stats;
  ObservabilityOptions o;
  o.metrics_address = "";
  o.health_address = "";
  Observability obs(stats, o);
  std::string err;
  ASSERT_TRUE(obs.start(&err)) << err;
  EXPECT_EQ(obs.metrics_port(), 0);
  EXPECT_EQ(obs.health_port(), 0);
}

TEST(Observability, MetricsBindErrorSaysWhy) {
  int port = 0;
  const int fd = listen_somewhere(&port);
  ASSERT_GE(fd, 0);
  testing::FakeStats stats;
  ObservabilityOptions o;
  o.metrics_address = "127.0.0.1:" + std::to_string(port);
  o.health_address = "127.0.0.1:0";
  Observability obs(stats, o);
  std::string err;
  EXPECT_FALSE(obs.start(&err));
  EXPECT_EQ(err, "metrics address " + o.metrics_address + ": bind failed: Address already in use");
  EXPECT_EQ(obs.health_port(), 0);
  ::close(fd);
}

// The regression: /healthz and /livez must answer while slow clients hold
// connections (one worker with a 5 s read timeout answered after ~5 s per idle
// connection before them).
TEST(HealthServer, AnswersWhileSlowClientsAreConnected) {
  HealthResult ok;
  ok.body = {{"status", "ok"}};
  HealthServer s("127.0.0.1:0", [&] { return ok; }, [&] { return ok; });
  std::string err;
  ASSERT_TRUE(s.start(&err)) << err;
  SlowClients slow(s.port(), 10, 10);
  ASSERT_EQ(slow.opened(), 20u);
  for (const char* path : {"/healthz", "/livez", "/healthz"}) {
    httplib::Client cli("127.0.0.1", s.port());
    cli.set_connection_timeout(5, 0);
    cli.set_read_timeout(5, 0);  // generous for sanitizer builds; the old server needed 50 s here
    auto r = cli.Get(path);
    ASSERT_TRUE(r) << path << ": " << httplib::to_string(r.error());
    EXPECT_EQ(r->status, 200) << path;
  }
}

TEST(Observability, ScrapeAndProbeAnswerWhileSlowClientsAreConnected) {
  testing::FakeStats stats;
  testing::fill_seed(stats);
  ObservabilityOptions o;
  o.metrics_address = "127.0.0.1:0";
  o.health_address = "127.0.0.1:0";
  Observability obs(stats, o);
  std::string err;
  ASSERT_TRUE(obs.start(&err)) << err;
  SlowClients slow_metrics(obs.metrics_port(), 10, 10);
  SlowClients slow_health(obs.health_port(), 10, 10);
  ASSERT_EQ(slow_metrics.opened() + slow_health.opened(), 40u);
  auto r = get(obs.metrics_port(), "/metrics");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(r->body.find("vipd_backend_connections_total{service=\"default/db:http\""), std::string::npos);
  EXPECT_NE(r->body.find("vipd_http_connections_dropped_total{listener=\"metrics\",reason=\"header_timeout\"}"),
            std::string::npos);
  r = get(obs.health_port(), "/livez");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200);
}

TEST(BoundedHttpServer, ConnectionCapClosesTheOldestUnfinishedConnection) {
  BoundedHttpOptions o;
  o.listener = "test-cap";
  o.max_connections = 4;
  o.header_timeout_ms = 60000;  // only the cap closes connections here
  TestServer t(o);
  const uint64_t before = http_connection_drops("test-cap", "limit");
  SlowClients slow(t.port, 4, 0);
  ASSERT_EQ(slow.opened(), 4u);
  ASSERT_TRUE(eventually([&] { return t.server.connections() == 4; }));
  // A fifth client at the cap is served: the oldest idle connection makes room.
  auto r = get(t.port, "/x");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->body, "ok /x");
  EXPECT_TRUE(closed_by_server(slow.all_idle()[0]));
  EXPECT_EQ(http_connection_drops("test-cap", "limit"), before + 1);
  EXPECT_LE(t.server.connections(), 4u);
}

TEST(BoundedHttpServer, HeaderDeadlineIsForTheWholeHeaderNotPerByte) {
  BoundedHttpOptions o;
  o.listener = "test-header";
  o.header_timeout_ms = 300;
  TestServer t(o);
  const uint64_t before = http_connection_drops("test-header", "header_timeout");
  SlowClients slow(t.port, 2, 2);  // the trickling ones send a byte every second, forever
  ASSERT_EQ(slow.opened(), 4u);
  // Every one of them is closed by the server, the tricklers included.
  ASSERT_TRUE(eventually([&] { return http_connection_drops("test-header", "header_timeout") >= before + 4; }));
  EXPECT_TRUE(eventually([&] { return t.server.connections() == 0; }));
  for (int fd : slow.all_idle()) EXPECT_TRUE(closed_by_server(fd));
}

TEST(BoundedHttpServer, ClientThatDoesNotReadBlocksNobody) {
  BoundedHttpOptions o;
  o.listener = "test-write";
  o.write_timeout_ms = 300;
  const std::string big(32 << 20, 'x');  // far more than the socket buffers hold
  TestServer t(o, [&](const HttpRequest& r) {
    HttpResponse res;
    res.content_type = "text/plain";
    res.body = r.path == "/big" ? big : "small";
    return res;
  });
  const uint64_t before = http_connection_drops("test-write", "write_timeout");
  const int fd = connect_to(t.port);
  ASSERT_GE(fd, 0);
  const std::string req = "GET /big HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  // Never read: the server must go on serving others, then give up on this one.
  auto r = get(t.port, "/small");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->body, "small");
  EXPECT_TRUE(eventually([&] { return http_connection_drops("test-write", "write_timeout") == before + 1; }));
  ::close(fd);
}

TEST(BoundedHttpServer, RequestParsingAndErrors) {
  BoundedHttpOptions o;
  o.listener = "test-parse";
  o.max_header_bytes = 512;
  TestServer t(o, [](const HttpRequest& r) {
    HttpResponse res;
    if (r.path == "/boom") throw std::runtime_error("broken");
    res.content_type = "text/plain";
    res.body = r.method + " " + r.path;
    for (const auto& [k, v] : r.query) res.body += " [" + k + "=" + v + "]";
    return res;
  });
  std::string out = raw_exchange(t.port, "GET /a%20b?x=1&y=a+b%21&x=2&z HTTP/1.1\r\nHost: h\r\n\r\n");
  EXPECT_EQ(out.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << out;
  EXPECT_NE(out.find("Connection: close\r\n"), std::string::npos) << out;
  EXPECT_NE(out.find("\r\n\r\nGET /a b [x=1] [y=a b!] [z=]"), std::string::npos) << out;
  out = raw_exchange(t.port, "GET /bare\n\n");  // no version
  EXPECT_EQ(out.rfind("HTTP/1.1 400 ", 0), 0u) << out;
  out = raw_exchange(t.port, "GET /plain-lf HTTP/1.0\n\n");
  EXPECT_NE(out.find("\r\n\r\nGET /plain-lf"), std::string::npos) << out;
  out = raw_exchange(t.port, "HEAD /h HTTP/1.1\r\n\r\n");
  EXPECT_EQ(out.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << out;
  EXPECT_NE(out.find("Content-Length: 7\r\n"), std::string::npos) << out;  // "HEAD /h"
  EXPECT_EQ(out.substr(out.size() - 4), "\r\n\r\n") << out;  // no body
  out = raw_exchange(t.port, "POST /p HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc");
  EXPECT_EQ(out.rfind("HTTP/1.1 405 ", 0), 0u) << out;
  EXPECT_NE(out.find("Allow: GET, HEAD\r\n"), std::string::npos) << out;
  out = raw_exchange(t.port, "GET /%zz HTTP/1.1\r\n\r\n");
  EXPECT_EQ(out.rfind("HTTP/1.1 400 ", 0), 0u) << out;
  out = raw_exchange(t.port, "GET /" + std::string(600, 'a') + " HTTP/1.1\r\n\r\n");
  EXPECT_EQ(out.rfind("HTTP/1.1 431 ", 0), 0u) << out;
  out = raw_exchange(t.port, "GET /boom HTTP/1.1\r\n\r\n");
  EXPECT_EQ(out.rfind("HTTP/1.1 500 ", 0), 0u) << out;
  EXPECT_NE(out.find(R"({"error":"broken"})"), std::string::npos) << out;
  // Still serving.
  auto r = get(t.port, "/after");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "GET /after");
}

TEST(BoundedHttpServer, StopClosesEverythingAndIsIdempotent) {
  BoundedHttpOptions o;
  o.listener = "test-stop";
  TestServer t(o);
  SlowClients slow(t.port, 3, 0);
  ASSERT_TRUE(eventually([&] { return t.server.connections() == 3; }));
  t.server.stop();
  t.server.stop();
  for (int fd : slow.all_idle()) EXPECT_TRUE(closed_by_server(fd));
  EXPECT_LT(connect_to(t.port), 0);
}

}  // namespace
}  // namespace vipd::cp
