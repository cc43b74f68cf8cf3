// Thread: test main thread.
// /v1/explain: query parsing and the document built from an ExplainResult.
#include "observability/explain.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/unit/metrics/fake_stats.h"

namespace vipd::cp {
namespace {

using testing::ip;

ExplainQuery q(Protocol p = Protocol::kTcp, const char* dst = "10.96.0.100", uint16_t dport = 8080) {
  ExplainQuery e;
  e.protocol = p;
  e.src = ip("10.0.0.2");
  e.sport = 40000;
  e.dst = ip(dst);
  e.dport = dport;
  return e;
}

dp::ExplainResult service_result() {
  dp::ExplainResult r;
  r.answered = true;
  r.worker_lcore = 1;
  r.service_found = true;
  r.vip_address = true;
  r.scheduler = Scheduler::kRr;
  r.n_dests = 4;
  r.n_weighted = 4;
  return r;
}

std::string all_reasons(const nlohmann::ordered_json& j) {
  std::string s;
  for (const auto& r : j["reasons"]) s += r.get<std::string>() + "\n";
  return s;
}

TEST(ExplainQuery, Parses) {
  std::string err;
  auto e = parse_explain_query({{"proto", "TCP"}, {"src", "10.0.0.2:40000"}, {"dst", "10.96.0.100:8080"}}, &err);
  ASSERT_TRUE(e) << err;
  EXPECT_EQ(e->protocol, Protocol::kTcp);
  EXPECT_EQ(e->src, ip("10.0.0.2"));
  EXPECT_EQ(e->sport, 40000);
  EXPECT_EQ(e->dst, ip("10.96.0.100"));
  EXPECT_EQ(e->dport, 8080);
  e = parse_explain_query({{"proto", "udp"}, {"src", "10.0.0.2:1"}, {"dst", "10.96.0.10:53"}}, &err);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->protocol, Protocol::kUdp);
}

TEST(ExplainQuery, RejectsBadInput) {
  std::string err;
  EXPECT_FALSE(parse_explain_query({{"proto", "tcp"}, {"src", "10.0.0.2:1"}}, &err));
  EXPECT_NE(err.find("proto=tcp|udp, src=IP:PORT and dst=IP:PORT"), std::string::npos);
  EXPECT_FALSE(parse_explain_query({{"proto", "icmp"}, {"src", "10.0.0.2:1"}, {"dst", "1.2.3.4:5"}}, &err));
  EXPECT_EQ(err, "proto 'icmp': expected tcp or udp");
  EXPECT_FALSE(parse_explain_query({{"proto", "tcp"}, {"src", "10.0.0.2"}, {"dst", "1.2.3.4:5"}}, &err));
  EXPECT_EQ(err, "src '10.0.0.2': expected IPv4:PORT or [IPv6]:PORT (port 1..65535)");
  EXPECT_FALSE(parse_explain_query({{"proto", "tcp"}, {"src", "10.0.0.2:1"}, {"dst", "1.2.3.4:0"}}, &err));
  EXPECT_EQ(err, "dst '1.2.3.4:0': expected IPv4:PORT or [IPv6]:PORT (port 1..65535)");
  EXPECT_FALSE(parse_explain_query({{"proto", "tcp"}, {"src", "10.0.0.2:1"}, {"dst", "1.2.3:5"}}, &err));
  EXPECT_FALSE(parse_explain_query({{"proto", "tcp"}, {"src", "10.0.0.2:70000"}, {"dst", "1.2.3.4:5"}}, &err));
  // IPv6: in brackets only, no zone, one family for both ends.
  EXPECT_FALSE(parse_explain_query({{"proto", "tcp"}, {"src", "fd00::2:1"}, {"dst", "[fd00::5]:5"}}, &err));
  EXPECT_EQ(err, "src 'fd00::2:1': expected IPv4:PORT or [IPv6]:PORT (port 1..65535)");
  EXPECT_FALSE(parse_explain_query({{"proto", "tcp"}, {"src", "[fd00::2%eth0]:1"}, {"dst", "[fd00::5]:5"}}, &err));
  EXPECT_FALSE(parse_explain_query({{"proto", "tcp"}, {"src", "[10.0.0.2]:1"}, {"dst", "1.2.3.4:5"}}, &err));
  EXPECT_FALSE(parse_explain_query({{"proto", "tcp"}, {"src", "[fd00::2]:0"}, {"dst", "[fd00::5]:5"}}, &err));
  EXPECT_FALSE(parse_explain_query({{"proto", "tcp"}, {"src", "10.0.0.2:1"}, {"dst", "[fd00::5]:5"}}, &err));
  EXPECT_EQ(err, "src '10.0.0.2:1' and dst '[fd00::5]:5': expected addresses of one family");
}

TEST(ExplainQuery, ParsesIpv6) {
  std::string err;
  auto e = parse_explain_query(
      {{"proto", "tcp"}, {"src", "[FD00:10:0:0:0:0:0:10]:40000"}, {"dst", "[fd00:10:96::100]:8080"}}, &err);
  ASSERT_TRUE(e) << err;
  EXPECT_TRUE(e->src.is_v6());
  EXPECT_EQ(e->src, *IpAddr::parse("fd00:10::10"));
  EXPECT_EQ(e->sport, 40000);
  EXPECT_EQ(e->dst, *IpAddr::parse("fd00:10:96::100"));
  EXPECT_EQ(e->dport, 8080);
}

TEST(Explain, NewConnectionIsScheduled) {
  const ServiceTable t = testing::seed_table();
  dp::ExplainResult r = service_result();
  r.would_schedule = true;
  r.next_dest_ip = ip("10.244.2.88");
  r.next_dest_port = 8080;
  const auto j = explain_json(q(), r, &t, true);
  EXPECT_EQ(j["decision"], "schedule");
  EXPECT_EQ(j["backend"], "10.244.2.88:8080");
  EXPECT_EQ(j["worker_lcore"], 1);
  EXPECT_EQ(j["query"]["src"], "10.0.0.2:40000");
  EXPECT_EQ(j["service"]["name"], "default/db:http");
  EXPECT_EQ(j["service"]["scheduler"], "rr");
  EXPECT_EQ(j["service"]["weighted_backends"], 4);
  EXPECT_TRUE(j["connection"].is_null());
  const std::string why = all_reasons(j);
  EXPECT_NE(why.find("virtual service default/db:http (TCP 10.96.0.100:8080), scheduler rr, 4 backends (4 with weight > 0)"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("scheduler rr picks 10.244.2.88:8080"), std::string::npos) << why;
  EXPECT_NE(why.find("only a SYN starts a connection"), std::string::npos) << why;
  // Key order is fixed (ordered_json).
  EXPECT_EQ(j.begin().key(), "query");
}

TEST(Explain, AffinityIsMentioned) {
  ServiceTable t = testing::seed_table();
  t.services[testing::db_key()].persistence_timeout_s = 10800;
  dp::ExplainResult r = service_result();
  r.would_schedule = true;
  r.next_dest_ip = ip("10.244.1.15");
  r.next_dest_port = 8080;
  const auto j = explain_json(q(), r, &t, true);
  EXPECT_EQ(j["service"]["persistence_timeout_s"], 10800);
  EXPECT_NE(all_reasons(j).find("session affinity ClientIP (10800 s): this client has no live persistence entry"),
            std::string::npos);
  EXPECT_TRUE(j["affinity"].is_null());
}

TEST(Explain, LivePersistenceEntryDecides) {
  ServiceTable t = testing::seed_table();
  t.services[testing::db_key()].persistence_timeout_s = 10800;
  dp::ExplainResult r = service_result();
  r.would_schedule = true;
  r.next_dest_ip = ip("10.244.3.12");
  r.next_dest_port = 8080;
  r.affinity_found = true;
  r.affinity_expires_in_s = 42.0;
  const auto j = explain_json(q(), r, &t, true);
  EXPECT_EQ(j["backend"], "10.244.3.12:8080");
  EXPECT_EQ(j["affinity"]["backend"], "10.244.3.12:8080");
  EXPECT_NE(all_reasons(j).find("persistence entry (expires in 42 s unless used) pins it to 10.244.3.12:8080"),
            std::string::npos)
      << all_reasons(j);
  EXPECT_EQ(all_reasons(j).find("scheduler rr picks"), std::string::npos);
}

TEST(Explain, ExistingConnection) {
  const ServiceTable t = testing::seed_table();
  dp::ExplainResult r = service_result();
  r.conn_found = true;
  r.conn_dest_alive = true;
  r.conn_state = "ESTABLISHED";
  r.conn_dest_ip = ip("10.244.3.12");
  r.conn_dest_port = 8080;
  r.conn_local_ip = ip("10.244.255.1");
  r.conn_local_port = 1025;
  r.conn_expires_in_s = 899.6;
  r.would_schedule = true;
  r.next_dest_ip = ip("10.244.1.15");
  r.next_dest_port = 8080;
  const auto j = explain_json(q(), r, &t, true);
  EXPECT_EQ(j["decision"], "existing_connection");
  EXPECT_EQ(j["backend"], "10.244.3.12:8080");
  EXPECT_EQ(j["connection"]["state"], "ESTABLISHED");
  EXPECT_EQ(j["connection"]["direction"], "original");
  EXPECT_EQ(j["connection"]["local"], "10.244.255.1:1025");
  EXPECT_NE(all_reasons(j).find("existing connection (state ESTABLISHED, expires in 900 s) to backend "
                                "10.244.3.12:8080, source rewritten to 10.244.255.1:1025"),
            std::string::npos)
      << all_reasons(j);
}

TEST(Explain, ClosingConnectionPortReuse) {
  const ServiceTable t = testing::seed_table();
  dp::ExplainResult r = service_result();
  r.conn_found = true;
  r.conn_dest_alive = true;
  r.conn_state = "TIME_WAIT";
  r.conn_dest_ip = ip("10.244.2.88");
  r.conn_dest_port = 8080;
  r.conn_expires_in_s = 108;
  r.would_schedule = true;
  r.next_dest_ip = ip("10.244.3.12");
  r.next_dest_port = 8080;
  const auto j = explain_json(q(), r, &t, true);
  EXPECT_EQ(j["decision"], "schedule");
  EXPECT_EQ(j["backend"], "10.244.3.12:8080");
  EXPECT_EQ(j["connection"]["state"], "TIME_WAIT");
  EXPECT_NE(all_reasons(j).find("is closing: a SYN starts a new connection, other packets still go to 10.244.2.88:8080"),
            std::string::npos)
      << all_reasons(j);
  // UDP has no closing states: the flow is followed.
  r.conn_state = "UDP";
  EXPECT_EQ(explain_json(q(Protocol::kUdp), r, &t, true)["decision"], "existing_connection");
}

TEST(Explain, ConnectionToARemovedBackend) {
  const ServiceTable t = testing::seed_table(false);
  dp::ExplainResult r = service_result();
  r.n_dests = 3;
  r.n_weighted = 3;
  r.conn_found = true;
  r.conn_dest_alive = false;
  r.conn_state = "ESTABLISHED";
  r.conn_dest_ip = ip("10.244.3.44");
  r.conn_dest_port = 8080;
  r.would_schedule = true;
  r.next_dest_ip = ip("10.244.1.15");
  r.next_dest_port = 8080;
  const auto j = explain_json(q(), r, &t, false);
  EXPECT_EQ(j["decision"], "reschedule");
  EXPECT_EQ(j["backend"], "10.244.1.15:8080");
  EXPECT_NE(all_reasons(j).find("which was removed: a TCP packet other than a SYN gets a RST"), std::string::npos);
}

TEST(Explain, ReplyDirection) {
  dp::ExplainResult r;
  r.answered = true;
  r.conn_found = true;
  r.conn_reply = true;
  r.conn_state = "ESTABLISHED";
  r.conn_dest_ip = ip("10.244.1.15");
  r.conn_dest_port = 8080;
  const auto j = explain_json(q(Protocol::kTcp, "10.244.255.1", 1025), r, nullptr, true);
  EXPECT_EQ(j["decision"], "reply");
  EXPECT_EQ(j["connection"]["direction"], "reply");
  EXPECT_TRUE(j["service"].is_null());
}

TEST(Explain, NoEndpointsRejectOrDrop) {
  const ServiceTable t = testing::seed_table();
  dp::ExplainResult r = service_result();
  r.n_dests = 0;
  r.n_weighted = 0;
  auto j = explain_json(q(Protocol::kTcp, "10.96.0.101", 80), r, &t, true);
  EXPECT_EQ(j["decision"], "reject");
  EXPECT_TRUE(j["backend"].is_null());
  EXPECT_NE(all_reasons(j).find("a TCP RST goes back to the client"), std::string::npos);
  j = explain_json(q(Protocol::kUdp, "10.96.0.101", 53), r, &t, true);
  EXPECT_NE(all_reasons(j).find("ICMP port unreachable"), std::string::npos);
  r.drop_when_empty = true;
  j = explain_json(q(Protocol::kTcp, "10.96.0.101", 80), r, &t, true);
  EXPECT_EQ(j["decision"], "drop");
  EXPECT_EQ(j["service"]["when_empty"], "drop");
}

TEST(Explain, ProxyProtocolShownInFullNatOnly) {
  ServiceTable t = testing::seed_table();
  const dp::ExplainResult r = service_result();
  EXPECT_EQ(explain_json(q(), r, &t, true)["service"]["proxy_protocol"], "");
  for (auto& [key, svc] : t.services) svc.proxy_protocol = ProxyProtocol::kV2;
  EXPECT_EQ(explain_json(q(), r, &t, true)["service"]["proxy_protocol"], "v2");
  // NAT mode cannot send the header: not shown.
  EXPECT_EQ(explain_json(q(), r, &t, false)["service"]["proxy_protocol"], "");
}

TEST(Explain, NotAServiceOrWrongPort) {
  dp::ExplainResult r;
  r.answered = true;
  r.vip_address = true;
  auto j = explain_json(q(Protocol::kTcp, "10.96.0.100", 9999), r, nullptr, true);
  EXPECT_EQ(j["decision"], "vip_port_not_served");
  EXPECT_NE(all_reasons(j).find("10.96.0.100 is a VIP, but TCP port 9999 is not served there"), std::string::npos);
  r.vip_address = false;
  j = explain_json(q(Protocol::kUdp, "8.8.8.8", 53), r, nullptr, true);
  EXPECT_EQ(j["decision"], "not_a_service");
  EXPECT_NE(all_reasons(j).find("8.8.8.8:53 (UDP) is not a virtual service"), std::string::npos);
}

// IPv6 flows: the same decisions and wording, addresses in RFC 5952 form and
// flows as [addr]:port (full NAT with its local address, and NAT).
ServiceTable ipv6_table() {
  ServiceTable t;
  VirtualService db;
  db.key = ServiceKey{*IpAddr::parse("fd00:10:96::100"), 8080, Protocol::kTcp};
  db.name = "default/db6:http";
  db.persistence_timeout_s = 600;
  for (const char* a : {"fd00:244::1:15", "fd00:244::2:88"}) db.backends.push_back({*IpAddr::parse(a), 8080, 1, false});
  t.services[db.key] = db;
  return t;
}

ExplainQuery q6() {
  ExplainQuery e;
  e.src = *IpAddr::parse("fd00:10::10");
  e.sport = 40000;
  e.dst = *IpAddr::parse("fd00:10:96:0:0:0:0:100");
  e.dport = 8080;
  return e;
}

TEST(Explain, Ipv6NewConnectionIsScheduled) {
  const ServiceTable t = ipv6_table();
  dp::ExplainResult r = service_result();
  r.n_dests = r.n_weighted = 2;
  r.would_schedule = true;
  r.next_dest_ip = *IpAddr::parse("fd00:244:0:0:0:0:2:88");
  r.next_dest_port = 8080;
  for (bool fnat : {true, false}) {
    const auto j = explain_json(q6(), r, &t, fnat);
    EXPECT_EQ(j["decision"], "schedule");
    EXPECT_EQ(j["query"]["src"], "[fd00:10::10]:40000");
    EXPECT_EQ(j["query"]["dst"], "[fd00:10:96::100]:8080");
    EXPECT_EQ(j["service"]["name"], "default/db6:http");
    EXPECT_EQ(j["service"]["vip"], "fd00:10:96::100");
    EXPECT_EQ(j["service"]["persistence_timeout_s"], 600);
    EXPECT_EQ(j["backend"], "[fd00:244::2:88]:8080");
    const std::string why = all_reasons(j);
    EXPECT_NE(why.find("virtual service default/db6:http (TCP [fd00:10:96::100]:8080), scheduler rr, 2 backends"),
              std::string::npos)
        << why;
    EXPECT_NE(why.find("scheduler rr picks [fd00:244::2:88]:8080"), std::string::npos) << why;
    EXPECT_NE(why.find("session affinity ClientIP (600 s): this client has no live persistence entry"),
              std::string::npos)
        << why;
  }
}

TEST(Explain, Ipv6ServiceShowsProxyProtocolInFullNat) {
  // dpdk fnat sends the PROXY protocol header over IPv6 too (worker6.cc).
  ServiceTable t = ipv6_table();
  for (auto& [key, svc] : t.services) svc.proxy_protocol = ProxyProtocol::kV1;
  const dp::ExplainResult r = service_result();
  EXPECT_EQ(explain_json(q6(), r, &t, true)["service"]["name"], "default/db6:http");
  EXPECT_EQ(explain_json(q6(), r, &t, true)["service"]["proxy_protocol"], "v1");
  EXPECT_EQ(explain_json(q6(), r, &t, false)["service"]["proxy_protocol"], "");
}

TEST(Explain, Ipv6ExistingConnectionFullNat) {
  const ServiceTable t = ipv6_table();
  dp::ExplainResult r = service_result();
  r.conn_found = true;
  r.conn_dest_alive = true;
  r.conn_state = "ESTABLISHED";
  r.conn_dest_ip = *IpAddr::parse("fd00:244::1:15");
  r.conn_dest_port = 8080;
  r.conn_local_ip = *IpAddr::parse("fd00:244::ff:1");
  r.conn_local_port = 1025;
  r.conn_expires_in_s = 899.6;
  const auto j = explain_json(q6(), r, &t, true);
  EXPECT_EQ(j["decision"], "existing_connection");
  EXPECT_EQ(j["backend"], "[fd00:244::1:15]:8080");
  EXPECT_EQ(j["connection"]["backend"], "[fd00:244::1:15]:8080");
  EXPECT_EQ(j["connection"]["local"], "[fd00:244::ff:1]:1025");
  EXPECT_NE(all_reasons(j).find("existing connection (state ESTABLISHED, expires in 900 s) to backend "
                                "[fd00:244::1:15]:8080, source rewritten to [fd00:244::ff:1]:1025"),
            std::string::npos)
      << all_reasons(j);
}

TEST(Explain, Ipv6ExistingConnectionNatAndLivePersistence) {
  const ServiceTable t = ipv6_table();
  dp::ExplainResult r = service_result();
  r.conn_found = true;
  r.conn_dest_alive = true;
  r.conn_state = "SYN_RECV";
  r.conn_dest_ip = *IpAddr::parse("fd00:244::2:88");
  r.conn_dest_port = 8080;  // nat: no local address (conn_local_ip unset)
  r.would_schedule = true;
  r.next_dest_ip = *IpAddr::parse("fd00:244::2:88");
  r.next_dest_port = 8080;
  r.affinity_found = true;
  r.affinity_expires_in_s = 599;
  const auto j = explain_json(q6(), r, &t, false);
  EXPECT_EQ(j["decision"], "existing_connection");
  EXPECT_EQ(j["backend"], "[fd00:244::2:88]:8080");
  EXPECT_TRUE(j["connection"]["local"].is_null());
  EXPECT_EQ(j["affinity"]["backend"], "[fd00:244::2:88]:8080");
  EXPECT_EQ(all_reasons(j).find("source rewritten"), std::string::npos) << all_reasons(j);
}

TEST(Explain, Ipv6VipPortNotServed) {
  dp::ExplainResult r;
  r.answered = true;
  r.vip_address = true;
  ExplainQuery e = q6();
  e.dport = 9999;
  const auto j = explain_json(e, r, nullptr, true);
  EXPECT_EQ(j["decision"], "vip_port_not_served");
  EXPECT_NE(all_reasons(j).find("fd00:10:96::100 is a VIP, but TCP port 9999 is not served there"), std::string::npos)
      << all_reasons(j);
}

}  // namespace
}  // namespace vipd::cp
