// Thread: test main thread. Tests for controlplane/config/options.cc: parsing
// the command line and the file, each option's values. The tests driven by
// the option table: config_table_test.cc.
#include "controlplane/config/options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "model/service_table.h"
#include "tests/unit/controlplane/config_test_fixture.h"
#include "tests/unit/controlplane/test_util.h"

namespace vipd::config {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST_F(ConfigTest, DefaultsMatchTheStruct) {
  const Options o = ok({});
  const Options d;
  EXPECT_EQ(o.mode, d.mode);
  EXPECT_TRUE(o.dry_run);
  EXPECT_EQ(o.manifests_dir, dir_.path());
  EXPECT_TRUE(o.ports.empty());
  EXPECT_TRUE(o.dataplane.eal_args.empty());
  EXPECT_EQ(o.dataplane.main_lcore, 0u);
  EXPECT_EQ(o.dataplane.worker_lcores, std::vector<unsigned>{1});
  EXPECT_EQ(o.forward_method, ForwardMethod::kFnat);
  EXPECT_EQ(o.admin_socket, "/run/vipd/admin.sock");
  EXPECT_EQ(o.metrics_address, "127.0.0.1:10249");
  EXPECT_EQ(o.log_level, LogLevel::kInfo);
  EXPECT_EQ(o.default_scheduler, cp::Scheduler::kRr);
  EXPECT_EQ(o.dataplane.conn_table_size, d.dataplane.conn_table_size);
  EXPECT_EQ(o.dataplane.tcp_established_timeout_s, 900u);
  EXPECT_EQ(o.dataplane.tcp_fin_timeout_s, 120u);
  EXPECT_EQ(o.dataplane.udp_timeout_s, 300u);
  EXPECT_EQ(o.dataplane.neighbor_timeout_s, 60u);
  EXPECT_EQ(o.dataplane.mbuf_count, 8191u);
  EXPECT_EQ(o.sync_min_interval_ms, 0u);
  EXPECT_EQ(o.dataplane.idle_sleep_us, 0u);
  EXPECT_EQ(o.user, "");  // keep root unless asked
}

TEST_F(ConfigTest, HelpListsEveryOptionWithDefault) {
  EXPECT_FALSE(run({"--help"}).has_value());
  const std::string h = out_.str();
  EXPECT_THAT(h, StartsWith("Usage: vipd"));
  for (const char* name :
       {"--config", "--mode", "--dry-run", "--eal-args", "--port", "--main-lcore", "--worker-lcores",
        "--forward-method", "--fnat-local-addrs", "--manifests-dir", "--admin-socket",
        "--metrics-address", "--log-level", "--scheduler", "--conn-table-size", "--tcp-timeout",
        "--tcp-fin-timeout", "--udp-timeout", "--neighbor-timeout", "--mbufs",
        "--sync-min-interval-ms", "--worker-idle-sleep-us", "--user", "--help", "--version"})
    EXPECT_THAT(h, HasSubstr(name));
  EXPECT_THAT(h, HasSubstr("(default: 262144)"));
  EXPECT_THAT(h, HasSubstr("(default: 127.0.0.1:10249)"));
  EXPECT_THAT(h, HasSubstr("(default: dpdk)"));
}

TEST_F(ConfigTest, Version) {
  EXPECT_FALSE(run({"--version"}).has_value());
  EXPECT_THAT(out_.str(), StartsWith("vipd "));
}

TEST_F(ConfigTest, UnknownOptionOnCommandLine) {
  EXPECT_EQ(error({"--foo"}), "config: unknown option --foo");
  // No abbreviations: --conf is not --config.
  EXPECT_EQ(error({"--conf", "x"}), "config: unknown option --conf");
}

TEST_F(ConfigTest, UnknownOptionInFile) {
  const std::string f = dir_.write("vipd.conf", "# comment\nmode = ipvs\nfoo = 1\n");
  EXPECT_EQ(error({"--config", f}), "config: " + f + ": unknown option 'foo'");
}

TEST_F(ConfigTest, BadLineInFile) {
  const std::string f = dir_.write("vipd.conf", "mode = ipvs\njust words\n");
  EXPECT_EQ(error({"--config", f}), "config: " + f + ":2: expected 'name = value', got 'just words'");
}

TEST_F(ConfigTest, ConfigCannotBeSetInFile) {
  const std::string f = dir_.write("vipd.conf", "config = other.conf\n");
  EXPECT_EQ(error({"--config", f}), "config: " + f + ": unknown option 'config'");
}

TEST_F(ConfigTest, MissingConfigFile) {
  EXPECT_EQ(error({"--config", "x"}), "config: --config 'x': cannot open file");
  EXPECT_THAT(error({"--config", dir_.path()}), StartsWith("config: --config '" + dir_.path() + "': cannot open file"));
}

// /dev/zero never ends: it is refused at the size cap, not read without end
// (vipd exits 2 on the ConfigError, as on every configuration error).
TEST_F(ConfigTest, EndlessOrHugeConfigFileRefused) {
  EXPECT_EQ(error({"--config", "/dev/zero"}), "config: --config '/dev/zero': file is larger than 1 MiB");
  const std::string big = dir_.write("big.conf", std::string((1 << 20) - 12, '#') + "\nmode = ipvs\n");
  EXPECT_EQ(error({"--config", big}), "config: --config '" + big + "': file is larger than 1 MiB");
  const std::string nul = dir_.write("nul.conf", std::string("mode = ipvs\n\0\n", 13));
  EXPECT_EQ(error({"--config", nul}), "config: --config '" + nul + "': file contains a NUL byte (not a text file)");
  // Just under the cap is read.
  const std::string fits = dir_.write("fits.conf", std::string((1 << 20) - 13, '#') + "\nmode = ipvs\n");
  EXPECT_EQ(ok({"--config", fits}).mode, Mode::kIpvs);
}

TEST_F(ConfigTest, OptionGivenTwice) {
  EXPECT_EQ(error({"--mode", "ipvs", "--mode", "iptables"}), "config: --mode: given more than once");
  const std::string f = dir_.write("vipd.conf", "mode = ipvs\nmode = dpdk\n");
  EXPECT_EQ(error({"--config", f}), "config: " + f + ": option 'mode' given more than once");
}

TEST_F(ConfigTest, UnexpectedArgument) {
  EXPECT_EQ(error({"stray"}), "config: unexpected argument 'stray'");
}

TEST_F(ConfigTest, MissingValue) {
  EXPECT_THAT(error({"--mode"}), StartsWith("config: "));
}

TEST_F(ConfigTest, PortParsing) {
  const Options o = ok({"--port", "0000:00:08.0 10.0.0.2/24 via 10.0.0.1", "--port",
                        "00:09.0 192.168.7.1/32", "--port", "net_af_packet0,iface=veth1 172.16.0.5/16"});
  ASSERT_EQ(o.ports.size(), 3u);
  EXPECT_EQ(o.ports[0].device, "0000:00:08.0");
  EXPECT_TRUE(o.ports[0].is_pci);
  EXPECT_EQ(o.ports[0].ip, *cp::parse_ipv4("10.0.0.2"));
  EXPECT_EQ(o.ports[0].prefix_len, 24);
  ASSERT_TRUE(o.ports[0].gateway.has_value());
  EXPECT_EQ(*o.ports[0].gateway, *cp::parse_ipv4("10.0.0.1"));
  EXPECT_TRUE(o.ports[1].is_pci);
  EXPECT_EQ(o.ports[1].prefix_len, 32);
  EXPECT_FALSE(o.ports[1].gateway.has_value());
  EXPECT_FALSE(o.ports[2].is_pci);
  EXPECT_EQ(o.ports[2].device, "net_af_packet0,iface=veth1");
  for (const char* dev : {"0000:00:08.0", "00:08.0", "ABCD:ef:1f.7"})
    EXPECT_TRUE(ok({"--port", std::string(dev) + " 10.0.0.1/24"}).ports[0].is_pci) << dev;
  for (const char* dev : {"0000:00:08.8", "00:08", "0000-00:08.0", "000:00:08.0", "00:0g.0", "net_tap0"})
    EXPECT_FALSE(ok({"--port", std::string(dev) + " 10.0.0.1/24"}).ports[0].is_pci) << dev;
}

TEST_F(ConfigTest, BadPortStrings) {
  EXPECT_EQ(error({"--port", "foo"}), "config: --port 'foo': expected DEVICE IP/PREFIX [via GATEWAY]");
  EXPECT_EQ(error({"--port", "eth0 10.0.0.1/24 via"}),
            "config: --port 'eth0 10.0.0.1/24 via': expected DEVICE IP/PREFIX [via GATEWAY]");
  EXPECT_EQ(error({"--port", "eth0 10.0.0.1"}),
            "config: --port 'eth0 10.0.0.1': address '10.0.0.1' needs a prefix length, e.g. 10.0.0.1/24");
  EXPECT_EQ(error({"--port", "dev 10.0.0.300/24"}),
            "config: --port 'dev 10.0.0.300/24': address '10.0.0.300' is not an IPv4 address");
  EXPECT_EQ(error({"--port", "dev 10.0.0.1/33"}),
            "config: --port 'dev 10.0.0.1/33': prefix length '33' must be between 1 and 32");
  EXPECT_THAT(error({"--port", "dev 10.0.0.1/x"}), HasSubstr("prefix length 'x'"));
  EXPECT_EQ(error({"--port", "dev 10.0.0.1/24 through 10.0.0.254"}),
            "config: --port 'dev 10.0.0.1/24 through 10.0.0.254': expected 'via GATEWAY' after the "
            "address, got 'through'");
}

TEST_F(ConfigTest, BadGateway) {
  EXPECT_EQ(error({"--port", "dev 10.0.0.1/24 via 10.0.0"}),
            "config: --port 'dev 10.0.0.1/24 via 10.0.0': gateway '10.0.0' is not an IPv4 address");
  EXPECT_EQ(error({"--port", "dev 10.0.0.1/24 via 10.0.1.1"}),
            "config: --port 'dev 10.0.0.1/24 via 10.0.1.1': gateway 10.0.1.1 is not inside 10.0.0.0/24");
  EXPECT_THAT(error({"--port", "dev 10.0.0.1/24 via 10.0.0.1"}), HasSubstr("own address"));
}

TEST_F(ConfigTest, PortIpv6List) {
  const Options o = ok({"--port-ipv6", "fd00:10::1, - ,2001:db8::7"});
  EXPECT_EQ(o.dataplane.port_ipv6, (std::vector<std::string>{"fd00:10::1", "-", "2001:db8::7"}));
  EXPECT_TRUE(ok({}).dataplane.port_ipv6.empty());
  for (const char* bad : {"10.0.0.1", "ff02::1", "::", "::1", "fd00::1,fd00::zz"})
    EXPECT_THAT(error({"--port-ipv6", bad}), HasSubstr("is not a unicast IPv6 address")) << bad;
  // The plain form: a /64, no gateway.
  EXPECT_EQ(o.dataplane.port_ipv6_prefix, (std::vector<uint8_t>{64, 64, 64}));
  EXPECT_EQ(o.dataplane.port_ipv6_gateway, (std::vector<std::string>{"", "", ""}));
}

TEST_F(ConfigTest, PortIpv6PrefixAndGateway) {
  const Options o = ok({"--port-ipv6", "fd00:10::1/64 via fd00:10::fe, - , 2001:db8::7/48 via fe80::1,fd00:20::1/120"});
  EXPECT_EQ(o.dataplane.port_ipv6, (std::vector<std::string>{"fd00:10::1", "-", "2001:db8::7", "fd00:20::1"}));
  EXPECT_EQ(o.dataplane.port_ipv6_prefix, (std::vector<uint8_t>{64, 64, 48, 120}));
  EXPECT_EQ(o.dataplane.port_ipv6_gateway, (std::vector<std::string>{"fd00:10::fe", "", "fe80::1", ""}));
  // Printed back in the same syntax.
  EXPECT_EQ(setting_value(o, "port-ipv6"), "fd00:10::1/64 via fd00:10::fe,-,2001:db8::7/48 via fe80::1,fd00:20::1/120");
  // A gateway in another /64 of a /48 is inside the prefix.
  EXPECT_EQ(ok({"--port-ipv6", "fd00:10::1/48 via fd00:10:0:5::1"}).dataplane.port_ipv6_gateway[0], "fd00:10:0:5::1");
  const std::pair<const char*, const char*> bad[] = {
      {"fd00:10::1 via", "expected ADDR[/PREFIX] [via GATEWAY]"},
      {"fd00:10::1/64 fd00:10::fe", "expected ADDR[/PREFIX] [via GATEWAY]"},
      {"fd00:10::1/64 gw fd00:10::fe", "expected 'via GATEWAY'"},
      {"fd00:10::1/0", "must be between 1 and 128"},
      {"fd00:10::1/129", "must be between 1 and 128"},
      {"fd00:10::1/x", "must be between 1 and 128"},
      {"fd00:10::1/64 via fd00:11::fe", "is neither inside fd00:10::1/64 nor link-local"},
      {"fd00:10::1/64 via fd00:10::1", "gateway is the port's own address"},
      {"fd00:10::1/64 via ff02::2", "gateway 'ff02::2' is not a unicast IPv6 address"},
      {"fd00:10::1/64 via ::", "gateway '::' is not a unicast IPv6 address"},
      {"fd00:10::1/64 via 10.0.0.1", "gateway '10.0.0.1' is not a unicast IPv6 address"},
      {"ff02::1/64", "address 'ff02::1' is not a unicast IPv6 address"},
  };
  for (const auto& [v, want] : bad) EXPECT_THAT(error({"--port-ipv6", v}), HasSubstr(want)) << v;
}

TEST_F(ConfigTest, DuplicateDevice) {
  EXPECT_THAT(error({"--port", "dev 10.0.0.1/24", "--port", "dev 10.0.1.1/24"}),
              HasSubstr("device dev is given twice"));
}

TEST_F(ConfigTest, RepeatedPortsFromCommandLineAndFile) {
  const std::string f = dir_.write("vipd.conf", "port = fileA 10.1.0.1/24\nport = fileB 10.2.0.1/24\n");
  const Options o = ok({"--config", f, "--port", "cli0 10.0.0.1/24"});
  ASSERT_EQ(o.ports.size(), 3u);
  EXPECT_EQ(o.ports[0].device, "cli0");
  EXPECT_EQ(o.ports[1].device, "fileA");
  EXPECT_EQ(o.ports[2].device, "fileB");
}

TEST_F(ConfigTest, CommandLineOverridesFile) {
  const std::string f = dir_.write("vipd.conf",
                                   "mode = iptables\nlog-level = debug\nudp-timeout = 30\n"
                                   "scheduler = wrr   # trailing comment\n");
  const Options o = ok({"--config", f, "--mode", "ipvs", "--udp-timeout", "45"});
  EXPECT_EQ(o.config_file, f);
  EXPECT_EQ(o.mode, Mode::kIpvs);
  EXPECT_EQ(o.dataplane.udp_timeout_s, 45u);
  EXPECT_EQ(o.log_level, LogLevel::kDebug);
  EXPECT_EQ(o.default_scheduler, cp::Scheduler::kWrr);
}

TEST_F(ConfigTest, FileCanSetEverything) {
  const std::string f = dir_.write(
      "vipd.conf",
      "mode = dpdk\ndry-run = false\neal-args = --no-pci  --vdev net_null0\n"
      "port = net_null0 10.0.0.1/24 via 10.0.0.254\nmain-lcore = 2\nworker-lcores = 3-4,6\n"
      "forward-method = fnat\nfnat-local-addrs = 10.0.0.10, 10.0.0.11\nmanifests-dir = " +
          dir_.path() +
          "\nadmin-socket = /tmp/a.sock\nmetrics-address = 0.0.0.0:9100\nlog-level = warn\n"
          "scheduler = rr\nconn-table-size = 1024\ntcp-timeout = 60\ntcp-fin-timeout = 5\n"
          "udp-timeout = 7\nneighbor-timeout = 9\nmbufs = 511\nsync-min-interval-ms = 250\n"
          "worker-idle-sleep-us = 50\n");
  const auto o = run({"--config", f});
  ASSERT_TRUE(o.has_value());
  EXPECT_FALSE(o->dry_run);
  EXPECT_EQ(o->dataplane.eal_args, (std::vector<std::string>{"--no-pci", "--vdev", "net_null0"}));
  EXPECT_EQ(o->dataplane.main_lcore, 2u);
  EXPECT_EQ(o->dataplane.worker_lcores, (std::vector<unsigned>{3, 4, 6}));
  EXPECT_EQ(o->fnat_local_addrs.size(), 2u);
  EXPECT_EQ(o->admin_socket, "/tmp/a.sock");
  EXPECT_EQ(o->metrics_address, "0.0.0.0:9100");
  EXPECT_EQ(o->log_level, LogLevel::kWarn);
  EXPECT_EQ(o->dataplane.conn_table_size, 1024u);
  EXPECT_EQ(o->dataplane.tcp_established_timeout_s, 60u);
  EXPECT_EQ(o->dataplane.tcp_fin_timeout_s, 5u);
  EXPECT_EQ(o->dataplane.udp_timeout_s, 7u);
  EXPECT_EQ(o->dataplane.neighbor_timeout_s, 9u);
  EXPECT_EQ(o->dataplane.mbuf_count, 511u);
  EXPECT_EQ(o->sync_min_interval_ms, 250u);
  EXPECT_EQ(o->dataplane.idle_sleep_us, 50u);
}

TEST_F(ConfigTest, LcoreLists) {
  EXPECT_EQ(ok({"--worker-lcores", "1,2"}).dataplane.worker_lcores, (std::vector<unsigned>{1, 2}));
  EXPECT_EQ(ok({"--worker-lcores", "1-3"}).dataplane.worker_lcores, (std::vector<unsigned>{1, 2, 3}));
  EXPECT_EQ(ok({"--worker-lcores", "1-2,5,7-8"}).dataplane.worker_lcores, (std::vector<unsigned>{1, 2, 5, 7, 8}));
  const std::string syntax = "expected a list like 1,2 or 1-3 or 1-3,6";
  EXPECT_EQ(error({"--worker-lcores", "a"}), "config: --worker-lcores 'a': " + syntax);
  EXPECT_EQ(error({"--worker-lcores", "1,,2"}), "config: --worker-lcores '1,,2': " + syntax);
  EXPECT_EQ(error({"--worker-lcores", ""}), "config: --worker-lcores '': " + syntax);
  EXPECT_EQ(error({"--worker-lcores", "1-"}), "config: --worker-lcores '1-': " + syntax);
  EXPECT_EQ(error({"--worker-lcores", "3-1"}), "config: --worker-lcores '3-1': range '3-1' ends before it starts");
  EXPECT_EQ(error({"--worker-lcores", "1,1"}), "config: --worker-lcores '1,1': lcore 1 is listed twice");
  EXPECT_EQ(error({"--worker-lcores", "2000"}), "config: --worker-lcores '2000': lcore 2000 is above 1023");
  EXPECT_EQ(error({"--worker-lcores", "0-1"}),
            "config: --worker-lcores '0-1': lcore 0 is also the main lcore (--main-lcore)");
  EXPECT_EQ(error({"--main-lcore", "1"}),
            "config: --worker-lcores '1': lcore 1 is also the main lcore (--main-lcore)");
}

TEST_F(ConfigTest, Modes) {
  EXPECT_EQ(error({"--mode", "ebpf"}), "config: --mode 'ebpf': expected dpdk, iptables, nftables or ipvs");
  // iptables, nftables and ipvs are accepted by the parser and need no port.
  EXPECT_EQ(run({"--manifests-dir", dir_.path(), "--mode", "iptables"})->mode, Mode::kIptables);
  EXPECT_EQ(run({"--manifests-dir", dir_.path(), "--mode", "ipvs"})->mode, Mode::kIpvs);
  EXPECT_EQ(run({"--manifests-dir", dir_.path(), "--mode", "nftables"})->mode, Mode::kNftables);
  EXPECT_STREQ(mode_name(Mode::kDpdk), "dpdk");
  EXPECT_STREQ(mode_name(Mode::kNftables), "nftables");
  EXPECT_STREQ(mode_name(Mode::kIptables), "iptables");
  EXPECT_STREQ(mode_name(Mode::kIpvs), "ipvs");
  EXPECT_STREQ(cp::name(ForwardMethod::kFnat), "fnat");
  EXPECT_STREQ(cp::name(ForwardMethod::kNat), "nat");
}

TEST_F(ConfigTest, DpdkModeNeedsPortAndFnatAddresses) {
  const std::string d = dir_.path();
  EXPECT_EQ(error({"--manifests-dir", d}, false),
            "config: --port: at least one port is required in dpdk mode (or use --dry-run)");
  EXPECT_EQ(error({"--manifests-dir", d, "--port", "net_null0 10.0.0.1/24"}, false),
            "config: --forward-method 'fnat': needs --fnat-local-addrs (or use --forward-method nat)");
  EXPECT_TRUE(run({"--manifests-dir", d, "--port", "net_null0 10.0.0.1/24", "--forward-method", "nat"}));
  const auto o = run({"--manifests-dir", d, "--port", "net_null0 10.0.0.1/24", "--fnat-local-addrs",
                      "10.0.0.10,10.0.0.11"});
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->fnat_local_addrs, (std::vector<uint32_t>{*cp::parse_ipv4("10.0.0.10"), *cp::parse_ipv4("10.0.0.11")}));
  EXPECT_EQ(error({"--forward-method", "dr"}), "config: --forward-method 'dr': expected fnat or nat");
}

