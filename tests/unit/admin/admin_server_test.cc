// Thread: test main thread (the server runs its own).
#include "observability/admin_server.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace vipd::cp {
namespace {

class AdminServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/vipd-admin-test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    sock_ = dir_ + "/run/admin.sock";
  }
  void TearDown() override {
    std::string cmd = "rm -rf '" + dir_ + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
  }

  httplib::Result get(const std::string& path, const std::string& sock = "") {
    httplib::Client cli(sock.empty() ? sock_ : sock, 80);
    cli.set_address_family(AF_UNIX);
    cli.set_connection_timeout(2, 0);
    cli.set_read_timeout(5, 0);
    return cli.Get(path.c_str());
  }

  static bool exists(const std::string& p) {
    struct stat st{};
    return ::lstat(p.c_str(), &st) == 0;
  }

  static std::vector<std::string> list_dir(const std::string& d) {
    std::vector<std::string> out;
    DIR* dp = ::opendir(d.c_str());
    if (!dp) return out;
    while (dirent* e = ::readdir(dp)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") out.push_back(n);
    }
    ::closedir(dp);
    return out;
  }

  std::string dir_;
  std::string sock_;
};

TEST_F(AdminServerTest, ServesRegisteredPathAsJson) {
  AdminServer s(sock_);
  s.handle("/v1/ping", [] { return nlohmann::json{{"ok", true}, {"n", 3}}; });
  std::string err;
  ASSERT_TRUE(s.start(&err)) << err;
  EXPECT_TRUE(s.running());

  auto res = get("/v1/ping");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "application/json");
  auto j = nlohmann::json::parse(res->body);
  EXPECT_EQ(j["ok"], true);
  EXPECT_EQ(j["n"], 3);
}

TEST_F(AdminServerTest, UnknownPathIs404WithPathList) {
  AdminServer s(sock_);
  s.handle("/v1/b", [] { return nlohmann::json::object(); });
  s.handle("/v1/a", [] { return nlohmann::json::object(); });
  std::string err;
  ASSERT_TRUE(s.start(&err)) << err;

  auto res = get("/nope");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  auto j = nlohmann::json::parse(res->body);
  EXPECT_EQ(j["error"], "not found");
  EXPECT_EQ(j["paths"], (nlohmann::json{"/v1/a", "/v1/b"}));
}

TEST_F(AdminServerTest, HandlerExceptionIs500) {
  AdminServer s(sock_);
  s.handle("/v1/boom", []() -> nlohmann::json { throw std::runtime_error("table not ready"); });
  std::string err;
  ASSERT_TRUE(s.start(&err)) << err;

  auto res = get("/v1/boom");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 500);
  EXPECT_EQ(nlohmann::json::parse(res->body), (nlohmann::json{{"error", "table not ready"}}));
  // The server keeps serving afterwards.
  auto again = get("/v1/boom");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 500);
}

TEST_F(AdminServerTest, NonGetIs405) {
  AdminServer s(sock_);
  s.handle("/v1/x", [] { return nlohmann::json::object(); });
  std::string err;
  ASSERT_TRUE(s.start(&err)) << err;
  httplib::Client cli(sock_, 80);
  cli.set_address_family(AF_UNIX);
  auto res = cli.Post("/v1/x", "{}", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 405);
}

