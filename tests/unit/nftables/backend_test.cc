// Thread: test main thread. Tests for controlplane/backends/nftables/backend.cc
// against a fake Runner that records transactions: a full sync first, partial
// syncs after, no transaction when nothing changed, a refused transaction
// reported and followed by a full sync. Nothing touches the real nf_tables.
#include "controlplane/backends/nftables/backend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace vipd::cp::nft {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

struct Log {
  std::vector<std::string> scripts;
  bool fail_next = false;
  std::vector<std::string> tables;  // what list_tables reports
};

class FakeRunner final : public Runner {
 public:
  explicit FakeRunner(Log* log) : log_(log) {}
  bool run(const std::string& script, std::string* error) override {
    log_->scripts.push_back(script);
    if (log_->fail_next) {
      log_->fail_next = false;
      *error = "nftables: transaction refused: Error: Could not process rule: No such file or directory";
      return false;
    }
    return true;
  }
  bool list_tables(std::vector<std::string>* out, std::string*) override {
    *out = log_->tables;
    return true;
  }

 private:
  Log* log_;
};

ServiceTable table(int endpoints) {
  ServiceTable t;
  VirtualService v;
  v.key = {*parse_ipv4("10.96.0.100"), 8080, Protocol::kTcp};
  v.name = "default/db:http";
  for (int i = 0; i < endpoints; ++i) v.backends.push_back({*parse_ipv4("10.244.1.1") + static_cast<Ipv4>(i), 8080, 1, false});
  t.services[v.key] = v;
  return t;
}

TEST(NftBackend, FullThenPartialThenNoop) {
  Log log;
  NftablesBackend be({}, std::make_unique<FakeRunner>(&log));
  std::string err;
  ASSERT_TRUE(be.apply(table(2), {}, true, &err)) << err;
  ASSERT_EQ(log.scripts.size(), 1u);
  EXPECT_THAT(log.scripts[0], StartsWith("add table ip vipd\ndelete table ip vipd\n"));
  ASSERT_TRUE(be.apply(table(3), {}, false, &err)) << err;
  ASSERT_EQ(log.scripts.size(), 2u);
  EXPECT_THAT(log.scripts[1], Not(HasSubstr("delete table")));
  EXPECT_THAT(log.scripts[1], HasSubstr("flush chain ip vipd svc-"));
  ASSERT_TRUE(be.apply(table(3), {}, false, &err)) << err;
  EXPECT_EQ(log.scripts.size(), 2u);  // nothing to do: no transaction
  const auto s = be.stats();
  EXPECT_EQ(s.full_syncs, 1u);
  EXPECT_EQ(s.partial_syncs, 1u);
  EXPECT_EQ(s.noop_syncs, 1u);
  EXPECT_EQ(s.chains, 1u);  // fnat (default): the compact svc chain, no sep chains
}

TEST(NftBackend, FailureReportedThenFullSync) {
  Log log;
  NftablesBackend be({}, std::make_unique<FakeRunner>(&log));
  std::string err;
  ASSERT_TRUE(be.apply(table(1), {}, true, &err));
  log.fail_next = true;
  EXPECT_FALSE(be.apply(table(2), {}, false, &err));
  EXPECT_THAT(err, HasSubstr("transaction refused"));
  EXPECT_EQ(be.stats().failures, 1u);
  // the loop retries with full=false; the backend still does a full sync
  ASSERT_TRUE(be.apply(table(2), {}, false, &err)) << err;
  EXPECT_THAT(log.scripts.back(), StartsWith("add table ip vipd\ndelete table ip vipd\n"));
  EXPECT_EQ(be.stats().full_syncs, 2u);
}

