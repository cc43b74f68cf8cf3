// Thread: test main thread.
#include "cmd/vipctl_format.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace vipd::ctl {
namespace {

using nlohmann::json;

json sample_services() {
  return json::parse(R"({
    "generation": 3, "forward_method": "fnat",
    "services": [
      {"name": "default/db:http", "protocol": "TCP", "vip": "10.96.0.100", "port": 8080,
       "scheduler": "rr", "persistence_timeout_s": 0, "when_empty": "reject", "proxy_protocol": "v1",
       "stats": {"conns": 120, "inpkts": 4000, "outpkts": 3900, "inbytes": 512000, "outbytes": 2048000},
       "backends": [
         {"ip": "10.244.1.15", "port": 8080, "weight": 1, "terminating": false,
          "active_conns": 7, "inactive_conns": 2,
          "stats": {"conns": 70, "inpkts": 2500, "outpkts": 2400, "inbytes": 300000, "outbytes": 1200000}},
         {"ip": "10.244.2.7", "port": 8080, "weight": 0, "terminating": true,
          "active_conns": 0, "inactive_conns": 11,
          "stats": {"conns": 50, "inpkts": 1500, "outpkts": 1500, "inbytes": 212000, "outbytes": 848000}}
       ]},
      {"name": "kube-system/dns:dns", "protocol": "UDP", "vip": "10.96.0.10", "port": 53,
       "scheduler": "wrr", "persistence_timeout_s": 360, "when_empty": "drop", "proxy_protocol": "",
       "stats": {"conns": 0, "inpkts": 0, "outpkts": 0, "inbytes": 0, "outbytes": 0},
       "backends": []}
    ]})");
}

TEST(VipctlFormat, ForwardLabel) {
  EXPECT_EQ(forward_label("fnat"), "FullNat");
  EXPECT_EQ(forward_label("nat"), "Masq");
  EXPECT_EQ(forward_label("dr"), "dr");
}

TEST(VipctlFormat, ListLikeIpvsadm) {
  EXPECT_EQ(format_list(sample_services()),
            "IP Virtual Server (vipd) generation 3, 2 services\n"
            "Prot LocalAddress:Port Scheduler Flags\n"
            "  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn\n"
            "TCP  10.96.0.100:8080 rr proxy-protocol v1\n"
            "  -> 10.244.1.15:8080             FullNat 1      7          2\n"
            "  -> 10.244.2.7:8080              FullNat 0      0          11\n"
            "UDP  10.96.0.10:53 wrr persistent 360\n");
}

TEST(VipctlFormat, ListBriefExampleAndMasq) {
  json doc = json::parse(R"({"generation":3,"forward_method":"nat","services":[
    {"name":"default/db:http","protocol":"TCP","vip":"10.96.0.100","port":8080,"scheduler":"rr",
     "persistence_timeout_s":0,"when_empty":"reject",
     "stats":{"conns":0,"inpkts":0,"outpkts":0,"inbytes":0,"outbytes":0},
     "backends":[{"ip":"10.244.1.15","port":8080,"weight":1,"terminating":false,
                  "active_conns":0,"inactive_conns":0,
                  "stats":{"conns":0,"inpkts":0,"outpkts":0,"inbytes":0,"outbytes":0}}]}]})");
  EXPECT_EQ(format_list(doc),
            "IP Virtual Server (vipd) generation 3, 1 services\n"
            "Prot LocalAddress:Port Scheduler Flags\n"
            "  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn\n"
            "TCP  10.96.0.100:8080 rr\n"
            "  -> 10.244.1.15:8080             Masq    1      0          0\n");
}

