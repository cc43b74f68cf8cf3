// Thread: test main thread. Tests for controlplane/backends/ipvs/ipvs_desired.cc
// and ipvs_kernel.cc: scheduler and persistence mapping, which real servers and
// VIPs are wanted, the iptables payload per forward method and when_empty, the
// dry-run text, and the one-line texts of kernel errors.
#include "controlplane/backends/ipvs/ipvs_desired.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>

#include "controlplane/backends/ipvs/ipvs_kernel.h"
#include "tests/unit/iptables/payload_check.h"
#include "tests/unit/ipvs/fake_kernel.h"

namespace vipd::cp::ipvs {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace ::vipd::cp::ipvs::testing;

VirtualService vs_of(const ServiceKey& k, Scheduler sched, uint32_t persist) {
  VirtualService v;
  v.key = k;
  v.name = "default/svc:http";
  v.scheduler = sched;
  v.persistence_timeout_s = persist;
  return v;
}

TEST(IpvsDesired, SchedulerPassesThroughByName) {
  for (const auto& s : kSchedulerNames)
    EXPECT_EQ(to_ipvs_service(vs_of(tcp("10.96.0.1", 80), s.value, 0)).scheduler, s.name);
  EXPECT_EQ(to_ipvs_service(VirtualService{}).scheduler, "rr");
}

TEST(IpvsDesired, PersistenceFromAffinity) {
  const IpvsService none = to_ipvs_service(vs_of(tcp("10.96.0.1", 80), Scheduler::kRr, 0));
  EXPECT_EQ(none.flags, 0u);
  EXPECT_EQ(none.timeout_s, 0u);
  const IpvsService sticky = to_ipvs_service(vs_of(tcp("10.96.0.1", 80), Scheduler::kRr, 10800));
  EXPECT_EQ(sticky.flags, kFlagPersistent);
  EXPECT_EQ(sticky.flags, 0x1u);
  EXPECT_EQ(sticky.timeout_s, 10800u);
  EXPECT_EQ(sticky.netmask, 0xffffffffu);
}

TEST(IpvsDesired, OnlyWeightAboveZeroRealServersAreWantedSorted) {
  VirtualService v = vs_of(tcp("10.96.0.1", 80), Scheduler::kWrr, 0);
  v.backends = {{ip("10.244.3.12"), 8080, 2, false}, {ip("10.244.1.15"), 8080, 1, false},
                {ip("10.244.2.88"), 8080, 0, true}};
  const DesiredService d = to_desired(v);
  ASSERT_EQ(d.dests.size(), 2u);
  EXPECT_EQ(d.dests[0].ip, ip("10.244.1.15"));
  EXPECT_EQ(d.dests[1].ip, ip("10.244.3.12"));
  EXPECT_EQ(d.dests[1].weight, 2u);
  EXPECT_EQ(d.dests[0].fwd_method, kFwdMasq);
  EXPECT_FALSE(d.empty());
  v.backends = {{ip("10.244.2.88"), 8080, 0, true}};
  EXPECT_TRUE(to_desired(v).empty());
}

TEST(IpvsDesired, VipsOfEveryKindButNodePort) {
  ServiceTable t;
  VirtualService a = vs_of(tcp("10.96.0.1", 80), Scheduler::kRr, 0);
  VirtualService b = vs_of(udp("10.96.0.1", 53), Scheduler::kRr, 0);
  VirtualService np = vs_of(tcp("192.168.1.5", 30080), Scheduler::kRr, 0);
  np.kind = ServiceKind::kNodePort;
  VirtualService lb = vs_of(tcp("203.0.113.7", 80), Scheduler::kRr, 0);
  lb.kind = ServiceKind::kLoadBalancer;
  for (auto* v : {&a, &b, &np, &lb}) t.services[v->key] = *v;
  const Desired d = build_desired(t);
  EXPECT_EQ(d.services.size(), 4u);
  EXPECT_EQ(d.vips, (std::set<IpAddr>{ip("10.96.0.1"), ip("203.0.113.7")}));
}

TEST(IpvsDesired, RulesPerForwardMethodAndWhenEmpty) {
  ServiceTable t;
  VirtualService rej = vs_of(tcp("10.96.0.101", 80), Scheduler::kRr, 0);
  rej.name = "default/empty:http";
  VirtualService drop = vs_of(udp("10.96.0.101", 53), Scheduler::kRr, 0);
  drop.when_empty = WhenEmpty::kDrop;
  VirtualService ranges = vs_of(tcp("203.0.113.7", 443), Scheduler::kRr, 0);
  ranges.backends = {{ip("10.244.1.15"), 443, 1, false}};
  ranges.source_ranges = {"192.0.2.0/24"};
  ranges.name = "default/lb:https";
  for (auto* v : {&rej, &drop, &ranges}) t.services[v->key] = *v;
  const Desired d = build_desired(t);
  const std::string fnat = render_rules(d, RulesOptions{true});
  const std::string nat = render_rules(d, RulesOptions{false});
  EXPECT_THAT(fnat, HasSubstr(":VIPD-IPVS-POSTROUTING - [0:0]\n"));
  EXPECT_THAT(fnat, HasSubstr("-j MASQUERADE"));
  EXPECT_THAT(nat, HasSubstr(":VIPD-IPVS-POSTROUTING - [0:0]\n"));
  EXPECT_THAT(nat, Not(HasSubstr("MASQUERADE")));
  EXPECT_THAT(fnat, HasSubstr("--comment \"default/empty:http has no endpoints\" -d 10.96.0.101/32 -p tcp -m tcp "
                              "--dport 80 -j REJECT\n"));
  EXPECT_THAT(fnat, HasSubstr("-d 10.96.0.101/32 -p udp -m udp --dport 53 -j DROP\n"));
  EXPECT_THAT(fnat, HasSubstr("-s 192.0.2.0/24 -d 203.0.113.7/32 -p tcp -m tcp --dport 443 -j RETURN\n"));
  EXPECT_THAT(fnat, HasSubstr("\"default/lb:https source ranges\" -d 203.0.113.7/32 -p tcp -m tcp --dport 443 -j DROP\n"));
  // Two tables, each committed once; nothing outside vipd's chains is declared.
  EXPECT_EQ(fnat.rfind("*nat\n", 0), 0u);
  EXPECT_THAT(fnat, HasSubstr("COMMIT\n*filter\n:VIPD-IPVS-SERVICES - [0:0]\n"));
  EXPECT_THAT(fnat, Not(HasSubstr(":INPUT")));
  EXPECT_THAT(fnat, Not(HasSubstr(":POSTROUTING")));
}

// The ipvs mode's iptables payload for names that try to break it (NUL,
// newline, quotes, ESC, 1,100 characters): well-formed, and exactly the rules
// of a plain name, each complete -- in particular the DROP after the
// loadBalancerSourceRanges RETURNs (a NUL used to cut it off: firewall
// bypassed), and no argument iptables-restore refuses (a long comment used to
// fail every sync with "Parameter too long!").
TEST(IpvsDesired, HostileNamesCannotBreakThePayload) {
  auto table = [](const std::string& name) {
    ServiceTable t;
    VirtualService rej = vs_of(tcp("10.96.0.101", 80), Scheduler::kRr, 0);
    VirtualService drop = vs_of(udp("10.96.0.101", 53), Scheduler::kRr, 0);
    drop.when_empty = WhenEmpty::kDrop;
    VirtualService ranges = vs_of(tcp("203.0.113.7", 443), Scheduler::kRr, 0);
    ranges.backends = {{ip("10.244.1.15"), 443, 1, false}};
    ranges.source_ranges = {"192.0.2.0/24", "198.51.100.0/24"};
    for (auto* v : {&rej, &drop, &ranges}) {
      v->name = name;
      t.services[v->key] = *v;
    }
    return t;
  };
  for (const bool fnat : {true, false}) {
    std::vector<std::string> plain;
    const std::string plain_payload = render_rules(build_desired(table("ns/plain:http")), RulesOptions{fnat});
    ASSERT_EQ(ipt::payload_check::check_payload(plain_payload, &plain), "");
    ASSERT_THAT(plain_payload, HasSubstr("-d 203.0.113.7/32 -p tcp -m tcp --dport 443 -j DROP\n"));
    for (const auto& name : ipt::payload_check::hostile_names()) {
      SCOPED_TRACE(ipt::payload_check::escaped(name));
      const std::string payload = render_rules(build_desired(table(name)), RulesOptions{fnat});
      std::vector<std::string> shape;
      EXPECT_EQ(ipt::payload_check::check_payload(payload, &shape), "");
      EXPECT_EQ(shape, plain);
      EXPECT_EQ(payload.find('\0'), std::string::npos);
    }
  }
}

TEST(IpvsDesired, JumpRules) {
  const auto j = ipvs_jumps();
  ASSERT_EQ(j.size(), 4u);
  EXPECT_EQ(j[0].text(),
            "-t nat -I POSTROUTING 1 -m comment --comment \"vipd ipvs postrouting rules\" -j VIPD-IPVS-POSTROUTING");
  EXPECT_EQ(j[1].chain, "INPUT");
  EXPECT_EQ(j[1].args.back(), "VIPD-IPVS-SERVICES");
}

TEST(IpvsDesired, DryRunTextIsIpvsadmLike) {
  ServiceTable t;
  VirtualService v = vs_of(tcp("10.96.0.100", 8080), Scheduler::kRr, 0);
  v.backends = {{ip("10.244.1.15"), 8080, 1, false}, {ip("10.244.2.88"), 8080, 1, false}};
  VirtualService s = vs_of(tcp("10.96.0.102", 8080), Scheduler::kSh, 300);
  t.services[v.key] = v;
  t.services[s.key] = s;
  const std::string txt = dry_run_text(build_desired(t), RulesOptions{}, "vipd-ipvs0");
  EXPECT_THAT(txt, HasSubstr("TCP  10.96.0.100:8080 rr\n  -> 10.244.1.15:8080             Masq    1\n"));
  EXPECT_THAT(txt, HasSubstr("TCP  10.96.0.102:8080 sh persistent 300\n"));
  EXPECT_THAT(txt, HasSubstr("dummy interface vipd-ipvs0"));
  EXPECT_THAT(txt, HasSubstr("#   10.96.0.102/32\n"));
  EXPECT_THAT(txt, HasSubstr("net.ipv4.vs.conntrack = 1"));
  EXPECT_THAT(txt, HasSubstr("-j REJECT"));  // .102 has no real servers
}


TEST(IpvsDesired, Ipv6EntryMapsToAnIpv6ServiceAndVip) {
  VirtualService v = vs_of(tcp("fd00:96::100", 8080), Scheduler::kRr, 300);
  v.backends = {{ip("fd00:244::3:12"), 8080, 2, false}, {ip("fd00:244::1:15"), 8080, 1, false},
                {ip("10.244.1.15"), 8080, 1, false}};  // the other family: not wanted
  ServiceTable t;
  t.services[v.key] = v;
  const Desired d = build_desired(t);
  const DesiredService& s = d.services.at(v.key);
  EXPECT_EQ(s.service.netmask, 128u);
  EXPECT_EQ(s.service.flags, kFlagPersistent);
  ASSERT_EQ(s.dests.size(), 2u);
  EXPECT_EQ(s.dests[0].ip, ip("fd00:244::1:15"));
  EXPECT_EQ(s.dests[1].weight, 2u);
  EXPECT_EQ(d.cross_family, 1u);
  EXPECT_EQ(d.vips, std::set<IpAddr>{ip("fd00:96::100")});
  EXPECT_TRUE(d.has_ipv6());
  EXPECT_EQ(dest_to_string(ip("fd00:244::1:15"), 8080), "[fd00:244::1:15]:8080");
  EXPECT_EQ(host_prefix(ip("fd00:96::100")), "fd00:96::100/128");
  EXPECT_EQ(host_prefix(ip("10.96.0.1")), "10.96.0.1/32");
}

TEST(IpvsDesired, RulesPerFamily) {
  ServiceTable t;
  VirtualService rej4 = vs_of(tcp("10.96.0.101", 80), Scheduler::kRr, 0);
  VirtualService rej6 = vs_of(tcp("fd00:96::101", 80), Scheduler::kRr, 0);
  rej6.name = "default/empty6:http";
  VirtualService drop6 = vs_of(udp("fd00:96::101", 53), Scheduler::kRr, 0);
  drop6.when_empty = WhenEmpty::kDrop;
  VirtualService lb6 = vs_of(tcp("2001:db8::7", 443), Scheduler::kRr, 0);
  lb6.backends = {{ip("fd00:244::1:15"), 443, 1, false}};
  lb6.source_ranges = {"192.0.2.0/24", "2001:db8:1::/48"};
  VirtualService only4 = vs_of(tcp("2001:db8::8", 443), Scheduler::kRr, 0);  // IPv4 ranges only
  only4.backends = {{ip("fd00:244::1:15"), 443, 1, false}};
  only4.source_ranges = {"192.0.2.0/24"};
  for (auto* v : {&rej4, &rej6, &drop6, &lb6, &only4}) t.services[v->key] = *v;
  const Desired d = build_desired(t);
  const std::string v4 = render_rules(d, RulesOptions{true}, AddressFamily::kIpv4);
  const std::string v6 = render_rules(d, RulesOptions{true}, AddressFamily::kIpv6);
  EXPECT_EQ(v4, render_rules(d, RulesOptions{true}));  // the default is IPv4
  EXPECT_THAT(v4, HasSubstr("-d 10.96.0.101/32 -p tcp -m tcp --dport 80 -j REJECT\n"));
  EXPECT_THAT(v4, Not(HasSubstr("fd00:")));
  EXPECT_THAT(v4, Not(HasSubstr("2001:db8")));
  EXPECT_THAT(v6, Not(HasSubstr("10.96.")));
  EXPECT_THAT(v6, HasSubstr("\"default/empty6:http has no endpoints\" -d fd00:96::101/128 -p tcp -m tcp --dport 80 "
                            "-j REJECT --reject-with icmp6-port-unreachable\n"));
  EXPECT_THAT(v6, HasSubstr("-d fd00:96::101/128 -p udp -m udp --dport 53 -j DROP\n"));
  EXPECT_THAT(v6, HasSubstr("-s 2001:db8:1::/48 -d 2001:db8::7/128 -p tcp -m tcp --dport 443 -j RETURN\n"));
  EXPECT_THAT(v6, Not(HasSubstr("192.0.2.0/24")));
  EXPECT_THAT(v6, Not(HasSubstr("-d 2001:db8::8/128 -p tcp -m tcp --dport 443 -j RETURN")));
  EXPECT_THAT(v6, HasSubstr("-d 2001:db8::8/128 -p tcp -m tcp --dport 443 -j DROP\n"));
  EXPECT_THAT(v6, HasSubstr("-m ipvs --ipvs --vdir ORIGINAL --vmethod MASQ -j MASQUERADE"));
  std::vector<std::string> shape;
  EXPECT_EQ(ipt::payload_check::check_payload(v6, &shape), "");
}

TEST(IpvsDesired, DryRunTextWithIpv6) {
  ServiceTable t;
  VirtualService v = vs_of(tcp("fd00:96::100", 8080), Scheduler::kRr, 0);
  v.backends = {{ip("fd00:244::1:15"), 8080, 1, false}};
  VirtualService e = vs_of(tcp("fd00:96::101", 80), Scheduler::kRr, 0);
  VirtualService v4 = vs_of(tcp("10.96.0.100", 8080), Scheduler::kRr, 0);
  v4.backends = {{ip("10.244.1.15"), 8080, 1, false}};
  for (auto* x : {&v, &e, &v4}) t.services[x->key] = *x;
  const std::string txt = dry_run_text(build_desired(t), RulesOptions{}, "vipd-ipvs0");
  EXPECT_THAT(txt, HasSubstr("TCP  [fd00:96::100]:8080 rr\n  -> [fd00:244::1:15]:8080        Masq    1\n"));
  EXPECT_THAT(txt, HasSubstr("#   fd00:96::100/128\n"));
  EXPECT_THAT(txt, HasSubstr("#   10.96.0.100/32\n"));
  EXPECT_THAT(txt, HasSubstr("net.ipv6.conf.all.forwarding = 1"));
  EXPECT_THAT(txt, HasSubstr("# ip6tables-restore --noflush payload\n"));
  EXPECT_THAT(txt, HasSubstr("#   ip6tables -t nat -I POSTROUTING 1"));
  EXPECT_THAT(txt, HasSubstr("-d fd00:96::101/128 -p tcp -m tcp --dport 80 -j REJECT --reject-with "
                             "icmp6-port-unreachable"));
  // IPv4 only: no IPv6 part at all.
  ServiceTable t4;
  t4.services[v4.key] = v4;
  const std::string txt4 = dry_run_text(build_desired(t4), RulesOptions{}, "vipd-ipvs0");
  EXPECT_THAT(txt4, Not(HasSubstr("ip6tables")));
  EXPECT_THAT(txt4, Not(HasSubstr("net.ipv6")));
}

TEST(IpvsKernelErrors, OneLineEach) {
  for (int e : {EEXIST, ESRCH, ENOENT, EPERM, EINVAL, kErrNoFamily, kErrBadReply, kErrSocket, 12345}) {
    const std::string t = kernel_error_text(e);
    EXPECT_FALSE(t.empty());
    EXPECT_EQ(t.find('\n'), std::string::npos) << t;
  }
  EXPECT_THAT(kernel_error_text(EEXIST), HasSubstr("EEXIST"));
  EXPECT_THAT(kernel_error_text(ESRCH), HasSubstr("ESRCH"));
  EXPECT_THAT(kernel_error_text(ENOENT), HasSubstr("ENOENT"));
  EXPECT_THAT(kernel_error_text(EPERM), HasSubstr("CAP_NET_ADMIN"));
  EXPECT_THAT(kernel_error_text(kErrNoFamily), HasSubstr("modprobe ip_vs"));
  EXPECT_EQ(describe_op("delete service", "TCP 10.96.0.1:80", ESRCH),
            "delete service TCP 10.96.0.1:80: no such virtual service in the kernel (ESRCH)");
  EXPECT_THAT(describe_op("add service", "TCP 10.96.0.1:80 (scheduler mh)", ENOENT), HasSubstr("ip_vs_<scheduler>"));
  EXPECT_THAT(describe_op("delete real server", "x", ENOENT), Not(HasSubstr("scheduler")));
}

}  // namespace
}  // namespace vipd::cp::ipvs
