// Thread: test main thread (the servers run their own threads).
// The HTTP side: /healthz and /livez over TCP, /metrics through the
// prometheus-cpp exposer, bind errors. Binds 127.0.0.1 on kernel-chosen ports.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "controlplane/metrics/observability.h"
#include "tests/unit/metrics/fake_stats.h"

namespace vipd::cp {
namespace {

httplib::Result get(int port, const std::string& path) {
  httplib::Client cli("127.0.0.1", port);
  cli.set_connection_timeout(2, 0);
  cli.set_read_timeout(5, 0);
  return cli.Get(path.c_str());
}

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

}  // namespace
}  // namespace vipd::cp