TEST_F(ConfigTest, HandoverPeersOnlyInFnat) {
  const std::string d = dir_.path();
  const auto o = run({"--manifests-dir", d, "--port", "net_null0 10.0.0.1/24", "--fnat-local-addrs", "10.0.0.10",
                      "--handover-peers", "10.0.0.2,10.0.0.3", "--handover-pps", "500"});
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->handover_peers, (std::vector<uint32_t>{*cp::parse_ipv4("10.0.0.2"), *cp::parse_ipv4("10.0.0.3")}));
  EXPECT_EQ(o->dataplane.handover_pps, 500u);
  EXPECT_THAT(error({"--manifests-dir", d, "--port", "net_null0 10.0.0.1/24", "--forward-method", "nat",
                     "--handover-peers", "10.0.0.2"}, false),
              HasSubstr("only with --forward-method fnat"));
  EXPECT_THAT(error({"--handover-peers", "10.0.0.2,10.0.0.2"}), HasSubstr("listed twice"));
  EXPECT_THAT(error({"--handover-pps", "0"}), HasSubstr("handover-pps"));
}

TEST_F(ConfigTest, BadFnatAddresses) {
  EXPECT_EQ(error({"--fnat-local-addrs", "10.0.0.1,x"}),
            "config: --fnat-local-addrs '10.0.0.1,x': address 'x' is not an IPv4 address");
  EXPECT_EQ(error({"--fnat-local-addrs", "10.0.0.1,"}),
            "config: --fnat-local-addrs '10.0.0.1,': expected comma-separated IPv4 addresses");
  EXPECT_THAT(error({"--fnat-local-addrs", "10.0.0.1,10.0.0.1"}), HasSubstr("listed twice"));
}

