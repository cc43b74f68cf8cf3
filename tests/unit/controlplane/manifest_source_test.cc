// Thread: test main thread. Tests for controlplane/sources/manifest_source.cc,
// including the dry-run golden files under tests/data (run from the source root).
#include "controlplane/sources/manifest_source.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <vector>

#include "tests/unit/controlplane/test_util.h"

namespace vipd::cp {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using vipd::testing::TempDir;

const char* kService = R"(apiVersion: v1
kind: Service
metadata: {name: db, namespace: default}
spec:
  clusterIP: 10.96.0.100
  ports: [{name: http, port: 8080}]
)";

std::string slice(const std::string& ip) {
  return "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
         "metadata: {name: db-1, labels: {kubernetes.io/service-name: db}}\n"
         "addressType: IPv4\nports: [{name: http, port: 8080}]\n"
         "endpoints: [{addresses: [" + ip + "]}]\n";
}

std::string manifest(const std::string& ip) { return std::string(kService) + "---\n" + slice(ip); }

// The backend addresses of default/db:http, or "none".
std::string db_backends(const LoadResult& r) {
  for (const auto& [k, s] : r.table.services) {
    if (s.name != "default/db:http") continue;
    std::string out;
    for (const auto& b : s.backends) out += (out.empty() ? "" : ",") + b.ip.to_string();
    return out;
  }
  return "none";
}

// Polls wait() until it reports a change or `ms` pass.
bool changed_within(ManifestSource& src, int ms) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < end)
    if (src.wait(50)) return true;
  return false;
}

TEST(ManifestGolden, DryRunOutputMatches) {
  const std::string root = "tests/data";
  ASSERT_TRUE(fs::is_directory(root + "/golden")) << "run from the source root";
  int cases = 0;
  for (const auto& g : fs::directory_iterator(root + "/golden")) {
    if (!g.is_regular_file()) continue;  // golden/iptables/: the iptables mode's payloads
    const std::string name = g.path().stem().string();
    SCOPED_TRACE(name);
    ManifestSource src(root + "/manifests/" + name, Scheduler::kRr);
    const LoadResult r = src.load();
    for (const auto& e : r.errors) ADD_FAILURE() << e.to_string();
    std::string want = vipd::testing::read_file(g.path().string());
    while (!want.empty() && (want.back() == '\n' || want.back() == '\r')) want.pop_back();
    EXPECT_EQ(to_dry_run_json(r.table), want);
    ++cases;
  }
  EXPECT_GE(cases, 7);
}

TEST(ManifestSource, ManifestNames) {
  for (const char* n : {"a.yaml", "b.yml", "c.json", "D.YAML", "svc.v2.yaml"})
    EXPECT_TRUE(ManifestSource::is_manifest_name(n)) << n;
  for (const char* n : {".hidden.yaml", "a.yaml~", ".a.yaml.swp", "a.yaml.swp", "README", "#a.yaml#",
                        "a.yaml.tmp", "..data", ""})
    EXPECT_FALSE(ManifestSource::is_manifest_name(n)) << n;
}

TEST(ManifestSource, ReadsOnlyManifestFilesSorted) {
  TempDir d;
  d.write("b.yaml", slice("10.0.0.1"));
  d.write("a.yml", kService);
  d.write(".hidden.yaml", "this: [is broken");
  d.write("a.yml~", "this: [is broken");
  d.write("notes.txt", "this: [is broken");
  fs::create_directory(d.file("sub.yaml"));
  fs::create_directory(d.file("nested"));
  d.write("nested/x.yaml", "this: [is broken");
  ManifestSource src(d.path(), Scheduler::kRr);
  const LoadResult r = src.load();
  EXPECT_TRUE(r.errors.empty()) << r.errors[0].to_string();
  EXPECT_EQ(db_backends(r), "10.0.0.1");
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_EQ(r.notes[0].to_string(), "sub.yaml: not a regular file; skipped");
}

