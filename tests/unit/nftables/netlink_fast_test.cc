// parse_fast: which partial-sync transactions go as a libnftnl netlink batch
// (the batch itself is checked against the kernel by nftables_test.sh).
#include "controlplane/backends/nftables/netlink_fast.h"

#include <gtest/gtest.h>
#include <nftables/libnftables.h>
#include <sched.h>
#include <unistd.h>

#include <cstring>
#include <regex>

namespace vipd::cp::nft {
namespace {

TEST(NetlinkFast, ParsesAServiceChainRewrite) {
  std::vector<FastCmd> cmds;
  ASSERT_TRUE(parse_fast(
      "flush chain ip vipd-3 svc-ABC\n"
      "add chain ip vipd-3 svc-ABC { jump mark-for-masquerade; meta l4proto tcp numgen random mod 2 0 dnat to "
      "10.0.0.1:80 comment \"web -> 10.0.0.1:80\"; meta l4proto udp dnat to 10.0.0.2:8080; }\n",
      &cmds));
  ASSERT_EQ(cmds.size(), 2u);
  EXPECT_EQ(cmds[0].kind, FastCmd::kFlushChain);
  EXPECT_EQ(cmds[0].table, "vipd-3");
  EXPECT_EQ(cmds[0].chain, "svc-ABC");
  EXPECT_FALSE(cmds[0].v6);
  ASSERT_EQ(cmds[1].kind, FastCmd::kAddChain);
  ASSERT_EQ(cmds[1].rules.size(), 3u);
  EXPECT_EQ(cmds[1].rules[0].jump, "mark-for-masquerade");
  const FastRule& r = cmds[1].rules[1];
  EXPECT_EQ(r.l4proto, 6);
  EXPECT_EQ(r.numgen_mod, 2u);
  EXPECT_EQ(r.port, 80);
  EXPECT_EQ(r.addr[0], 10);
  EXPECT_EQ(r.addr[3], 1);
  EXPECT_EQ(r.comment, "web -> 10.0.0.1:80");
  EXPECT_EQ(cmds[1].rules[2].l4proto, 17);
  EXPECT_EQ(cmds[1].rules[2].numgen_mod, 0u);
  EXPECT_EQ(cmds[1].rules[2].port, 8080);
  EXPECT_TRUE(cmds[1].rules[2].comment.empty());
}

TEST(NetlinkFast, ParsesIpv6AndBareChains) {
  std::vector<FastCmd> cmds;
  ASSERT_TRUE(parse_fast("add chain ip6 vipd svc-X\nadd chain ip6 vipd svc-X { meta l4proto sctp dnat to [fd00::1]:443; }\n",
                         &cmds));
  ASSERT_EQ(cmds.size(), 2u);
  EXPECT_TRUE(cmds[0].rules.empty());
  EXPECT_TRUE(cmds[1].v6);
  EXPECT_EQ(cmds[1].rules[0].addr[0], 0xfd);
  EXPECT_EQ(cmds[1].rules[0].addr[15], 1);
  EXPECT_EQ(cmds[1].rules[0].port, 443);
}

TEST(NetlinkFast, ParsesTheNatAndAffinityForms) {
  std::vector<FastCmd> cmds;
  ASSERT_TRUE(parse_fast(
      "add set ip vipd-2 aff-E-10800 { type ipv4_addr; flags dynamic,timeout; timeout 10800s; }\n"
      "add chain ip vipd-2 svc-A { ip saddr @aff-E-10800 goto sep-E; numgen random mod 2 0 goto sep-E comment \"web -> "
      "10.0.0.1:80\"; goto sep-F; }\n"
      "add chain ip vipd-2 sep-E { ip saddr 10.0.0.1 jump mark-for-masquerade; update @aff-E-10800 { ip saddr }; "
      "meta l4proto tcp dnat to 10.0.0.1:80; }\n"
      "add set ip6 vipd aff-G-60 { type ipv6_addr; flags dynamic,timeout; timeout 60s; }\n"
      "add chain ip6 vipd sep-G { ip6 saddr fd00::1 jump mark-for-masquerade; update @aff-G-60 { ip6 saddr }; }\n",
      &cmds));
  ASSERT_EQ(cmds.size(), 5u);
  EXPECT_EQ(cmds[0].kind, FastCmd::kAddSet);
  EXPECT_EQ(cmds[0].chain, "aff-E-10800");
  EXPECT_EQ(cmds[0].timeout_s, 10800u);
  ASSERT_EQ(cmds[1].rules.size(), 3u);
  EXPECT_EQ(cmds[1].rules[0].saddr_set, "aff-E-10800");
  EXPECT_EQ(cmds[1].rules[0].jump, "sep-E");
  EXPECT_TRUE(cmds[1].rules[0].go_to);
  EXPECT_EQ(cmds[1].rules[1].numgen_mod, 2u);
  EXPECT_EQ(cmds[1].rules[1].l4proto, 0);
  EXPECT_EQ(cmds[1].rules[1].comment, "web -> 10.0.0.1:80");
  EXPECT_EQ(cmds[1].rules[2].numgen_mod, 0u);
  EXPECT_EQ(cmds[1].rules[2].jump, "sep-F");
  const auto& sep = cmds[2].rules;
  ASSERT_EQ(sep.size(), 3u);
  EXPECT_EQ(sep[0].saddr_len, 4);
  EXPECT_EQ(sep[0].saddr[3], 1);
  EXPECT_EQ(sep[0].jump, "mark-for-masquerade");
  EXPECT_FALSE(sep[0].go_to);
  EXPECT_EQ(sep[1].update_set, "aff-E-10800");
  EXPECT_TRUE(sep[1].jump.empty());
  EXPECT_TRUE(sep[2].dnat);
  EXPECT_EQ(sep[2].port, 80);
  EXPECT_TRUE(cmds[3].v6);
  EXPECT_EQ(cmds[3].timeout_s, 60u);
  EXPECT_EQ(cmds[4].rules[0].saddr_len, 16);
  EXPECT_EQ(cmds[4].rules[1].update_set, "aff-G-60");
}

TEST(NetlinkFast, ParsesElements) {
  std::vector<FastCmd> cmds;
  ASSERT_TRUE(parse_fast("delete element ip vipd-2 service-ips { 10.96.0.1 . tcp . 80, 10.96.0.2 . udp . 53 }\n"
                         "add element ip vipd no-endpoint-services { 10.96.0.3 . sctp . 9 : drop, 10.96.0.4 . tcp . 1 : "
                         "goto reject-chain }\n"
                         "add element ip vipd cluster-ips { 10.96.0.1 }\n"
                         "add element ip6 vipd service-ips { fd00::1 . tcp . 80 : goto svc-X }\n",
                         &cmds));
  ASSERT_EQ(cmds.size(), 4u);
  EXPECT_EQ(cmds[0].kind, FastCmd::kDeleteElements);
  EXPECT_EQ(cmds[0].table, "vipd-2");
  EXPECT_EQ(cmds[0].chain, "service-ips");
  ASSERT_EQ(cmds[0].elems.size(), 2u);
  const uint8_t k0[12] = {10, 96, 0, 1, 6, 0, 0, 0, 0, 80, 0, 0};
  EXPECT_EQ(cmds[0].elems[0].key_len, 12);
  EXPECT_EQ(std::memcmp(cmds[0].elems[0].key, k0, 12), 0);
  EXPECT_EQ(cmds[0].elems[1].key[4], 17);
  EXPECT_EQ(cmds[1].kind, FastCmd::kAddElements);
  EXPECT_EQ(cmds[1].elems[0].value, FastElem::kDrop);
  EXPECT_EQ(cmds[1].elems[1].value, FastElem::kGoto);
  EXPECT_EQ(cmds[1].elems[1].chain, "reject-chain");
  EXPECT_EQ(cmds[2].elems[0].key_len, 4);
  EXPECT_EQ(cmds[2].elems[0].value, FastElem::kNone);
  EXPECT_EQ(cmds[3].elems[0].key_len, 24);
  EXPECT_EQ(cmds[3].elems[0].key[16], 6);
}

TEST(NetlinkFast, LeavesEverythingElseToLibnftables) {
  std::vector<FastCmd> cmds;
  std::string why;
  const char* others[] = {
      "",
      "add element ip vipd service-ips { 10.96.0.1 . icmp . 80 : goto svc-A }\n",
      "add element ip vipd service-ips { 10.96.0.1 . tcp . 80 : accept }\n",
      "add element ip vipd service-ips { fd00::1 . tcp . 80 : goto svc-A }\n",
      "delete element ip vipd service-ips { 10.96.0.1 . tcp . 80 : goto svc-A }\n",
      "add element ip vipd service-ips { 10.96.0.1 . tcp . 80 : goto svc-A\n",
      "add element ip vipd service-ips { 10.96.0.1 . tcp . 70000 }\n",
      "add element ip vipd firewall-ips { 10.0.0.0/8 }\n",
      "flush chain ip vipd svc-A\nadd rule ip vipd svc-A jump x\n",
      "add chain ip vipd svc-A { numgen random mod 2 vmap { 0 : goto sep-A, 1 : goto sep-B }; }\n",
      "add chain ip vipd svc-A { ip daddr 10.0.0.1 jump mark-for-masquerade; }\n",
      "add chain ip vipd svc-A { ip6 saddr fd00::1 jump mark-for-masquerade; }\n",   // v6 match in table ip
      "add chain ip vipd svc-A { ip saddr 10.0.0.0/8 jump x; }\n",
      "add chain ip vipd svc-A { ip saddr != { 10.0.0.0/8 } drop; }\n",
      "add chain ip vipd svc-A { ip saddr @aff-A; }\n",                           // no statement
      "add chain ip vipd svc-A { update @aff-A { ip daddr }; }\n",
      "add chain ip vipd svc-A { meta l4proto tcp dnat to 10.0.0.1:80 goto x; }\n",
      "add set ip vipd aff-A { type ipv4_addr; flags dynamic,timeout; }\n",
      "add set ip vipd aff-A { type ipv4_addr; flags dynamic,timeout; timeout 0s; }\n",
      "add set ip6 vipd aff-A { type ipv4_addr; flags dynamic,timeout; timeout 10s; }\n",
      "add set ip vipd aff-A { type ipv4_addr; flags timeout; timeout 10s; }\n",
      "add chain ip vipd svc-A { meta l4proto tcp dnat to [fd00::1]:80; }\n",    // v6 address in table ip
      "add chain ip6 vipd svc-A { meta l4proto tcp dnat to 10.0.0.1:80; }\n",    // v4 address in table ip6
      "add chain ip vipd svc-A { meta l4proto tcp dnat to 10.0.0.1:0; }\n",
      "add chain ip vipd svc-A { meta l4proto tcp dnat to 10.0.0.1:80 comment \"a\\\"b\"; }\n",
      "add chain ip vipd svc-A { meta l4proto tcp numgen random mod 2 1 dnat to 10.0.0.1:80; }\n",
      "add chain ip vipd svc-A { meta l4proto tcp dnat to 10.0.0.1:80 }\n",  // no ';'
      "add chain inet vipd svc-A\n",
      "add chain ip vipd svc-A { hook prerouting priority 0; }\n",
      "delete chain ip vipd svc-A\n",
      "flush chain ip vipd svc-A { }\n",
  };
  for (const char* s : others) {
    EXPECT_FALSE(parse_fast(s, &cmds, &why)) << s;
    EXPECT_TRUE(cmds.empty()) << s;
  }
  // one line it cannot take sends the whole script to libnftables
  EXPECT_FALSE(parse_fast("flush chain ip vipd svc-A\nadd set ip vipd aff-A { type ipv4_addr; }\n", &cmds, &why));
  EXPECT_EQ(why, "add set ip vipd aff-A { type ipv4_addr; }");
}

// Runs `script` through libnftables; returns nft's output ("" on failure, with the error in *err).
std::string nft(const std::string& script, std::string* err) {
  nft_ctx* ctx = nft_ctx_new(NFT_CTX_DEFAULT);
  nft_ctx_buffer_output(ctx);
  nft_ctx_buffer_error(ctx);
  std::string out;
  if (nft_run_cmd_from_buffer(ctx, script.c_str()) == 0) out = nft_ctx_get_output_buffer(ctx);
  else *err = nft_ctx_get_error_buffer(ctx);
  nft_ctx_free(ctx);
  return out;
}

// The batch writes what libnftables writes for the same text: both tables,
// one filled by each, list the same (in a network namespace of the test's own).
TEST(NetlinkFast, BatchMatchesLibnftables) {
  if (geteuid() != 0) GTEST_SKIP() << "SKIP: needs root (a network namespace and nf_tables)";
  if (unshare(CLONE_NEWNET) != 0) GTEST_SKIP() << "SKIP: unshare(CLONE_NEWNET) failed";
  std::string err;
  const std::string base = "add table ip A\nadd table ip B\nadd table ip6 A\nadd table ip6 B\n";
  std::string decl;
  for (const char* t : {"ip A", "ip B", "ip6 A", "ip6 B"})
    decl += std::string("add chain ") + t + " mark-for-masquerade\nadd chain " + t + " svc-X\nadd chain " + t + " svc-Z\n";
  nft(base + decl, &err);
  ASSERT_EQ(err, "");
  std::string maps;
  for (const char* t : {"A", "B"})
    maps += std::string("add chain ip ") + t + " reject-chain\nadd map ip " + t +
            " service-ips { type ipv4_addr . inet_proto . inet_service : verdict; }\nadd set ip " + t +
            " cluster-ips { type ipv4_addr; }\nadd map ip6 " + t +
            " service-ips { type ipv6_addr . inet_proto . inet_service : verdict; }\n"
            "add element ip " + t + " service-ips { 10.96.0.9 . tcp . 9 : drop }\n";
  nft(maps, &err);
  ASSERT_EQ(err, "");
  auto tx = [](const std::string& t) -> std::string {
    return "flush chain ip " + t + " svc-X\nadd chain ip " + t +
           " svc-X { jump mark-for-masquerade; meta l4proto tcp numgen random mod 2 0 dnat to 10.0.0.1:80 comment "
           "\"web -> 10.0.0.1:80\"; meta l4proto udp dnat to 10.0.0.2:8080; }\n"
           "add chain ip " + t + " svc-Y\nadd chain ip " + t + " svc-Y { meta l4proto sctp dnat to 10.1.2.3:9; }\n"
           "flush chain ip6 " + t + " svc-X\nadd chain ip6 " + t +
           " svc-X { jump mark-for-masquerade; meta l4proto tcp numgen random mod 3 0 dnat to [fd00::1]:443 comment \"v6\"; "
           "meta l4proto tcp dnat to [fd00::2]:443; }\n"
           "delete element ip " + t + " service-ips { 10.96.0.9 . tcp . 9 }\n"
           "add element ip " + t + " service-ips { 10.96.0.1 . tcp . 80 : goto svc-X, 10.96.0.2 . udp . 53 : goto svc-Y }\n"
           "add element ip " + t + " cluster-ips { 10.96.0.1 }\n"
           "add element ip6 " + t + " service-ips { fd00::1 . sctp . 443 : goto svc-X }\n"
           // the nat / affinity form: sets (re)declared, endpoint chains
           "add set ip " + t + " aff-E-10800 { type ipv4_addr; flags dynamic,timeout; timeout 10800s; }\n"
           "add set ip6 " + t + " aff-G-60 { type ipv6_addr; flags dynamic,timeout; timeout 60s; }\n"
           "add chain ip " + t + " sep-E\nadd chain ip " + t + " sep-F\nadd chain ip6 " + t + " sep-G\n"
           "add chain ip " + t + " sep-E { ip saddr 10.0.0.1 jump mark-for-masquerade; update @aff-E-10800 { ip saddr }; "
           "meta l4proto tcp dnat to 10.0.0.1:80 comment \"web -> 10.0.0.1:80\"; }\n"
           "add chain ip " + t + " sep-F { ip saddr 10.0.0.2 jump mark-for-masquerade; meta l4proto tcp dnat to 10.0.0.2:80; }\n"
           "flush chain ip " + t + " svc-Z\n"
           "add chain ip " + t + " svc-Z { ip saddr @aff-E-10800 goto sep-E; numgen random mod 2 0 goto sep-E comment "
           "\"web ClusterIP -> 10.0.0.1:80\"; goto sep-F; }\n"
           "add chain ip6 " + t + " sep-G { ip6 saddr fd00::1 jump mark-for-masquerade; update @aff-G-60 { ip6 saddr }; "
           "meta l4proto tcp dnat to [fd00::1]:443; }\n";
  };
  // once with these elements, then once more after they went again (a delete
  // of each added one, an add of the deleted one)
  auto undo = [](const std::string& t) -> std::string {
    return "delete element ip " + t + " service-ips { 10.96.0.1 . tcp . 80, 10.96.0.2 . udp . 53 }\n"
           "delete element ip " + t + " cluster-ips { 10.96.0.1 }\n"
           "delete element ip6 " + t + " service-ips { fd00::1 . sctp . 443 }\n"
           "add element ip " + t + " service-ips { 10.96.0.9 . tcp . 9 : goto reject-chain }\n";
  };
  // tx, undo, tx: the second rewrite replaces the first one's rules, and
  // every element is added and deleted once
  NetlinkBatchSender sender;
  for (auto* script : {+tx, +undo, +tx}) {
    nft(script("A"), &err);
    ASSERT_EQ(err, "");
    std::vector<FastCmd> cmds;
    ASSERT_TRUE(parse_fast(script("B"), &cmds));
    ASSERT_TRUE(sender.send(cmds, &err)) << err;
  }
  for (const char* f : {"ip", "ip6"}) {
    const std::string a = nft(std::string("list table ") + f + " A", &err);
    const std::string b = nft(std::string("list table ") + f + " B", &err);
    EXPECT_NE(a.find("dnat"), std::string::npos) << a;
    EXPECT_NE(a.find("elements"), std::string::npos) << a;
    EXPECT_NE(a.find("update @aff-"), std::string::npos) << a;
    EXPECT_NE(a.find("flags dynamic,timeout"), std::string::npos) << a;
    EXPECT_EQ(std::regex_replace(a, std::regex("table (ip6?) A"), "table $1 T"),
              std::regex_replace(b, std::regex("table (ip6?) B"), "table $1 T"));
  }
  // a refused batch (no such chain to jump to) reports an error and changes nothing
  std::vector<FastCmd> bad;
  ASSERT_TRUE(parse_fast("flush chain ip B svc-X\nadd chain ip B svc-X { jump nowhere; }\n", &bad));
  NetlinkBatchSender s;
  EXPECT_FALSE(s.send(bad, &err));
  EXPECT_NE(err.find("refused"), std::string::npos) << err;
  EXPECT_NE(nft("list chain ip B svc-X", &err).find("10.0.0.1:80"), std::string::npos);
}

}  // namespace
}  // namespace vipd::cp::nft