TEST(VipctlFormat, ListMarksEjectedBackends) {
  json doc = sample_services();
  doc["services"][0]["backends"][0]["ejected"] = true;
  doc["services"][0]["backends"][0]["ejections"] = 2;
  doc["services"][0]["backends"][1]["ejected"] = false;
  doc["services"][0]["backends"][1]["ejections"] = 1;
  const std::string out = format_list(doc);
  EXPECT_NE(out.find("  -> 10.244.1.15:8080             FullNat 1      7          2  ejected "
                     "(consecutive failed connections; ejections 2)\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("  -> 10.244.2.7:8080              FullNat 0      0          11\n"), std::string::npos) << out;
}

TEST(VipctlFormat, ListIpv6InBrackets) {
  json doc = json::parse(R"({"generation":4,"forward_method":"nat","services":[
    {"name":"default/web:http","protocol":"TCP","vip":"fd00:10:96::50","port":80,"scheduler":"rr",
     "persistence_timeout_s":0,"when_empty":"reject",
     "stats":{"conns":0,"inpkts":0,"outpkts":0,"inbytes":0,"outbytes":0},
     "backends":[{"ip":"fd00:10:244:1::5","port":8080,"weight":1,"terminating":false,
                  "active_conns":0,"inactive_conns":0,
                  "stats":{"conns":0,"inpkts":0,"outpkts":0,"inbytes":0,"outbytes":0}}]}]})");
  EXPECT_EQ(format_list(doc),
            "IP Virtual Server (vipd) generation 4, 1 services\n"
            "Prot LocalAddress:Port Scheduler Flags\n"
            "  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn\n"
            "TCP  [fd00:10:96::50]:80 rr\n"
            "  -> [fd00:10:244:1::5]:8080      Masq    1      0          0\n");
}

TEST(VipctlFormat, ListEmptyAndMalformedIsTolerated) {
  EXPECT_EQ(format_list(json::parse(R"({"generation":0,"forward_method":"fnat","services":[]})")),
            "IP Virtual Server (vipd) generation 0, 0 services\n"
            "Prot LocalAddress:Port Scheduler Flags\n"
            "  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn\n");
  // Not an object at all: header only, no throw.
  EXPECT_NO_THROW(format_list(json::array()));
  EXPECT_NO_THROW(format_list_stats(json(nullptr)));
  EXPECT_NO_THROW(format_stats(json("x")));
  EXPECT_NO_THROW(format_status(json(1), 0));
}

TEST(VipctlFormat, ListStats) {
  EXPECT_EQ(format_list_stats(sample_services()),
            "IP Virtual Server (vipd) generation 3, 2 services\n"
            "Prot LocalAddress:Port               Conns   InPkts  OutPkts  InBytes OutBytes\n"
            "  -> RemoteAddress:Port\n"
            "TCP  10.96.0.100:8080                  120     4000     3900   512000  2048000\n"
            "  -> 10.244.1.15:8080                   70     2500     2400   300000  1200000\n"
            "  -> 10.244.2.7:8080                    50     1500     1500   212000   848000\n"
            "UDP  10.96.0.10:53                       0        0        0        0        0\n");
}

