// Thread: test main thread. Tests for controlplane/backends/nftables/ruleset.cc:
// per-entry rendering (kube-proxy's nftables layout with vipd's names), the
// full-sync transaction, and the delta transaction a one-endpoint change makes
// (only that entry's chains and elements, ordered so references stay valid).
// Deterministic: pure functions, no kernel.
#include "controlplane/backends/nftables/ruleset.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <sstream>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "controlplane/backends/iptables/chain_names.h"
#include "controlplane/backends/nftables/netlink_fast.h"

namespace vipd::cp::nft {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

Ipv4 ip(const char* s) { return *parse_ipv4(s); }

VirtualService svc(const char* name, const char* vip, uint16_t port, std::vector<const char*> eps,
                   Protocol p = Protocol::kTcp) {
  VirtualService v;
  v.key = {ip(vip), port, p};
  v.name = name;
  for (const char* e : eps) v.backends.push_back({ip(e), 8080, 1, false});
  return v;
}

ServiceTable table_of(std::vector<VirtualService> v) {
  ServiceTable t;
  t.generation = 1;
  for (auto& s : v) t.services[s.key] = s;
  t.normalize();
  return t;
}

Desired desired(const ServiceTable& t, const RenderOptions& o = {}) {
  Desired d;
  std::string err;
  EXPECT_TRUE(build_desired(t, o, {}, &d, nullptr, &err)) << err;
  return d;
}

// Lines of a transaction; each ends with '\0' so that index_of can match a
// whole line ("add chain ip vipd X\0") as well as a prefix.
std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l + '\0');
  return out;
}

size_t index_of(const std::vector<std::string>& ls, const std::string& prefix) {
  for (size_t i = 0; i < ls.size(); ++i)
    if (ls[i].rfind(prefix, 0) == 0) return i;
  return ls.size();
}

RenderOptions nat_mode() {
  RenderOptions o;
  o.masquerade_all = false;
  return o;
}

TEST(NftRender, CompactServiceChainDnatsItself) {
  // fnat (every flow marked), no affinity: one chain, one dnat rule per
  // endpoint, rule i of K taken when numgen random mod (K - i) draws 0 (no set)
  EntryRender r;
  std::string err;
  const auto s = svc("default/db:http", "10.96.0.100", 8080, {"10.244.1.15", "10.244.2.88"});
  ASSERT_TRUE(render_entry(s, "default/db:httptcp", {}, &r, &err)) << err;
  const std::string h = ipt::chain_hash("default/db:httptcp");
  ASSERT_EQ(r.chains.size(), 1u);
  EXPECT_EQ(r.chains[0].name, "svc-" + h);
  ASSERT_EQ(r.chains[0].rules.size(), 3u);
  EXPECT_EQ(r.chains[0].rules[0], "jump mark-for-masquerade");
  EXPECT_EQ(r.chains[0].rules[1],
            "meta l4proto tcp numgen random mod 2 0 dnat to 10.244.1.15:8080 "
            "comment \"default/db:http -> 10.244.1.15:8080\"");
  EXPECT_EQ(r.chains[0].rules[2],
            "meta l4proto tcp dnat to 10.244.2.88:8080 comment \"default/db:http -> 10.244.2.88:8080\"");
  ASSERT_EQ(r.elements.size(), 1u);
  EXPECT_EQ(r.elements[0], (Element{"service-ips", "10.96.0.100 . tcp . 8080", "goto svc-" + h}));
  EXPECT_TRUE(r.sets.empty());
  // one endpoint: a plain dnat; UDP keeps its protocol
  auto u = svc("default/dns:dns", "10.96.0.10", 53, {"10.244.3.12"}, Protocol::kUdp);
  ASSERT_TRUE(render_entry(u, "x", {}, &r, &err)) << err;
  ASSERT_EQ(r.chains.size(), 1u);
  EXPECT_EQ(r.chains[0].rules[1], "meta l4proto udp dnat to 10.244.3.12:8080 comment \"default/dns:dns -> 10.244.3.12:8080\"");
}

TEST(NftRender, ServiceWithEndpoints) {
  // nat mode: kube-proxy's form, one chain per endpoint (hairpin marking)
  EntryRender r;
  std::string err;
  const auto s = svc("default/db:http", "10.96.0.100", 8080, {"10.244.1.15", "10.244.2.88"});
  ASSERT_TRUE(render_entry(s, "default/db:httptcp", nat_mode(), &r, &err)) << err;
  const std::string h = ipt::chain_hash("default/db:httptcp");
  ASSERT_EQ(r.chains.size(), 3u);  // svc + 2 sep
  EXPECT_EQ(r.chains[0].name, "svc-" + h);
  ASSERT_EQ(r.chains[0].rules.size(), 2u);
  const std::string sep0 = "sep-" + ipt::chain_hash("default/db:httptcp10.244.1.15:8080");
  const std::string sep1 = "sep-" + ipt::chain_hash("default/db:httptcp10.244.2.88:8080");
  // the random pick without an anonymous vmap: rule i of K when numgen mod K-i draws 0, the last always
  EXPECT_THAT(r.chains[0].rules[0], StartsWith("numgen random mod 2 0 goto " + sep0 + " comment"));
  EXPECT_THAT(r.chains[0].rules[1], StartsWith("goto " + sep1 + " comment"));
  EXPECT_THAT(r.chains[0].rules[1], HasSubstr("-> 10.244.2.88:8080"));
  // the batch path takes every rule of this form (netlink_fast.h)
  for (const auto& c : r.chains) {
    std::string line = "add chain ip vipd " + c.name + " {";
    for (const auto& x : c.rules) line += " " + x + ";";
    std::vector<FastCmd> cmds;
    EXPECT_TRUE(parse_fast(line + " }\n", &cmds)) << line;
  }
  EXPECT_EQ(r.chains[1].name, sep0);
  EXPECT_EQ(r.chains[1].rules[0], "ip saddr 10.244.1.15 jump mark-for-masquerade");  // hairpin
  EXPECT_THAT(r.chains[1].rules[1], HasSubstr("meta l4proto tcp dnat to 10.244.1.15:8080"));
  ASSERT_EQ(r.elements.size(), 1u);
  EXPECT_EQ(r.elements[0], (Element{"service-ips", "10.96.0.100 . tcp . 8080", "goto svc-" + h}));
  EXPECT_TRUE(r.sets.empty());
}

TEST(NftRender, NatModeDoesNotMarkAll) {
  EntryRender r;
  std::string err;
  ASSERT_TRUE(render_entry(svc("a/b:c", "10.96.0.1", 80, {"10.244.0.5"}), "x", nat_mode(), &r, &err));
  ASSERT_EQ(r.chains[0].rules.size(), 1u);  // no mark-for-masquerade jump; one endpoint: no numgen
  EXPECT_THAT(r.chains[0].rules[0], StartsWith("goto sep-"));
  EXPECT_EQ(r.chains[1].rules[0], "ip saddr 10.244.0.5 jump mark-for-masquerade");  // hairpin still marked
}