TEST(NftBackend, BadInputKeepsLastGoodState) {
  Log log;
  NftablesBackend be({}, std::make_unique<FakeRunner>(&log));
  std::string err;
  ASSERT_TRUE(be.apply(table(1), {}, true, &err));
  ServiceTable bad = table(1);
  bad.services.begin()->second.source_ranges = {"not-a-cidr"};
  EXPECT_FALSE(be.apply(bad, {}, false, &err));
  EXPECT_THAT(err, HasSubstr("not an IPv4 CIDR"));
  EXPECT_EQ(log.scripts.size(), 1u);  // nothing sent to the kernel
}

TEST(NftBackend, FirstAndLastIpv6EntryTakeAFullSyncOthersArePartial) {
  Log log;
  NftablesBackend be({}, std::make_unique<FakeRunner>(&log));
  std::string err;
  ASSERT_TRUE(be.apply(table(2), {}, true, &err)) << err;
  ServiceTable t = table(2);
  VirtualService v6;
  v6.key = {*IpAddr::parse("fd00:10::10"), 8080, Protocol::kTcp};
  v6.name = "default/db6:http";
  v6.backends.push_back({*IpAddr::parse("fd00:244::1"), 8080, 1, false});
  t.services[v6.key] = v6;
  // the first IPv6 entry: table ip6 vipd is declared by a full sync
  ASSERT_TRUE(be.apply(t, {}, false, &err)) << err;
  ASSERT_EQ(log.scripts.size(), 2u);
  EXPECT_THAT(log.scripts[1], HasSubstr("table ip6 vipd {"));
  EXPECT_EQ(be.stats().full_syncs, 2u);
  // an IPv6 endpoint change: partial, in the ip6 table
  t.services[v6.key].backends.push_back({*IpAddr::parse("fd00:244::2"), 8080, 1, false});
  ASSERT_TRUE(be.apply(t, {}, false, &err)) << err;
  ASSERT_EQ(log.scripts.size(), 3u);
  EXPECT_THAT(log.scripts[2], StartsWith("flush chain ip6 vipd svc-"));
  EXPECT_THAT(log.scripts[2], Not(HasSubstr(" ip vipd")));
  EXPECT_EQ(be.stats().partial_syncs, 1u);
  // the last IPv6 entry gone: a full sync deletes the ip6 table
  ASSERT_TRUE(be.apply(table(2), {}, false, &err)) << err;
  ASSERT_EQ(log.scripts.size(), 4u);
  EXPECT_THAT(log.scripts[3], HasSubstr("add table ip6 vipd\ndelete table ip6 vipd\n"));
  EXPECT_THAT(log.scripts[3], Not(HasSubstr("table ip6 vipd {")));
  EXPECT_EQ(be.stats().full_syncs, 3u);
}

TEST(NftBackend, FullSyncDeletesStaleShardTablesPartialUsesTheDiff) {
  Log log;
  log.tables = {"ip vipd", "ip vipd-4", "ip6 vipd-2", "inet filter"};
  NftablesBackend be({}, std::make_unique<FakeRunner>(&log));
  std::string err;
  const ServiceTable t = table(2);
  ASSERT_TRUE(be.apply(t, TableDiff::compute({}, t), true, &err)) << err;
  EXPECT_THAT(log.scripts[0], HasSubstr("add table ip vipd-4\ndelete table ip vipd-4\n"));
  EXPECT_THAT(log.scripts[0], HasSubstr("add table ip6 vipd-2\ndelete table ip6 vipd-2\n"));
  EXPECT_THAT(log.scripts[0], Not(HasSubstr("inet filter")));
  // a partial sync from the loop's diff: the changed entry alone
  const ServiceTable t3 = table(3);
  ASSERT_TRUE(be.apply(t3, TableDiff::compute(t, t3), false, &err)) << err;
  ASSERT_EQ(log.scripts.size(), 2u);
  EXPECT_THAT(log.scripts[1], StartsWith("flush chain ip vipd svc-"));
  EXPECT_EQ(be.stats().partial_syncs, 1u);
  EXPECT_EQ(be.stats().entries_rendered, 1u);
  EXPECT_EQ(be.stats().chains, 1u);
}

}  // namespace
}  // namespace vipd::cp::nft