TEST(VipctlFormat, ComputeRates) {
  json before = sample_services();
  json after = sample_services();
  after["generation"] = 4;
  auto& svc = after["services"][0];
  svc["stats"] = {{"conns", 140}, {"inpkts", 5000}, {"outpkts", 4900}, {"inbytes", 612000}, {"outbytes", 2548000}};
  svc["backends"][0]["stats"] = {{"conns", 90}, {"inpkts", 3500}, {"outpkts", 3400}, {"inbytes", 400000}, {"outbytes", 1700000}};
  // A backend that was not there in the first sample counts from zero.
  svc["backends"].push_back(json::parse(R"({"ip":"10.244.3.3","port":8080,"weight":1,
    "active_conns":1,"inactive_conns":0,
    "stats":{"conns":4,"inpkts":8,"outpkts":6,"inbytes":800,"outbytes":600}})"));
  // Counters that went backwards (daemon restart) give zero, not a huge number.
  after["services"][1]["stats"]["conns"] = 0;
  before["services"][1]["stats"]["conns"] = 10;

  json r = compute_rates(before, after, 2.0);
  EXPECT_EQ(r["generation"], 4);
  EXPECT_EQ(r["interval_s"], 2.0);
  const json& s0 = r["services"][0];
  EXPECT_EQ(s0["vip"], "10.96.0.100");
  EXPECT_DOUBLE_EQ(s0["rate"]["cps"].get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(s0["rate"]["inpps"].get<double>(), 500.0);
  EXPECT_DOUBLE_EQ(s0["rate"]["outpps"].get<double>(), 500.0);
  EXPECT_DOUBLE_EQ(s0["rate"]["inbps"].get<double>(), 50000.0);
  EXPECT_DOUBLE_EQ(s0["rate"]["outbps"].get<double>(), 250000.0);
  EXPECT_DOUBLE_EQ(s0["backends"][0]["rate"]["cps"].get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(s0["backends"][1]["rate"]["cps"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(s0["backends"][2]["rate"]["cps"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(s0["backends"][2]["rate"]["inbps"].get<double>(), 400.0);
  EXPECT_DOUBLE_EQ(r["services"][1]["rate"]["cps"].get<double>(), 0.0);

  EXPECT_EQ(format_list_rate(r),
            "IP Virtual Server (vipd) generation 4, 2 services\n"
            "Prot LocalAddress:Port                 CPS    InPPS   OutPPS    InBPS   OutBPS\n"
            "  -> RemoteAddress:Port\n"
            "TCP  10.96.0.100:8080                   10      500      500    50000   250000\n"
            "  -> 10.244.1.15:8080                   10      500      500    50000   250000\n"
            "  -> 10.244.2.7:8080                     0        0        0        0        0\n"
            "  -> 10.244.3.3:8080                     2        4        3      400      300\n"
            "UDP  10.96.0.10:53                       0        0        0        0        0\n");
}

TEST(VipctlFormat, ComputeRatesZeroIntervalAndNewService) {
  json before = json::parse(R"({"generation":1,"services":[]})");
  json after = sample_services();
  json r = compute_rates(before, after, 0.0);
  EXPECT_DOUBLE_EQ(r["services"][0]["rate"]["cps"].get<double>(), 0.0);
  r = compute_rates(before, after, 1.0);
  EXPECT_DOUBLE_EQ(r["services"][0]["rate"]["cps"].get<double>(), 120.0);
}

TEST(VipctlFormat, Stats) {
  json doc = json::parse(R"({"workers":[
    {"lcore":1,"rx":1000,"tx":990,"drops":10,"new_flows":50,"active_flows":20,"redirects":3,
     "drop_reasons":{"no_service":6,"bad_checksum":0,"ring_full":4}},
    {"lcore":2,"rx":2000000,"tx":1999000,"drops":1000,"new_flows":7,"active_flows":5,"redirects":0,
     "drop_reasons":{"no_service":994,"bad_checksum":6,"ring_full":0}}]})");
  EXPECT_EQ(format_stats(doc),
            "Lcore       RX       TX  Drops  NewFlows  ActiveFlows  Redirects\n"
            "1         1000      990     10        50           20          3\n"
            "2      2000000  1999000   1000         7            5          0\n"
            "total  2001000  1999990   1010        57           25          3\n"
            "\n"
            "Drops by reason (all workers):\n"
            "  no_service    1000\n"
            "  bad_checksum     6\n"
            "  ring_full        4\n");
}

// Re-steered connections: one line when any counter is non-zero, summed
// over the workers; nothing when all are zero (StatsAllDropsZero).
TEST(VipctlFormat, StatsResteered) {
  json doc = json::parse(R"({"workers":[
    {"lcore":1,"rx":5,"tx":5,"drops":0,"new_flows":1,"active_flows":1,"redirects":0,"drop_reasons":{},
     "resteers":{"rst":3,"icmp":0,"timeout":2,"retransmit":0},"resteer_pool_full":0,"resteer_gave_up":1},
    {"lcore":2,"rx":5,"tx":5,"drops":0,"new_flows":1,"active_flows":1,"redirects":0,"drop_reasons":{},
     "resteers":{"rst":1,"icmp":4,"timeout":0,"retransmit":1},"resteer_pool_full":7,"resteer_gave_up":0}]})");
  EXPECT_EQ(format_stats(doc),
            "Lcore  RX  TX  Drops  NewFlows  ActiveFlows  Redirects\n"
            "1       5   5      0         1            1          0\n"
            "2       5   5      0         1            1          0\n"
            "total  10  10      0         2            2          0\n"
            "\n"
            "Re-steered connections: icmp 4 retransmit 1 rst 4 timeout 2; gave up 1, pool full 7\n"
            "\n"
            "Drops by reason: none (all reasons zero)\n");
}

TEST(VipctlFormat, StatsExceptionPath) {
  json doc = json::parse(R"({"workers":[
    {"lcore":1,"rx":5,"tx":5,"drops":0,"new_flows":1,"active_flows":1,"redirects":0,"drop_reasons":{}}],
    "ports":[{"port_id":0,"device":"net_af_packet0,iface=c0",
              "exception":{"interface":"vipd-0","to_kernel":12,"from_kernel":11,"rate_limited":3,
                           "kernel_full":0,"from_kernel_full":1}},
             {"port_id":1,"device":"net_af_packet1,iface=p0"}]})");
  EXPECT_EQ(format_stats(doc),
            "Lcore  RX  TX  Drops  NewFlows  ActiveFlows  Redirects\n"
            "1       5   5      0         1            1          0\n"
            "\n"
            "Exception path vipd-0: to kernel 12, from kernel 11; dropped: rate limited 3, kernel full 0, "
            "from-kernel queue full 1\n"
            "\n"
            "Drops by reason: none (all reasons zero)\n");
}