TEST(NftRender, NoEndpointsRejectOrDrop) {
  EntryRender r;
  std::string err;
  auto s = svc("default/empty:http", "10.96.0.101", 80, {});
  ASSERT_TRUE(render_entry(s, "x", {}, &r, &err));
  EXPECT_TRUE(r.chains.empty());
  ASSERT_EQ(r.elements.size(), 1u);
  EXPECT_EQ(r.elements[0], (Element{"no-endpoint-services", "10.96.0.101 . tcp . 80", "goto reject-chain"}));
  s.when_empty = WhenEmpty::kDrop;
  ASSERT_TRUE(render_entry(s, "x", {}, &r, &err));
  EXPECT_EQ(r.elements[0].value, "drop");
  // quiesced endpoints (weight 0) are not usable either
  s = svc("default/q:http", "10.96.0.9", 80, {"10.244.0.1"});
  s.backends[0].weight = 0;
  ASSERT_TRUE(render_entry(s, "x", {}, &r, &err));
  EXPECT_EQ(r.elements[0].map, "no-endpoint-services");
}

TEST(NftRender, AffinitySetsPerEndpoint) {
  EntryRender r;
  std::string err;
  auto s = svc("default/sticky:http", "10.96.0.102", 8080, {"10.244.1.15", "10.244.2.88"});
  s.persistence_timeout_s = 300;
  ASSERT_TRUE(render_entry(s, "in", {}, &r, &err));
  const std::string h0 = ipt::chain_hash("in10.244.1.15:8080");
  const std::string aff0 = "aff-" + h0 + "-300";
  ASSERT_EQ(r.sets.count(aff0), 1u);
  EXPECT_EQ(r.sets[aff0], "type ipv4_addr; flags dynamic,timeout; timeout 300s;");
  EXPECT_EQ(r.chains[0].rules[1], "ip saddr @" + aff0 + " goto sep-" + h0);
  EXPECT_EQ(r.chains[1].rules[1], "update @" + aff0 + " { ip saddr }");
}

TEST(NftRender, NodePortAndFirewall) {
  EntryRender r;
  std::string err;
  auto s = svc("default/web:http", "192.168.1.5", 30080, {"10.244.1.15"});
  s.kind = ServiceKind::kNodePort;
  s.source_ranges = {"10.0.0.0/8", "192.168.0.0/16"};
  ASSERT_TRUE(render_entry(s, "in", {}, &r, &err));
  EXPECT_EQ(r.elements[0].map, "service-nodeports");
  const std::string h = ipt::chain_hash("in");
  EXPECT_EQ(r.chains[0].name, "fw-" + h);
  EXPECT_THAT(r.chains[0].rules[0], HasSubstr("ip saddr != { 10.0.0.0/8, 192.168.0.0/16 } drop"));
  EXPECT_EQ(r.elements[1], (Element{"firewall-ips", "192.168.1.5 . tcp . 30080", "goto fw-" + h}));
  s.source_ranges = {"10.0.0.0/8\" drop; flush ruleset"};
  EXPECT_FALSE(render_entry(s, "in", {}, &r, &err));
  EXPECT_THAT(err, HasSubstr("not an IPv4 CIDR"));
}

TEST(NftRender, CommentsAreSanitized) {
  EntryRender r;
  std::string err;
  auto s = svc("evil\"; flush ruleset\n#", "10.96.0.1", 80, {"10.244.0.1"});
  ASSERT_TRUE(render_entry(s, "in", {}, &r, &err));
  for (const auto& c : r.chains)
    for (const auto& rule : c.rules) {
      EXPECT_EQ(rule.find('\n'), std::string::npos) << rule;
      const auto at = rule.find("comment \"");
      if (at == std::string::npos) continue;
      const std::string text = rule.substr(at + 9);
      EXPECT_EQ(std::count(text.begin(), text.end(), '"'), 1) << rule;  // only the closing quote
      EXPECT_THAT(text, HasSubstr("evil__ flush ruleset__"));
    }
  s.name = std::string(300, 'a');
  ASSERT_TRUE(render_entry(s, "in", {}, &r, &err));
  const std::string& rule = r.chains.back().rules.back();
  const auto at = rule.find("comment \"");
  EXPECT_LE(rule.size() - at - 10, 128u);
}

TEST(NftFull, ReplacesTableAtomically) {
  auto t = table_of({svc("default/db:http", "10.96.0.100", 8080, {"10.244.1.15", "10.244.2.88"}),
                     svc("default/empty:http", "10.96.0.101", 80, {})});
  const Desired d = desired(t, nat_mode());
  const Transaction tx = render_full(d, nat_mode());
  const auto ls = lines(tx.text);
  ASSERT_GE(ls.size(), 3u);
  EXPECT_EQ(ls[0], std::string("add table ip vipd") + '\0');
  EXPECT_EQ(ls[1], std::string("delete table ip vipd") + '\0');
  EXPECT_EQ(ls[2], std::string("table ip vipd {") + '\0');
  EXPECT_THAT(tx.text, HasSubstr("type nat hook prerouting priority -100"));
  EXPECT_THAT(tx.text, HasSubstr("masquerade fully-random"));
  // chains are declared before any rule refers to them
  EXPECT_LT(index_of(ls, "add chain ip vipd sep-"), index_of(ls, "add rule ip vipd svc-"));
  EXPECT_THAT(tx.text, HasSubstr("add element ip vipd no-endpoint-services { 10.96.0.101 . tcp . 80 : goto reject-chain }"));
  EXPECT_THAT(tx.text, HasSubstr("add element ip vipd cluster-ips { 10.96.0.100, 10.96.0.101 }"));
  EXPECT_EQ(tx.chains_written, 3u);
  const std::string dry = dry_run_text(d, nat_mode());
  EXPECT_EQ(dry.rfind("# vipd nftables mode", 0), 0u);
  EXPECT_THAT(dry, HasSubstr(tx.text));
  // fnat: the compact form, one chain for db, no endpoint chains
  const Transaction fnat = render_full(desired(t), {});
  EXPECT_EQ(fnat.chains_written, 1u);
  EXPECT_THAT(fnat.text, Not(HasSubstr("sep-")));
  EXPECT_THAT(fnat.text, HasSubstr("numgen random mod 2 0 dnat to 10.244.1.15:8080 "));
  EXPECT_THAT(fnat.text, Not(HasSubstr(" map {")));
}

TEST(NftDelta, NothingChangedIsEmpty) {
  auto t = table_of({svc("default/db:http", "10.96.0.100", 8080, {"10.244.1.15"})});
  const Desired a = desired(t);
  Desired b;
  size_t rendered = 9;
  std::string err;
  ASSERT_TRUE(build_desired(t, {}, a, &b, &rendered, &err));
  EXPECT_EQ(rendered, 0u);  // nothing rendered again
  EXPECT_TRUE(render_delta(a, b).empty());
}

