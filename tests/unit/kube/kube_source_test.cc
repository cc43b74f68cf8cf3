// Thread: test main thread (KubeSource runs its reflector threads).
// KubeSource + ApiClient against the test API server (tests/kube/fake_apiserver.py)
// over real TLS: kubeconfig variants, TLS verification, token and client-cert
// auth, pagination, watch events, 410 -> relist with deletions, garbage ->
// relist, API errors -> not ready / last state kept. Skipped (loudly) where
// python3, openssl or curl are missing.
#include "controlplane/kube/kube_source.h"
#include "controlplane/kube/source_factory.h"

#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "controlplane/kube/api_client.h"

namespace vipd::cp::kube {
namespace {

namespace fs = std::filesystem;

std::string b64(const std::string& in) {
  static const char* t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out.push_back(t[(v >> s) & 63]);
  }
  if (i + 1 == in.size()) {
    const uint32_t v = uint8_t(in[i]) << 16;
    out += {t[(v >> 18) & 63], t[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == in.size()) {
    const uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8);
    out += {t[(v >> 18) & 63], t[(v >> 12) & 63], t[(v >> 6) & 63], '='};
  }
  return out;
}

std::string slurp(const std::string& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string run(const std::string& cmd) {
  std::string out;
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  pclose(f);
  return out;
}

const char* kObjects = R"({"items":[
 {"apiVersion":"v1","kind":"Service","metadata":{"name":"db","namespace":"default"},
  "spec":{"clusterIP":"10.96.0.100","ports":[{"name":"http","port":8080}]}},
 {"apiVersion":"v1","kind":"Service","metadata":{"name":"hl","namespace":"default","labels":{"service.kubernetes.io/headless":""}},
  "spec":{"clusterIP":"10.96.0.150","ports":[{"name":"http","port":80}]}},
 {"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"db-1","namespace":"default","labels":{"kubernetes.io/service-name":"db"}},
  "addressType":"IPv4","ports":[{"name":"http","protocol":"TCP","port":8080}],
  "endpoints":[{"addresses":["10.244.1.15"]},{"addresses":["10.244.2.88"]}]}
]})";