TEST(VipctlFormat, StatsAllDropsZero) {
  json doc = json::parse(R"({"workers":[
    {"lcore":3,"rx":5,"tx":5,"drops":0,"new_flows":1,"active_flows":1,"redirects":0,
     "drop_reasons":{"no_service":0}}]})");
  EXPECT_EQ(format_stats(doc),
            "Lcore  RX  TX  Drops  NewFlows  ActiveFlows  Redirects\n"
            "3       5   5      0         1            1          0\n"
            "\n"
            "Drops by reason: none (all reasons zero)\n");
  EXPECT_EQ(format_stats(json::parse(R"({"workers":[]})")), "No workers.\n");
  EXPECT_EQ(format_stats(json::parse(R"({"workers":[],"note":"iptables mode: no counters"})")),
            "No workers: iptables mode: no counters\n");
}

TEST(VipctlFormat, Status) {
  json doc = json::parse(R"({"mode":"dpdk","forward_method":"fnat","generation":3,"syncs":17,
    "full_syncs":2,"sync_errors":1,"next_retry_ms":2500,"last_sync_unix_ns":1000000000000,"last_change_to_applied_ms":1.234,
    "last_error":"","source_errors":["manifests: bad.yaml: port 0 out of range"],
    "config":{"admin_socket":"/run/vipd/admin.sock","worker_lcores":[1,2]}})");
  const int64_t now = 1000000000000 + 4200000000;  // 4.2 s later
  EXPECT_EQ(format_status(doc, now),
            "Mode:                      dpdk\n"
            "Forward method:            fnat\n"
            "Generation:                3\n"
            "Syncs:                     17 (2 full)\n"
            "Sync errors:               1\n"
            "Next retry:                full sync in 2.5 s\n"
            "Last sync:                 4.2s ago\n"
            "Last change to dataplane:  1.23 ms\n"
            "Last error:                none\n"
            "Source errors:             1\n"
            "  manifests: bad.yaml: port 0 out of range\n"
            "Config:\n"
            "  admin_socket:  /run/vipd/admin.sock\n"
            "  worker_lcores: [1,2]\n");
}