TEST_F(ConfigTest, ManifestsDirRequiredAndChecked) {
  EXPECT_EQ(error({"--dry-run"}, false),
            "config: --manifests-dir: required (the directory of Service/EndpointSlice manifests)");
  EXPECT_EQ(error({"--dry-run", "--manifests-dir", "/nonexistent/vipd"}, false),
            "config: --manifests-dir '/nonexistent/vipd': no such directory");
  const std::string f = dir_.write("file", "");
  EXPECT_EQ(error({"--dry-run", "--manifests-dir", f}, false),
            "config: --manifests-dir '" + f + "': not a directory");
}

TEST_F(ConfigTest, NumbersOutOfRange) {
  EXPECT_EQ(error({"--conn-table-size", "0"}),
            "config: --conn-table-size '0': must be between 1024 and 67108864");
  EXPECT_EQ(error({"--tcp-timeout", "abc"}), "config: --tcp-timeout 'abc': expected a whole number");
  EXPECT_EQ(error({"--udp-timeout", "-5"}), "config: --udp-timeout '-5': expected a whole number");
  EXPECT_EQ(error({"--udp-timeout", "99999999999999999999"}),
            "config: --udp-timeout '99999999999999999999': expected a whole number");
  EXPECT_EQ(error({"--tcp-fin-timeout", "86401"}),
            "config: --tcp-fin-timeout '86401': must be between 1 and 86400");
  EXPECT_EQ(error({"--neighbor-timeout", "0"}), "config: --neighbor-timeout '0': must be between 1 and 86400");
  EXPECT_EQ(error({"--mbufs", "100"}), "config: --mbufs '100': must be between 511 and 16777215");
  EXPECT_EQ(error({"--main-lcore", "1024"}), "config: --main-lcore '1024': must be between 0 and 1023");
  EXPECT_EQ(error({"--sync-min-interval-ms", "60001"}),
            "config: --sync-min-interval-ms '60001': must be between 0 and 60000");
  EXPECT_EQ(error({"--worker-idle-sleep-us", "100001"}),
            "config: --worker-idle-sleep-us '100001': must be between 0 and 100000");
}