class FakeApi {
 public:
  bool start(std::string* why) {
    if (system("command -v openssl >/dev/null 2>&1 && command -v curl >/dev/null 2>&1 && "
               "test -x /usr/bin/python3") != 0) {
      *why = "python3 (/usr/bin/python3), openssl or curl missing";
      return false;
    }
    dir_ = fs::temp_directory_path() / ("vipd-kube-ut-" + std::to_string(getpid()));
    fs::create_directories(dir_);
    if (system(("tests/kube/gen_certs.sh " + dir_.string()).c_str()) != 0) {
      *why = "gen_certs.sh failed";
      return false;
    }
    std::ofstream(dir_ / "objects.json") << kObjects;
    port_ = 20000 + (getpid() * 7) % 20000;
    ctl_ = port_ + 1;
    pid_ = fork();
    if (pid_ == 0) {
      const std::string d = dir_.string();
      execl("/usr/bin/python3", "python3", "tests/kube/fake_apiserver.py", "--port",
            std::to_string(port_).c_str(), "--ctl-port", std::to_string(ctl_).c_str(), "--cert",
            (d + "/server.crt").c_str(), "--key", (d + "/server.key").c_str(), "--client-ca",
            (d + "/ca.crt").c_str(), "--token", "sekret", "--bookmark-s", "0.5", "--load",
            (d + "/objects.json").c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    for (int i = 0; i < 100; ++i) {
      if (run("curl -s -m 1 http://127.0.0.1:" + std::to_string(ctl_) + "/stats").find("\"rv\"") !=
          std::string::npos)
        return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    *why = "the test API server did not start";
    return false;
  }
  ~FakeApi() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  std::string ctl(const std::string& op, const std::string& body = "{}") {
    return run("curl -s -m 5 -X POST --data-binary '" + body + "' http://127.0.0.1:" + std::to_string(ctl_) +
               "/" + op);
  }
  std::string stats() { return run("curl -s -m 5 http://127.0.0.1:" + std::to_string(ctl_) + "/stats"); }
  std::string server() const { return "https://127.0.0.1:" + std::to_string(port_); }
  std::string file(const std::string& n) const { return (dir_ / n).string(); }

  // A kubeconfig; `cluster_extra`/`user` are YAML lines (indented 4 / 4).
  std::string kubeconfig(const std::string& cluster_extra, const std::string& user) {
    const std::string p = file("kubeconfig-" + std::to_string(++n_));
    std::ofstream(p) << "apiVersion: v1\nkind: Config\ncurrent-context: test\n"
                     << "contexts:\n- name: other\n  context: {cluster: nowhere, user: nobody}\n"
                     << "- name: test\n  context: {cluster: c, user: u}\n"
                     << "clusters:\n- name: c\n  cluster:\n    server: " << server() << "\n"
                     << cluster_extra << "users:\n- name: u\n  user:\n" << user;
    return p;
  }

 private:
  fs::path dir_;
  int port_ = 0, ctl_ = 0;
  int n_ = 0;
  pid_t pid_ = -1;
};

class KubeSourceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    api_ = new FakeApi();
    if (!api_->start(&skip_why_)) {
      fprintf(stderr, "!!! kube_source_test: SKIPPED: %s\n", skip_why_.c_str());
    }
  }
  static void TearDownTestSuite() {
    delete api_;
    api_ = nullptr;
  }
  void SetUp() override {
    if (!skip_why_.empty()) GTEST_SKIP() << skip_why_;
  }

  static std::unique_ptr<KubeSource> source(const std::string& kubeconfig, uint32_t page = 500) {
    std::string err;
    auto cfg = load_kubeconfig(kubeconfig, &err);
    EXPECT_TRUE(cfg) << err;
    if (!cfg) return nullptr;
    KubeSourceOptions o;
    o.backoff_initial_ms = 50;
    o.backoff_max_ms = 200;
    o.qps = 200;
    o.list_page_size = page;
    auto s = std::make_unique<KubeSource>(*cfg, o);
    s->start();
    return s;
  }
  static std::string ca_data() { return "    certificate-authority-data: " + b64(slurp(api_->file("ca.crt"))) + "\n"; }

  // Waits until pred(load()) holds (up to 5 s).
  template <typename P>
  static bool eventually(KubeSource& s, P pred) {
    for (int i = 0; i < 250; ++i) {
      if (s.ready() && pred(s.load())) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  static size_t backends_of(const LoadResult& r, const char* vip) {
    const ServiceTable& t = r.delta ? *r.current : r.table;
    for (const auto& [k, v] : t.services)
      if (k.vip.to_string() == vip) return v.backends.size();
    return 999;
  }
  static bool has(const LoadResult& r, const char* vip) { return backends_of(r, vip) != 999; }

  static FakeApi* api_;
  static std::string skip_why_;
};
FakeApi* KubeSourceTest::api_ = nullptr;
std::string KubeSourceTest::skip_why_;

TEST_F(KubeSourceTest, TokenAndCaDataListsAndSelectsLikeKubeProxy) {
  auto s = source(api_->kubeconfig(ca_data(), "    token: sekret\n"));
  ASSERT_TRUE(s->wait_ready(5000));
  const LoadResult r = s->load();
  EXPECT_EQ(backends_of(r, "10.96.0.100"), 2u);
  EXPECT_FALSE(has(r, "10.96.0.150"));  // headless label: excluded by the label selector
  const std::string st = api_->stats();
  EXPECT_NE(st.find("labelSelector=%21service.kubernetes.io%2Fheadless%2C%21service.kubernetes.io%2Fservice-proxy-name"),
            std::string::npos)
      << st;
  EXPECT_NE(st.find("allowWatchBookmarks=true"), std::string::npos);
}

TEST_F(KubeSourceTest, ClientCertificateFilesRelativeToKubeconfig) {
  auto s = source(api_->kubeconfig("    certificate-authority: ca.crt\n",
                                   "    client-certificate: client.crt\n    client-key: client.key\n"));
  ASSERT_TRUE(s->wait_ready(5000));
  EXPECT_EQ(backends_of(s->load(), "10.96.0.100"), 2u);
}

TEST_F(KubeSourceTest, ClientCertificateData) {
  auto s = source(api_->kubeconfig(ca_data(), "    client-certificate-data: " + b64(slurp(api_->file("client.crt"))) +
                                                  "\n    client-key-data: " + b64(slurp(api_->file("client.key"))) + "\n"));
  ASSERT_TRUE(s->wait_ready(5000));
}

TEST_F(KubeSourceTest, TokenFileIsReread) {
  const std::string tf = api_->file("token");
  std::ofstream(tf) << "wrong\n";
  auto s = source(api_->kubeconfig(ca_data(), "    tokenFile: " + tf + "\n"));
  EXPECT_FALSE(s->wait_ready(800));
  std::ofstream(tf) << "sekret\n";  // "rotation"
  EXPECT_TRUE(s->wait_ready(5000));
}

TEST_F(KubeSourceTest, TlsIsVerifiedUnlessInsecureIsAsked) {
  auto bad = source(api_->kubeconfig("    certificate-authority: other-ca.crt\n", "    token: sekret\n"));
  EXPECT_FALSE(bad->wait_ready(1000));
  EXPECT_GT(bad->stats().services.errors, 0u);
  auto insecure = source(api_->kubeconfig("    insecure-skip-tls-verify: true\n", "    token: sekret\n"));
  EXPECT_TRUE(insecure->wait_ready(5000));
}

TEST_F(KubeSourceTest, Pagination) {
  std::string items;
  for (int i = 0; i < 7; ++i)
    items += std::string(i ? "," : "") + R"({"apiVersion":"v1","kind":"Service","metadata":{"name":"p)" +
             std::to_string(i) + R"(","namespace":"page"},"spec":{"clusterIP":"10.97.0.)" + std::to_string(i + 1) +
             R"(","ports":[{"port":80}]}})";
  api_->ctl("apply", "{\"items\":[" + items + "]}");
  auto s = source(api_->kubeconfig(ca_data(), "    token: sekret\n"), 3);
  ASSERT_TRUE(s->wait_ready(5000));
  EXPECT_TRUE(has(s->load(), "10.97.0.7"));
  EXPECT_EQ(s->stats().services.list_pages, 3u);  // 8 services (7 + db) in pages of 3
  EXPECT_EQ(s->stats().services.objects, 8u);
}