TEST(VipctlFormat, StatusNeverSynced) {
  json doc = json::parse(R"({"mode":"ipvs","forward_method":"nat","generation":0,"syncs":0,
    "sync_errors":0,"last_sync_unix_ns":0,"last_change_to_applied_ms":null,
    "last_error":"apply: netlink: EPERM","source_errors":[]})");
  EXPECT_EQ(format_status(doc, 5),
            "Mode:                      ipvs\n"
            "Forward method:            nat\n"
            "Generation:                0\n"
            "Syncs:                     0 (0 full)\n"
            "Sync errors:               0\n"
            "Last sync:                 never\n"
            "Last change to dataplane:  n/a\n"
            "Last error:                apply: netlink: EPERM\n"
            "Source errors:             none\n");
}

TEST(VipctlFormat, StatusShowsResyncRepairs) {
  json doc = json::parse(R"({"mode":"iptables","generation":9,"syncs":40,"full_syncs":3,"resync_repairs":2,
    "sync_errors":0,"last_sync_unix_ns":0,"source_errors":[]})");
  EXPECT_NE(format_status(doc, 5).find("Syncs:                     40 (3 full, 2 repaired a divergence)\n"),
            std::string::npos)
      << format_status(doc, 5);
}

TEST(VipctlFormat, Drain) {
  const int64_t since = 1000000000000;
  json on = json::parse(R"({"draining":true,"since_unix_ns":1000000000000,"connections":3,
    "announced_vips":0,"announce_table":100,"stopping":false})");
  EXPECT_EQ(format_drain(on, since + 12500000000),
            "Draining:                  yes\n"
            "Since:                     12.5s ago\n"
            "Connections:               3\n"
            "Announced VIPs:            0 (table 100)\n");
  EXPECT_EQ(drain_summary(on, since + 12500000000), "yes, since 12.5s ago, 3 connection(s) left");
  json off = json::parse(R"({"draining":false,"since_unix_ns":0,"connections":7,"announced_vips":2,
    "announce_table":100,"stopping":false})");
  EXPECT_EQ(format_drain(off, since),
            "Draining:                  no\n"
            "Connections:               7\n"
            "Announced VIPs:            2 (table 100)\n");
  EXPECT_EQ(drain_summary(off, since), "no");
  json plain = json::parse(R"({"draining":true,"since_unix_ns":1000000000000,"connections":0,
    "announced_vips":0,"announce_table":0,"stopping":true})");
  EXPECT_EQ(format_drain(plain, since + 1000000000),
            "Draining:                  yes (stopping)\n"
            "Since:                     1.0s ago\n"
            "Connections:               0\n"
            "Announced VIPs:            none (no --announce-table)\n");
  // A malformed answer: no crash, neutral values.
  EXPECT_EQ(drain_summary(json::parse("[]"), 0), "no");
}

TEST(VipctlFormat, StatusShowsDraining) {
  json doc = json::parse(R"({"mode":"dpdk","generation":1,"last_sync_unix_ns":0,"source_errors":[],
    "drain":{"draining":true,"since_unix_ns":1000000000000,"connections":42,"stopping":false}})");
  const std::string out = format_status(doc, 1000000000000 + 65000000000);
  EXPECT_NE(out.find("Draining:                  yes, since 1m05s ago, 42 connection(s) left\n"), std::string::npos)
      << out;
  doc["drain"]["draining"] = false;
  EXPECT_NE(format_status(doc, 0).find("Draining:                  no\n"), std::string::npos);
}