TEST_F(ConfigTest, UserIsDpdkModeOnly) {
  EXPECT_EQ(ok({"--user", "vipd"}).user, "vipd");
  EXPECT_EQ(ok({"--user", " vipd "}).user, "vipd");
  EXPECT_EQ(error({"--user", " "}), "config: --user ' ': must not be empty (leave --user out to keep root)");
  const std::string d = dir_.path();
  EXPECT_THAT(error({"--manifests-dir", d, "--mode", "iptables", "--user", "vipd"}, false),
              StartsWith("config: --user 'vipd': only dpdk mode drops privileges; iptables mode programs"));
  EXPECT_THAT(error({"--manifests-dir", d, "--mode", "ipvs", "--user", "vipd"}, false),
              HasSubstr("ipvs mode programs the kernel"));
  // A dry run starts nothing, so a shared config file's user does not matter there.
  EXPECT_EQ(ok({"--mode", "iptables", "--dry-run", "--user", "vipd"}).user, "vipd");
}

TEST_F(ConfigTest, OtherValues) {
  EXPECT_EQ(error({"--log-level", "trace"}), "config: --log-level 'trace': expected debug, info, warn or error");
  EXPECT_EQ(ok({"--scheduler", "mh"}).default_scheduler, cp::Scheduler::kMh);
  EXPECT_EQ(ok({"--scheduler", "wlc"}).default_scheduler, cp::Scheduler::kWlc);
  EXPECT_EQ(error({"--scheduler", "fifo"}),
            "config: --scheduler 'fifo': expected one of rr, wrr, lc, wlc, sed, nq, sh, dh, lblc, lblcr, mh");
  // --help lists every scheduler the model knows, in its order.
  out_.str("");
  run({"--help"});
  EXPECT_THAT(out_.str(), HasSubstr(cp::names<cp::Scheduler>(" | ")));
  EXPECT_EQ(ok({}).default_proxy_protocol, cp::ProxyProtocol::kNone);
  EXPECT_EQ(ok({"--proxy-protocol", "v1"}).default_proxy_protocol, cp::ProxyProtocol::kV1);
  EXPECT_EQ(ok({"--proxy-protocol", "v2"}).default_proxy_protocol, cp::ProxyProtocol::kV2);
  EXPECT_EQ(ok({"--proxy-protocol", "none"}).default_proxy_protocol, cp::ProxyProtocol::kNone);
  EXPECT_EQ(error({"--proxy-protocol", "v3"}), "config: --proxy-protocol 'v3': expected none, v1 or v2");
  EXPECT_EQ(ok({"--mh-table-size", "251"}).dataplane.mh_table_size, 251u);
  EXPECT_EQ(error({"--mh-table-size", "65536"}),
            "config: --mh-table-size '65536': must be a prime number (e.g. 251, 4093, 65537)");
  EXPECT_FALSE(ok({"--expire-quiescent-template", "false"}).dataplane.expire_quiescent_template);
  EXPECT_TRUE(ok({}).dataplane.expire_quiescent_template);
  EXPECT_EQ(error({"--metrics-address", "localhost"}),
            "config: --metrics-address 'localhost': expected HOST:PORT with an IPv4 host");
  EXPECT_EQ(error({"--metrics-address", "localhost:80"}),
            "config: --metrics-address 'localhost:80': host 'localhost' is not an IPv4 address");
  EXPECT_EQ(error({"--metrics-address", "127.0.0.1:0"}),
            "config: --metrics-address '127.0.0.1:0': port must be between 1 and 65535");
  EXPECT_EQ(error({"--admin-socket", ""}), "config: --admin-socket '': must not be empty");
}