TEST_F(KubeSourceTest, WatchEventsGoneRelistAndGarbage) {
  auto s = source(api_->kubeconfig(ca_data(), "    token: sekret\n"));
  ASSERT_TRUE(s->wait_ready(5000));
  // MODIFIED: one endpoint less.
  api_->ctl("apply", R"({"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"db-1","namespace":"default","labels":{"kubernetes.io/service-name":"db"}},"addressType":"IPv4","ports":[{"name":"http","protocol":"TCP","port":8080}],"endpoints":[{"addresses":["10.244.1.15"]}]})");
  EXPECT_TRUE(eventually(*s, [&](const LoadResult& r) { return backends_of(r, "10.96.0.100") == 1; }));
  // ADDED service.
  api_->ctl("apply", R"({"apiVersion":"v1","kind":"Service","metadata":{"name":"gone","namespace":"default"},"spec":{"clusterIP":"10.96.0.200","ports":[{"port":80}]}})");
  EXPECT_TRUE(eventually(*s, [&](const LoadResult& r) { return has(r, "10.96.0.200"); }));
  // Bookmarks arrive (every 0.5 s).
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  EXPECT_GT(s->stats().services.bookmarks, 0u);

  // While the watches are away the service is deleted and the history compacted:
  // the resumed watch gets 410, the relist replaces the cache, the service vanishes.
  api_->ctl("fault", R"({"fail": 1000})");
  api_->ctl("drop");
  api_->ctl("delete", R"({"resource":"services","namespace":"default","name":"gone"})");
  api_->ctl("compact");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_TRUE(has(s->load(), "10.96.0.200"));  // last state stays while the API fails
  api_->ctl("fault", R"({"fail": 0})");
  EXPECT_TRUE(eventually(*s, [&](const LoadResult& r) { return !has(r, "10.96.0.200"); }));
  EXPECT_GE(s->stats().services.gone, 1u);
  EXPECT_GE(s->stats().services.lists, 2u);

  // Garbage in the stream: relist, nothing lost, nothing crashes.
  const uint64_t lists = s->stats().services.lists + s->stats().endpointslices.lists;
  api_->ctl("fault", R"({"garbage": 2})");
  api_->ctl("drop");
  // The server's garbage is a broken object at the end of a stream. A watcher
  // that sees it as a complete bad object counts it malformed and relists; one
  // that sees the stream end inside the object treats it as a dropped
  // connection and resumes the watch (both are correct). Which one happens
  // depends on how the chunks arrive, so at least one of the two garbage
  // streams must be counted malformed and followed by a relist.
  auto malformed = [&] { return s->stats().services.malformed + s->stats().endpointslices.malformed; };
  for (int i = 0; i < 200 && (malformed() < 1 || s->stats().services.lists + s->stats().endpointslices.lists < lists + 1); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_GE(malformed(), 1u);
  EXPECT_GE(s->stats().services.lists + s->stats().endpointslices.lists, lists + 1);
  EXPECT_TRUE(eventually(*s, [&](const LoadResult& r) { return backends_of(r, "10.96.0.100") == 1; }));
}