TEST(NftDelta, OneEndpointChangeTouchesOnlyThatEntry) {
  std::vector<VirtualService> v;
  for (int i = 0; i < 50; ++i) {
    const std::string vip = "10.96.1." + std::to_string(i);
    const std::string e = "10.244.9." + std::to_string(i);
    v.push_back(svc(("ns/s" + std::to_string(i) + ":p").c_str(), vip.c_str(), 80, {e.c_str(), "10.244.8.1"}));
  }
  auto t = table_of(v);
  const Desired a = desired(t, nat_mode());
  auto t2 = t;
  for (auto& b : t2.services.begin()->second.backends)
    if (b.ip == ip("10.244.8.1")) b.ip = ip("10.244.7.7");  // in ns/s0 only
  t2.normalize();
  Desired b;
  size_t rendered = 0;
  std::string err;
  ASSERT_TRUE(build_desired(t2, nat_mode(), a, &b, &rendered, &err));
  EXPECT_EQ(rendered, 1u);
  const Transaction tx = render_delta(a, b);
  const std::string in = "ns/s0:ptcp";
  const std::string svc_chain = "svc-" + ipt::chain_hash(in);
  // (svc() gives every endpoint port 8080)
  const std::string old_sep8080 = "sep-" + ipt::chain_hash(in + "10.244.8.1:8080");
  const std::string new_sep8080 = "sep-" + ipt::chain_hash(in + "10.244.7.7:8080");
  const auto ls = lines(tx.text);
  EXPECT_EQ(tx.chains_written, 2u) << tx.text;  // svc chain + the new sep chain
  EXPECT_EQ(tx.chains_retired, 1u) << tx.text;  // the old sep chain: flushed, deleted later in bulk
  EXPECT_EQ(tx.chains_deleted, 0u) << tx.text;
  EXPECT_EQ(tx.retired_chains, std::set<std::string>{old_sep8080});
  EXPECT_EQ(tx.elements_added + tx.elements_deleted, 0u) << tx.text;  // svc chain name unchanged
  const size_t add_chain = index_of(ls, "add chain ip vipd " + new_sep8080 + "\0");
  const size_t fill_new = index_of(ls, "add chain ip vipd " + new_sep8080 + " {");
  const size_t flush_svc = index_of(ls, "flush chain ip vipd " + svc_chain);
  const size_t flush_old = index_of(ls, "flush chain ip vipd " + old_sep8080);
  const size_t fill_svc = index_of(ls, "add chain ip vipd " + svc_chain + " {");
  ASSERT_LT(fill_svc, ls.size()) << tx.text;
  ASSERT_LT(flush_old, ls.size()) << tx.text;
  EXPECT_LT(add_chain, fill_svc);
  EXPECT_LT(fill_new, ls.size());
  EXPECT_LT(flush_svc, fill_svc);
  // none of the commands that make libnftables fetch every chain of the table
  EXPECT_THAT(tx.text, Not(HasSubstr("add rule")));
  EXPECT_THAT(tx.text, Not(HasSubstr("delete chain")));
  EXPECT_THAT(tx.text, Not(HasSubstr("element")));
  EXPECT_THAT(tx.text, Not(HasSubstr("add table")));
  // nothing of the other 49 services
  EXPECT_THAT(tx.text, Not(HasSubstr("10.244.9.1:")));
  EXPECT_THAT(tx.text, Not(HasSubstr("ns/s1")));
  EXPECT_LE(ls.size(), 12u) << tx.text;
}

TEST(NftDelta, OneEndpointChangeCompactRewritesOneChain) {
  std::vector<VirtualService> v;
  for (int i = 0; i < 50; ++i) {
    const std::string vip = "10.96.1." + std::to_string(i);
    const std::string e = "10.244.9." + std::to_string(i);
    v.push_back(svc(("ns/s" + std::to_string(i) + ":p").c_str(), vip.c_str(), 80, {e.c_str(), "10.244.8.1"}));
  }
  auto t = table_of(v);
  const Desired a = desired(t);
  auto t2 = t;
  for (auto& b : t2.services.begin()->second.backends)
    if (b.ip == ip("10.244.8.1")) b.ip = ip("10.244.7.7");  // in ns/s0 only
  t2.normalize();
  Desired b;
  size_t rendered = 0;
  std::string err;
  ASSERT_TRUE(build_desired(t2, {}, a, &b, &rendered, &err));
  EXPECT_EQ(rendered, 1u);
  const Transaction tx = render_delta(a, b);
  const std::string svc_chain = "svc-" + ipt::chain_hash("ns/s0:ptcp");
  const auto ls = lines(tx.text);
  ASSERT_EQ(ls.size(), 2u) << tx.text;
  EXPECT_EQ(ls[0], "flush chain ip vipd " + svc_chain + '\0');
  EXPECT_THAT(ls[1], HasSubstr("add chain ip vipd " + svc_chain + " { jump mark-for-masquerade; meta l4proto tcp "
                               "numgen random mod 2 0 dnat to 10.244.7.7:8080 "));
  EXPECT_THAT(ls[1], HasSubstr("; meta l4proto tcp dnat to 10.244.9.0:8080 "));
  EXPECT_EQ(tx.chains_written, 1u);
  EXPECT_EQ(tx.chains_retired, 0u);
  EXPECT_EQ(tx.elements_added + tx.elements_deleted, 0u);
  // one endpoint more: the same single rewrite
  t2.services.begin()->second.backends.push_back({ip("10.244.6.6"), 8080, 1, false});
  t2.normalize();
  Desired c;
  ASSERT_TRUE(build_desired(t2, {}, b, &c, &rendered, &err));
  const Transaction tx2 = render_delta(b, c);
  EXPECT_EQ(lines(tx2.text).size(), 2u) << tx2.text;
  EXPECT_THAT(tx2.text, HasSubstr("numgen random mod 3 0 dnat to 10.244.6.6:8080"));
}

TEST(NftDelta, RemovedServiceDeletesElementsBeforeChains) {
  auto t = table_of({svc("default/db:http", "10.96.0.100", 8080, {"10.244.1.15"}),
                     svc("default/web:http", "10.96.0.200", 80, {"10.244.1.16"})});
  const Desired a = desired(t);
  auto t2 = t;
  t2.services.erase(t2.services.begin());
  const Desired b = desired(t2);
  const Transaction tx = render_delta(a, b);
  const auto ls = lines(tx.text);
  const std::string svc_chain = "svc-" + ipt::chain_hash("default/db:httptcp");
  const size_t del_elem = index_of(ls, "delete element ip vipd service-ips { 10.96.0.100 . tcp . 8080 }");
  const size_t flush = index_of(ls, "flush chain ip vipd " + svc_chain);
  ASSERT_LT(flush, ls.size()) << tx.text;
  EXPECT_LT(del_elem, flush);  // the element that jumps to it goes first
  EXPECT_LT(index_of(ls, "delete element ip vipd cluster-ips { 10.96.0.100 }"), ls.size()) << tx.text;
  EXPECT_EQ(tx.chains_retired, 1u);  // compact: the svc chain only
  EXPECT_EQ(tx.retired_chains.count(svc_chain), 1u);
  EXPECT_THAT(tx.text, Not(HasSubstr("10.96.0.200")));
}

