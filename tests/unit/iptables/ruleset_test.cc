// Thread: test main thread. Tests for controlplane/backends/iptables/ruleset.cc:
// golden payloads of the tests/data manifests (VIPD_UPDATE_GOLDEN=1 rewrites
// them), probabilities, affinity, reject/drop, source ranges, full vs partial
// payloads and stale chain deletion. Run from the source root.
#include "controlplane/backends/iptables/ruleset.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "controlplane/backends/iptables/chain_names.h"
#include "controlplane/backends/iptables/comment.h"
#include "controlplane/sources/manifest_source.h"
#include "tests/unit/iptables/payload_check.h"

namespace vipd::cp::ipt {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

Ipv4 ip(const char* s) { return *parse_ipv4(s); }

VirtualService service(const std::string& name, const char* vip, uint16_t port, std::vector<RealServer> backends,
                       Protocol proto = Protocol::kTcp) {
  VirtualService s;
  s.key = {ip(vip), port, proto};
  s.name = name;
  s.backends = std::move(backends);
  return s;
}

RealServer rs(const char* a, uint16_t port, uint32_t weight = 1) {
  RealServer r;
  r.ip = ip(a);
  r.port = port;
  r.weight = weight;
  r.terminating = weight == 0;
  return r;
}

ServiceTable table_of(std::vector<VirtualService> v) {
  ServiceTable t;
  for (auto& s : v) t.services[s.key] = std::move(s);
  t.normalize();
  return t;
}

Ruleset build(const ServiceTable& t, RenderOptions o = {}) {
  Ruleset r;
  std::string err;
  EXPECT_TRUE(build_ruleset(t, o, &r, &err)) << err;
  return r;
}

std::vector<std::string> rules_of(const Ruleset& r, Table t, const std::string& chain) {
  const Chain* c = r.find(t, chain);
  return c ? c->rules : std::vector<std::string>{"<no chain " + chain + ">"};
}

std::string svc_chain(const std::string& name, const char* proto = "tcp") {
  return "VIPD-SVC-" + port_proto_hash(name, proto);
}
std::string sep_chain(const std::string& name, const std::string& ep, const char* proto = "tcp") {
  return "VIPD-SEP-" + endpoint_hash(name, proto, ep);
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

bool has_line(const std::string& text, const std::string& line) {
  for (const auto& l : lines(text))
    if (l == line) return true;
  return false;
}

// Every chain named in a payload is vipd's own; builtin chains are never declared.
void expect_only_owned(const std::string& payload) {
  for (const auto& l : lines(payload)) {
    std::string chain;
    if (l.rfind(":", 0) == 0) {
      chain = l.substr(1, l.find(' ') - 1);
    } else if (l.rfind("-X ", 0) == 0) {
      chain = l.substr(3);
    } else if (l.rfind("-A ", 0) == 0) {
      chain = l.substr(3, l.find(' ', 3) - 3);
    }
    if (!chain.empty()) {
      EXPECT_EQ(chain.rfind("VIPD-", 0), 0u) << l;
    }
    EXPECT_NE(l.rfind("-F", 0), 0u) << "a flush command: " << l;
  }
}

// One golden file per manifests case and forward method:
// tests/data/golden/iptables/NAME.{fnat,nat}.rules. Like the JSON goldens, the
// cases are the golden files present (a new manifests directory needs no
// iptables golden); VIPD_UPDATE_GOLDEN=1 (re)writes one for every directory.
TEST(IptablesGolden, DryRunPayloadsMatch) {
  const std::string root = "tests/data";
  ASSERT_TRUE(fs::is_directory(root + "/manifests")) << "run from the source root";
  const bool update = std::getenv("VIPD_UPDATE_GOLDEN") != nullptr;
  std::set<std::string> names;
  if (update) {
    fs::create_directories(root + "/golden/iptables");
    for (const auto& d : fs::directory_iterator(root + "/manifests"))
      if (d.is_directory()) names.insert(d.path().filename().string());
  } else {
    ASSERT_TRUE(fs::is_directory(root + "/golden/iptables"));
    for (const auto& g : fs::directory_iterator(root + "/golden/iptables")) {
      const std::string f = g.path().filename().string();
      for (const char* suffix : {".fnat.rules", ".nat.rules"}) {
        const std::string sfx = suffix;
        if (f.size() > sfx.size() && f.compare(f.size() - sfx.size(), sfx.size(), sfx) == 0)
          names.insert(f.substr(0, f.size() - sfx.size()));
      }
    }
  }
  int cases = 0;
  for (const auto& name : names) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(fs::is_directory(root + "/manifests/" + name)) << "golden file without tests/data/manifests/" << name;
    ManifestSource src(root + "/manifests/" + name, Scheduler::kRr);
    LoadResult r = src.load();
    for (const auto& e : r.errors) ADD_FAILURE() << e.to_string();
    r.table.normalize();
    for (bool masq : {true, false}) {
      RenderOptions o;
      o.masquerade_all = masq;
      const std::string got = dry_run_text(build(r.table, o), o);
      const std::string file = root + "/golden/iptables/" + name + (masq ? ".fnat" : ".nat") + ".rules";
      if (update) std::ofstream(file, std::ios::binary | std::ios::trunc) << got;
      std::ifstream in(file, std::ios::binary);
      ASSERT_TRUE(in) << file << " missing (VIPD_UPDATE_GOLDEN=1 writes it)";
      std::stringstream want;
      want << in.rdbuf();
      EXPECT_EQ(got, want.str()) << file << " differs (VIPD_UPDATE_GOLDEN=1 rewrites it)";
      expect_only_owned(got);
      ++cases;
    }
  }
  EXPECT_GE(cases, 14);
}

TEST(IptablesGolden, SeedUsesContractLayout) {
  ManifestSource src("tests/data/manifests/seed", Scheduler::kRr);
  LoadResult r = src.load();
  ASSERT_TRUE(r.errors.empty());
  r.table.normalize();
  const Ruleset rs = build(r.table);
  const std::string svc = svc_chain("default/db:http");
  EXPECT_THAT(rules_of(rs, Table::kNat, "VIPD-SERVICES"),
              ElementsAre("-m comment --comment \"default/db:http cluster IP\" -d 10.96.0.100/32 -p tcp -m tcp "
                          "--dport 8080 -j " + svc));
  const auto svc_rules = rules_of(rs, Table::kNat, svc);
  ASSERT_EQ(svc_rules.size(), 5u);
  EXPECT_THAT(svc_rules[0], HasSubstr("-j VIPD-MARK-MASQ"));
  EXPECT_THAT(svc_rules[1], AllOf(HasSubstr("--probability 0.2500000000 "),
                                  HasSubstr("-j " + sep_chain("default/db:http", "10.244.1.15:8080"))));
  const auto sep = rules_of(rs, Table::kNat, sep_chain("default/db:http", "10.244.3.44:8080"));
  EXPECT_THAT(sep, ElementsAre(HasSubstr("-s 10.244.3.44/32 -j VIPD-MARK-MASQ"),
                               HasSubstr("-p tcp -m tcp -j DNAT --to-destination 10.244.3.44:8080")));
  EXPECT_THAT(rules_of(rs, Table::kNat, "VIPD-MARK-MASQ"), ElementsAre("-j MARK --or-mark 0x4000"));
  EXPECT_THAT(rules_of(rs, Table::kNat, "VIPD-POSTROUTING"),
              ElementsAre("-m mark ! --mark 0x4000/0x4000 -j RETURN", "-j MARK --xor-mark 0x4000",
                          HasSubstr("-j MASQUERADE")));
}

TEST(IptablesRender, ProbabilitiesOneOverRemaining) {
  const auto t = table_of({service("ns/s:p", "10.96.1.1", 80,
                                   {rs("10.1.0.1", 8080), rs("10.1.0.2", 8080), rs("10.1.0.3", 8080),
                                    rs("10.1.0.4", 8080), rs("10.1.0.5", 8080), rs("10.1.0.6", 8080),
                                    rs("10.1.0.7", 8080)})});
  const auto r = rules_of(build(t, {.masquerade_all = false}), Table::kNat, svc_chain("ns/s:p"));
  ASSERT_EQ(r.size(), 7u);
  const char* want[] = {"0.1428571429", "0.1666666667", "0.2000000000", "0.2500000000", "0.3333333333",
                        "0.5000000000"};
  for (size_t i = 0; i < 6; ++i)
    EXPECT_THAT(r[i], HasSubstr("-m statistic --mode random --probability " + std::string(want[i]) + " -j "));
  EXPECT_THAT(r[6], Not(HasSubstr("statistic")));  // last: unconditional
  EXPECT_THAT(r[6], HasSubstr("\"ns/s:p -> 10.1.0.7:8080\" -j " + sep_chain("ns/s:p", "10.1.0.7:8080")));
}

TEST(IptablesRender, SingleBackendIsUnconditional) {
  const auto t = table_of({service("ns/one", "10.96.1.2", 53, {rs("10.1.0.9", 5353)}, Protocol::kUdp)});
  const auto rsu = build(t);
  const auto r = rules_of(rsu, Table::kNat, svc_chain("ns/one", "udp"));
  ASSERT_EQ(r.size(), 2u);
  EXPECT_THAT(r[0], HasSubstr("-d 10.96.1.2/32 -p udp -m udp --dport 53 -j VIPD-MARK-MASQ"));
  EXPECT_EQ(r[1], "-m comment --comment \"ns/one -> 10.1.0.9:5353\" -j " +
                      sep_chain("ns/one", "10.1.0.9:5353", "udp"));
  EXPECT_THAT(rules_of(rsu, Table::kNat, sep_chain("ns/one", "10.1.0.9:5353", "udp"))[1],
              HasSubstr("-p udp -m udp -j DNAT --to-destination 10.1.0.9:5353"));
}

TEST(IptablesRender, TerminatingBackendsGetNoNewFlows) {
  const auto t = table_of({service("ns/s:p", "10.96.1.1", 80,
                                   {rs("10.1.0.1", 80), rs("10.1.0.2", 80, 0), rs("10.1.0.3", 80)})});
  const auto rsu = build(t, {.masquerade_all = false});
  const auto r = rules_of(rsu, Table::kNat, svc_chain("ns/s:p"));
  ASSERT_EQ(r.size(), 2u);
  EXPECT_THAT(r[0], HasSubstr("--probability 0.5000000000 -j " + sep_chain("ns/s:p", "10.1.0.1:80")));
  EXPECT_THAT(r[1], HasSubstr("-j " + sep_chain("ns/s:p", "10.1.0.3:80")));
  EXPECT_EQ(rsu.find(Table::kNat, sep_chain("ns/s:p", "10.1.0.2:80")), nullptr);
  for (const auto& c : rsu.nat)
    for (const auto& l : c.rules) EXPECT_THAT(l, Not(HasSubstr("10.1.0.2"))) << c.name;
}

TEST(IptablesRender, AllBackendsQuiescedIsLikeNoEndpoints) {
  const auto t = table_of({service("ns/s:p", "10.96.1.1", 80, {rs("10.1.0.1", 80, 0)})});
  const auto rsu = build(t);
  EXPECT_EQ(rsu.find(Table::kNat, svc_chain("ns/s:p")), nullptr);
  EXPECT_THAT(rules_of(rsu, Table::kFilter, "VIPD-SERVICES"),
              ElementsAre("-m comment --comment \"ns/s:p has no endpoints\" -d 10.96.1.1/32 -p tcp -m tcp "
                          "--dport 80 -j REJECT"));
}

TEST(IptablesRender, AffinityUsesRecent) {
  auto s = service("ns/sticky:web", "10.96.3.1", 80, {rs("10.1.0.1", 8080), rs("10.1.0.2", 8080)});
  s.persistence_timeout_s = 600;
  const auto rsu = build(table_of({s}), {.masquerade_all = false});
  const std::string sep1 = sep_chain("ns/sticky:web", "10.1.0.1:8080");
  const std::string sep2 = sep_chain("ns/sticky:web", "10.1.0.2:8080");
  EXPECT_THAT(rules_of(rsu, Table::kNat, svc_chain("ns/sticky:web")),
              ElementsAre(HasSubstr("-m recent --name " + sep1 + " --rcheck --seconds 600 --reap -j " + sep1),
                          HasSubstr("-m recent --name " + sep2 + " --rcheck --seconds 600 --reap -j " + sep2),
                          HasSubstr("--probability 0.5000000000 -j " + sep1), HasSubstr(" -j " + sep2)));
  EXPECT_THAT(rules_of(rsu, Table::kNat, sep1)[1],
              HasSubstr("-m recent --name " + sep1 + " --set -p tcp -m tcp -j DNAT --to-destination 10.1.0.1:8080"));
  // Without affinity: no recent match anywhere.
  s.persistence_timeout_s = 0;
  for (const auto& c : build(table_of({s})).nat)
    for (const auto& l : c.rules) EXPECT_THAT(l, Not(HasSubstr("recent"))) << c.name;
}

TEST(IptablesRender, EmptyServicesRejectOrDrop) {
  auto reject = service("ns/none:http", "10.96.5.1", 80, {});
  auto drop = service("ns/local:http", "10.96.5.2", 443, {});
  drop.when_empty = WhenEmpty::kDrop;
  const auto rsu = build(table_of({reject, drop}));
  EXPECT_THAT(rules_of(rsu, Table::kFilter, "VIPD-SERVICES"),
              ElementsAre("-m comment --comment \"ns/none:http has no endpoints\" -d 10.96.5.1/32 -p tcp -m tcp "
                          "--dport 80 -j REJECT",
                          "-m comment --comment \"ns/local:http has no local endpoints\" -d 10.96.5.2/32 -p tcp "
                          "-m tcp --dport 443 -j DROP"));
  EXPECT_TRUE(rules_of(rsu, Table::kNat, "VIPD-SERVICES").empty());
  EXPECT_EQ(rsu.nat.size(), 3u);  // SERVICES, MARK-MASQ, POSTROUTING only
}

TEST(IptablesRender, NatModeMasqueradesHairpinOnly) {
  const auto t = table_of({service("ns/s:p", "10.96.1.1", 80, {rs("10.1.0.1", 80)})});
  const auto fnat = rules_of(build(t, {.masquerade_all = true}), Table::kNat, svc_chain("ns/s:p"));
  const auto nat = rules_of(build(t, {.masquerade_all = false}), Table::kNat, svc_chain("ns/s:p"));
  EXPECT_EQ(fnat.size(), nat.size() + 1);
  for (const auto& l : nat) EXPECT_THAT(l, Not(HasSubstr("VIPD-MARK-MASQ")));
  EXPECT_THAT(rules_of(build(t, {.masquerade_all = false}), Table::kNat, sep_chain("ns/s:p", "10.1.0.1:80"))[0],
              HasSubstr("-s 10.1.0.1/32 -j VIPD-MARK-MASQ"));
}

TEST(IptablesRender, SourceRangesGetFirewallChains) {
  auto lb = service("ns/web:http", "203.0.113.7", 80, {rs("10.1.0.1", 8080)});
  lb.kind = ServiceKind::kLoadBalancer;
  lb.source_ranges = {"192.0.2.0/24", "198.51.100.0/25"};
  auto cip = service("ns/web:http", "10.96.7.1", 80, {rs("10.1.0.1", 8080)});
  const auto rsu = build(table_of({lb, cip}));
  const std::string h = chain_hash(entry_hash_input(lb));
  EXPECT_THAT(rules_of(rsu, Table::kNat, "VIPD-SERVICES"),
              ElementsAre(HasSubstr("-d 10.96.7.1/32 -p tcp -m tcp --dport 80 -j " + svc_chain("ns/web:http")),
                          HasSubstr("\"ns/web:http loadbalancer IP\" -d 203.0.113.7/32 -p tcp -m tcp --dport 80 -j "
                                    "VIPD-FW-" + h)));
  EXPECT_THAT(rules_of(rsu, Table::kNat, "VIPD-FW-" + h),
              ElementsAre(HasSubstr("-s 192.0.2.0/24 -j VIPD-SVC-" + h), HasSubstr("-s 198.51.100.0/25 -j VIPD-SVC-" + h)));
  EXPECT_THAT(rules_of(rsu, Table::kFilter, "VIPD-FIREWALL"),
              ElementsAre("-m comment --comment \"ns/web:http traffic not accepted by VIPD-FW-" + h +
                          "\" -d 203.0.113.7/32 -p tcp -m tcp --dport 80 -j DROP"));
  // The LoadBalancer entry's chains are distinct from the ClusterIP entry's.
  EXPECT_NE("VIPD-SVC-" + h, svc_chain("ns/web:http"));
  EXPECT_NE(rsu.find(Table::kNat, "VIPD-SVC-" + h), nullptr);
}

TEST(IptablesRender, BadSourceRangeIsAnError) {
  for (const char* bad : {"10.0.0.0", "10.0.0.0/33", "10.0.0/8", "x/8", "10.0.0.0/8\" -j ACCEPT", "10.0.0.0/"}) {
    auto lb = service("ns/web:http", "203.0.113.7", 80, {rs("10.1.0.1", 8080)});
    lb.source_ranges = {bad};
    Ruleset r;
    std::string err;
    EXPECT_FALSE(build_ruleset(table_of({lb}), {}, &r, &err)) << bad;
    EXPECT_THAT(err, AllOf(HasSubstr("ns/web:http"), HasSubstr("not an IPv4 CIDR"))) << bad;
  }
}

TEST(IptablesRender, FamilySpellings) {
  EXPECT_EQ(host_cidr("10.96.0.100", AddressFamily::kIpv4), "10.96.0.100/32");
  EXPECT_EQ(host_cidr("fd00:96::100", AddressFamily::kIpv6), "fd00:96::100/128");
  EXPECT_EQ(host_port("10.244.1.15", 8080, AddressFamily::kIpv4), "10.244.1.15:8080");
  EXPECT_EQ(host_port("fd00:244::1:15", 8080, AddressFamily::kIpv6), "[fd00:244::1:15]:8080");
  EXPECT_EQ(reject_target(AddressFamily::kIpv4), "-j REJECT");
  EXPECT_EQ(reject_target(AddressFamily::kIpv6), "-j REJECT --reject-with icmp6-port-unreachable");
  EXPECT_STREQ(restore_program(AddressFamily::kIpv6), "ip6tables-restore");
  EXPECT_STREQ(iptables_program(AddressFamily::kIpv4), "iptables");
  EXPECT_STREQ(family_label(AddressFamily::kIpv6), "IPv6");
  EXPECT_EQ(cidr_family("192.0.2.0/24"), AddressFamily::kIpv4);
  EXPECT_EQ(cidr_family("2001:db8::/32"), AddressFamily::kIpv6);
  EXPECT_EQ(cidr_family("fd00::1/128"), AddressFamily::kIpv6);
  EXPECT_EQ(cidr_family("::/0"), AddressFamily::kIpv6);
  for (const char* bad : {"2001:db8::/129", "2001:db8::/032", "2001:db8::", "2001:db8::/", "2001:db8::/1a",
                          "fe80::1%eth0/64", "[2001:db8::]/32", "2001:db8::/32 ", "10.0.0.0/33"})
    EXPECT_FALSE(cidr_family(bad).has_value()) << bad;
}

TEST(IptablesRender, Ipv6RulesetOfAnIpv4TableHasOnlyTheBaseChains) {
  const auto t = table_of({service("ns/a:http", "10.96.1.1", 80, {rs("10.1.0.1", 80)}),
                           service("ns/e:http", "10.96.1.2", 80, {})});
  Ruleset v6;
  std::string err;
  ASSERT_TRUE(build_ruleset(t, {}, AddressFamily::kIpv6, &v6, &err)) << err;
  EXPECT_EQ(v6.family, AddressFamily::kIpv6);
  EXPECT_EQ(v6.entries, 0u);
  EXPECT_EQ(count_entries(t, AddressFamily::kIpv4), 2u);
  EXPECT_EQ(count_entries(t, AddressFamily::kIpv6), 0u);
  EXPECT_THAT(v6.names(Table::kNat), ElementsAre("VIPD-MARK-MASQ", "VIPD-POSTROUTING", "VIPD-SERVICES"));
  EXPECT_TRUE(rules_of(v6, Table::kNat, "VIPD-SERVICES").empty());
  EXPECT_TRUE(rules_of(v6, Table::kFilter, "VIPD-SERVICES").empty());
  // The dry run of both families is the IPv4 text alone while there is no IPv6 entry.
  const Ruleset v4 = build(t);
  EXPECT_EQ(dry_run_text(v4, v6, {}), dry_run_text(v4, {}));
  // The IPv6 text names ip6tables.
  const std::string d6 = dry_run_text(v6, {});
  EXPECT_THAT(d6, HasSubstr("full ip6tables-restore --noflush payload (0 IPv6 service entries"));
  EXPECT_THAT(d6, HasSubstr("#   ip6tables -t nat -I PREROUTING 1 "));
}

TEST(IptablesRender, SourceRangesOfTheOtherFamilyAreLeftOut) {
  auto lb = service("ns/web:http", "203.0.113.7", 80, {rs("10.1.0.1", 8080)});
  lb.kind = ServiceKind::kLoadBalancer;
  lb.source_ranges = {"2001:db8::/32", "192.0.2.0/24"};
  const std::string h = chain_hash(entry_hash_input(lb));
  EXPECT_THAT(rules_of(build(table_of({lb})), Table::kNat, "VIPD-FW-" + h),
              ElementsAre(HasSubstr("-s 192.0.2.0/24 -j VIPD-SVC-" + h)));
  // Only ranges of the other family: the restriction stays, nothing is let through.
  lb.source_ranges = {"2001:db8::/32"};
  const Ruleset r = build(table_of({lb}));
  EXPECT_TRUE(rules_of(r, Table::kNat, "VIPD-FW-" + h).empty());
  EXPECT_THAT(rules_of(r, Table::kFilter, "VIPD-FIREWALL"),
              ElementsAre(HasSubstr("-d 203.0.113.7/32 -p tcp -m tcp --dport 80 -j DROP")));
}

TEST(IptablesRender, CommentsCannotBreakTheLine) {
  const auto t = table_of({service("ns/we\"ird\nname", "10.96.1.1", 80, {rs("10.1.0.1", 80)})});
  const std::string p = render_full(build(t), {}).text;
  for (const auto& l : lines(p)) EXPECT_TRUE(l == "COMMIT" || l[0] == '*' || l[0] == ':' || l[0] == '-') << l;
  EXPECT_THAT(p, HasSubstr("\"ns/we_ird_name -> 10.1.0.1:80\""));
}

// Every kind of rule (DNAT with affinity, firewall chains, REJECT, DROP) for a
// name that tries to break the payload: the payload stays well-formed and has
// exactly the rules of a plain name, each complete, only the comments differ.
TEST(IptablesRender, HostileNamesCannotBreakAnyRule) {
  auto entries = [](const std::string& name) {
    auto svc = service(name, "10.96.1.1", 80, {rs("10.1.0.1", 80), rs("10.1.0.2", 80)});
    svc.persistence_timeout_s = 10800;
    auto lb = service(name, "203.0.113.7", 80, {rs("10.1.0.1", 80)});
    lb.kind = ServiceKind::kLoadBalancer;
    lb.source_ranges = {"192.0.2.0/24"};
    auto rej = service(name, "10.96.1.2", 80, {});
    auto drop = service(name, "10.96.1.3", 53, {}, Protocol::kUdp);
    drop.when_empty = WhenEmpty::kDrop;
    return table_of({svc, lb, rej, drop});
  };
  for (const bool fnat : {true, false}) {
    RenderOptions o;
    o.masquerade_all = fnat;
    std::vector<std::string> plain;
    ASSERT_EQ(payload_check::check_payload(render_full(build(entries("ns/plain:http"), o), {}).text, &plain), "");
    ASSERT_GT(plain.size(), 20u);
    for (const auto& name : payload_check::hostile_names()) {
      SCOPED_TRACE(payload_check::escaped(name));
      const std::string payload = render_full(build(entries(name), o), {}).text;
      std::vector<std::string> shape;
      EXPECT_EQ(payload_check::check_payload(payload, &shape), "");
      EXPECT_EQ(shape, plain);
    }
  }
}

TEST(IptablesComment, SanitiserKeepsAllowedCutsAt255) {
  EXPECT_EQ(comment_text("ns/web:http -> 10.0.0.1:80 |x_y."), "ns/web:http -> 10.0.0.1:80 |x_y.");
  EXPECT_EQ(comment_text("ns/web:http -> [fd00::1]:80"), "ns/web:http -> [fd00::1]:80");
  EXPECT_EQ(comment_text(std::string("a\0b\n\"\\\x1b\xff", 8)), "a_b_____");
  EXPECT_EQ(comment_text(std::string(1100, 'x')).size(), kMaxCommentLength);
  EXPECT_EQ(comment_match("a\"b"), "-m comment --comment \"a_b\"");
}

TEST(IptablesRender, CollidingEntriesGetDistinctChains) {
  // Two ClusterIP entries with the same name and protocol (a broken source):
  // both switch to the extended hash input instead of sharing a chain.
  const auto t = table_of({service("ns/dup:p", "10.96.1.1", 80, {rs("10.1.0.1", 80)}),
                           service("ns/dup:p", "10.96.1.2", 80, {rs("10.1.0.2", 80)})});
  const auto rsu = build(t);
  const auto svcs = rules_of(rsu, Table::kNat, "VIPD-SERVICES");
  ASSERT_EQ(svcs.size(), 2u);
  EXPECT_NE(svcs[0].substr(svcs[0].rfind(' ')), svcs[1].substr(svcs[1].rfind(' ')));
  EXPECT_EQ(rsu.find(Table::kNat, svc_chain("ns/dup:p")), nullptr);
}

TEST(IptablesPayload, FullDeclaresEverythingAndDeletesStale) {
  const auto t = table_of({service("ns/s:p", "10.96.1.1", 80, {rs("10.1.0.1", 80)})});
  ExistingChains existing;
  existing.nat = {"VIPD-SVC-OLDOLDOLDOLDOLDO", "VIPD-SERVICES", "KUBE-SVC-NOTOURS"};
  existing.filter = {"VIPD-OLD-FILTER"};
  const Payload p = render_full(build(t), existing);
  EXPECT_EQ(p.chains_written, 2u + 5u);
  EXPECT_EQ(p.chains_deleted, 2u);
  EXPECT_TRUE(has_line(p.text, ":VIPD-SVC-OLDOLDOLDOLDOLDO - [0:0]"));
  EXPECT_TRUE(has_line(p.text, "-X VIPD-SVC-OLDOLDOLDOLDOLDO"));
  EXPECT_TRUE(has_line(p.text, "-X VIPD-OLD-FILTER"));
  EXPECT_THAT(p.text, Not(HasSubstr("KUBE-")));
  EXPECT_TRUE(has_line(p.text, ":" + svc_chain("ns/s:p") + " - [0:0]"));
  expect_only_owned(p.text);
  // Structure: *filter ... COMMIT *nat ... COMMIT, and -X after every rule of its table.
  const auto l = lines(p.text);
  ASSERT_GE(l.size(), 4u);
  EXPECT_EQ(l.front(), "*filter");
  EXPECT_EQ(l.back(), "COMMIT");
  size_t last_append = 0, first_delete = l.size();
  for (size_t i = 0; i < l.size(); ++i) {
    if (l[i] == "*nat") last_append = 0, first_delete = l.size();
    if (l[i].rfind("-A ", 0) == 0) last_append = i;
    if (l[i].rfind("-X ", 0) == 0 && i < first_delete) first_delete = i;
  }
  EXPECT_LT(last_append, first_delete);
}

TEST(IptablesPayload, PartialRewritesOnlyChangedChains) {
  auto db = service("default/db:http", "10.96.0.100", 8080,
                    {rs("10.244.1.15", 8080), rs("10.244.2.88", 8080), rs("10.244.3.12", 8080), rs("10.244.3.44", 8080)});
  auto other = service("default/other:http", "10.96.0.102", 80, {rs("10.244.9.9", 80)});
  const Ruleset before = build(table_of({db, other}));

  // Nothing changed (e.g. only the scheduler, which iptables mode ignores): no payload.
  auto db_sched = db;
  db_sched.scheduler = Scheduler::kWrr;
  EXPECT_TRUE(render_partial(build(table_of({db_sched, other})), before).empty());

  // Remove pod4 from db: db's SVC chain rewritten, pod4's SEP deleted, nothing else.
  auto db3 = db;
  db3.backends.pop_back();
  const Payload p = render_partial(build(table_of({db3, other})), before);
  const std::string svc = svc_chain("default/db:http");
  const std::string sep4 = sep_chain("default/db:http", "10.244.3.44:8080");
  EXPECT_EQ(p.chains_written, 1u) << p.text;
  EXPECT_EQ(p.chains_deleted, 1u) << p.text;
  EXPECT_THAT(lines(p.text), ElementsAre("*nat", ":" + svc + " - [0:0]", ":" + sep4 + " - [0:0]",
                                         HasSubstr("-A " + svc + " "), HasSubstr("--probability 0.3333333333"),
                                         HasSubstr("--probability 0.5000000000"), HasSubstr("10.244.3.12:8080\" -j"),
                                         "-X " + sep4, "COMMIT"));
  EXPECT_THAT(p.text, Not(HasSubstr("default/other")));
  EXPECT_THAT(p.text, Not(HasSubstr("*filter")));
  expect_only_owned(p.text);

  // db loses every endpoint: nat SERVICES rewritten, all its chains deleted,
  // the filter table gets the REJECT.
  auto db0 = db;
  db0.backends.clear();
  const Payload e = render_partial(build(table_of({db0, other})), before);
  EXPECT_EQ(e.chains_deleted, 5u);
  EXPECT_TRUE(has_line(e.text, "-X " + svc));
  EXPECT_TRUE(has_line(e.text, ":VIPD-SERVICES - [0:0]"));
  EXPECT_THAT(e.text, HasSubstr("-A VIPD-SERVICES -m comment --comment \"default/db:http has no endpoints\""));
  EXPECT_THAT(e.text, HasSubstr("-A VIPD-SERVICES -m comment --comment \"default/other:http cluster IP\""));
  EXPECT_THAT(e.text, Not(HasSubstr(":" + svc_chain("default/other:http"))));

  // A new service: its chains and nat SERVICES, nothing of db's.
  auto added = service("default/new:http", "10.96.0.103", 80, {rs("10.244.8.8", 80)});
  const Payload a = render_partial(build(table_of({db, other, added})), before);
  EXPECT_EQ(a.chains_written, 3u);  // SERVICES, SVC, SEP
  EXPECT_EQ(a.chains_deleted, 0u);
  EXPECT_THAT(a.text, Not(HasSubstr(":" + svc + " ")));
  EXPECT_THAT(a.text, HasSubstr(":" + svc_chain("default/new:http") + " - [0:0]"));
}

TEST(IptablesPayload, PartialAlsoDeletesStaleKernelChains) {
  const auto t = table_of({service("ns/s:p", "10.96.1.1", 80, {rs("10.1.0.1", 80)})});
  const Ruleset r = build(t);
  ExistingChains leftover;
  leftover.nat = {"VIPD-SEP-LEFTOVERLEFTOVE", "KUBE-SEP-X"};
  const Payload p = render_partial(r, r, leftover);
  EXPECT_EQ(p.chains_written, 0u);
  EXPECT_EQ(p.chains_deleted, 1u);
  EXPECT_TRUE(has_line(p.text, "-X VIPD-SEP-LEFTOVERLEFTOVE"));
  EXPECT_THAT(p.text, Not(HasSubstr("KUBE")));
}

TEST(IptablesPayload, ParseSavedChains) {
  const std::string save =
      "# Generated by iptables-save v1.8.9 (nf_tables)\n*mangle\n:PREROUTING ACCEPT [0:0]\n:VIPD-NOT-HERE - [0:0]\n"
      "COMMIT\n*filter\n:INPUT ACCEPT [0:0]\n:VIPD-SERVICES - [0:0]\n:KUBE-SERVICES - [0:0]\n"
      "-A INPUT -j VIPD-SERVICES\nCOMMIT\n*nat\n:PREROUTING ACCEPT [3:180]\n:VIPD-SVC-ABC - [5:300]\n"
      ":VIPD-SERVICES - [0:0]\r\nCOMMIT\n";
  const ExistingChains e = parse_saved_chains(save);
  EXPECT_THAT(e.filter, ElementsAre("VIPD-SERVICES"));
  EXPECT_THAT(e.nat, ElementsAre("VIPD-SERVICES", "VIPD-SVC-ABC"));
}

TEST(IptablesPayload, JumpRulesAndDryRunText) {
  const auto j = jump_rules();
  ASSERT_EQ(j.size(), 9u);
  std::set<std::string> where;
  for (const auto& r : j) {
    where.insert(std::string(table_name(r.table)) + "/" + r.chain + "/" + r.args.back());
    EXPECT_EQ(r.args.back().rfind("VIPD-", 0), 0u);
  }
  for (const char* w : {"nat/PREROUTING/VIPD-SERVICES", "nat/OUTPUT/VIPD-SERVICES", "nat/POSTROUTING/VIPD-POSTROUTING",
                        "filter/INPUT/VIPD-SERVICES", "filter/FORWARD/VIPD-SERVICES", "filter/OUTPUT/VIPD-SERVICES",
                        "filter/FORWARD/VIPD-FIREWALL"})
    EXPECT_TRUE(where.count(w)) << w;
  EXPECT_EQ(j[0].text(), "-t filter -I INPUT 1 -m conntrack --ctstate NEW -m comment --comment \"vipd service portals\" "
                         "-j VIPD-SERVICES");
  const std::string d = dry_run_text(build(table_of({})), {});
  EXPECT_THAT(d, HasSubstr("#   iptables -t nat -I PREROUTING 1 -m comment --comment \"vipd service portals\" -j "
                           "VIPD-SERVICES\n"));
  EXPECT_THAT(d, HasSubstr("*filter\n:VIPD-SERVICES - [0:0]\n:VIPD-FIREWALL - [0:0]\nCOMMIT\n*nat\n"));
}

// IPv6 entries (ip6tables): the seed scenario over fd00::/8, golden payloads
// tests/data/golden/iptables-ipv6/seed6.{fnat,nat}.rules (VIPD_UPDATE_GOLDEN=1
// rewrites them).
IpAddr ip6(const char* s) { return *IpAddr::parse(s); }
ServiceTable seed6_table() {
  VirtualService db;
  db.key = {ip6("fd00:96::100"), 8080, Protocol::kTcp};
  db.name = "default/db6:http";
  for (const char* a : {"fd00:244::1:15", "fd00:244::2:88", "fd00:244::3:12", "fd00:244::3:44"}) {
    RealServer r;
    r.ip = ip6(a);
    r.port = 8080;
    db.backends.push_back(r);
  }
  VirtualService sticky = db;
  sticky.key = {ip6("fd00:96::102"), 8080, Protocol::kTcp};
  sticky.name = "default/sticky6:http";
  sticky.persistence_timeout_s = 300;
  VirtualService empty;
  empty.key = {ip6("fd00:96::101"), 80, Protocol::kTcp};
  empty.name = "default/empty6:http";
  VirtualService lb = db;
  lb.key = {ip6("2001:db8::7"), 80, Protocol::kTcp};
  lb.kind = ServiceKind::kLoadBalancer;
  lb.source_ranges = {"2001:db8:1::/48"};
  auto v4 = service("default/db:http", "10.96.0.100", 8080, {rs("10.244.1.15", 8080)});
  return table_of({db, sticky, empty, lb, v4});
}

TEST(IptablesIpv6, SeedPayloadsMatchGolden) {
  const bool update = std::getenv("VIPD_UPDATE_GOLDEN") != nullptr;
  const ServiceTable t = seed6_table();
  for (bool masq : {true, false}) {
    RenderOptions o;
    o.masquerade_all = masq;
    Ruleset v6;
    std::string err;
    ASSERT_TRUE(build_ruleset(t, o, AddressFamily::kIpv6, &v6, &err)) << err;
    EXPECT_EQ(v6.entries, 4u);
    const std::string got = dry_run_text(v6, o);
    const std::string file = std::string("tests/data/golden/iptables-ipv6/seed6.") + (masq ? "fnat" : "nat") + ".rules";
    if (update) {
      fs::create_directories("tests/data/golden/iptables-ipv6");
      std::ofstream(file, std::ios::binary | std::ios::trunc) << got;
    }
    std::ifstream in(file, std::ios::binary);
    ASSERT_TRUE(in) << file << " missing (VIPD_UPDATE_GOLDEN=1 writes it)";
    std::stringstream want;
    want << in.rdbuf();
    EXPECT_EQ(got, want.str()) << file << " differs (VIPD_UPDATE_GOLDEN=1 rewrites it)";
    expect_only_owned(got);
    EXPECT_THAT(got, Not(HasSubstr("10.")));
  }
}

TEST(IptablesIpv6, Ip6tablesLayout) {
  const ServiceTable t = seed6_table();
  Ruleset v6, v4;
  std::string err;
  ASSERT_TRUE(build_ruleset(t, {}, AddressFamily::kIpv6, &v6, &err)) << err;
  ASSERT_TRUE(build_ruleset(t, {}, AddressFamily::kIpv4, &v4, &err)) << err;
  EXPECT_EQ(v4.entries, 1u);
  EXPECT_EQ(count_entries(t, AddressFamily::kIpv6), 4u);
  const std::string svc = svc_chain("default/db6:http");
  EXPECT_THAT(rules_of(v6, Table::kNat, "VIPD-SERVICES"),
              ::testing::Contains("-m comment --comment \"default/db6:http cluster IP\" -d fd00:96::100/128 -p tcp -m tcp "
                                  "--dport 8080 -j " + svc));
  const auto svc_rules = rules_of(v6, Table::kNat, svc);
  ASSERT_EQ(svc_rules.size(), 5u);
  EXPECT_THAT(svc_rules[1], AllOf(HasSubstr("--probability 0.2500000000 "),
                                  HasSubstr("-j " + sep_chain("default/db6:http", "[fd00:244::1:15]:8080"))));
  EXPECT_THAT(rules_of(v6, Table::kNat, sep_chain("default/db6:http", "[fd00:244::3:44]:8080")),
              ElementsAre(HasSubstr("-s fd00:244::3:44/128 -j VIPD-MARK-MASQ"),
                          HasSubstr("-p tcp -m tcp -j DNAT --to-destination [fd00:244::3:44]:8080")));
  EXPECT_THAT(rules_of(v6, Table::kFilter, "VIPD-SERVICES"),
              ElementsAre("-m comment --comment \"default/empty6:http has no endpoints\" -d fd00:96::101/128 -p tcp "
                          "-m tcp --dport 80 -j REJECT --reject-with icmp6-port-unreachable"));
  const std::string sticky_sep = sep_chain("default/sticky6:http", "[fd00:244::2:88]:8080");
  EXPECT_THAT(rules_of(v6, Table::kNat, svc_chain("default/sticky6:http")),
              ::testing::Contains(HasSubstr("-m recent --name " + sticky_sep + " --rcheck --seconds 300 --reap -j " +
                                            sticky_sep)));
  EXPECT_THAT(rules_of(v6, Table::kNat, "VIPD-MARK-MASQ"), ElementsAre("-j MARK --or-mark 0x4000"));
  // The IPv4 entry is only in the IPv4 rules, the IPv6 ones only in the IPv6 rules.
  EXPECT_THAT(rules_of(v4, Table::kNat, "VIPD-SERVICES"), ElementsAre(HasSubstr("-d 10.96.0.100/32")));
  EXPECT_TRUE(rules_of(v4, Table::kFilter, "VIPD-SERVICES").empty());
  // Both in the dry run, IPv4 first.
  const std::string d = dry_run_text(v4, v6, {});
  const auto at6 = d.find("# vipd iptables mode: full ip6tables-restore --noflush payload (4 IPv6 service entries");
  ASSERT_NE(at6, std::string::npos);
  EXPECT_LT(d.find("-d 10.96.0.100/32"), at6);
  EXPECT_GT(d.find("-d fd00:96::100/128"), at6);
  EXPECT_THAT(d.substr(at6), HasSubstr("#   ip6tables -t nat -I POSTROUTING 1 "));
}

}  // namespace
}  // namespace vipd::cp::ipt
