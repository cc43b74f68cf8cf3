// Thread: test main thread. Tests for controlplane/backends/iptables/chain_names.cc:
// kube-proxy's chain-name hash against the check values of docs/contract.md C14.
#include "controlplane/backends/iptables/chain_names.h"

#include <gtest/gtest.h>

#include <set>

namespace vipd::cp::ipt {
namespace {

TEST(ChainNames, Base32MatchesRfc4648) {
  // RFC 4648 section 10 test vectors (without the padding).
  EXPECT_EQ(base32(""), "");
  EXPECT_EQ(base32("f"), "MY");
  EXPECT_EQ(base32("fo"), "MZXQ");
  EXPECT_EQ(base32("foo"), "MZXW6");
  EXPECT_EQ(base32("foob"), "MZXW6YQ");
  EXPECT_EQ(base32("fooba"), "MZXW6YTB");
  EXPECT_EQ(base32("foobar"), "MZXW6YTBOI");
}

TEST(ChainNames, ContractCheckValues) {
  EXPECT_EQ(port_proto_hash("ns1/svc1:p80", "tcp"), "XPGD46QRK7WJZT7O");
  EXPECT_EQ(endpoint_hash("ns1/svc1:p80", "tcp", "10.180.0.1:80"), "SXIVWICOYRO3J4NJ");
  EXPECT_EQ(chain_hash("ns1/svc1:p80tcp"), "XPGD46QRK7WJZT7O");
}

TEST(ChainNames, HashIsSixteenBase32Characters) {
  for (const char* in : {"", "a", "default/db:http", "kube-system/kube-dns:dns"}) {
    const std::string h = chain_hash(in);
    EXPECT_EQ(h.size(), 16u) << in;
    EXPECT_EQ(h.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"), std::string::npos) << h;
  }
  EXPECT_NE(chain_hash("default/db:http"), chain_hash("default/db:https"));
  EXPECT_NE(port_proto_hash("ns/a:p", "tcp"), port_proto_hash("ns/a:p", "udp"));
}

TEST(ChainNames, ClusterIpEntryHashesLikeKubeProxy) {
  VirtualService s;
  s.name = "ns1/svc1:p80";
  s.key = {*parse_ipv4("10.96.0.1"), 80, Protocol::kTcp};
  EXPECT_EQ(entry_hash_input(s), "ns1/svc1:p80tcp");
  EXPECT_EQ(chain_hash(entry_hash_input(s)), "XPGD46QRK7WJZT7O");
  s.key.protocol = Protocol::kUdp;
  EXPECT_EQ(entry_hash_input(s), "ns1/svc1:p80udp");
}

TEST(ChainNames, OtherKindsGetDistinctInputs) {
  VirtualService c;
  c.name = "default/web:http";
  c.key = {*parse_ipv4("10.96.0.10"), 80, Protocol::kTcp};
  VirtualService n1 = c, n2 = c, lb = c, ext = c;
  n1.kind = n2.kind = ServiceKind::kNodePort;
  n1.key = {*parse_ipv4("192.168.1.5"), 30080, Protocol::kTcp};
  n2.key = {*parse_ipv4("192.168.1.6"), 30080, Protocol::kTcp};
  lb.kind = ServiceKind::kLoadBalancer;
  lb.key = {*parse_ipv4("203.0.113.7"), 80, Protocol::kTcp};
  ext.kind = ServiceKind::kExternalIp;
  ext.key = {*parse_ipv4("198.51.100.9"), 80, Protocol::kTcp};
  EXPECT_EQ(entry_hash_input(n1), "default/web:httptcp|NodePort|192.168.1.5:30080");
  std::set<std::string> hashes;
  for (const auto* s : {&c, &n1, &n2, &lb, &ext}) hashes.insert(chain_hash(entry_hash_input(*s)));
  EXPECT_EQ(hashes.size(), 5u);
  EXPECT_EQ(entry_hash_input_extended(c), "default/web:httptcp|ClusterIP|10.96.0.10:80");
}

}  // namespace
}  // namespace vipd::cp::ipt
