// Thread: test main thread. Tests for controlplane/backends/ipvs/ipvs_backend.cc
// against the fakes of fake_kernel.h: first (full) sync, partial syncs from the
// TableDiff, reconcile from a dump that differs, graceful termination (drain,
// UDP at once, a real server coming back), VIP bind/unbind bookkeeping, errors
// mapped to one line and a full resync, sysctls, iptables rules and jumps.
#include "controlplane/backends/ipvs/ipvs_backend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "tests/unit/ipvs/fake_kernel.h"

namespace vipd::cp::ipvs {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace ::vipd::cp::ipvs::testing;

VirtualService svc(const ServiceKey& k, std::vector<const char*> backends, const char* name = "default/db:http") {
  VirtualService vs;
  vs.key = k;
  vs.name = name;
  for (const char* b : backends) vs.backends.push_back({ip(b), k.port, 1, false});
  return vs;
}

ServiceTable table_of(std::vector<VirtualService> v) {
  ServiceTable t;
  for (auto& s : v) t.services[s.key] = s;
  t.normalize();
  return t;
}

// A temporary /proc/sys with the files the mode writes (value 0).
class ProcSys {
 public:
  explicit ProcSys(bool with_vs = true) {
    const char* base = getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/vipd-ipvs-sys-XXXXXX";
    dir_ = mkdtemp(tmpl.data()) ? tmpl : std::string();
    fs::create_directories(dir_ + (with_vs ? "/net/ipv4/vs" : "/net/ipv4"));
    write("net/ipv4/ip_forward", "0");
    if (with_vs)
      for (const char* n : {"conntrack", "expire_nodest_conn", "expire_quiescent_template"})
        write(std::string("net/ipv4/vs/") + n, "0");
  }
  ~ProcSys() {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  const std::string& dir() const { return dir_; }
  std::string read(const std::string& rel) const {
    std::ifstream in(dir_ + "/" + rel);
    std::string s;
    std::getline(in, s);
    return s;
  }

 private:
  void write(const std::string& rel, const char* v) { std::ofstream(dir_ + "/" + rel) << v << "\n"; }
  std::string dir_;
};

class IpvsBackendTest : public ::testing::Test {
 protected:
  IpvsBackendTest() : backend_(kernel_, vips_, options()) {}
  IpvsBackendOptions options() {
    IpvsBackendOptions o;
    o.proc_sys = sys_.dir();
    o.run = ipt_.runner();
    return o;
  }
  // Applies `next` the way the SyncLoop does: a diff against the last table.
  bool apply(const ServiceTable& next, bool full = false) {
    const ServiceTable empty;
    const TableDiff d = full ? TableDiff::compute(empty, next) : TableDiff::compute(last_, next);
    error_.clear();
    const bool ok = backend_.apply(next, d, full, &error_);
    if (ok) last_ = next;
    return ok;
  }