TEST(VipctlFormat, StatusPrivileges) {
  json doc = json::parse(R"({"mode":"dpdk","generation":1,"last_sync_unix_ns":0,"source_errors":[],
    "privileges":{"user":"vipd","uid":998,"threads":11,"privileged_threads":0,"no_new_privs_threads":11}})");
  EXPECT_NE(format_status(doc, 5).find("Privileges:                user vipd, uid 998; 0 of 11 threads keep root or a capability\n"),
            std::string::npos)
      << format_status(doc, 5);
  doc["privileges"] = json::parse(R"({"user":"root","uid":0,"threads":9,"privileged_threads":9})");
  EXPECT_NE(format_status(doc, 5).find("Privileges:                root (no --user), uid 0; 9 of 9 threads"),
            std::string::npos);
}

// Names from Kubernetes objects reach the terminal: control characters (a
// newline forging a row, ESC sequences) and bytes that are not UTF-8 are
// shown escaped, and the output has the same lines as for a plain name.
TEST(VipctlFormat, HostileNamesAreEscaped) {
  const std::string hostile = "default/x\n  -> 6.6.6.6:1 FullNat 1\x1b[2J\x1b]0;pwned\x07\xff:http";
  json plain = sample_services();
  json evil = sample_services();
  evil["services"][0]["name"] = hostile;
  evil["services"][0]["scheduler"] = hostile;
  {
    const std::string a = format_list(plain), b = format_list(evil);
    EXPECT_EQ(std::count(a.begin(), a.end(), '\n'), std::count(b.begin(), b.end(), '\n')) << b;
    for (char c : b) EXPECT_TRUE(c == '\n' || static_cast<unsigned char>(c) >= 0x20) << b;
    EXPECT_EQ(b.find('\xff'), std::string::npos);
  }
  const json explain = {{"query", {{"protocol", "TCP"}, {"src", "1.1.1.1:1"}, {"dst", "10.96.0.100:8080"}}},
                        {"service", {{"name", hostile}, {"scheduler", "rr"}, {"backends", 1}}},
                        {"decision", "new connection"},
                        {"backend", hostile}};
  const std::string ex = format_explain(explain);
  EXPECT_EQ(ex.find('\x1b'), std::string::npos) << ex;
  EXPECT_EQ(ex.find('\xff'), std::string::npos) << ex;
  EXPECT_NE(ex.find("Service:    default/x\\n  -> 6.6.6.6:1"), std::string::npos) << ex;
  json doc = json::parse(R"({"mode":"dpdk","generation":1,"last_sync_unix_ns":0,"last_error":""})");
  doc["source_errors"] = json::array({"api: Service " + hostile + ": bad"});
  doc["last_error"] = "apply: \x1b[31mred";
  const std::string st = format_status(doc, 5);
  EXPECT_EQ(st.find('\x1b'), std::string::npos) << st;
  EXPECT_NE(st.find("  api: Service default/x\\n  -> 6.6.6.6:1 FullNat 1\\x1b[2J\\x1b]0;pwned\\x07\\xff:http: bad\n"),
            std::string::npos)
      << st;
  EXPECT_NE(st.find("Last error:                apply: \\x1b[31mred\n"), std::string::npos) << st;
}

TEST(VipctlFormat, StatusShowsTlsVerification) {
  json doc = json::parse(R"({"mode":"iptables","generation":1,"last_sync_unix_ns":0,"source_errors":[],
    "kubernetes_api":{"server":"https://10.0.0.1:6443","tls_verify":true,"insecure_skip_tls_verify":false,
                      "plain_http":false,"token_in_clear":false}})");
  EXPECT_NE(format_status(doc, 5).find("Kubernetes API:            https://10.0.0.1:6443\n"
                                       "TLS verification:          verified\n"),
            std::string::npos)
      << format_status(doc, 5);
  doc["kubernetes_api"]["insecure_skip_tls_verify"] = true;
  doc["kubernetes_api"]["tls_verify"] = false;
  EXPECT_NE(format_status(doc, 5).find("TLS verification:          OFF (insecure-skip-tls-verify)"), std::string::npos)
      << format_status(doc, 5);
  doc["kubernetes_api"] = json::parse(R"({"server":"http://10.0.0.1:8080","tls_verify":false,
    "insecure_skip_tls_verify":false,"plain_http":true,"token_in_clear":true})");
  EXPECT_NE(format_status(doc, 5).find("TLS verification:          none (plain http); bearer token sent in clear"),
            std::string::npos)
      << format_status(doc, 5);
  doc.erase("kubernetes_api");
  EXPECT_EQ(format_status(doc, 5).find("TLS verification"), std::string::npos);
}

