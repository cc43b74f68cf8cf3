// Thread: test main thread. Tests for controlplane/backends/iptables/
// iptables_backend.cc and runner.cc against fake iptables commands (shell
// scripts written into a temporary directory): full sync at start, jump rules
// added once, partial syncs, no-op syncs, a failed iptables-restore reported
// with its stderr and followed by a full sync. Nothing touches the real netfilter.
#include "controlplane/backends/iptables/iptables_backend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "controlplane/backends/iptables/chain_names.h"
#include "controlplane/backends/iptables/runner.h"

namespace vipd::cp::ipt {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

size_t count_lines_with(const std::string& text, const std::string& needle) {
  size_t n = 0;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) n += l.find(needle) != std::string::npos;
  return n;
}

// A directory with fake iptables-restore / iptables-save / iptables scripts that
// log their arguments to DIR/calls and keep the "rules" they were given.
class FakeIptables {
 public:
  FakeIptables() {
    const char* base = getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/vipd-ipt-test-XXXXXX";
    dir_ = mkdtemp(tmpl.data()) ? tmpl : std::string();
    script("restore",
           "n=$(ls \"$D\"/payload.* 2>/dev/null | wc -l); cat > \"$D/payload.$n\"\n"
           "if [ -f \"$D/restore-fail\" ]; then echo 'iptables-restore: line 3 failed' >&2; exit 1; fi\n"
           "if [ -f \"$D/restore-hang\" ]; then sleep 20; fi\n");
    script("save", "cat \"$D/save-output\" 2>/dev/null; exit 0\n");
    // -C succeeds when the rule (arguments after -C) was inserted before.
    for (const char* t : {"iptables", "ip6tables"})
      script(t, std::string("R=\"$D/rules-") + t + "\"\n" +
                    "args=\"$*\"\n"
                    "case \"$args\" in\n"
                    "  *' -C '*) key=${args#*-C }; grep -qxF \"$key\" \"$R\" 2>/dev/null && exit 0; exit 1 ;;\n"
                    "  *' -I '*) key=${args#*-I }; chain=${key%% *}; rest=${key#* 1 }; echo \"$chain $rest\" >> \"$R\" ;;\n"
                    "esac\n");
    // IPv6: payloads to payload6.N; ip6tables-save prints save6-output (fails with save6-fail).
    script("restore6",
           "n=$(ls \"$D\"/payload6.* 2>/dev/null | wc -l); cat > \"$D/payload6.$n\"\n"
           "if [ -f \"$D/restore6-fail\" ]; then echo 'ip6tables-restore: line 2 failed' >&2; exit 1; fi\n");
    script("save6",
           "if [ -f \"$D/save6-fail\" ]; then echo 'ip6tables-save: no such table' >&2; exit 1; fi\n"
           "cat \"$D/save6-output\" 2>/dev/null; exit 0\n");
  }
  ~FakeIptables() {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  IptablesOptions options() const {
    IptablesOptions o;
    o.restore_cmd = dir_ + "/restore";
    o.save_cmd = dir_ + "/save";
    o.iptables_cmd = dir_ + "/iptables";
    o.restore6_cmd = dir_ + "/restore6";
    o.save6_cmd = dir_ + "/save6";
    o.ip6tables_cmd = dir_ + "/ip6tables";
    o.command_timeout_ms = 5000;
    return o;
  }
  std::string calls() const { return slurp(dir_ + "/calls"); }
  std::string payload(int n) const { return slurp(dir_ + "/payload." + std::to_string(n)); }
  std::string payload6(int n) const { return slurp(dir_ + "/payload6." + std::to_string(n)); }
  int payloads6() const {
    int n = 0;
    while (fs::exists(dir_ + "/payload6." + std::to_string(n))) ++n;
    return n;
  }
  int payloads() const {
    int n = 0;
    while (fs::exists(dir_ + "/payload." + std::to_string(n))) ++n;
    return n;
  }
  void touch(const std::string& name, const std::string& content = "") const {
    std::ofstream(dir_ + "/" + name) << content;
  }
  void remove(const std::string& name) const { fs::remove(dir_ + "/" + name); }
  void clear_calls() const { fs::remove(dir_ + "/calls"); }

 private:
  void script(const std::string& name, const std::string& body) const {
    const std::string p = dir_ + "/" + name;
    std::ofstream(p) << "#!/bin/sh\nD='" << dir_ << "'\necho \"" << name << "${*:+ $*}\" >> \"$D/calls\"\n" << body;
    ::chmod(p.c_str(), 0755);
  }
  std::string dir_;
};

ServiceTable seed(int pods) {
  ServiceTable t;
  VirtualService s;
  s.key = {*parse_ipv4("10.96.0.100"), 8080, Protocol::kTcp};
  s.name = "default/db:http";
  const char* ips[] = {"10.244.1.15", "10.244.2.88", "10.244.3.12", "10.244.3.44"};
  for (int i = 0; i < pods; ++i) s.backends.push_back({*parse_ipv4(ips[i]), 8080, 1, false});
  t.services[s.key] = s;
  VirtualService e;
  e.key = {*parse_ipv4("10.96.0.101"), 80, Protocol::kTcp};
  e.name = "default/empty:http";
  t.services[e.key] = e;
  t.normalize();
  return t;
}

bool apply(IptablesBackend& b, const ServiceTable& t, bool full, std::string* err) {
  return b.apply(t, TableDiff{}, full, err);
}

TEST(IptablesRunner, CapturesOutputAndStatus) {
  RunResult r = run_command({"sh", "-c", "cat; echo oops >&2; exit 3"}, "hello\n", 5000);
  EXPECT_TRUE(r.started);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.out, "hello\n");
  EXPECT_EQ(r.err, "oops\n");
  EXPECT_EQ(describe_failure("x", r), "x: exit status 3: oops");
  // Large input (well above a pipe buffer) goes through whole.
  const std::string big(4 << 20, 'x');
  r = run_command({"wc", "-c"}, big, 10000);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.out.substr(0, r.out.find('\n')), std::to_string(big.size()));
}