  ProcSys sys_;
  FakeIpvs kernel_;
  FakeVips vips_;
  FakeIptables ipt_;
  IpvsBackend backend_;
  ServiceTable last_;
  std::string error_;
};

const ServiceKey kDb = tcp("10.96.0.100", 8080);
const ServiceKey kDns = udp("10.96.0.100", 9053);
const ServiceKey kEmpty = tcp("10.96.0.101", 80);

ServiceTable seed() {
  return table_of({svc(kDb, {"10.244.1.15", "10.244.2.88", "10.244.3.12", "10.244.3.44"}),
                   svc(kDns, {"10.244.1.15", "10.244.2.88"}, "default/db:dns"),
                   svc(kEmpty, {}, "default/empty:http")});
}

TEST_F(IpvsBackendTest, FirstSyncCreatesServicesRealServersVipsRulesAndSysctls) {
  ASSERT_TRUE(apply(seed(), true)) << error_;
  ASSERT_EQ(kernel_.svcs.size(), 3u);
  EXPECT_EQ(kernel_.svcs[kDb].service.scheduler, "rr");
  EXPECT_EQ(kernel_.svcs[kDb].dests.size(), 4u);
  EXPECT_EQ(kernel_.svcs[kDns].dests.size(), 2u);
  EXPECT_TRUE(kernel_.svcs[kEmpty].dests.empty());
  for (const auto& d : kernel_.svcs[kDb].dests) {
    EXPECT_EQ(d.weight, 1u);
    EXPECT_EQ(d.fwd_method, kFwdMasq);
  }
  EXPECT_EQ(kernel_.count("dump"), 1u);  // read back before programming
  EXPECT_EQ(vips_.addrs, (std::set<IpAddr>{ip("10.96.0.100"), ip("10.96.0.101")}));
  EXPECT_TRUE(vips_.exists);
  // Rules: one payload; the empty service is rejected; fnat masquerades.
  ASSERT_EQ(ipt_.payloads.size(), 1u);
  EXPECT_THAT(ipt_.payloads[0], HasSubstr("-d 10.96.0.101/32 -p tcp -m tcp --dport 80 -j REJECT"));
  EXPECT_THAT(ipt_.payloads[0], Not(HasSubstr("--dport 8080 -j REJECT")));
  EXPECT_THAT(ipt_.payloads[0], HasSubstr("-m ipvs --ipvs --vdir ORIGINAL --vmethod MASQ -j MASQUERADE"));
  EXPECT_EQ(ipt_.jumps.size(), 4u);
  for (const char* s : {"net/ipv4/ip_forward", "net/ipv4/vs/conntrack", "net/ipv4/vs/expire_nodest_conn",
                        "net/ipv4/vs/expire_quiescent_template"})
    EXPECT_EQ(sys_.read(s), "1") << s;
  const auto st = backend_.stats();
  EXPECT_EQ(st.full_syncs, 1u);
  EXPECT_EQ(st.services, 3u);
  EXPECT_EQ(st.dests, 6u);
  EXPECT_EQ(st.vips_bound, 2u);
  EXPECT_EQ(st.sysctl_errors, 0u);
  EXPECT_EQ(st.jump_rules_added, 4u);
}

TEST_F(IpvsBackendTest, SecondFullSyncChangesNothingAndAddsNoJumpTwice) {
  ASSERT_TRUE(apply(seed(), true)) << error_;
  kernel_.calls.clear();
  vips_.calls.clear();
  ASSERT_TRUE(apply(seed(), true)) << error_;
  EXPECT_EQ(kernel_.count("add_"), 0u);
  EXPECT_EQ(kernel_.count("edit_"), 0u);
  EXPECT_EQ(kernel_.count("del_"), 0u);
  EXPECT_EQ(vips_.calls, std::vector<std::string>{"ensure"});
  EXPECT_EQ(ipt_.jumps.size(), 4u);
  EXPECT_EQ(backend_.stats().jump_rules_added, 4u);
}

TEST_F(IpvsBackendTest, PartialSyncAppliesOnlyTheDiffWithoutADump) {
  ASSERT_TRUE(apply(seed(), true)) << error_;
  kernel_.calls.clear();
  ServiceTable next = seed();
  next.services[kDb].backends.push_back({ip("10.244.9.9"), 8080, 1, false});  // one more real server
  next.services[kDb].backends[0].weight = 3;                                   // a weight change
  next.services.erase(kEmpty);                                                 // last service on .101
  next.normalize();
  ASSERT_TRUE(apply(next)) << error_;
  EXPECT_EQ(kernel_.count("dump"), 0u);
  EXPECT_TRUE(kernel_.called("add_dest TCP 10.96.0.100:8080 10.244.9.9:8080 w=1"));
  EXPECT_TRUE(kernel_.called("edit_dest TCP 10.96.0.100:8080 10.244.1.15:8080 w=3"));
  EXPECT_TRUE(kernel_.called("del_service TCP 10.96.0.101:80"));
  EXPECT_EQ(kernel_.count("add_service"), 0u);
  EXPECT_EQ(kernel_.calls.size(), 3u) << ::testing::PrintToString(kernel_.calls);
  EXPECT_EQ(vips_.addrs, std::set<IpAddr>{ip("10.96.0.100")});  // .101 unbound with its last service
  // The REJECT rule went with the empty service: a new payload without it.
  ASSERT_EQ(ipt_.payloads.size(), 2u);
  EXPECT_THAT(ipt_.payloads[1], Not(HasSubstr("REJECT")));
  EXPECT_EQ(backend_.stats().partial_syncs, 1u);
}

TEST_F(IpvsBackendTest, VipStaysBoundWhileAnotherServiceUsesIt) {
  ASSERT_TRUE(apply(seed(), true)) << error_;
  ServiceTable next = seed();
  next.services.erase(kDns);  // .100 still has the TCP service
  ASSERT_TRUE(apply(next)) << error_;
  EXPECT_TRUE(vips_.addrs.count(ip("10.96.0.100")));
  EXPECT_FALSE(kernel_.svcs.count(kDns));
  next.services.erase(kDb);
  ASSERT_TRUE(apply(next)) << error_;
  EXPECT_FALSE(vips_.addrs.count(ip("10.96.0.100")));
  EXPECT_TRUE(vips_.addrs.count(ip("10.96.0.101")));
}

TEST_F(IpvsBackendTest, NodePortEntriesAreNotBound) {
  VirtualService np = svc(tcp("192.168.1.5", 30080), {"10.244.1.15"});
  np.kind = ServiceKind::kNodePort;
  ASSERT_TRUE(apply(table_of({np}), true)) << error_;
  EXPECT_TRUE(kernel_.svcs.count(np.key));
  EXPECT_TRUE(vips_.addrs.empty());
}

TEST_F(IpvsBackendTest, NoPayloadWhenRulesDidNotChange) {
  ASSERT_TRUE(apply(seed(), true)) << error_;
  ServiceTable next = seed();
  next.services[kDb].backends[1].weight = 2;
  ASSERT_TRUE(apply(next)) << error_;
  EXPECT_EQ(ipt_.payloads.size(), 1u);
}

TEST_F(IpvsBackendTest, ReconcileFromADumpThatDiffers) {
  // The kernel as a previous vipd run (and someone else) left it.
  vips_.exists = true;
  vips_.addrs = {ip("10.96.0.100"), ip("10.96.0.200")};
  IpvsService wrong = to_ipvs_service(svc(kDb, {}));
  wrong.scheduler = "wlc";
  kernel_.svcs[kDb].service = wrong;
  IpvsDest d;
  d.ip = ip("10.244.1.15"), d.port = 8080, d.weight = 7;  // wrong weight
  kernel_.svcs[kDb].dests.push_back(d);
  d.ip = ip("10.244.5.5"), d.weight = 1, d.active_conns = 2;  // not wanted, has connections
  kernel_.svcs[kDb].dests.push_back(d);
  const ServiceKey stale = tcp("10.96.0.200", 80);  // on vipd's interface: vipd's
  kernel_.svcs[stale].service = to_ipvs_service(svc(stale, {}));
  const ServiceKey foreign = tcp("172.16.0.1", 80);  // not bound there: someone else's
  kernel_.svcs[foreign].service = to_ipvs_service(svc(foreign, {}));

  ASSERT_TRUE(apply(seed(), true)) << error_;
  EXPECT_TRUE(kernel_.called("edit_service TCP 10.96.0.100:8080 rr flags=0 timeout=0"));
  EXPECT_TRUE(kernel_.called("edit_dest TCP 10.96.0.100:8080 10.244.1.15:8080 w=1"));
  EXPECT_EQ(kernel_.count("add_dest TCP 10.96.0.100:8080"), 3u);  // the three missing ones
  EXPECT_TRUE(kernel_.called("edit_dest TCP 10.96.0.100:8080 10.244.5.5:8080 w=0"));  // drains
  ASSERT_NE(kernel_.dest(kDb, "10.244.5.5", 8080), nullptr);
  EXPECT_TRUE(kernel_.called("del_service TCP 10.96.0.200:80"));
  EXPECT_FALSE(kernel_.svcs.count(stale));
  EXPECT_TRUE(kernel_.svcs.count(foreign));
  EXPECT_EQ(kernel_.count("del_service TCP 172.16.0.1:80"), 0u);
  EXPECT_FALSE(vips_.addrs.count(ip("10.96.0.200")));
  EXPECT_TRUE(vips_.addrs.count(ip("10.96.0.101")));
  EXPECT_EQ(kernel_.count("add_service"), 2u);  // kDns, kEmpty
  const auto st = backend_.stats();
  EXPECT_EQ(st.stale_services_deleted, 1u);
  EXPECT_EQ(st.foreign_services, 1u);
  EXPECT_EQ(st.draining, 1u);
  // No duplicates: every wanted real server exactly once.
  EXPECT_EQ(kernel_.svcs[kDb].dests.size(), 5u);
}

TEST_F(IpvsBackendTest, GracefulTerminationDrainsTcpAndDeletesUdpAtOnce) {
  ASSERT_TRUE(apply(seed(), true)) << error_;
  kernel_.dest(kDb, "10.244.3.44", 8080)->active_conns = 1;
  kernel_.dest(kDb, "10.244.3.44", 8080)->inactive_conns = 2;
  ServiceTable next = seed();
  auto& b = next.services[kDb].backends;
  b.erase(b.begin() + 3);  // pod4 (10.244.3.44) leaves
  next.services[kDns].backends.erase(next.services[kDns].backends.begin());  // UDP 10.244.1.15 leaves
  ASSERT_TRUE(apply(next)) << error_;
  ASSERT_NE(kernel_.dest(kDb, "10.244.3.44", 8080), nullptr);
  EXPECT_EQ(kernel_.dest(kDb, "10.244.3.44", 8080)->weight, 0u);
  EXPECT_EQ(kernel_.dest(kDns, "10.244.1.15", 9053), nullptr);
  EXPECT_EQ(backend_.stats().draining, 1u);
  ASSERT_EQ(backend_.draining().size(), 1u);
  EXPECT_EQ(backend_.draining()[0].ip, ip("10.244.3.44"));

  std::string err;
  ASSERT_TRUE(backend_.tick(&err)) << err;  // still has connections
  EXPECT_NE(kernel_.dest(kDb, "10.244.3.44", 8080), nullptr);
  EXPECT_EQ(backend_.draining()[0].active_conns, 1u);
  EXPECT_EQ(backend_.draining()[0].inactive_conns, 2u);
  kernel_.dest(kDb, "10.244.3.44", 8080)->active_conns = 0;
  ASSERT_TRUE(backend_.tick(&err)) << err;  // InActConn still 2
  EXPECT_NE(kernel_.dest(kDb, "10.244.3.44", 8080), nullptr);
  kernel_.dest(kDb, "10.244.3.44", 8080)->inactive_conns = 0;
  ASSERT_TRUE(backend_.tick(&err)) << err;
  EXPECT_EQ(kernel_.dest(kDb, "10.244.3.44", 8080), nullptr);
  EXPECT_EQ(backend_.stats().dests_drained, 1u);
  EXPECT_EQ(backend_.stats().draining, 0u);
  // Nothing left to drain: a tick reads nothing.
  kernel_.calls.clear();
  ASSERT_TRUE(backend_.tick(&err)) << err;
  EXPECT_TRUE(kernel_.calls.empty());
}

TEST_F(IpvsBackendTest, TerminatingWeightZeroBackendIsDrainedLikeARemovedOne) {
  ASSERT_TRUE(apply(seed(), true)) << error_;
  ServiceTable next = seed();
  next.services[kDb].backends[0].weight = 0;
  next.services[kDb].backends[0].terminating = true;
  ASSERT_TRUE(apply(next)) << error_;
  EXPECT_EQ(kernel_.dest(kDb, "10.244.1.15", 8080)->weight, 0u);
  std::string err;
  ASSERT_TRUE(backend_.tick(&err)) << err;  // no connections: deleted
  EXPECT_EQ(kernel_.dest(kDb, "10.244.1.15", 8080), nullptr);
}

TEST_F(IpvsBackendTest, RealServerComingBackWhileDrainingGetsItsWeightBack) {
  ASSERT_TRUE(apply(seed(), true)) << error_;
  kernel_.dest(kDb, "10.244.3.44", 8080)->active_conns = 5;
  ServiceTable without = seed();
  without.services[kDb].backends.pop_back();
  ASSERT_TRUE(apply(without)) << error_;
  EXPECT_EQ(kernel_.dest(kDb, "10.244.3.44", 8080)->weight, 0u);
  ASSERT_TRUE(apply(seed())) << error_;
  EXPECT_EQ(kernel_.dest(kDb, "10.244.3.44", 8080)->weight, 1u);
  kernel_.dest(kDb, "10.244.3.44", 8080)->active_conns = 0;
  std::string err;
  ASSERT_TRUE(backend_.tick(&err)) << err;
  EXPECT_NE(kernel_.dest(kDb, "10.244.3.44", 8080), nullptr);  // wanted again: kept
  EXPECT_EQ(backend_.stats().draining, 0u);
}

TEST_F(IpvsBackendTest, RemovedServiceIsDeletedAtOnceEvenWithConnections) {
  ASSERT_TRUE(apply(seed(), true)) << error_;
  kernel_.dest(kDb, "10.244.1.15", 8080)->active_conns = 3;
  ServiceTable next = seed();
  next.services.erase(kDb);
  ASSERT_TRUE(apply(next)) << error_;
  EXPECT_FALSE(kernel_.svcs.count(kDb));
}

TEST_F(IpvsBackendTest, MissingIpvsIsOneClearLineAndTheNextSyncIsFull) {
  kernel_.open_err = kErrNoFamily;
  EXPECT_FALSE(apply(seed(), true));
  EXPECT_THAT(error_, HasSubstr("modprobe ip_vs"));
  EXPECT_EQ(error_.find('\n'), std::string::npos);
  EXPECT_EQ(backend_.stats().failures, 1u);
  kernel_.open_err = 0;
  ASSERT_TRUE(apply(seed(), false)) << error_;  // asked for partial, done full
  EXPECT_EQ(kernel_.count("dump"), 1u);
  EXPECT_EQ(kernel_.svcs.size(), 3u);
  EXPECT_EQ(backend_.stats().full_syncs, 1u);
}

TEST_F(IpvsBackendTest, EexistDuringAPartialSyncFailsAndAFullSyncRepairs) {
  ASSERT_TRUE(apply(seed(), true)) << error_;
  // Someone created the service behind vipd's back.
  const ServiceKey k = tcp("10.96.0.102", 8080);
  kernel_.svcs[k].service = to_ipvs_service(svc(k, {}));
  ServiceTable next = seed();
  next.services[k] = svc(k, {"10.244.1.15"}, "default/sticky:http");
  EXPECT_FALSE(apply(next));
  EXPECT_THAT(error_, HasSubstr("add service TCP 10.96.0.102:8080"));
  EXPECT_THAT(error_, HasSubstr("EEXIST"));
  ASSERT_TRUE(apply(next, true)) << error_;  // the SyncLoop's retry
  EXPECT_EQ(kernel_.svcs[k].dests.size(), 1u);
}

TEST_F(IpvsBackendTest, KernelErrorsAreMappedToOneLine) {
  ASSERT_TRUE(apply(seed(), true)) << error_;
  ServiceTable next = seed();
  next.services.erase(kEmpty);
  kernel_.svcs.erase(kEmpty);  // gone behind vipd's back
  EXPECT_FALSE(apply(next));
  EXPECT_THAT(error_, HasSubstr("delete service TCP 10.96.0.101:80"));
  EXPECT_THAT(error_, HasSubstr("ESRCH"));
  ASSERT_TRUE(apply(next, true)) << error_;

  kernel_.fail_next["add_dest"] = EPERM;
  ServiceTable more = next;
  more.services[kDb].backends.push_back({ip("10.244.9.9"), 8080, 1, false});
  more.normalize();
  EXPECT_FALSE(apply(more));
  EXPECT_THAT(error_, HasSubstr("CAP_NET_ADMIN"));
  ASSERT_TRUE(apply(more, true)) << error_;

  kernel_.fail_next["add_service"] = ENOENT;  // scheduler module missing
  ServiceTable mh = more;
  const ServiceKey k = tcp("10.96.0.103", 80);
  mh.services[k] = svc(k, {"10.244.1.15"});
  mh.services[k].scheduler = Scheduler::kMh;
  EXPECT_FALSE(apply(mh));
  EXPECT_THAT(error_, HasSubstr("scheduler mh"));
  EXPECT_THAT(error_, HasSubstr("modprobe ip_vs_<scheduler>"));
}

TEST_F(IpvsBackendTest, DummyInterfaceThatCannotBeCreatedFailsTheSync) {
  vips_.ensure_err = EOPNOTSUPP;
  EXPECT_FALSE(apply(seed(), true));
  EXPECT_THAT(error_, HasSubstr("dummy interface vipd-ipvs0"));
  EXPECT_THAT(error_, HasSubstr("modprobe dummy"));
  EXPECT_TRUE(kernel_.svcs.empty());
}

TEST_F(IpvsBackendTest, TickFailureAsksForAFullSync) {
  ASSERT_TRUE(apply(seed(), true)) << error_;
  kernel_.dest(kDb, "10.244.3.44", 8080)->active_conns = 1;
  ServiceTable next = seed();
  next.services[kDb].backends.pop_back();
  ASSERT_TRUE(apply(next)) << error_;
  kernel_.fail_next["dump_dests"] = ESRCH;
  std::string err;
  EXPECT_FALSE(backend_.tick(&err));
  EXPECT_THAT(err, HasSubstr("ESRCH"));
  kernel_.calls.clear();
  ASSERT_TRUE(apply(next, false)) << error_;
  EXPECT_EQ(kernel_.count("dump"), 1u);  // full
}

TEST_F(IpvsBackendTest, IptablesFailureFailsTheSyncWithItsStderr) {
  ipt_.restore_fails = true;
  EXPECT_FALSE(apply(seed(), true));
  EXPECT_THAT(error_, HasSubstr("Couldn't load match `ipvs'"));
  EXPECT_THAT(error_, HasSubstr("xt_ipvs"));
  ipt_.restore_fails = false;
  ASSERT_TRUE(apply(seed(), false)) << error_;
  EXPECT_EQ(ipt_.payloads.size(), 2u);
}

TEST(IpvsBackendSysctl, MissingSysctlsAreReportedButDoNotFailTheSync) {
  ProcSys sys(false);  // no net/ipv4/vs: ip_vs not loaded
  FakeIpvs kernel;
  FakeVips vips;
  FakeIptables ipt;
  IpvsBackendOptions o;
  o.proc_sys = sys.dir();
  o.run = ipt.runner();
  IpvsBackend b(kernel, vips, o);
  std::string err;
  ASSERT_TRUE(b.apply(seed(), TableDiff::compute(ServiceTable{}, seed()), true, &err)) << err;
  const auto st = b.stats();
  EXPECT_EQ(st.sysctl_errors, 3u);
  EXPECT_THAT(st.sysctl_error, HasSubstr("net.ipv4.vs.conntrack"));
  EXPECT_THAT(st.sysctl_error, HasSubstr("is ip_vs loaded?"));
  EXPECT_EQ(sys.read("net/ipv4/ip_forward"), "1");
}


// ---- IPv6 -------------------------------------------------------------------------------
const ServiceKey kDb6 = tcp("fd00:96::100", 8080);
const ServiceKey kDns6 = udp("fd00:96::100", 9053);
const ServiceKey kEmpty6 = tcp("fd00:96::101", 80);

ServiceTable seed_dual() {
  ServiceTable t = seed();
  for (auto& v : {svc(kDb6, {"fd00:244::1:15", "fd00:244::2:88", "fd00:244::3:12", "fd00:244::3:44"}, "default/db6:http"),
                  svc(kDns6, {"fd00:244::1:15", "fd00:244::2:88"}, "default/db6:dns"),
                  svc(kEmpty6, {}, "default/empty6:http")})
    t.services[v.key] = v;
  t.normalize();
  return t;
}

TEST_F(IpvsBackendTest, Ipv6ServicesVipsRulesAndForwarding) {
  std::filesystem::create_directories(sys_.dir() + "/net/ipv6/conf/all");
  std::ofstream(sys_.dir() + "/net/ipv6/conf/all/forwarding") << "0\n";
  ASSERT_TRUE(apply(seed_dual(), true)) << error_;
  ASSERT_EQ(kernel_.svcs.size(), 6u);
  EXPECT_TRUE(kernel_.called("add_service TCP [fd00:96::100]:8080 rr flags=0 timeout=0"));
  EXPECT_TRUE(kernel_.called("add_dest TCP [fd00:96::100]:8080 [fd00:244::3:44]:8080 w=1"));
  EXPECT_EQ(kernel_.svcs[kDb6].dests.size(), 4u);
  EXPECT_EQ(kernel_.svcs[kDb6].service.netmask, 128u);  // IPv6: a prefix length
  EXPECT_EQ(kernel_.svcs[kDb].service.netmask, 0xffffffffu);
  EXPECT_EQ(vips_.addrs, (std::set<IpAddr>{ip("10.96.0.100"), ip("10.96.0.101"), ip("fd00:96::100"),
                                           ip("fd00:96::101")}));
  // One payload per family, each with only its own entries.
  ASSERT_EQ(ipt_.payloads.size(), 1u);
  ASSERT_EQ(ipt_.payloads6.size(), 1u);
  EXPECT_THAT(ipt_.payloads[0], Not(HasSubstr("fd00:")));
  EXPECT_THAT(ipt_.payloads6[0], Not(HasSubstr("10.96.")));
  EXPECT_THAT(ipt_.payloads6[0], HasSubstr("-d fd00:96::101/128 -p tcp -m tcp --dport 80 -j REJECT "
                                           "--reject-with icmp6-port-unreachable\n"));
  EXPECT_THAT(ipt_.payloads6[0], HasSubstr("--vmethod MASQ -j MASQUERADE"));
  EXPECT_EQ(ipt_.jumps.size(), 4u);
  EXPECT_EQ(ipt_.jumps6.size(), 4u);
  EXPECT_EQ(sys_.read("net/ipv6/conf/all/forwarding"), "1");
  const auto st = backend_.stats();
  EXPECT_EQ(st.ipv6_services, 3u);
  EXPECT_TRUE(st.ipv6_rules);
  EXPECT_EQ(st.sysctl_errors, 0u) << st.sysctl_error;
}

TEST_F(IpvsBackendTest, Ipv4OnlyRunsNoIp6tablesButTheCheck) {
  ASSERT_TRUE(apply(seed(), true)) << error_;
  EXPECT_TRUE(ipt_.payloads6.empty());
  EXPECT_TRUE(ipt_.jumps6.empty());
  size_t v6cmds = 0;
  for (const auto& c : ipt_.commands) v6cmds += c.rfind("ip6tables", 0) == 0;
  EXPECT_EQ(v6cmds, 1u);  // ip6tables -S VIPD-IPVS-SERVICES: nothing of an earlier run
  EXPECT_FALSE(backend_.stats().ipv6_rules);
  EXPECT_EQ(sys_.read("net/ipv6/conf/all/forwarding"), "");  // not touched
}

TEST_F(IpvsBackendTest, Ipv6PartialSyncDrainsAndDeletesUdpAtOnce) {
  ASSERT_TRUE(apply(seed_dual(), true)) << error_;
  kernel_.dest(kDb6, "fd00:244::3:44", 8080)->active_conns = 2;
  ServiceTable next = seed_dual();
  auto& b = next.services[kDb6].backends;
  b.erase(std::remove_if(b.begin(), b.end(), [](const RealServer& r) { return r.ip == ip("fd00:244::3:44"); }),
          b.end());
  auto& u = next.services[kDns6].backends;
  u.erase(u.begin());  // fd00:244::1:15 leaves the UDP service
  kernel_.calls.clear();
  ASSERT_TRUE(apply(next)) << error_;
  EXPECT_EQ(kernel_.count("dump"), 0u);  // partial: from vipd's record
  EXPECT_TRUE(kernel_.called("edit_dest TCP [fd00:96::100]:8080 [fd00:244::3:44]:8080 w=0"));
  EXPECT_TRUE(kernel_.called("del_dest UDP [fd00:96::100]:9053 [fd00:244::1:15]:9053"));
  ASSERT_EQ(backend_.draining().size(), 1u);
  EXPECT_EQ(backend_.draining()[0].ip, ip("fd00:244::3:44"));
  kernel_.dest(kDb6, "fd00:244::3:44", 8080)->active_conns = 0;
  std::string err;
  ASSERT_TRUE(backend_.tick(&err)) << err;
  EXPECT_TRUE(kernel_.called("del_dest TCP [fd00:96::100]:8080 [fd00:244::3:44]:8080"));
  EXPECT_EQ(backend_.stats().draining, 0u);
  // The empty IPv6 service gets endpoints: its REJECT goes, in ip6tables only.
  const size_t v4_payloads = ipt_.payloads.size();
  next.services[kEmpty6].backends.push_back({ip("fd00:244::1:15"), 80, 1, false});
  ASSERT_TRUE(apply(next)) << error_;
  EXPECT_EQ(ipt_.payloads.size(), v4_payloads);
  EXPECT_THAT(ipt_.payloads6.back(), Not(HasSubstr("REJECT")));
}

// A restart after a run with IPv6 services: the stale IPv6 service (its VIP on
// vipd's interface) is deleted and unbound, the foreign one kept, and vipd's
// ip6tables chain (found by the check) is emptied although the table is IPv4-only.
TEST_F(IpvsBackendTest, RestartCleansUpStaleIpv6) {
  vips_.exists = true;
  vips_.addrs = {ip("10.96.0.100"), ip("fd00:96::200")};
  const ServiceKey stale6 = tcp("fd00:96::200", 80);
  kernel_.svcs[stale6].service = to_ipvs_service(svc(stale6, {}));
  IpvsDest d;
  d.ip = ip("fd00:244::1:15"), d.port = 80;
  kernel_.svcs[stale6].dests.push_back(d);
  const ServiceKey foreign6 = tcp("fd00:1::1", 80);
  kernel_.svcs[foreign6].service = to_ipvs_service(svc(foreign6, {}));
  ipt_.v6_chain_exists = true;
  ASSERT_TRUE(apply(seed(), true)) << error_;
  EXPECT_TRUE(kernel_.called("del_service TCP [fd00:96::200]:80"));
  EXPECT_FALSE(kernel_.svcs.count(stale6));
  EXPECT_TRUE(kernel_.svcs.count(foreign6));
  EXPECT_FALSE(vips_.addrs.count(ip("fd00:96::200")));
  ASSERT_EQ(ipt_.payloads6.size(), 1u);
  EXPECT_THAT(ipt_.payloads6[0], HasSubstr(":VIPD-IPVS-SERVICES - [0:0]\n"));
  EXPECT_THAT(ipt_.payloads6[0], Not(HasSubstr("-A VIPD-IPVS-SERVICES")));
  const auto st = backend_.stats();
  EXPECT_EQ(st.stale_services_deleted, 1u);
  EXPECT_EQ(st.foreign_services, 1u);
  EXPECT_EQ(st.ipv6_services, 0u);
}

TEST_F(IpvsBackendTest, Ip6tablesFailureFailsTheSyncWithOneLine) {
  ipt_.restore6_fails = true;
  EXPECT_FALSE(apply(seed_dual(), true));
  EXPECT_THAT(error_, HasSubstr("ip6tables-restore"));
  EXPECT_EQ(error_.find('\n'), std::string::npos) << error_;
  ipt_.restore6_fails = false;
  ASSERT_TRUE(apply(seed_dual())) << error_;  // the retry is a full sync
  EXPECT_EQ(ipt_.payloads6.size(), 2u);
}

TEST_F(IpvsBackendTest, CrossFamilyBackendsAreSkippedAndCounted) {
  ServiceTable t = seed();
  t.services[kDb].backends.push_back({ip("fd00:244::9"), 8080, 1, false});
  ASSERT_TRUE(apply(t, true)) << error_;
  EXPECT_EQ(kernel_.svcs[kDb].dests.size(), 4u);
  EXPECT_EQ(backend_.stats().cross_family_skipped, 1u);
}

}  // namespace
}  // namespace vipd::cp::ipvs
