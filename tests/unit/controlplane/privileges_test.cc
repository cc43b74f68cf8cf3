// common/privileges: parsing /proc status files, user lookup, and the drop
// itself reaching every thread (in a forked child; needs root).
#include "common/privileges.h"

#include <gtest/gtest.h>
#include <grp.h>
#include <pwd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <thread>
#include <vector>

namespace vipd {
namespace {

const char* kStatus =
    "Name:\trte-worker-1\n"
    "Umask:\t0022\n"
    "State:\tR (running)\n"
    "Tgid:\t4242\n"
    "Pid:\t4245\n"
    "Uid:\t65534\t65534\t65534\t65534\n"
    "Gid:\t65534\t65534\t65534\t65534\n"
    "Groups:\t65534 \n"
    "CapInh:\t0000000000000000\n"
    "CapPrm:\t0000000000000000\n"
    "CapEff:\t0000000000000000\n"
    "CapBnd:\t000001ffffffffff\n"
    "CapAmb:\t0000000000000000\n"
    "NoNewPrivs:\t1\n";

TEST(Privileges, ParsesAThreadStatus) {
  ThreadCredentials c;
  ASSERT_TRUE(parse_thread_status(kStatus, &c));
  EXPECT_EQ(c.name, "rte-worker-1");
  EXPECT_EQ(c.tid, 4245);
  EXPECT_EQ(c.uid[0], 65534u);
  EXPECT_EQ(c.uid[3], 65534u);
  EXPECT_EQ(c.gid[1], 65534u);
  EXPECT_EQ(c.groups, std::vector<gid_t>{65534});
  EXPECT_EQ(c.no_new_privs, 1);
  EXPECT_FALSE(c.privileged());
}

TEST(Privileges, AnyRootIdOrCapabilityIsPrivileged) {
  std::string s = kStatus;
  ThreadCredentials c;
  // The saved uid alone is enough to get root back.
  std::string saved = s;
  saved.replace(saved.find("Uid:\t65534\t65534\t65534"), 22, "Uid:\t65534\t65534\t0\t");
  ASSERT_TRUE(parse_thread_status(saved, &c));
  EXPECT_TRUE(c.privileged());
  std::string eff = s;
  eff.replace(eff.find("CapEff:\t0000000000000000"), 24, "CapEff:\t0000000000001000");
  ASSERT_TRUE(parse_thread_status(eff, &c));
  EXPECT_EQ(c.cap_eff, 0x1000u);
  EXPECT_TRUE(c.privileged());
  std::string amb = s;
  amb.replace(amb.find("CapAmb:\t0000000000000000"), 24, "CapAmb:\t0000000000000400");
  ASSERT_TRUE(parse_thread_status(amb, &c));
  EXPECT_TRUE(c.privileged());
}

// Group 0 (root) as any of the four gids or as a supplementary group keeps
// write access to root-group files: privileged too.
TEST(Privileges, RootGroupIsPrivileged) {
  ThreadCredentials c;
  std::string gid = kStatus;
  gid.replace(gid.find("Gid:\t65534\t65534\t65534\t65534"), 26, "Gid:\t65534\t0\t65534\t65534");
  ASSERT_TRUE(parse_thread_status(gid, &c));
  EXPECT_TRUE(c.privileged());
  std::string groups = kStatus;
  groups.replace(groups.find("Groups:\t65534"), 13, "Groups:\t65534 0");
  ASSERT_TRUE(parse_thread_status(groups, &c));
  EXPECT_EQ(c.groups, (std::vector<gid_t>{65534, 0}));
  EXPECT_TRUE(c.privileged());
}

TEST(Privileges, PrivilegedGroups) {
  const auto priv = privileged_gids();
  ASSERT_TRUE(priv.count(0));
  EXPECT_EQ(priv.at(0), "root");
  if (group* g = getgrnam("disk")) {
    ASSERT_TRUE(priv.count(g->gr_gid));
    EXPECT_EQ(priv.at(g->gr_gid), "disk");
  }
  const std::map<gid_t, std::string> p = {{0, "root"}, {6, "disk"}, {42, "shadow"}};
  EXPECT_EQ(privileged_group_in(1000, {1000, 100}, p), "");
  EXPECT_EQ(privileged_group_in(0, {1000}, p), "primary group 0 (root)");
  EXPECT_EQ(privileged_group_in(1000, {1000, 6}, p), "supplementary group 6 (disk)");
  EXPECT_EQ(privileged_group_in(1000, {1000, 42, 0}, p), "supplementary group 42 (shadow)");
  for (const char* n : {"disk", "shadow", "sudo"})
    EXPECT_NE(std::find(privileged_group_names().begin(), privileged_group_names().end(), n),
              privileged_group_names().end());
}

TEST(Privileges, IncompleteOrGarbageStatusIsRejected) {
  ThreadCredentials c;
  EXPECT_FALSE(parse_thread_status("", &c));
  EXPECT_FALSE(parse_thread_status("Name:\tx\nUid:\t1\t1\t1\t1\n", &c));
  std::string bad = kStatus;
  bad.replace(bad.find("CapEff:\t0000000000000000"), 24, "CapEff:\tzz");
  EXPECT_FALSE(parse_thread_status(bad, &c));
}

TEST(Privileges, LookupUser) {
  std::string err;
  EXPECT_FALSE(lookup_user("no-such-user-vipd-test", &err));
  EXPECT_EQ(err, "no such user");
  EXPECT_FALSE(lookup_user("root", &err));
  EXPECT_NE(err.find("is uid 0"), std::string::npos) << err;
  EXPECT_FALSE(lookup_user("", &err));
  if (getpwnam("nobody") == nullptr) GTEST_SKIP() << "no user 'nobody' here";
  auto u = lookup_user("nobody", &err);
  ASSERT_TRUE(u) << err;
  EXPECT_EQ(u->uid, getpwnam("nobody")->pw_uid);
  EXPECT_EQ(u->gid, getpwnam("nobody")->pw_gid);
  EXPECT_NE(std::find(u->groups.begin(), u->groups.end(), u->gid), u->groups.end());
}

// A user whose primary group is 0 or who is in a privileged group is refused
// like root. Such users exist only where the test created them
// (tests/integration/privdrop_test.sh); here: any on this machine.
TEST(Privileges, LookupUserRefusesPrivilegedGroups) {
  const auto priv = privileged_gids();
  int checked = 0;
  setpwent();
  std::vector<std::string> names;
  while (passwd* pw = getpwent())
    if (pw->pw_uid != 0) names.push_back(pw->pw_name);
  endpwent();
  for (const auto& n : names) {
    passwd* pw = getpwnam(n.c_str());
    if (!pw) continue;
    int count = 256;
    std::vector<gid_t> groups(count);
    if (getgrouplist(n.c_str(), pw->pw_gid, groups.data(), &count) < 0) continue;
    groups.resize(count);
    const std::string bad = privileged_group_in(pw->pw_gid, groups, priv);
    std::string err;
    const auto u = lookup_user(n, &err);
    if (bad.empty()) {
      EXPECT_TRUE(u) << n << ": " << err;
    } else {
      ++checked;
      EXPECT_FALSE(u) << n << " is in " << bad;
      EXPECT_NE(err.find("is in " + bad + ", a privileged group"), std::string::npos) << err;
    }
  }
  if (checked == 0) GTEST_SKIP() << "no user in a privileged group here (other than root)";
}

TEST(Privileges, ThisProcessIsListed) {
  std::string err;
  auto t = thread_credentials(&err);
  ASSERT_FALSE(t.empty()) << err;
  bool self = false;
  for (const auto& c : t) self |= c.tid == static_cast<int>(syscall(SYS_gettid));
  EXPECT_TRUE(self);
}

// In a forked child: start threads first (as DPDK does before vipd can drop
// anything), then drop with `how`, then let every thread report whether it is
// still privileged. Returns the number of privileged threads, or -1 when the
// child failed before counting.
enum class How { kDropTo, kRawSyscallInOneThread, kNothing };
int privileged_threads_after(How how) {
  pid_t pid = fork();
  if (pid == 0) {
    std::string err;
    if (how == How::kDropTo && !prepare_drop(&err)) _exit(200);
    std::atomic<bool> dropped{false};
    std::atomic<int> privileged{0};
    std::vector<std::thread> ts;
    for (int i = 0; i < 3; ++i)
      ts.emplace_back([&] {
        while (!dropped.load()) std::this_thread::yield();
      });
    auto u = lookup_user("nobody", &err);
    if (!u) _exit(201);
    if (how == How::kDropTo && !drop_to(*u, &err)) _exit(202);
    // The syscall itself changes only the calling thread: what a drop that
    // bypasses glibc's broadcast (or capset in one thread) would do.
    // (Groups first: a thread left in group 0 counts as privileged too.)
    if (how == How::kRawSyscallInOneThread) {
      const gid_t g = u->gid;
      if (syscall(SYS_setgroups, 1, &g) != 0 || syscall(SYS_setresgid, g, g, g) != 0 ||
          syscall(SYS_setresuid, u->uid, u->uid, u->uid) != 0)
        _exit(203);
    }
    for (const auto& c : thread_credentials(&err))
      if (c.privileged()) privileged.fetch_add(1);
    dropped.store(true);
    for (auto& t : ts) t.join();
    _exit(std::min(privileged.load(), 100));
  }
  int st = 0;
  if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) > 100) return -1;
  return WEXITSTATUS(st);
}

TEST(Privileges, DropReachesEveryThread) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (the drop starts from uid 0)";
  if (getpwnam("nobody") == nullptr) GTEST_SKIP() << "no user 'nobody' here";
  // Controls: without a drop all 4 threads are root; a setresuid that only
  // reaches the calling thread leaves the 3 others root, and the check sees it.
  EXPECT_EQ(privileged_threads_after(How::kNothing), 4);
  EXPECT_EQ(privileged_threads_after(How::kRawSyscallInOneThread), 3);
  EXPECT_EQ(privileged_threads_after(How::kDropTo), 0);
}

}  // namespace
}  // namespace vipd