TEST_F(ConfigTest, DryRunSwitch) {
  const std::string d = dir_.path();
  EXPECT_TRUE(run({"--manifests-dir", d, "--dry-run"})->dry_run);
  // On the command line it is a plain switch: it never takes the next word.
  EXPECT_EQ(error({"--manifests-dir", d, "--dry-run=true"}, false),
            "config: option '--dry-run' does not take any arguments");
  const std::string f = dir_.write("vipd.conf", "dry-run = yes\n");
  EXPECT_TRUE(run({"--manifests-dir", d, "--config", f})->dry_run);
  const std::string g = dir_.write("vipd2.conf", "dry-run = maybe\n");
  EXPECT_EQ(error({"--manifests-dir", d, "--config", g}, false),
            "config: --dry-run 'maybe': expected true or false");
  // dry-run = false in dpdk mode without ports: the port check applies again.
  const std::string h = dir_.write("vipd3.conf", "dry-run = false\n");
  EXPECT_THAT(error({"--manifests-dir", d, "--config", h}, false), HasSubstr("--port"));
}


TEST_F(ConfigTest, MetricsAndHealthOptions) {
  Options d = ok({});
  EXPECT_EQ(d.health_address, "127.0.0.1:10256");
  EXPECT_TRUE(d.metrics_per_backend);
  EXPECT_EQ(d.metrics_max_backend_series, 10000u);
  EXPECT_EQ(d.metrics_max_service_series, 10000u);
  Options o = ok({"--metrics-address", "off", "--health-address", "0.0.0.0:9256", "--metrics-per-backend",
                  "false", "--metrics-max-backend-series", "0", "--metrics-max-service-series", "500"});
  EXPECT_EQ(o.metrics_address, "");
  EXPECT_EQ(o.health_address, "0.0.0.0:9256");
  EXPECT_FALSE(o.metrics_per_backend);
  EXPECT_EQ(o.metrics_max_backend_series, 0u);
  EXPECT_EQ(o.metrics_max_service_series, 500u);
  EXPECT_EQ(ok({"--health-address", ""}).health_address, "");
  EXPECT_EQ(error({"--health-address", "localhost:1"}),
            "config: --health-address 'localhost:1': host 'localhost' is not an IPv4 address");
  EXPECT_EQ(error({"--health-address", "127.0.0.1:10249"}),
            "config: --health-address '127.0.0.1:10249': is also the --metrics-address");
  EXPECT_EQ(error({"--metrics-per-backend", "maybe"}),
            "config: --metrics-per-backend 'maybe': expected true or false");
  EXPECT_EQ(error({"--metrics-max-backend-series", "10000001"}),
            "config: --metrics-max-backend-series '10000001': must be between 0 and 10000000");
  out_.str("");
  run({"--help"});
  for (const char* name : {"--health-address", "--metrics-per-backend", "--metrics-max-backend-series",
                           "--metrics-max-service-series"})
    EXPECT_THAT(out_.str(), HasSubstr(name));
  EXPECT_THAT(out_.str(), HasSubstr("(default: 127.0.0.1:10256)"));
}