TEST_F(AdminServerTest, SocketIs0600AndParentCreated0755) {
  AdminServer s(sock_);
  std::string err;
  ASSERT_TRUE(s.start(&err)) << err;
  struct stat st{};
  ASSERT_EQ(::lstat(sock_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  ASSERT_EQ(::stat((dir_ + "/run").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  // No temporary bind directory is left behind.
  EXPECT_EQ(list_dir(dir_ + "/run"), std::vector<std::string>{"admin.sock"});
}

TEST_F(AdminServerTest, StopRemovesSocketAndIsIdempotent) {
  AdminServer s(sock_);
  s.handle("/v1/x", [] { return nlohmann::json::object(); });
  std::string err;
  ASSERT_TRUE(s.start(&err)) << err;
  ASSERT_TRUE(exists(sock_));
  s.stop();
  EXPECT_FALSE(s.running());
  EXPECT_FALSE(exists(sock_));
  s.stop();
  EXPECT_FALSE(get("/v1/x"));
}

TEST_F(AdminServerTest, DestructorStops) {
  {
    AdminServer s(sock_);
    std::string err;
    ASSERT_TRUE(s.start(&err)) << err;
  }
  EXPECT_FALSE(exists(sock_));
}

TEST_F(AdminServerTest, StopRightAfterStartDoesNotHang) {
  for (int i = 0; i < 20; ++i) {
    AdminServer s(sock_);
    std::string err;
    ASSERT_TRUE(s.start(&err)) << err;
    s.stop();
    ASSERT_FALSE(exists(sock_));
  }
}

TEST_F(AdminServerTest, StaleSocketIsReplaced) {
  ASSERT_EQ(::mkdir((dir_ + "/run").c_str(), 0755), 0);
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, sock_.c_str(), sizeof a.sun_path - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ::close(fd);  // bound, never listened: a stale file
  ASSERT_TRUE(exists(sock_));

  AdminServer s(sock_);
  s.handle("/v1/x", [] { return nlohmann::json{{"fresh", true}}; });
  std::string err;
  ASSERT_TRUE(s.start(&err)) << err;
  auto res = get("/v1/x");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
}

TEST_F(AdminServerTest, LiveSocketIsNotStolen) {
  AdminServer first(sock_);
  first.handle("/v1/who", [] { return nlohmann::json{{"who", "first"}}; });
  std::string err;
  ASSERT_TRUE(first.start(&err)) << err;

  AdminServer second(sock_);
  EXPECT_FALSE(second.start(&err));
  EXPECT_NE(err.find(sock_), std::string::npos) << err;
  EXPECT_NE(err.find("another process is listening"), std::string::npos) << err;
  second.stop();

  auto res = get("/v1/who");
  ASSERT_TRUE(res);
  EXPECT_EQ(nlohmann::json::parse(res->body)["who"], "first");
}

TEST_F(AdminServerTest, StartFailsClearlyOnBadPath) {
  std::string err;
  {
    AdminServer s("/proc/vipd-no-such-dir/admin.sock");
    EXPECT_FALSE(s.start(&err));
    EXPECT_NE(err.find("/proc/vipd-no-such-dir/admin.sock"), std::string::npos) << err;
    EXPECT_NE(err.find("cannot create directory"), std::string::npos) << err;
    EXPECT_FALSE(s.running());
  }
  {
    std::string file = dir_ + "/plain";
    FILE* f = std::fopen(file.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fclose(f);
    AdminServer s(file);
    EXPECT_FALSE(s.start(&err));
    EXPECT_NE(err.find("not a socket"), std::string::npos) << err;
    EXPECT_TRUE(exists(file));  // never removed
  }
  {
    AdminServer s(dir_ + "/" + std::string(200, 'x'));
    EXPECT_FALSE(s.start(&err));
    EXPECT_NE(err.find("path too long"), std::string::npos) << err;
  }
  {
    AdminServer s("");
    EXPECT_FALSE(s.start(nullptr));  // null error pointer is allowed
  }
}

TEST_F(AdminServerTest, StartTwiceFails) {
  AdminServer s(sock_);
  std::string err;
  ASSERT_TRUE(s.start(&err)) << err;
  EXPECT_FALSE(s.start(&err));
  EXPECT_NE(err.find("already started"), std::string::npos);
  EXPECT_TRUE(s.running());
}

TEST_F(AdminServerTest, HandleOrderedKeepsKeyOrderAndLateRegistrationWorks) {
  AdminServer s(sock_);
  std::string err;
  ASSERT_TRUE(s.start(&err)) << err;
  s.handle_ordered("/v1/table", [] {
    nlohmann::ordered_json j;
    j["generation"] = 3;
    j["table"] = nlohmann::ordered_json::parse(R"({"services":[{"name":"a","protocol":"TCP"}]})");
    return j;
  });
  auto res = get("/v1/table");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, R"({"generation":3,"table":{"services":[{"name":"a","protocol":"TCP"}]}})");
}

TEST_F(AdminServerTest, ConcurrentClientsAreServed) {
  AdminServer s(sock_);
  std::atomic<int> calls{0};
  s.handle("/v1/n", [&] { return nlohmann::json{{"n", ++calls}}; });
  std::string err;
  ASSERT_TRUE(s.start(&err)) << err;
  std::atomic<int> ok{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 8; ++i) {
    ts.emplace_back([&] {
      for (int k = 0; k < 5; ++k) {
        auto res = get("/v1/n");
        if (res && res->status == 200) ++ok;
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(ok.load(), 40);
  EXPECT_EQ(calls.load(), 40);
}

TEST_F(AdminServerTest, QueryHandlerGetsParametersAndHttpErrorsKeepTheirStatus) {
  AdminServer s(sock_);
  s.handle_query("/v1/explain", [](const AdminServer::Query& q) -> nlohmann::ordered_json {
    auto it = q.find("proto");
    if (it == q.end()) throw AdminServer::HttpError(400, "proto missing");
    nlohmann::ordered_json j;
    j["proto"] = it->second;
    j["src"] = q.count("src") ? q.at("src") : "";
    return j;
  });
  std::string err;
  ASSERT_TRUE(s.start(&err)) << err;
  auto res = get("/v1/explain?proto=tcp&src=10.0.0.2:40000&proto=udp");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, R"({"proto":"tcp","src":"10.0.0.2:40000"})");  // first value wins
  res = get("/v1/explain");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(nlohmann::json::parse(res->body)["error"], "proto missing");
}

// The regression: the admin socket (one worker, 5 s read timeout) answered
// vipctl only after every slow client queued before it had timed out.
TEST_F(AdminServerTest, AnswersWhileSlowClientsAreConnected) {
  AdminServer s(sock_);
  s.handle("/v1/status", [] { return nlohmann::json{{"ok", true}}; });
  std::string err;
  ASSERT_TRUE(s.start(&err)) << err;
  auto connect_unix = [&] {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, sock_.c_str(), sizeof a.sun_path - 1);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd);
      return -1;
    }
    return fd;
  };
  const uint64_t before = http_connection_drops("admin", "header_timeout");
  std::vector<int> idle, trickling;
  for (int i = 0; i < 10; ++i) {
    idle.push_back(connect_unix());
    trickling.push_back(connect_unix());
    ASSERT_GE(idle.back(), 0);
    ASSERT_GE(trickling.back(), 0);
  }
  std::atomic<bool> stop{false};
  std::thread trickle([&] {  // one byte a second, never the end of the header
    const std::string req = "GET /v1/status HTTP/1.1\r\nHost: x\r\nX-Pad: aaaaaaaaaaaaaaaaaaaa";
    for (size_t k = 0; !stop.load(); k = (k + 1) % req.size()) {
      for (int fd : trickling) ::send(fd, &req[k], 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      for (int i = 0; i < 20 && !stop.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  struct Cleanup {  // also when an assertion returns early
    std::function<void()> fn;
    ~Cleanup() { fn(); }
  } cleanup{[&] {
    stop = true;
    trickle.join();
    for (int fd : idle) ::close(fd);
    for (int fd : trickling) ::close(fd);
  }};
  for (int i = 0; i < 3; ++i) {
    httplib::Client cli(sock_, 80);
    cli.set_address_family(AF_UNIX);
    cli.set_connection_timeout(5, 0);
    cli.set_read_timeout(5, 0);  // generous for sanitizer builds; the old server needed 100 s here
    auto res = cli.Get("/v1/status");
    ASSERT_TRUE(res) << httplib::to_string(res.error());
    EXPECT_EQ(res->status, 200);
    EXPECT_EQ(res->body, R"({"ok":true})");
  }
  // The slow clients are closed by the header deadline, counted per listener.
  timeval tv{30, 0};
  for (int fd : idle) {
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char c;
    EXPECT_EQ(::recv(fd, &c, 1, 0), 0);  // EOF: closed by the server
  }
  // Counted before the close, so all ten are in by now.
  EXPECT_GE(http_connection_drops("admin", "header_timeout"), before + 10);
}

TEST_F(AdminServerTest, HeadAndPercentEncodedQuery) {
  AdminServer s(sock_);
  s.handle_query("/v1/q", [](const AdminServer::Query& q) -> nlohmann::ordered_json {
    nlohmann::ordered_json j;
    for (const auto& [k, v] : q) j[k] = v;
    return j;
  });
  std::string err;
  ASSERT_TRUE(s.start(&err)) << err;
  auto res = get("/v1/q?src=10.0.0.2%3A40000&name=a%20b");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->body, R"({"name":"a b","src":"10.0.0.2:40000"})");
  httplib::Client cli(sock_, 80);
  cli.set_address_family(AF_UNIX);
  auto head = cli.Head("/v1/q");
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 200);
  EXPECT_TRUE(head->body.empty());
}

}  // namespace
}  // namespace vipd::cp