// A dual-stack Service and an IPv6 EndpointSlice through list/watch: one entry
// per family, the IPv6 one fed by the IPv6 slice only.
TEST_F(KubeSourceTest, DualStackServiceThroughTheApi) {
  auto s = source(api_->kubeconfig(ca_data(), "    token: sekret\n"));
  ASSERT_TRUE(s->wait_ready(5000));
  api_->ctl("apply", R"({"apiVersion":"v1","kind":"Service","metadata":{"name":"ds","namespace":"default"},"spec":{"clusterIP":"10.96.0.77","clusterIPs":["10.96.0.77","fd00:96::77"],"ipFamilies":["IPv4","IPv6"],"ipFamilyPolicy":"RequireDualStack","ports":[{"name":"http","port":80}]}})");
  api_->ctl("apply", R"({"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"ds-6","namespace":"default","labels":{"kubernetes.io/service-name":"ds"}},"addressType":"IPv6","ports":[{"name":"http","protocol":"TCP","port":8080}],"endpoints":[{"addresses":["fd00:244::1"]},{"addresses":["fd00:244::2"]}]})");
  EXPECT_TRUE(eventually(*s, [&](const LoadResult& r) {
    return backends_of(r, "fd00:96::77") == 2 && backends_of(r, "10.96.0.77") == 0;
  }));
  api_->ctl("delete", R"({"resource":"endpointslices","namespace":"default","name":"ds-6"})");
  api_->ctl("delete", R"({"resource":"services","namespace":"default","name":"ds"})");
  EXPECT_TRUE(eventually(*s, [&](const LoadResult& r) { return !has(r, "fd00:96::77") && !has(r, "10.96.0.77"); }));
}

TEST_F(KubeSourceTest, InvalidObjectIsSkippedWithReason) {
  auto s = source(api_->kubeconfig(ca_data(), "    token: sekret\n"));
  ASSERT_TRUE(s->wait_ready(5000));
  api_->ctl("apply", R"({"apiVersion":"v1","kind":"Service","metadata":{"name":"bad","namespace":"default"},"spec":{"clusterIP":"10.96.0.201","ports":[{"port":"eighty"}]}})");
  EXPECT_TRUE(eventually(*s, [&](const LoadResult& r) {
    for (const auto& e : r.errors)
      if (e.object == "Service default/bad") return true;
    return false;
  }));
  EXPECT_GE(s->stats().services.invalid_objects, 1u);
  api_->ctl("delete", R"({"resource":"services","namespace":"default","name":"bad"})");
}