TEST(IptablesRunner, MissingProgramAndTimeout) {
  RunResult r = run_command({"/nonexistent/vipd-no-such-tool"}, "", 1000);
  EXPECT_FALSE(r.ok());
  EXPECT_THAT(describe_failure("tool", r), HasSubstr("No such file"));
  r = run_command({"sleep", "10"}, "", 200);
  EXPECT_TRUE(r.timed_out);
  EXPECT_THAT(describe_failure("sleep", r), HasSubstr("killed after the timeout"));
  EXPECT_FALSE(run_command({}, "", 100).ok());
}

TEST(IptablesBackend, FirstSyncIsFullAndAddsJumpsOnce) {
  FakeIptables f;
  f.touch("save-output", "*nat\n:PREROUTING ACCEPT [0:0]\n:VIPD-SVC-STALESTALESTALE - [0:0]\n:KUBE-SVC-X - [0:0]\nCOMMIT\n");
  IptablesBackend b(f.options());
  std::string err;
  ASSERT_TRUE(apply(b, seed(4), false, &err)) << err;  // not asked for full, but nothing applied yet
  const std::string calls = f.calls();
  EXPECT_THAT(calls, HasSubstr("restore --noflush -w 5\n"));
  EXPECT_THAT(calls, HasSubstr("save\n"));
  EXPECT_EQ(count_lines_with(calls, "iptables -w 5 -t "), 9u * 2);  // 9 checks, 9 inserts
  EXPECT_THAT(calls, HasSubstr("iptables -w 5 -t nat -I PREROUTING 1 -m comment --comment vipd service portals -j VIPD-SERVICES"));
  ASSERT_EQ(f.payloads(), 1);
  const std::string p = f.payload(0);
  EXPECT_EQ(p, b.last_payload());
  EXPECT_THAT(p, HasSubstr("-X VIPD-SVC-STALESTALESTALE\n"));
  EXPECT_THAT(p, Not(HasSubstr("KUBE-")));
  EXPECT_THAT(p, HasSubstr("-j REJECT"));
  EXPECT_EQ(b.stats().full_syncs, 1u);
  EXPECT_EQ(b.stats().jump_rules_added, 9u);

  // A second full sync (e.g. a restarted vipd or the periodic one): the jumps
  // exist, so only checks run; no duplicate is inserted.
  f.clear_calls();
  ASSERT_TRUE(apply(b, seed(4), true, &err)) << err;
  EXPECT_EQ(count_lines_with(f.calls(), " -C "), 9u);
  EXPECT_EQ(count_lines_with(f.calls(), " -I "), 0u);
  EXPECT_EQ(b.stats().full_syncs, 2u);
  EXPECT_EQ(b.stats().jump_rules_added, 9u);
}