TEST(VipctlFormat, Age) {
  EXPECT_EQ(format_age(0.04), "0.0s");
  EXPECT_EQ(format_age(-3), "0.0s");
  EXPECT_EQ(format_age(59.94), "59.9s");
  EXPECT_EQ(format_age(192), "3m12s");
  EXPECT_EQ(format_age(2 * 3600 + 3 * 60 + 9), "2h03m");
  EXPECT_EQ(format_age(5 * 86400 + 4 * 3600), "5d04h");
}

TEST(VipctlFormat, DumpKeepsKeyOrderOnOneLine) {
  const std::string table =
      R"({"services":[{"name":"default/db:http","protocol":"TCP","vip":"10.96.0.100","port":8080,)"
      R"("kind":"ClusterIP","scheduler":"rr","persistence_timeout_s":0,"when_empty":"reject","proxy_protocol":"",)"
      R"("backends":[{"ip":"10.244.1.15","port":8080,"weight":1,"terminating":false}]}]})";
  auto doc = nlohmann::ordered_json::parse("{\"generation\": 3,\n \"table\": " + table + "}");
  EXPECT_EQ(format_dump(doc), table + "\n");
  EXPECT_THROW(format_dump(nlohmann::ordered_json::parse(R"({"generation":3})")), std::runtime_error);
}

TEST(VipctlFormat, Explain) {
  json doc = json::parse(R"({"query":{"protocol":"TCP","src":"10.0.0.2:40000","dst":"10.96.0.100:8080"},
    "worker_lcore":1,"decision":"existing_connection",
    "service":{"name":"default/db:http","protocol":"TCP","vip":"10.96.0.100","port":8080,"scheduler":"rr",
               "persistence_timeout_s":10800,"when_empty":"reject","proxy_protocol":"v2","backends":4,
               "weighted_backends":3},
    "connection":{"direction":"original","state":"ESTABLISHED","backend":"10.244.3.12:8080",
                  "local":"10.244.255.1:1025","expires_in_s":897.4,"backend_alive":true},
    "backend":"10.244.3.12:8080","reasons":["first reason","second reason"]})");
  EXPECT_EQ(format_explain(doc),
            "Flow:       TCP 10.0.0.2:40000 -> 10.96.0.100:8080\n"
            "Service:    default/db:http (rr, persistent 10800, proxy-protocol v2, 4 backends, 3 with weight > 0)\n"
            "Connection: ESTABLISHED to 10.244.3.12:8080 via 10.244.255.1:1025, expires in 897 s\n"
            "Decision:   existing_connection\n"
            "Backend:    10.244.3.12:8080\n"
            "Worker:     lcore 1\n"
            "Why:\n"
            "  first reason\n"
            "  second reason\n");
  json none = json::parse(R"({"query":{"protocol":"UDP","src":"10.0.0.2:1","dst":"8.8.8.8:53"},
    "worker_lcore":2,"decision":"not_a_service","service":null,"connection":null,"backend":null,"reasons":[]})");
  EXPECT_EQ(format_explain(none),
            "Flow:       UDP 10.0.0.2:1 -> 8.8.8.8:53\n"
            "Service:    none\n"
            "Connection: none\n"
            "Decision:   not_a_service\n"
            "Backend:    none\n"
            "Worker:     lcore 2\n");
}

}  // namespace
}  // namespace vipd::ctl