TEST(NftDelta, LosingEndpointsMovesTheElement) {
  auto t = table_of({svc("default/db:http", "10.96.0.100", 8080, {"10.244.1.15"})});
  const Desired a = desired(t);
  auto t2 = t;
  t2.services.begin()->second.backends.clear();
  const Desired b = desired(t2);
  const Transaction tx = render_delta(a, b);
  EXPECT_THAT(tx.text, HasSubstr("delete element ip vipd service-ips { 10.96.0.100 . tcp . 8080 }"));
  EXPECT_THAT(tx.text, HasSubstr("add element ip vipd no-endpoint-services { 10.96.0.100 . tcp . 8080 : goto reject-chain }"));
  EXPECT_EQ(tx.chains_retired, 1u);
  // and back: chains created before the element that refers to them
  const Transaction back = render_delta(b, a);
  const auto ls = lines(back.text);
  EXPECT_LT(index_of(ls, "add chain ip vipd svc-"), index_of(ls, "add element ip vipd service-ips"));
  EXPECT_EQ(back.chains_written, 1u);
  EXPECT_LT(index_of(ls, "delete element ip vipd no-endpoint-services"), ls.size());
}

TEST(NftDelta, AffinityTimeoutChangeRenamesTheSet) {
  auto s = svc("default/sticky:http", "10.96.0.102", 8080, {"10.244.1.15"});
  s.persistence_timeout_s = 300;
  const Desired a = desired(table_of({s}));
  s.persistence_timeout_s = 60;
  const Desired b = desired(table_of({s}));
  const Transaction tx = render_delta(a, b);
  const auto ls = lines(tx.text);
  const size_t add_set = index_of(ls, "add set ip vipd aff-");
  ASSERT_LT(add_set, ls.size()) << tx.text;
  EXPECT_THAT(ls[add_set], HasSubstr("-60 { type ipv4_addr; flags dynamic,timeout; timeout 60s; }"));
  EXPECT_LT(add_set, index_of(ls, "add chain ip vipd svc-"));
  ASSERT_EQ(tx.retired_sets.size(), 1u);
  EXPECT_THAT(*tx.retired_sets.begin(), HasSubstr("-300"));
}

TEST(NftDelta, RetiredChainsDeletedInBulkAtTheLimit) {
  auto s = svc("default/db:http", "10.96.0.100", 8080, {"10.244.1.15"});
  Desired a = desired(table_of({s}), nat_mode());
  for (size_t i = 0; i + 3 < kRetiredLimit; ++i) a.retired_chains.insert("sep-OLD" + std::to_string(i));
  a.retired_sets.insert("aff-OLD-10");
  // below the limit: the change retires one more chain, nothing deleted yet
  s.backends[0].ip = ip("10.244.1.16");
  Desired b = desired(table_of({s}), nat_mode());
  Transaction tx = render_delta(a, b);
  EXPECT_THAT(tx.text, Not(HasSubstr("delete chain")));
  EXPECT_EQ(tx.retired_chains.size() + tx.retired_sets.size(), kRetiredLimit - 1);
  // reaching it: every retired chain and set is deleted, after the flushes
  b.retired_chains = tx.retired_chains;
  b.retired_sets = tx.retired_sets;
  s.backends[0].ip = ip("10.244.1.17");
  const Desired c = desired(table_of({s}), nat_mode());
  tx = render_delta(b, c);
  const auto ls = lines(tx.text);
  EXPECT_EQ(tx.chains_deleted, kRetiredLimit - 1);
  EXPECT_TRUE(tx.retired_chains.empty());
  EXPECT_LT(index_of(ls, "flush chain"), index_of(ls, "delete chain"));
  EXPECT_LT(index_of(ls, "delete set ip vipd aff-OLD-10"), ls.size());
  // a retired chain that is needed again is reused, not deleted
  b.retired_chains.insert("sep-" + ipt::chain_hash("default/db:httptcp10.244.1.15:8080"));
  tx = render_delta(b, a);
  EXPECT_EQ(tx.retired_chains.count("sep-" + ipt::chain_hash("default/db:httptcp10.244.1.15:8080")), 0u);
}

TEST(NftDesired, CollidingNamesGetDistinctChains) {
  auto a = svc("default/db:http", "10.96.0.100", 8080, {"10.244.1.15"});
  auto b = svc("default/db:http", "10.96.0.200", 8080, {"10.244.1.15"});
  const Desired d = desired(table_of({a, b}), nat_mode());
  ASSERT_EQ(d.entries.size(), 2u);
  std::set<std::string> names;
  for (const auto& [k, e] : d.entries)
    for (const auto& c : e->render.chains) names.insert(c.name);
  EXPECT_EQ(names.size(), 4u);
}

}  // namespace
}  // namespace vipd::cp::nft