TEST(IptablesBackend, PartialNoopAndFailure) {
  FakeIptables f;
  IptablesBackend b(f.options());
  std::string err;
  ASSERT_TRUE(apply(b, seed(4), true, &err)) << err;
  f.clear_calls();

  // Remove pod4: a partial payload, no iptables-save, no jump checks.
  ASSERT_TRUE(apply(b, seed(3), false, &err)) << err;
  EXPECT_EQ(f.calls(), "restore --noflush -w 5\n");
  const std::string p = f.payload(1);
  EXPECT_THAT(p, HasSubstr("-X VIPD-SEP-" + endpoint_hash("default/db:http", "tcp", "10.244.3.44:8080") + "\n"));
  EXPECT_THAT(p, Not(HasSubstr("*filter")));
  EXPECT_EQ(b.stats().partial_syncs, 1u);
  EXPECT_EQ(b.stats().chains_written, 1u);
  EXPECT_EQ(b.stats().chains_deleted, 1u);

  // Same table again: nothing to run.
  f.clear_calls();
  ASSERT_TRUE(apply(b, seed(3), false, &err)) << err;
  EXPECT_EQ(f.calls(), "");
  EXPECT_EQ(b.stats().noop_syncs, 1u);

  // iptables-restore fails: false, the error names the payload line; the
  // next apply is a full sync even if the caller does not ask for one.
  f.touch("restore-fail");
  err.clear();
  EXPECT_FALSE(apply(b, seed(2), false, &err));
  EXPECT_THAT(err, HasSubstr("iptables-restore: exit status 1: iptables-restore: line 3 failed"));
  EXPECT_THAT(err, HasSubstr("(payload line 3: "));
  EXPECT_EQ(b.stats().failures, 1u);
  f.remove("restore-fail");
  f.clear_calls();
  ASSERT_TRUE(apply(b, seed(2), false, &err)) << err;
  EXPECT_THAT(f.calls(), HasSubstr("save\n"));
  EXPECT_EQ(b.stats().full_syncs, 2u);
  const std::string full = b.last_payload();
  EXPECT_THAT(full, HasSubstr(":VIPD-POSTROUTING - [0:0]"));
  // pod3 and pod4's SEP chains from the failed attempt's predecessor: deleted.
  EXPECT_THAT(full, HasSubstr("-X VIPD-SEP-" + endpoint_hash("default/db:http", "tcp", "10.244.3.12:8080")));
}

TEST(IptablesBackend, Ipv4OnlyTableRunsNoIp6tablesButTheFullSyncsSave) {
  FakeIptables f;
  IptablesBackend b(f.options());
  std::string err;
  ASSERT_TRUE(apply(b, seed(4), true, &err)) << err;
  const std::string calls = f.calls();
  EXPECT_EQ(count_lines_with(calls, "save6"), 1u);
  EXPECT_EQ(count_lines_with(calls, "restore6"), 0u);
  EXPECT_EQ(count_lines_with(calls, "ip6tables"), 0u);
  EXPECT_FALSE(b.stats().ipv6_active);
  EXPECT_EQ(b.last_payload6(), "");
  // Partial syncs do not look at ip6tables at all; a failing ip6tables-save (no
  // ip6tables, no ip6table_nat) changes nothing for IPv4.
  f.clear_calls();
  ASSERT_TRUE(apply(b, seed(3), false, &err)) << err;
  EXPECT_EQ(f.calls(), "restore --noflush -w 5\n");
  f.touch("save6-fail");
  ASSERT_TRUE(apply(b, seed(2), true, &err)) << err;
  EXPECT_EQ(f.payloads6(), 0);
  EXPECT_EQ(b.stats().failures, 0u);
}