// The exception path and VIP announcement (docs/gateway.md).
TEST_F(ConfigTest, ExceptionPathAndAnnounce) {
  const Options def = ok({});
  EXPECT_EQ(def.dataplane.exception_path, ExceptionPath::kNone);
  EXPECT_EQ(def.dataplane.exception_pps, 10000u);
  EXPECT_EQ(def.announce_table, 0u);
  EXPECT_TRUE(def.announce_require_endpoints);
  const Options o = ok({"--exception-path", "tap", "--exception-ifnames", "up0,-", "--exception-pps", "500",
                        "--announce-table", "100", "--announce-require-endpoints", "false"});
  EXPECT_EQ(o.dataplane.exception_path, ExceptionPath::kTap);
  EXPECT_EQ(o.dataplane.exception_ifnames, (std::vector<std::string>{"up0", "-"}));
  EXPECT_EQ(o.dataplane.exception_pps, 500u);
  EXPECT_EQ(o.announce_table, 100u);
  EXPECT_FALSE(o.announce_require_endpoints);
  EXPECT_EQ(error({"--exception-path", "kni"}), "config: --exception-path 'kni': expected none or tap");
  EXPECT_THAT(error({"--exception-ifnames", "a,a"}), HasSubstr("given twice"));
  EXPECT_THAT(error({"--exception-ifnames", "much-too-long-name0"}), HasSubstr("interface name"));
  EXPECT_THAT(error({"--exception-pps", "0"}), HasSubstr("between 1 and"));
  EXPECT_THAT(error({"--announce-table", "254"}), HasSubstr("main"));
  // Outside --dry-run: the routes live on the exception interface, and need root.
  const std::string d = dir_.path();
  const std::vector<std::string> base = {"--manifests-dir", d, "--port", "net_null0 10.0.0.1/24",
                                         "--forward-method", "nat"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> a = base;
    a.insert(a.end(), more.begin(), more.end());
    return a;
  };
  EXPECT_THAT(error(with({"--announce-table", "100"}), false), HasSubstr("needs --exception-path tap"));
  EXPECT_THAT(error(with({"--announce-table", "100", "--exception-path", "tap", "--user", "nobody"}), false),
              HasSubstr("cannot be used with --user"));
  EXPECT_THAT(error(with({"--exception-ifnames", "a,b"}), false), HasSubstr("more names than there are ports"));
  EXPECT_TRUE(run(with({"--announce-table", "100", "--exception-path", "tap"})).has_value());
}

}  // namespace
}  // namespace vipd::config