// A relist that finds a broken version of a working Service keeps the last good
// version (as a watch event does), instead of deleting the service.
TEST_F(KubeSourceTest, RelistKeepsTheLastGoodVersionOfAnInvalidObject) {
  auto s = source(api_->kubeconfig(ca_data(), "    token: sekret\n"));
  ASSERT_TRUE(s->wait_ready(5000));
  api_->ctl("apply", R"({"apiVersion":"v1","kind":"Service","metadata":{"name":"flip","namespace":"default"},"spec":{"clusterIP":"10.96.0.202","ports":[{"port":80}]}})");
  ASSERT_TRUE(eventually(*s, [&](const LoadResult& r) { return has(r, "10.96.0.202"); }));
  // The broken version arrives while the watches are away, and the history is
  // compacted: the resumed watch gets 410 and the relist brings it.
  api_->ctl("fault", R"({"fail": 1000})");
  api_->ctl("drop");
  api_->ctl("apply", R"({"apiVersion":"v1","kind":"Service","metadata":{"name":"flip","namespace":"default"},"spec":{"clusterIP":"banana","ports":[{"port":80}]}})");
  api_->ctl("compact");
  const uint64_t lists = s->stats().services.lists;
  api_->ctl("fault", R"({"fail": 0})");
  for (int i = 0; i < 200 && s->stats().services.lists < lists + 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_GE(s->stats().services.lists, lists + 1);
  EXPECT_TRUE(eventually(*s, [&](const LoadResult& r) {
    for (const auto& e : r.errors)
      if (e.object == "Service default/flip") return true;
    return false;
  }));
  EXPECT_TRUE(has(s->load(), "10.96.0.202"));
  // Deleting it for real still removes it.
  api_->ctl("delete", R"({"resource":"services","namespace":"default","name":"flip"})");
  EXPECT_TRUE(eventually(*s, [&](const LoadResult& r) { return !has(r, "10.96.0.202"); }));
}

TEST_F(KubeSourceTest, NotReadyWhileTheApiFails) {
  api_->ctl("fault", R"({"fail": 1000})");
  auto s = source(api_->kubeconfig(ca_data(), "    token: sekret\n"));
  EXPECT_FALSE(s->wait_ready(600));
  api_->ctl("fault", R"({"fail": 0})");
  EXPECT_TRUE(s->wait_ready(5000));
}

TEST(KubeConfig, Errors) {
  std::string err;
  EXPECT_FALSE(load_kubeconfig("/nonexistent/kubeconfig", &err));
  EXPECT_NE(err.find("/nonexistent/kubeconfig"), std::string::npos);
  const std::string p = fs::temp_directory_path() / ("vipd-kc-" + std::to_string(getpid()));
  std::ofstream(p) << "apiVersion: v1\nkind: Config\ncurrent-context: missing\ncontexts: []\n";
  EXPECT_FALSE(load_kubeconfig(p, &err));
  EXPECT_NE(err.find("context 'missing' not found"), std::string::npos) << err;
  fs::remove(p);
}

// The files a --user must still be able to read (cmd/vipd.cc checks them
// after the drop): token, CA, certificate and key files, resolved against the
// kubeconfig's directory; embedded *-data fields are no files.
TEST(KubeConfig, RuntimeFiles) {
  const fs::path dir = fs::temp_directory_path() / ("vipd-kc-rt-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string p = dir / "kubeconfig";
  const auto write = [&](const std::string& cluster, const std::string& user) {
    std::ofstream(p) << "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
                        "contexts:\n- name: c\n  context: {cluster: k, user: u}\n"
                        "clusters:\n- name: k\n  cluster:\n    server: https://127.0.0.1:6443\n" << cluster
                     << "users:\n- name: u\n  user:\n" << user;
  };
  write("    certificate-authority: pki/ca.crt\n",
        "    tokenFile: /run/tok\n    client-certificate: pki/c.crt\n    client-key: pki/c.key\n");
  std::string err;
  auto cfg = load_kubeconfig(p, &err);
  ASSERT_TRUE(cfg) << err;
  auto files = runtime_files(*cfg);
  ASSERT_EQ(files.size(), 4u);
  EXPECT_EQ(files[0].second, "/run/tok");
  EXPECT_NE(files[0].first.find("token"), std::string::npos) << files[0].first;
  EXPECT_NE(files[0].first.find(p), std::string::npos) << "names the kubeconfig: " << files[0].first;
  EXPECT_EQ(files[1].second, (dir / "pki/ca.crt").string());
  EXPECT_EQ(files[2].second, (dir / "pki/c.crt").string());
  EXPECT_EQ(files[3].second, (dir / "pki/c.key").string());
  // Embedded data: nothing to read later (a static token is no file either).
  write("    certificate-authority-data: " + b64("CA") + "\n",
        "    token: sekret\n    client-certificate-data: " + b64("C") +
            "\n    client-key-data: " + b64("K") + "\n");
  cfg = load_kubeconfig(p, &err);
  ASSERT_TRUE(cfg) << err;
  EXPECT_TRUE(runtime_files(*cfg).empty());
  fs::remove_all(dir);
}

// Both sources build with these options: the full-NAT local addresses are
// reserved in dpdk mode with fnat, and nowhere else.
TEST(KubeConfig, BuildOptionsReserveTheFullNatLocalAddresses) {
  config::Options opt;
  opt.mode = config::Mode::kDpdk;
  opt.forward_method = config::ForwardMethod::kFnat;
  opt.fnat_local_addrs = {0x0a000064, 0x0a000065};
  EXPECT_EQ(build_options(opt).reserved_addrs, (std::vector<IpAddr>{0x0a000064u, 0x0a000065u}));
  opt.forward_method = config::ForwardMethod::kNat;
  EXPECT_TRUE(build_options(opt).reserved_addrs.empty());
  opt.forward_method = config::ForwardMethod::kFnat;
  opt.mode = config::Mode::kIptables;
  EXPECT_TRUE(build_options(opt).reserved_addrs.empty());
}

// A kubeconfig with an http:// server and a bearer token: the token would
// travel in clear. Refused at start (make_source) unless
// --api-allow-insecure-token, and never sent by the client without it.
TEST(KubeConfig, TokenOverPlainHttpIsRefusedUnlessAllowed) {
  const fs::path dir = fs::temp_directory_path() / ("vipd-kc-http-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string p = dir / "kubeconfig";
  const auto write = [&](const std::string& server, const std::string& user) {
    std::ofstream(p) << "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
                        "contexts:\n- name: c\n  context: {cluster: k, user: u}\n"
                        "clusters:\n- name: k\n  cluster:\n    server: " << server << "\n"
                     << "users:\n- name: u\n  user:\n" << user;
  };
  config::Options opt;
  opt.source = config::SourceKind::kKubernetes;
  opt.kubeconfig = p;
  std::string err;
  for (const char* user : {"    token: sekret\n", "    tokenFile: /run/tok\n"}) {
    for (const char* server : {"http://127.0.0.1:1", "HTTP://127.0.0.1:1"}) {
      SCOPED_TRACE(std::string(server) + " " + user);
      write(server, user);
      err.clear();
      EXPECT_EQ(make_source(opt, &err), nullptr);
      EXPECT_NE(err.find("plain http"), std::string::npos) << err;
      EXPECT_NE(err.find("--api-allow-insecure-token"), std::string::npos) << err;
      auto cfg = load_kubeconfig(p, &err);
      ASSERT_TRUE(cfg) << err;
      EXPECT_FALSE(check_transport(*cfg, &err));
      cfg->allow_insecure_token = true;
      ::testing::internal::CaptureStderr();
      EXPECT_TRUE(check_transport(*cfg, &err));
      EXPECT_NE(::testing::internal::GetCapturedStderr().find("warn: kube: --api-allow-insecure-token"),
                std::string::npos);
    }
  }
  // No token (client certificates, or none): plain http is the user's business.
  write("http://127.0.0.1:1", "    client-certificate: c.crt\n");
  auto cfg = load_kubeconfig(p, &err);
  ASSERT_TRUE(cfg) << err;
  EXPECT_TRUE(check_transport(*cfg, &err)) << err;
  // The client itself never puts the token on a plain http request.
  ClientConfig c;
  c.server = "http://127.0.0.1:1";
  c.token = "sekret";
  ApiClient api(c);
  std::atomic<bool> stop{false};
  std::string body;
  HttpResult r = api.get("/api/v1/services", &body, stop, 5);
  EXPECT_NE(r.error.find("refusing to send the bearer token"), std::string::npos) << r.error;
  fs::remove_all(dir);
}

TEST(KubeConfig, InsecureSkipTlsVerifyWarnsAtEveryStart) {
  ClientConfig c;
  c.server = "https://127.0.0.1:6443";
  c.origin = "kubeconfig /x (context c)";
  c.token = "sekret";
  std::string err;
  ::testing::internal::CaptureStderr();
  EXPECT_TRUE(check_transport(c, &err));
  EXPECT_EQ(::testing::internal::GetCapturedStderr().find("TLS verification is OFF"), std::string::npos);
  c.insecure = true;
  for (int start = 0; start < 2; ++start) {
    ::testing::internal::CaptureStderr();
    EXPECT_TRUE(check_transport(c, &err));
    const std::string out = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(out.find("vipd warn: kube: TLS verification is OFF for https://127.0.0.1:6443"), std::string::npos)
        << out;
  }
}

// libcurl takes its proxy from the environment (docs/security.md "Kubernetes
// API transport"): HTTPS_PROXY sends an https:// request as CONNECT through the
// proxy (TLS stays end to end), NO_PROXY bypasses it.
TEST(KubeConfig, HttpsProxyAndNoProxyAreHonoured) {
  const int ls = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(ls, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(listen(ls, 4), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(getsockname(ls, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const std::string proxy = "http://127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  for (const char* v : {"https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"}) unsetenv(v);
  ClientConfig c;
  c.server = "https://127.0.0.2:1";  // nothing listens there: only the proxy answers
  c.token = "sekret";
  ApiClient api(c);
  std::atomic<bool> stop{false};
  std::string body;

  setenv("HTTPS_PROXY", proxy.c_str(), 1);
  std::string request;
  std::thread proxy_side([&] {
    pollfd p{ls, POLLIN, 0};
    if (poll(&p, 1, 30000) != 1) return;
    const int conn = accept(ls, nullptr, nullptr);
    if (conn < 0) return;
    char buf[1024];
    while (request.find("\r\n\r\n") == std::string::npos) {
      pollfd q{conn, POLLIN, 0};
      if (poll(&q, 1, 30000) != 1) break;
      const ssize_t n = read(conn, buf, sizeof buf);
      if (n <= 0) break;
      request.append(buf, static_cast<size_t>(n));
    }
    close(conn);  // no answer: the request fails
  });
  HttpResult r = api.get("/api/v1/services", &body, stop, 30);
  proxy_side.join();
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(request.rfind("CONNECT 127.0.0.2:1 HTTP/1.1\r\n", 0), 0u) << request;
  EXPECT_EQ(request.find("Authorization"), std::string::npos) << "the token stays inside the tunnel";

  setenv("NO_PROXY", "127.0.0.2", 1);
  r = api.get("/api/v1/services", &body, stop, 30);
  EXPECT_FALSE(r.ok());
  pollfd p{ls, POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 0), 0) << "NO_PROXY: the proxy was not asked";
  unsetenv("HTTPS_PROXY");
  unsetenv("NO_PROXY");
  close(ls);
}

TEST(KubeConfig, LabelSelector) {
  EXPECT_EQ(proxy_label_selector(""), "!service.kubernetes.io/headless,!service.kubernetes.io/service-proxy-name");
  EXPECT_EQ(proxy_label_selector("vipd"), "service.kubernetes.io/service-proxy-name=vipd");
}

}  // namespace
}  // namespace vipd::cp::kube