TEST(IptablesBackend, StaleIp6tablesChainsOfAnEarlierRunAreRemoved) {
  FakeIptables f;
  f.touch("save6-output",
          "*filter\n:INPUT ACCEPT [0:0]\n:VIPD-SERVICES - [0:0]\nCOMMIT\n"
          "*nat\n:PREROUTING ACCEPT [0:0]\n:VIPD-SERVICES - [0:0]\n:VIPD-SVC-OLDOLDOLDOLDOLD6 - [0:0]\n"
          ":VIPD-SEP-OLDOLDOLDOLDOLD6 - [0:0]\n:KUBE-SVC-X - [0:0]\nCOMMIT\n");
  IptablesBackend b(f.options());
  std::string err;
  ASSERT_TRUE(apply(b, seed(4), false, &err)) << err;
  ASSERT_EQ(f.payloads6(), 1);
  const std::string p = f.payload6(0);
  EXPECT_EQ(p, b.last_payload6());
  EXPECT_THAT(p, HasSubstr("-X VIPD-SVC-OLDOLDOLDOLDOLD6\n"));
  EXPECT_THAT(p, HasSubstr("-X VIPD-SEP-OLDOLDOLDOLDOLD6\n"));
  EXPECT_THAT(p, HasSubstr(":VIPD-POSTROUTING - [0:0]\n"));
  EXPECT_THAT(p, Not(HasSubstr("KUBE-")));
  EXPECT_THAT(p, Not(HasSubstr("10.")));  // no IPv4 entry in the IPv6 payload
  // The IPv6 jumps go through ip6tables, the IPv4 ones through iptables.
  EXPECT_EQ(count_lines_with(f.calls(), "ip6tables -w 5 -t "), 9u * 2);
  EXPECT_EQ(count_lines_with(f.calls(), "iptables -w 5 -t "), 9u * 2);
  EXPECT_TRUE(b.stats().ipv6_active);
  EXPECT_EQ(b.stats().ipv6_restores, 1u);
  EXPECT_EQ(b.stats().jump_rules_added, 18u);
  // Engaged now: an unchanged IPv6 side runs nothing on a partial sync.
  f.clear_calls();
  ASSERT_TRUE(apply(b, seed(3), false, &err)) << err;
  EXPECT_EQ(f.calls(), "restore --noflush -w 5\n");
  // An ip6tables-restore failure fails the sync (IPv4 is applied); the next is full.
  f.touch("restore6-fail");
  EXPECT_FALSE(apply(b, seed(4), true, &err));
  EXPECT_THAT(err, HasSubstr("ip6tables-restore: exit status 1: ip6tables-restore: line 2 failed"));
  EXPECT_EQ(b.stats().failures, 1u);
  f.remove("restore6-fail");
  f.clear_calls();
  ASSERT_TRUE(apply(b, seed(4), false, &err)) << err;
  EXPECT_EQ(count_lines_with(f.calls(), "save6"), 1u);
  EXPECT_EQ(count_lines_with(f.calls(), "restore6"), 1u);
}