TEST(ManifestSource, MultiDocumentFileAndList) {
  TempDir d;
  d.write("all.yaml", std::string(kService) + "---\napiVersion: v1\nkind: List\nitems:\n- " +
                          "{apiVersion: discovery.k8s.io/v1, kind: EndpointSlice, metadata: {name: s, labels: "
                          "{kubernetes.io/service-name: db}}, addressType: IPv4, ports: [{name: http, port: 1}],"
                          " endpoints: [{addresses: [10.0.0.5]}, {addresses: [10.0.0.4]}]}\n---\n");
  ManifestSource src(d.path(), Scheduler::kWrr);
  const LoadResult r = src.load();
  EXPECT_TRUE(r.errors.empty());
  EXPECT_EQ(db_backends(r), "10.0.0.4,10.0.0.5");
  EXPECT_EQ(r.table.services.begin()->second.scheduler, Scheduler::kWrr);
}

TEST(ManifestSource, BrokenFileKeepsLastGoodVersion) {
  TempDir d;
  d.write("db.yaml", manifest("10.0.0.1"));
  d.write("other.yaml", "apiVersion: v1\nkind: Service\nmetadata: {name: o}\n"
                        "spec: {clusterIP: 10.96.0.2, ports: [{port: 1}]}\n");
  ManifestSource src(d.path(), Scheduler::kRr);
  LoadResult r = src.load();
  ASSERT_TRUE(r.errors.empty());
  EXPECT_EQ(db_backends(r), "10.0.0.1");
  EXPECT_EQ(r.table.services.size(), 2u);

  // YAML syntax error: reported with file and position; old objects stay.
  d.write("db.yaml", std::string(kService) + "---\nkind: [unclosed\n");
  r = src.load();
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].file, "db.yaml");
  EXPECT_EQ(r.errors[0].object, "");
  EXPECT_THAT(r.errors[0].reason, HasSubstr("YAML syntax error at line"));
  EXPECT_EQ(db_backends(r), "10.0.0.1");
  EXPECT_EQ(r.table.services.size(), 2u);
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_EQ(r.notes[0].to_string(), "db.yaml: has errors; its last good version stays in force");

  // An invalid object: file, object and reason; the whole file keeps its last good version.
  std::string bad = manifest("10.0.0.9");
  bad.replace(bad.find("port: 8080"), 10, "port: 70000");
  d.write("db.yaml", bad);
  r = src.load();
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].to_string(),
            "db.yaml: Service default/db: spec.ports[0].port: port 70000 is out of range 1..65535");
  EXPECT_EQ(db_backends(r), "10.0.0.1");

  // Fixed: the new version is used and the errors are gone.
  d.write("db.yaml", manifest("10.0.0.9"));
  r = src.load();
  EXPECT_TRUE(r.errors.empty());
  EXPECT_TRUE(r.notes.empty());
  EXPECT_EQ(db_backends(r), "10.0.0.9");

  // Deleting a file deletes its objects.
  fs::remove(d.file("db.yaml"));
  r = src.load();
  EXPECT_EQ(db_backends(r), "none");
  EXPECT_EQ(r.table.services.size(), 1u);
}

TEST(ManifestSource, BrokenFileAtStartContributesNothing) {
  TempDir d;
  d.write("a.yaml", std::string(kService) + "---\nkind: Service\nmetadata: {name: x}\n");
  d.write("b.yaml", "apiVersion: v1\nkind: Service\nmetadata: {name: o}\n"
                    "spec: {clusterIP: 10.96.0.2, ports: [{port: 1}]}\n");
  ManifestSource src(d.path(), Scheduler::kRr);
  const LoadResult r = src.load();
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].file, "a.yaml");
  EXPECT_EQ(r.errors[0].object, "Service default/x");
  EXPECT_THAT(r.errors[0].reason, HasSubstr("apiVersion"));
  EXPECT_EQ(r.table.services.size(), 1u);
  EXPECT_EQ(db_backends(r), "none");
}

TEST(ManifestSource, DuplicateObjectsAcrossFiles) {
  TempDir d;
  d.write("a.yaml", manifest("10.0.0.1"));
  d.write("b.yaml", manifest("10.0.0.2"));
  ManifestSource src(d.path(), Scheduler::kRr);
  const LoadResult r = src.load();
  ASSERT_EQ(r.errors.size(), 2u);
  EXPECT_EQ(r.errors[0].to_string(),
            "b.yaml: EndpointSlice default/db-1: defined again; the first definition (in a.yaml) is used");
  EXPECT_EQ(r.errors[1].file, "b.yaml");
  EXPECT_EQ(db_backends(r), "10.0.0.1");
}