namespace vipd::cp::nft {
namespace {

TEST(NftDesired, CollisionAppearingLaterRenamesTheReusedEntry) {
  // The first entry is reused from prev while unchanged, yet a colliding entry
  // added later must move it to the extended name (and back when it goes).
  auto a = svc("default/db:http", "10.96.0.100", 8080, {"10.244.1.15"});
  auto b = svc("default/db:http", "10.96.0.200", 8080, {"10.244.1.15"});
  const Desired one = desired(table_of({a}));
  Desired two;
  size_t rendered = 0;
  std::string err;
  ASSERT_TRUE(build_desired(table_of({a, b}), {}, one, &two, &rendered, &err)) << err;
  EXPECT_EQ(rendered, 2u);
  std::set<std::string> names;
  for (const auto& [k, e] : two.entries) names.insert(e->hash_input);
  EXPECT_EQ(names.size(), 2u);
  EXPECT_EQ(names.count(ipt::entry_hash_input(a)), 0u);
  Desired back;
  ASSERT_TRUE(build_desired(table_of({a}), {}, two, &back, &rendered, &err)) << err;
  EXPECT_EQ(rendered, 1u);
  EXPECT_EQ(back.entries.begin()->second->hash_input, ipt::entry_hash_input(a));
  EXPECT_EQ(back.chains(), 1u);
  // and an unchanged table reuses everything
  Desired same;
  ASSERT_TRUE(build_desired(table_of({a, b}), {}, two, &same, &rendered, &err)) << err;
  EXPECT_EQ(rendered, 0u);
  EXPECT_EQ(same.chains(), 2u);
  EXPECT_TRUE(render_delta(two, same).empty());
}


// ---- IPv6: table ip6 vipd, same layout, same transaction ----

IpAddr ip6(const char* s) { return *IpAddr::parse(s); }

VirtualService svc6(const char* name, const char* vip, uint16_t port, std::vector<const char*> eps,
                    Protocol p = Protocol::kTcp) {
  VirtualService v;
  v.key = {ip6(vip), port, p};
  v.name = name;
  for (const char* e : eps) v.backends.push_back({ip6(e), 8080, 1, false});
  return v;
}

ServiceTable dual_stack() {
  auto aff = svc6("default/aff:http", "fd00:10::20", 80, {"fd00:244::3", "fd00:244::4"});
  aff.persistence_timeout_s = 300;
  auto fw = svc6("default/fw:http", "fd00:10::30", 80, {"fd00:244::5"});
  fw.kind = ServiceKind::kLoadBalancer;
  fw.source_ranges = {"fd00:aa::/32"};
  auto none = svc6("default/none:http", "fd00:10::40", 80, {});
  return table_of({svc("default/db:http", "10.96.0.100", 8080, {"10.244.1.15", "10.244.2.88"}),
                   svc6("default/db6:http", "fd00:10::10", 8080, {"fd00:244::1", "fd00:244::2"}), aff, fw, none});
}

TEST(NftRender6, DualStackFullSyncBothTablesOneTransaction) {
  const Desired d = desired(dual_stack());
  EXPECT_TRUE(d.has_v6());
  const Transaction tx = render_full(d, {});
  const auto ls = lines(tx.text);
  // the ip table first, unchanged; then the ip6 table deleted and declared
  EXPECT_EQ(ls[0], std::string("add table ip vipd") + '\0');
  EXPECT_EQ(ls[1], std::string("delete table ip vipd") + '\0');
  EXPECT_EQ(ls[2], std::string("table ip vipd {") + '\0');
  const size_t add6 = index_of(ls, std::string("add table ip6 vipd") + '\0');
  ASSERT_LT(add6, ls.size()) << tx.text;
  EXPECT_EQ(ls[add6 + 1], std::string("delete table ip6 vipd") + '\0');
  EXPECT_EQ(ls[add6 + 2], std::string("table ip6 vipd {") + '\0');
  const std::string base6 = render_base({}, true);
  EXPECT_THAT(tx.text, HasSubstr(base6));
  EXPECT_THAT(base6, HasSubstr("map service-ips { type ipv6_addr . inet_proto . inet_service : verdict;"));
  EXPECT_THAT(base6, HasSubstr("set cluster-ips { type ipv6_addr;"));
  EXPECT_THAT(base6, HasSubstr("ip6 daddr . meta l4proto . th dport vmap @service-ips"));
  EXPECT_THAT(base6, HasSubstr("ip6 daddr @cluster-ips reject"));
  EXPECT_THAT(base6, HasSubstr("masquerade fully-random"));
  EXPECT_THAT(base6, Not(HasSubstr("ip daddr")));
  EXPECT_EQ(render_base({}, false), render_base({}));
  // compact IPv6 chain, in the ip6 table
  const std::string c6 = "svc-" + ipt::chain_hash("default/db6:httptcp");
  EXPECT_THAT(tx.text, HasSubstr("add chain ip6 vipd " + c6 + "\n"));
  EXPECT_THAT(tx.text, HasSubstr("add rule ip6 vipd " + c6 + " jump mark-for-masquerade\n"));
  EXPECT_THAT(tx.text, HasSubstr("add rule ip6 vipd " + c6 + " meta l4proto tcp numgen random mod 2 0 dnat to "
                                 "[fd00:244::1]:8080 "));
  EXPECT_THAT(tx.text, HasSubstr("add rule ip6 vipd " + c6 + " meta l4proto tcp dnat to [fd00:244::2]:8080 "));
  // one endpoint: dnat to [addr]:port
  EXPECT_THAT(tx.text, HasSubstr("add rule ip6 vipd fw-"));
  EXPECT_THAT(tx.text, HasSubstr("ip6 saddr != { fd00:aa::/32 } drop"));
  EXPECT_THAT(tx.text, HasSubstr("meta l4proto tcp dnat to [fd00:244::5]:8080"));
  // affinity: ipv6_addr sets, ip6 saddr, per-endpoint chains
  EXPECT_THAT(tx.text, HasSubstr("add set ip6 vipd aff-"));
  EXPECT_THAT(tx.text, HasSubstr("{ type ipv6_addr; flags dynamic,timeout; timeout 300s; }"));
  EXPECT_THAT(tx.text, HasSubstr("{ ip6 saddr }"));
  EXPECT_THAT(tx.text, HasSubstr("ip6 saddr fd00:244::3 jump mark-for-masquerade"));
  EXPECT_THAT(tx.text, HasSubstr("meta l4proto tcp dnat to [fd00:244::4]:8080"));
  // elements per table
  EXPECT_THAT(tx.text, HasSubstr("add element ip vipd cluster-ips { 10.96.0.100 }"));
  EXPECT_THAT(tx.text, HasSubstr("add element ip6 vipd cluster-ips { fd00:10::10, fd00:10::20, fd00:10::40 }"));
  EXPECT_THAT(tx.text, HasSubstr("add element ip6 vipd service-ips { fd00:10::10 . tcp . 8080 : goto " + c6));
  EXPECT_THAT(tx.text, HasSubstr("add element ip6 vipd firewall-ips { fd00:10::30 . tcp . 80 : goto fw-"));
  EXPECT_THAT(tx.text, HasSubstr("add element ip6 vipd no-endpoint-services { fd00:10::40 . tcp . 80 : goto reject-chain }"));
  // nothing IPv6 leaks into the ip table, nothing IPv4 into ip6
  for (const auto& l : ls) {
    if (l.rfind("add rule ip vipd", 0) == 0 || l.rfind("add element ip vipd", 0) == 0) {
      EXPECT_THAT(l, Not(HasSubstr("fd00:"))) << l;
      EXPECT_THAT(l, Not(HasSubstr("ip6 "))) << l;
    }
    if (l.rfind("add rule ip6 vipd", 0) == 0 || l.rfind("add element ip6 vipd", 0) == 0)
      EXPECT_THAT(l, Not(HasSubstr("10."))) << l;
  }
  // the IPv4 part is what an IPv4-only table renders
  ServiceTable v4only = table_of({svc("default/db:http", "10.96.0.100", 8080, {"10.244.1.15", "10.244.2.88"})});
  const Transaction tx4 = render_full(desired(v4only), {});
  for (const auto& l : lines(tx4.text))
    if (l.find("ip6") == std::string::npos) EXPECT_LT(index_of(ls, l), ls.size()) << l;
}

TEST(NftRender6, Ipv4OnlyFullSyncStillRemovesAStaleIp6Table) {
  const Desired d = desired(table_of({svc("default/db:http", "10.96.0.100", 8080, {"10.244.1.15"})}));
  EXPECT_FALSE(d.has_v6());
  const Transaction tx = render_full(d, {});
  EXPECT_THAT(tx.text, HasSubstr("add table ip6 vipd\ndelete table ip6 vipd\n"));
  EXPECT_THAT(tx.text, Not(HasSubstr("table ip6 vipd {")));
  EXPECT_THAT(tx.text, Not(HasSubstr("add chain ip6")));
}

TEST(NftRender6, MixedFamilyBackendsAndRangesChecked) {
  auto s = svc6("default/m:http", "fd00:10::10", 80, {"fd00:244::1"});
  s.backends.push_back({ip("10.244.1.1"), 8080, 1, false});  // IPv4 real server of an IPv6 VIP
  EntryRender r;
  std::string err;
  ASSERT_TRUE(render_entry(s, "default/m:httptcp", {}, &r, &err)) << err;
  EXPECT_TRUE(r.v6);
  ASSERT_EQ(r.chains.size(), 1u);
  EXPECT_THAT(r.chains[0].rules.back(), HasSubstr("dnat to [fd00:244::1]:8080"));
  EXPECT_THAT(r.chains[0].rules.back(), Not(HasSubstr("10.244.1.1")));
  // only an IPv4 real server: no usable endpoint
  auto only4 = svc6("default/o:http", "fd00:10::11", 80, {});
  only4.backends.push_back({ip("10.244.1.1"), 8080, 1, false});
  ASSERT_TRUE(render_entry(only4, "default/o:httptcp", {}, &r, &err)) << err;
  ASSERT_EQ(r.elements.size(), 1u);
  EXPECT_EQ(r.elements[0].map, "no-endpoint-services");
  // an IPv4 source range on an IPv6 VIP (and garbage) is refused with a reason
  auto bad = svc6("default/b:http", "fd00:10::12", 80, {"fd00:244::1"});
  bad.source_ranges = {"10.0.0.0/8"};
  EXPECT_FALSE(render_entry(bad, "default/b:httptcp", {}, &r, &err));
  EXPECT_THAT(err, HasSubstr("not an IPv6 CIDR"));
  bad.source_ranges = {"fd00::/200"};
  err.clear();
  EXPECT_FALSE(render_entry(bad, "default/b:httptcp", {}, &r, &err));
  EXPECT_THAT(err, HasSubstr("fd00::/200"));
  // an IPv6 range is normalised (host bits cleared)
  bad.source_ranges = {"fd00:aa::1/32"};
  ASSERT_TRUE(render_entry(bad, "default/b:httptcp", {}, &r, &err)) << err;
  EXPECT_THAT(r.chains[0].rules[0], HasSubstr("ip6 saddr != { fd00:aa::/32 } drop"));
}

TEST(NftDelta6, OneEndpointChangeOfAnIpv6EntryTouchesTheIp6TableOnly) {
  const ServiceTable t = dual_stack();
  const Desired a = desired(t);
  auto t2 = t;
  for (auto& [k, v] : t2.services)
    if (v.name == "default/db6:http")
      for (auto& b : v.backends)
        if (b.ip == ip6("fd00:244::2")) b.ip = ip6("fd00:244::9");
  t2.normalize();
  Desired b;
  size_t rendered = 0;
  std::string err;
  ASSERT_TRUE(build_desired(t2, {}, a, &b, &rendered, &err)) << err;
  EXPECT_EQ(rendered, 1u);
  const Transaction tx = render_delta(a, b);
  const std::string c6 = "svc-" + ipt::chain_hash("default/db6:httptcp");
  const auto ls = lines(tx.text);
  ASSERT_EQ(ls.size(), 2u) << tx.text;
  EXPECT_EQ(ls[0], "flush chain ip6 vipd " + c6 + '\0');
  EXPECT_THAT(ls[1], HasSubstr("add chain ip6 vipd " + c6 + " { jump mark-for-masquerade; meta l4proto tcp "
                               "numgen random mod 2 0 dnat to [fd00:244::1]:8080 "));
  EXPECT_EQ(tx.chains_written, 1u);
  EXPECT_EQ(tx.elements_added + tx.elements_deleted, 0u);
}

TEST(NftDelta6, RemovingIpv6EntriesRetiresTheirObjectsInTheIp6Table) {
  const ServiceTable t = dual_stack();
  const Desired a = desired(t);
  auto t2 = t;
  for (auto it = t2.services.begin(); it != t2.services.end();)
    it = it->second.name == "default/aff:http" || it->second.name == "default/db6:http" ? t2.services.erase(it)
                                                                                        : std::next(it);
  t2.normalize();
  Desired b;
  std::string err;
  ASSERT_TRUE(build_desired(t2, {}, a, &b, nullptr, &err)) << err;
  Transaction tx = render_delta(a, b);
  const auto ls = lines(tx.text);
  EXPECT_LT(index_of(ls, "delete element ip6 vipd service-ips { fd00:10::10 . tcp . 8080, fd00:10::20 . tcp . 80 }"),
            ls.size()) << tx.text;
  EXPECT_LT(index_of(ls, "delete element ip6 vipd cluster-ips { fd00:10::10, fd00:10::20 }"), ls.size()) << tx.text;
  EXPECT_LT(index_of(ls, "flush chain ip6 vipd svc-" + ipt::chain_hash("default/db6:httptcp")), ls.size());
  EXPECT_THAT(tx.text, Not(HasSubstr(" ip vipd")));
  // retired with the ip6 table's marker (2 svc + 2 sep chains; 2 affinity sets)
  EXPECT_EQ(tx.chains_retired, 4u);
  ASSERT_EQ(tx.retired_sets.size(), 2u);
  for (const auto& n : tx.retired_chains) EXPECT_THAT(n, ::testing::EndsWith("/6"));
  // the bulk delete names the right table
  b.retired_chains = tx.retired_chains;
  b.retired_sets = tx.retired_sets;
  for (size_t i = 0; i < kRetiredLimit; ++i) b.retired_chains.insert("sep-OLD" + std::to_string(i));
  Desired c;
  auto t3 = t2;
  t3.services.begin()->second.backends.pop_back();  // the IPv4 entry changes: a delta with the bulk delete
  t3.normalize();
  ASSERT_TRUE(build_desired(t3, {}, b, &c, nullptr, &err)) << err;
  tx = render_delta(b, c);
  EXPECT_THAT(tx.text, HasSubstr("delete chain ip6 vipd svc-" + ipt::chain_hash("default/db6:httptcp") + "\n"));
  EXPECT_THAT(tx.text, HasSubstr("delete set ip6 vipd aff-"));
  EXPECT_THAT(tx.text, HasSubstr("delete chain ip vipd sep-OLD0\n"));
  EXPECT_TRUE(tx.retired_chains.empty());
}

// The dual-stack transactions in a real kernel: `nft -f` in a private network
// namespace (unshare -n; nothing outside it changes), the full sync then an
// IPv6 partial sync, and what `nft list table ip6 vipd` shows. Needs root and
// nft; SKIPs with the reason otherwise.
std::string run_shell(const std::string& cmd, int* rc) {
  std::string out;
  FILE* f = ::popen(cmd.c_str(), "r");
  if (!f) {
    *rc = -1;
    return out;
  }
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
  *rc = ::pclose(f);
  return out;
}

TEST(NftKernel6, DualStackTransactionsLoadInAPrivateNetns) {
  if (::geteuid() != 0) GTEST_SKIP() << "SKIP: needs root for a private network namespace and nf_tables";
  int rc = 0;
  run_shell("command -v nft >/dev/null && command -v unshare >/dev/null", &rc);
  if (rc != 0) GTEST_SKIP() << "SKIP: nft or unshare not installed";
  run_shell("unshare -n nft list tables >/dev/null 2>&1", &rc);
  if (rc != 0) GTEST_SKIP() << "SKIP: no nf_tables in a new network namespace here";
  for (const bool nat : {false, true}) {
    const RenderOptions o = nat ? nat_mode() : RenderOptions{};
    const ServiceTable t = dual_stack();
    const Desired a = desired(t, o);
    auto t2 = t;
    for (auto& [k, v] : t2.services)
      if (v.name == "default/db6:http") v.backends.push_back({ip6("fd00:244::9"), 8080, 1, false});
      else if (v.name == "default/aff:http") v.backends.pop_back();
    t2.normalize();
    Desired b;
    std::string err;
    ASSERT_TRUE(build_desired(t2, o, a, &b, nullptr, &err)) << err;
    const Transaction full = render_full(a, o), delta = render_delta(a, b);
    char dir[] = "/tmp/nft6-test-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    const std::string d = dir;
    for (const auto& [name, text] : {std::pair<std::string, std::string>{"full", full.text}, {"delta", delta.text}}) {
      FILE* f = std::fopen((d + "/" + name).c_str(), "w");
      ASSERT_NE(f, nullptr);
      std::fwrite(text.data(), 1, text.size(), f);
      std::fclose(f);
    }
    const std::string out = run_shell("unshare -n sh -c 'nft -f " + d + "/full && nft -f " + d +
                                          "/delta && nft list table ip6 vipd && echo ---ip && nft list table ip vipd' 2>&1",
                                      &rc);
    run_shell("rm -rf " + d, &rc);
    if (std::getenv("VIPD_NFT6_SHOW")) std::fputs(out.c_str(), stderr);
    ASSERT_EQ(out.find("Error"), std::string::npos) << (nat ? "nat" : "fnat") << ": " << out;
    const std::string v6 = out.substr(0, out.find("---ip"));
    const std::string v4 = out.substr(out.find("---ip") == std::string::npos ? out.size() : out.find("---ip"));
    EXPECT_THAT(v6, HasSubstr("table ip6 vipd {")) << out;
    EXPECT_THAT(v6, HasSubstr("fd00:244::9")) << out;                       // the delta's new endpoint
    EXPECT_THAT(v6, HasSubstr("fd00:10::40 . tcp . 80 : goto reject-chain")) << out;
    EXPECT_THAT(v6, HasSubstr("type ipv6_addr")) << out;
    EXPECT_THAT(v6, HasSubstr("fd00:aa::/32")) << out;
    EXPECT_THAT(v6, Not(HasSubstr("10.96."))) << out;
    EXPECT_THAT(v4, HasSubstr("10.96.0.100 . tcp . 8080")) << out;
    EXPECT_THAT(v4, Not(HasSubstr("fd00:"))) << out;
  }
}

}  // namespace
// ---- shards -------------------------------------------------------------------

RenderOptions shards_of(uint32_t n) {
  RenderOptions o;
  o.shard_size = n;
  return o;
}

ServiceTable five_services() {
  std::vector<VirtualService> v;
  for (int i = 0; i < 5; ++i) {
    const std::string vip = "10.96.1." + std::to_string(10 + i);
    v.push_back(svc(("ns/s" + std::to_string(i) + ":p").c_str(), vip.c_str(), 80, {"10.244.5.1", "10.244.5.2"}));
  }
  v[3].source_ranges = {"10.0.0.0/8"};  // its fw- chain stays in ip vipd
  return table_of(v);
}

TEST(NftShard, FullSyncSpreadsEntriesOverShardTables) {
  const Desired d = desired(five_services(), shards_of(2));
  ASSERT_EQ(d.shard_fill[0], (std::vector<uint32_t>{2, 2, 1}));
  const Transaction tx = render_full(d, shards_of(2), {"ip vipd", "ip vipd-2", "ip vipd-7", "inet other", "ip vipd-x"});
  EXPECT_THAT(tx.text, HasSubstr("table ip vipd-1 {\n\tmap service-ips"));
  EXPECT_THAT(tx.text, HasSubstr("table ip vipd-2 {\n"));
  EXPECT_THAT(tx.text, HasSubstr("\tchain nat-prerouting {\n\t\ttype nat hook prerouting priority -100; policy accept;\n"));
  // stale shard tables go, in-use ones are replaced; others are left alone
  EXPECT_THAT(tx.text, HasSubstr("add table ip vipd-7\ndelete table ip vipd-7\n"));
  EXPECT_THAT(tx.text, HasSubstr("add table ip vipd-1\ndelete table ip vipd-1\n"));
  EXPECT_THAT(tx.text, Not(HasSubstr("table ip vipd-3")));
  EXPECT_THAT(tx.text, Not(HasSubstr("other")));
  EXPECT_THAT(tx.text, Not(HasSubstr("vipd-x")));
  // entries in key order: s0 s1 -> vipd, s2 s3 -> vipd-1, s4 -> vipd-2
  const std::string c2 = "svc-" + ipt::chain_hash("ns/s2:ptcp"), c3 = "svc-" + ipt::chain_hash("ns/s3:ptcp");
  const std::string c4 = "svc-" + ipt::chain_hash("ns/s4:ptcp"), f3 = "fw-" + ipt::chain_hash("ns/s3:ptcp");
  EXPECT_THAT(tx.text, HasSubstr("add chain ip vipd-1 " + c2 + "\n"));
  EXPECT_THAT(tx.text, HasSubstr("add rule ip vipd-1 " + c2 + " jump mark-for-masquerade\n"));
  EXPECT_THAT(tx.text, HasSubstr("add chain ip vipd-2 " + c4 + "\n"));
  EXPECT_THAT(tx.text, HasSubstr("add element ip vipd-1 service-ips { 10.96.1.12 . tcp . 80 : goto " + c2 + ", "
                                 "10.96.1.13 . tcp . 80 : goto " + c3 + " }"));
  EXPECT_THAT(tx.text, HasSubstr("add chain ip vipd " + f3 + "\n"));
  EXPECT_THAT(tx.text, HasSubstr("add element ip vipd firewall-ips { 10.96.1.13 . tcp . 80 : goto " + f3 + " }"));
  EXPECT_THAT(tx.text, HasSubstr("add element ip vipd cluster-ips { 10.96.1.10, 10.96.1.11, 10.96.1.12, 10.96.1.13, "
                                 "10.96.1.14 }"));
}

// apply_diff (O(changes), in place) gives render_delta's transaction and state.
TEST(NftShard, ApplyDiffMatchesTheWholeTableDelta) {
  for (const bool nat : {false, true}) {
    RenderOptions o = shards_of(2);
    o.masquerade_all = !nat;
    const ServiceTable t = five_services();
    const Desired a = desired(t, o);
    ServiceTable t2 = t;
    auto it = t2.services.begin();
    std::advance(it, 2);
    it->second.backends[1].ip = ip("10.244.5.9");  // s2 (shard 1): one endpoint replaced
    t2.services.erase(t2.services.begin());        // s0 (shard 0) removed
    VirtualService n = svc("ns/new:p", "10.96.2.1", 80, {"10.244.6.1"});
    t2.services[n.key] = n;  // new: takes s0's place in shard 0
    VirtualService m = svc("ns/new2:p", "10.96.2.2", 80, {"10.244.6.2"});
    m.kind = ServiceKind::kNodePort;
    t2.services[m.key] = m;  // new: shard 2 has room
    VirtualService q = svc("ns/new3:p", "10.96.2.3", 80, {"10.244.6.3"});
    t2.services[q.key] = q;  // new: shard 3, a new table
    t2.normalize();
    Desired b;
    std::string err;
    ASSERT_TRUE(build_desired(t2, o, a, &b, nullptr, &err)) << err;
    const Transaction whole = render_delta(a, b);
    Desired c = a;
    Transaction inc;
    size_t rendered = 0;
    ASSERT_EQ(apply_diff(&c, TableDiff::compute(t, t2), o, &inc, &rendered, &err), DiffResult::kApplied) << err;
    EXPECT_EQ(rendered, 4u);
    EXPECT_EQ(inc.text, whole.text);
    EXPECT_THAT(inc.text, HasSubstr("table ip vipd-3 {"));
    EXPECT_THAT(inc.text, HasSubstr("add element ip vipd-2 service-nodeports { 10.96.2.2 . tcp . 80 : goto "));
    EXPECT_THAT(inc.text, HasSubstr("flush chain ip vipd-1 svc-" + ipt::chain_hash("ns/s2:ptcp")));
    EXPECT_THAT(inc.text, HasSubstr("add element ip vipd cluster-ips { 10.96.2.1, 10.96.2.3 }"));
    EXPECT_THAT(inc.text, HasSubstr("delete element ip vipd cluster-ips { 10.96.1.10 }"));
    ASSERT_EQ(c.entries.size(), b.entries.size());
    for (size_t i = 0; i < c.entries.size(); ++i) {
      EXPECT_EQ(c.entries[i].first, b.entries[i].first);
      EXPECT_EQ(c.entries[i].second->shard, b.entries[i].second->shard) << c.entries[i].second->svc.name;
      EXPECT_EQ(c.entries[i].second->render, b.entries[i].second->render);
    }
    EXPECT_EQ(c.shard_fill[0], b.shard_fill[0]);
    EXPECT_EQ(c.shard_fill[0], (std::vector<uint32_t>{2, 2, 2, 1}));
    EXPECT_EQ(c.cluster_ips, b.cluster_ips);
    EXPECT_EQ(c.base_hashes, b.base_hashes);
    EXPECT_EQ(c.chains(), b.chains());
    EXPECT_EQ(c.retired_chains, inc.retired_chains);
    // nothing changed: an empty transaction
    Transaction none;
    ASSERT_EQ(apply_diff(&c, TableDiff::compute(t2, t2), o, &none, &rendered, &err), DiffResult::kApplied);
    EXPECT_TRUE(none.empty());
  }
}

TEST(NftShard, ApplyDiffFallsBackWhenTheDiffDoesNotMatch) {
  const ServiceTable t = five_services();
  Desired a = desired(t, shards_of(2));
  ServiceTable t2 = t;
  VirtualService n = svc("ns/new:p", "10.96.2.1", 80, {"10.244.6.1"});
  t2.services[n.key] = n;
  Transaction tx;
  std::string err;
  // the diff applied once; "added" again (the key exists now): fallback, state untouched
  TableDiff d = TableDiff::compute(t, t2);
  ASSERT_EQ(apply_diff(&a, d, shards_of(2), &tx, nullptr, &err), DiffResult::kApplied);
  const auto after = a.entries;
  EXPECT_EQ(apply_diff(&a, d, shards_of(2), &tx, nullptr, &err), DiffResult::kFallback);
  EXPECT_EQ(a.entries.size(), after.size());
  // a removed key that is not there
  TableDiff gone;
  gone.removed.push_back(svc("x", "10.9.9.9", 1, {}).key);
  EXPECT_EQ(apply_diff(&a, gone, shards_of(2), &tx, nullptr, &err), DiffResult::kFallback);
  // an entry whose hash input collides with another's: build_desired decides
  VirtualService twin = t.services.begin()->second;
  twin.key.port = 81;  // same name and protocol: same chain-name input
  ServiceTable t3 = t2;
  t3.services[twin.key] = twin;
  EXPECT_EQ(apply_diff(&a, TableDiff::compute(t2, t3), shards_of(2), &tx, nullptr, &err), DiffResult::kFallback);
  // bad input: refused, state untouched
  ServiceTable t4 = t2;
  t4.services.begin()->second.source_ranges = {"bad"};
  EXPECT_EQ(apply_diff(&a, TableDiff::compute(t2, t4), shards_of(2), &tx, nullptr, &err), DiffResult::kBadInput);
  EXPECT_THAT(err, HasSubstr("not an IPv4 CIDR"));
  EXPECT_EQ(a.entries, after);
}

// The shard tables and an incremental change load into a real kernel.
TEST(NftKernelShard, ShardedTransactionsLoadInAPrivateNetns) {
  if (::geteuid() != 0) GTEST_SKIP() << "SKIP: needs root for a private network namespace and nf_tables";
  int rc = 0;
  run_shell("command -v nft >/dev/null && command -v unshare >/dev/null", &rc);
  if (rc != 0) GTEST_SKIP() << "SKIP: nft or unshare not installed";
  run_shell("unshare -n nft list tables >/dev/null 2>&1", &rc);
  if (rc != 0) GTEST_SKIP() << "SKIP: no nf_tables in a new network namespace here";
  const ServiceTable t = five_services();
  Desired a = desired(t, shards_of(2));
  const Transaction full = render_full(a, shards_of(2));
  ServiceTable t2 = t;
  std::prev(t2.services.end())->second.backends[0].ip = ip("10.244.7.7");  // s4, shard 2
  VirtualService q = svc("ns/new3:p", "10.96.2.3", 80, {"10.244.6.3", "10.244.6.4", "10.244.6.5"});
  t2.services[q.key] = q;  // shard 2 has room
  VirtualService r = svc("ns/new4:p", "10.96.2.4", 80, {"10.244.6.6"});
  t2.services[r.key] = r;  // shard 3: a new table in a partial sync
  t2.normalize();
  Transaction delta;
  std::string err;
  ASSERT_EQ(apply_diff(&a, TableDiff::compute(t, t2), shards_of(2), &delta, nullptr, &err), DiffResult::kApplied);
  char dir[] = "/tmp/nft-shard-test-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string d = dir;
  for (const auto& [name, text] : {std::pair<std::string, std::string>{"full", full.text}, {"delta", delta.text}}) {
    FILE* f = std::fopen((d + "/" + name).c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  }
  const std::string out = run_shell("unshare -n sh -c 'nft -f " + d + "/full && nft -f " + d +
                                        "/delta && nft list tables && nft list table ip vipd-2 && nft list table ip vipd-3' 2>&1",
                                    &rc);
  run_shell("rm -rf " + d, &rc);
  ASSERT_EQ(out.find("Error"), std::string::npos) << out;
  EXPECT_THAT(out, HasSubstr("table ip vipd\n"));
  EXPECT_THAT(out, HasSubstr("table ip vipd-1\n"));
  EXPECT_THAT(out, HasSubstr("table ip vipd-3\n"));
  EXPECT_THAT(out, HasSubstr("dnat to 10.244.7.7:8080"));
  EXPECT_THAT(out, HasSubstr("numgen random mod 3 0 dnat to 10.244.6.3:8080"));
  EXPECT_THAT(out, HasSubstr("10.96.2.4 . tcp . 80 : goto svc-"));
}

}  // namespace vipd::cp::nft