TEST(IptablesBackend, Ipv6EntriesGoThroughIp6tablesRestore) {
  FakeIptables f;
  IptablesBackend b(f.options());
  ServiceTable t = seed(4);
  VirtualService v6;
  v6.key = {*IpAddr::parse("fd00:96::100"), 8080, Protocol::kTcp};
  v6.name = "default/db6:http";
  for (const char* a : {"fd00:244::1:15", "fd00:244::3:44"}) v6.backends.push_back({*IpAddr::parse(a), 8080, 1, false});
  t.services[v6.key] = v6;
  t.normalize();
  std::string err;
  // A partial sync asked for, but nothing applied yet: full for both families.
  ASSERT_TRUE(apply(b, t, false, &err)) << err;
  ASSERT_EQ(f.payloads(), 1);
  ASSERT_EQ(f.payloads6(), 1);
  EXPECT_THAT(f.payload(0), Not(HasSubstr("fd00:")));
  const std::string p6 = f.payload6(0);
  EXPECT_EQ(p6, b.last_payload6());
  EXPECT_THAT(p6, HasSubstr("-d fd00:96::100/128 -p tcp -m tcp --dport 8080 -j VIPD-SVC-"));
  EXPECT_THAT(p6, HasSubstr("-j DNAT --to-destination [fd00:244::3:44]:8080"));
  EXPECT_THAT(p6, Not(HasSubstr("10.96.0.")));
  EXPECT_EQ(count_lines_with(f.calls(), "ip6tables -w 5 -t "), 9u * 2);
  EXPECT_TRUE(b.stats().ipv6_active);
  EXPECT_GE(b.stats().ipv6_nat_chains, 6u);  // 3 base + SVC + 2 SEP
  // Remove one IPv6 endpoint: only ip6tables-restore runs, and only for that change.
  t.services[v6.key].backends.pop_back();
  f.clear_calls();
  ASSERT_TRUE(apply(b, t, false, &err)) << err;
  EXPECT_EQ(f.calls(), "restore6 --noflush -w 5\n");
  EXPECT_THAT(f.payload6(1), HasSubstr("-X VIPD-SEP-" + endpoint_hash("default/db6:http", "tcp", "[fd00:244::3:44]:8080") + "\n"));
  EXPECT_THAT(f.payload6(1), Not(HasSubstr("*filter")));
  EXPECT_EQ(b.stats().partial_syncs, 1u);
  EXPECT_EQ(b.stats().ipv6_restores, 2u);
}

TEST(IptablesBackend, MissingToolsAndBadInputAreErrorsNotCrashes) {
  IptablesOptions o;
  o.restore_cmd = "/nonexistent/iptables-restore";
  o.save_cmd = "/nonexistent/iptables-save";
  o.iptables_cmd = "/nonexistent/iptables";
  IptablesBackend b(o);
  std::string err;
  EXPECT_FALSE(apply(b, seed(4), true, &err));
  EXPECT_THAT(err, HasSubstr("iptables-restore: cannot run /nonexistent/iptables-restore"));

  FakeIptables f;
  IptablesBackend b2(f.options());
  ServiceTable t = seed(1);
  t.services.begin()->second.source_ranges = {"not-a-range"};
  EXPECT_FALSE(apply(b2, t, true, &err));
  EXPECT_THAT(err, HasSubstr("not an IPv4 CIDR"));
  EXPECT_EQ(f.payloads(), 0);
}

TEST(IptablesBackend, RestoreTimeoutGrowsWithThePayload) {
  IptablesOptions o;
  EXPECT_EQ(restore_timeout_ms(o, 0), 30000);
  EXPECT_EQ(restore_timeout_ms(o, 20u << 20), 30000 + 200000);  // 10k services, full load
  EXPECT_EQ(restore_timeout_ms(o, size_t{1} << 40), 3600 * 1000);  // capped at an hour
  o.restore_timeout_ms_per_mib = 0;
  EXPECT_EQ(restore_timeout_ms(o, 20u << 20), 30000);
}

TEST(IptablesBackend, HungRestoreIsKilled) {
  FakeIptables f;
  f.touch("restore-hang");
  IptablesOptions o = f.options();
  o.command_timeout_ms = 300;
  IptablesBackend b(o);
  std::string err;
  EXPECT_FALSE(apply(b, seed(4), true, &err));
  EXPECT_THAT(err, HasSubstr("killed after the timeout"));
}

}  // namespace
}  // namespace vipd::cp::ipt