TEST(ManifestSource, UnreadableDirectoryKeepsState) {
  TempDir d;
  const std::string dir = d.path() + "/m";
  fs::create_directory(dir);
  {
    std::ofstream(dir + "/db.yaml") << manifest("10.0.0.1");
  }
  ManifestSource src(dir, Scheduler::kRr);
  EXPECT_EQ(db_backends(src.load()), "10.0.0.1");
  fs::remove_all(dir);
  const LoadResult r = src.load();
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].file, dir);
  EXPECT_THAT(r.errors[0].reason, HasSubstr("cannot read directory"));
  EXPECT_EQ(db_backends(r), "10.0.0.1");
}

// Peak resident memory of this process so far, in MiB.
long peak_rss_mib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024;
}

// An alias bomb: a 1,000-address anchored list and then about 400 KB of aliases
// to it. Expanded, that is tens of millions of addresses (gigabytes, minutes of
// CPU, the sync loop stuck); refused, it is a few hundred KB of text read once.
TEST(ManifestSource, AliasBombIsRefusedBeforeExpansion) {
  TempDir d;
  d.write("db.yaml", manifest("10.0.0.1"));
  d.write("other.yaml", "apiVersion: v1\nkind: Service\nmetadata: {name: o}\n"
                        "spec: {clusterIP: 10.96.0.2, ports: [{port: 1}]}\n");
  ManifestSource src(d.path(), Scheduler::kRr);
  LoadResult r = src.load();
  ASSERT_TRUE(r.errors.empty());
  ASSERT_EQ(db_backends(r), "10.0.0.1");

  std::string bomb = std::string(kService) +
                     "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
                     "metadata: {name: db-1, labels: {kubernetes.io/service-name: db}}\n"
                     "addressType: IPv4\nports: [{name: http, port: 8080}]\nendpoints:\n"
                     "- addresses: &a [";
  for (int i = 0; i < 1000; ++i)
    bomb += (i ? ", 10.1." : "10.1.") + std::to_string(i / 250) + "." + std::to_string(i % 250 + 1);
  bomb += "]\n";
  while (bomb.size() < 400 * 1024) bomb += "- addresses: *a\n";
  d.write("db.yaml", bomb);
  const long before = peak_rss_mib();
  r = src.load();
  const long grown = peak_rss_mib() - before;
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].file, "db.yaml");
  EXPECT_EQ(r.errors[0].reason,
            "YAML alias at line 15, column 14: YAML aliases (*name) are not allowed in manifests: "
            "each alias repeats its anchored node, so a small file can expand without bound; "
            "file refused");
  // The last good version of the file stays, the other file is untouched.
  EXPECT_EQ(db_backends(r), "10.0.0.1");
  EXPECT_EQ(r.table.services.size(), 2u);
  // Nothing was expanded: the peak grew by far less than one expansion would take.
  EXPECT_LT(grown, 200) << "MiB";
}

TEST(ManifestSource, AnyAliasIsRefused) {
  EXPECT_THROW(ManifestSource::load_documents("a: &x 1\nb: *x\n"), ManifestSource::AliasRefused);
  EXPECT_THROW(ManifestSource::load_documents("a: 1\n---\nb: [&y 1, *y]\n"), YAML::ParserException);
  // An anchor that nothing refers to repeats nothing.
  EXPECT_EQ(ManifestSource::load_documents("a: &x 1\n").size(), 1u);
}

// A validation error is one error naming file, object and rule; the file keeps
// its last good version, the other files are applied.
TEST(ManifestSource, InvalidObjectKeepsLastGoodVersion) {
  TempDir d;
  d.write("db.yaml", manifest("10.0.0.1"));
  ManifestSource src(d.path(), Scheduler::kRr);
  ASSERT_EQ(db_backends(src.load()), "10.0.0.1");
  d.write("db.yaml", manifest("169.254.169.254"));
  d.write("other.yaml", "apiVersion: v1\nkind: Service\nmetadata: {name: \"o\\e[31m\"}\n"
                        "spec: {clusterIP: 10.96.0.2, ports: [{port: 1}]}\n---\n"
                        "apiVersion: v1\nkind: Service\nmetadata: {name: p}\n"
                        "spec: {clusterIP: 10.96.0.3, ports: [{port: \"1\"}]}\n");
  const LoadResult r = src.load();
  ASSERT_EQ(r.errors.size(), 3u);
  EXPECT_EQ(r.errors[0].to_string(),
            "db.yaml: EndpointSlice default/db-1: endpoints[0].addresses[0]: '169.254.169.254' is a "
            "link-local address, which Kubernetes refuses");
  EXPECT_EQ(r.errors[1].file, "other.yaml");
  EXPECT_EQ(r.errors[1].object, "Service default/o\\x1b[31m");
  EXPECT_EQ(r.errors[2].to_string(),
            "other.yaml: Service default/p: spec.ports[0].port: expected an integer, got the string '1'");
  EXPECT_EQ(db_backends(r), "10.0.0.1");
  EXPECT_TRUE(r.table.services.size() == 1u);
}

TEST(ManifestSource, DanglingSymlinkIsAnError) {
  TempDir d;
  fs::create_symlink(d.file("missing"), d.file("x.yaml"));
  ManifestSource src(d.path(), Scheduler::kRr);
  const LoadResult r = src.load();
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].to_string(), "x.yaml: dangling symbolic link");
}

TEST(ManifestWatch, SeesWritesRenamesAndDeletes) {
  TempDir d;
  ManifestSource src(d.path(), Scheduler::kRr);
  ASSERT_GE(src.fd(), 0);
  EXPECT_FALSE(src.wait(0));
  EXPECT_EQ(src.load().newest_change_unix_ns, 0);

  const auto before = std::chrono::system_clock::now().time_since_epoch();
  d.write("db.yaml", manifest("10.0.0.1"));
  EXPECT_TRUE(changed_within(src, 2000));
  const int64_t t = src.newest_change_unix_ns();
  EXPECT_GE(t, std::chrono::duration_cast<std::chrono::nanoseconds>(before).count() - 1'000'000'000);
  LoadResult r = src.load();
  EXPECT_EQ(r.newest_change_unix_ns, t);
  EXPECT_EQ(db_backends(r), "10.0.0.1");
  EXPECT_EQ(src.newest_change_unix_ns(), 0);

  // Editor leftovers and other files are not changes.
  d.write(".db.yaml.swp", "x");
  d.write("db.yaml~", "x");
  d.write("README", "x");
  EXPECT_FALSE(src.wait(100));

  // The atomic-write pattern: write a temporary name, rename over the file.
  d.write(".tmp-db", manifest("10.0.0.2"));
  EXPECT_FALSE(src.wait(50));
  fs::rename(d.file(".tmp-db"), d.file("db.yaml"));
  EXPECT_TRUE(changed_within(src, 2000));
  EXPECT_EQ(db_backends(src.load()), "10.0.0.2");

  fs::remove(d.file("db.yaml"));
  EXPECT_TRUE(changed_within(src, 2000));
  EXPECT_EQ(db_backends(src.load()), "none");
}

TEST(ManifestWatch, RelativeDotDirectory) {
  TempDir d;
  const auto cwd = fs::current_path();
  fs::current_path(d.path());
  {
    ManifestSource src(".", Scheduler::kRr);
    EXPECT_EQ(db_backends(src.load()), "none");
    d.write("db.yaml", manifest("10.0.0.1"));
    EXPECT_TRUE(changed_within(src, 2000));
    EXPECT_EQ(db_backends(src.load()), "10.0.0.1");
  }
  fs::current_path(cwd);
}

TEST(ManifestWatch, DirectoryRenameSwap) {
  TempDir p;
  const std::string dir = p.path() + "/manifests";
  fs::create_directory(dir);
  std::ofstream(dir + "/db.yaml") << manifest("10.0.0.1");
  ManifestSource src(dir, Scheduler::kRr);
  EXPECT_EQ(db_backends(src.load()), "10.0.0.1");

  fs::create_directory(p.path() + "/next");
  std::ofstream(p.path() + "/next/db.yaml") << manifest("10.0.0.2");
  while (src.wait(50)) {}  // the writes above were outside the directory
  fs::rename(dir, p.path() + "/old");
  fs::rename(p.path() + "/next", dir);
  EXPECT_TRUE(changed_within(src, 2000));
  while (src.wait(50)) {}
  EXPECT_EQ(db_backends(src.load()), "10.0.0.2");

  // The watch follows the new directory.
  std::ofstream(dir + "/db.yaml") << manifest("10.0.0.3");
  EXPECT_TRUE(changed_within(src, 2000));
  EXPECT_EQ(db_backends(src.load()), "10.0.0.3");
  // ...and no longer the old one.
  std::ofstream(p.path() + "/old/db.yaml") << manifest("10.0.0.4");
  EXPECT_FALSE(src.wait(100));
}

TEST(ManifestWatch, SymlinkSwap) {
  TempDir p;
  for (const char* v : {"v1", "v2"}) fs::create_directory(p.path() + "/" + v);
  std::ofstream(p.path() + "/v1/db.yaml") << manifest("10.0.0.1");
  std::ofstream(p.path() + "/v2/db.yaml") << manifest("10.0.0.2");
  fs::create_directory_symlink("v1", p.path() + "/current");
  ManifestSource src(p.path() + "/current/", Scheduler::kRr);
  EXPECT_EQ(db_backends(src.load()), "10.0.0.1");

  fs::create_directory_symlink("v2", p.path() + "/tmp-link");
  fs::rename(p.path() + "/tmp-link", p.path() + "/current");
  EXPECT_TRUE(changed_within(src, 2000));
  EXPECT_EQ(db_backends(src.load()), "10.0.0.2");
  std::ofstream(p.path() + "/v2/db.yaml") << manifest("10.0.0.3");
  EXPECT_TRUE(changed_within(src, 2000));
  EXPECT_EQ(db_backends(src.load()), "10.0.0.3");
}

// A Kubernetes ConfigMap volume: files are symlinks through "..data", which is
// swapped atomically to a new hidden version directory.
TEST(ManifestWatch, ConfigMapStyleSwap) {
  TempDir d;
  fs::create_directory(d.file("..v1"));
  d.write("..v1/db.yaml", manifest("10.0.0.1"));
  fs::create_directory_symlink("..v1", d.file("..data"));
  fs::create_symlink("..data/db.yaml", d.file("db.yaml"));
  ManifestSource src(d.path(), Scheduler::kRr);
  EXPECT_EQ(db_backends(src.load()), "10.0.0.1");

  fs::create_directory(d.file("..v2"));
  d.write("..v2/db.yaml", manifest("10.0.0.2"));
  fs::create_directory_symlink("..v2", d.file("..data_tmp"));
  fs::rename(d.file("..data_tmp"), d.file("..data"));
  EXPECT_TRUE(changed_within(src, 2000));
  const LoadResult r = src.load();
  EXPECT_TRUE(r.errors.empty());
  EXPECT_EQ(db_backends(r), "10.0.0.2");
}

TEST(ManifestWatch, DirectoryRemovedAndRecreated) {
  TempDir p;
  const std::string dir = p.path() + "/m";
  fs::create_directory(dir);
  std::ofstream(dir + "/db.yaml") << manifest("10.0.0.1");
  ManifestSource src(dir, Scheduler::kRr);
  EXPECT_EQ(db_backends(src.load()), "10.0.0.1");
  fs::remove_all(dir);
  EXPECT_TRUE(changed_within(src, 2000));
  LoadResult r = src.load();
  EXPECT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(db_backends(r), "10.0.0.1");  // last good state stays

  fs::create_directory(dir);
  std::ofstream(dir + "/db.yaml") << manifest("10.0.0.5");
  EXPECT_TRUE(changed_within(src, 2000));
  while (src.wait(50)) {}
  r = src.load();
  EXPECT_TRUE(r.errors.empty());
  EXPECT_EQ(db_backends(r), "10.0.0.5");
}

// Runs the process out of descriptors: lowers RLIMIT_NOFILE to a little above
// the highest open descriptor and fills every free one. release() (or the
// destructor) gives them back and restores the limit.
class DescriptorExhaustion {
 public:
  DescriptorExhaustion() {
    ::getrlimit(RLIMIT_NOFILE, &saved_);
    int highest = 0;
    for (const auto& e : fs::directory_iterator("/proc/self/fd")) highest = std::max(highest, std::stoi(e.path().filename()));
    base_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    rlimit low = saved_;
    low.rlim_cur = std::min<rlim_t>(saved_.rlim_cur, static_cast<rlim_t>(highest + 64));
    ::setrlimit(RLIMIT_NOFILE, &low);
    for (;;) {
      const int fd = ::fcntl(base_, F_DUPFD_CLOEXEC, 0);
      if (fd < 0) {
        exhausted_ = errno == EMFILE;
        break;
      }
      fds_.push_back(fd);
    }
  }
  ~DescriptorExhaustion() { release(); }
  void release() {
    for (int fd : fds_) ::close(fd);
    fds_.clear();
    if (base_ >= 0) ::close(base_);
    base_ = -1;
    ::setrlimit(RLIMIT_NOFILE, &saved_);
  }
  bool exhausted() const { return exhausted_; }

 private:
  rlimit saved_{};
  int base_ = -1;
  std::vector<int> fds_;
  bool exhausted_ = false;
};

// The regression: a change seen while descriptors ran out ("cannot read
// directory: Too many open files") was applied only at the next file event.
// Now the failed read is retried by itself once descriptors are back.
TEST(ManifestWatch, ReadFailureIsRetriedWithoutAnotherFileEvent) {
  TempDir p;
  const std::string dir = p.path() + "/m";
  fs::create_directory(dir);
  std::ofstream(dir + "/db.yaml") << manifest("10.0.0.1");
  std::ofstream(p.path() + "/next.yaml") << manifest("10.0.0.7");  // staged outside the directory
  ManifestSource src(dir, Scheduler::kRr);
  ASSERT_EQ(db_backends(src.load()), "10.0.0.1");
  ASSERT_FALSE(changed_within(src, 200));

  LoadResult failed;
  {
    DescriptorExhaustion ex;
    ASSERT_TRUE(ex.exhausted());
    ASSERT_EQ(::rename((p.path() + "/next.yaml").c_str(), (dir + "/db.yaml").c_str()), 0);  // needs no descriptor
    ASSERT_TRUE(changed_within(src, 5000));
    failed = src.load();
  }
  ASSERT_FALSE(failed.errors.empty());
  EXPECT_THAT(failed.errors[0].reason, HasSubstr("Too many open files"));
  EXPECT_EQ(db_backends(failed), "10.0.0.1");  // the last good state stays
  EXPECT_EQ(src.read_failures(), 1);
  EXPECT_EQ(src.retry_delay_ms(), ManifestSource::kRetryFirstMs);

  // No file event from here on: the source must ask for the retry itself.
  ASSERT_TRUE(changed_within(src, 30000));
  EXPECT_GT(src.newest_change_unix_ns(), 0);  // dated by the change the failed read was for
  const LoadResult r = src.load();
  EXPECT_TRUE(r.errors.empty());
  EXPECT_EQ(db_backends(r), "10.0.0.7");
  EXPECT_EQ(src.read_failures(), 0);
  EXPECT_FALSE(changed_within(src, 300));  // and no more retries
}

TEST(ManifestWatch, ReadRetriesBackOffTo5s) {
  TempDir p;
  const std::string dir = p.path() + "/m";
  fs::create_directory(dir);
  std::ofstream(dir + "/db.yaml") << manifest("10.0.0.1");
  ManifestSource src(dir, Scheduler::kRr);
  ASSERT_EQ(db_backends(src.load()), "10.0.0.1");
  fs::remove_all(dir);
  std::vector<int> delays;
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(db_backends(src.load()), "10.0.0.1");
    delays.push_back(src.retry_delay_ms());
  }
  EXPECT_EQ(delays, (std::vector<int>{100, 200, 400, 800, 1600, 3200, 5000, 5000}));
  EXPECT_EQ(src.read_failures(), 8);
  fs::create_directory(dir);
  std::ofstream(dir + "/db.yaml") << manifest("10.0.0.2");
  EXPECT_EQ(db_backends(src.load()), "10.0.0.2");
  EXPECT_EQ(src.read_failures(), 0);
  EXPECT_EQ(src.retry_delay_ms(), 0);
}

}  // namespace
}  // namespace vipd::cp
