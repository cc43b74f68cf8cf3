// Thread: test main thread. Tests for model/kinds.h: the name tables.
#include "model/kinds.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace vipd::cp {
namespace {

// Every enumerator of E names itself and parses back; names are unique and
// names<E>() lists exactly the table, in order.
template <class E>
void check_table(size_t enumerators) {
  const auto& table = name_table(E{});
  EXPECT_EQ(std::size(table), enumerators);
  std::set<std::string> seen;
  std::string listed;
  for (const auto& e : table) {
    EXPECT_STREQ(name(e.value), e.name);
    EXPECT_EQ(kinds_detail::parse<E>(e.name), e.value) << e.name;
    EXPECT_TRUE(seen.insert(e.name).second) << "duplicate name " << e.name;
    listed += (listed.empty() ? "" : ", ") + std::string(e.name);
  }
  EXPECT_EQ(names<E>(", "), listed);
  EXPECT_FALSE(kinds_detail::parse<E>(""));
  EXPECT_FALSE(kinds_detail::parse<E>("random"));
}

TEST(Kinds, Scheduler) {
  check_table<Scheduler>(11);
  // The enumerators are in table order (the dataplane indexes by them).
  for (size_t i = 0; i < std::size(kSchedulerNames); ++i)
    EXPECT_EQ(static_cast<size_t>(kSchedulerNames[i].value), i);
  EXPECT_EQ(names<Scheduler>(), "rr wrr lc wlc sed nq sh dh lblc lblcr mh");
  EXPECT_EQ(parse_scheduler("wlc"), Scheduler::kWlc);
  EXPECT_EQ(parse_scheduler("lblcr"), Scheduler::kLblcr);
  EXPECT_FALSE(parse_scheduler("WLC"));
  EXPECT_FALSE(parse_scheduler("lblcr "));
  EXPECT_FALSE(parse_scheduler("fo"));
  EXPECT_STREQ(name(static_cast<Scheduler>(200)), "rr");  // outside the table: the first entry
}

TEST(Kinds, ServiceKind) {
  check_table<ServiceKind>(4);
  EXPECT_EQ(parse_service_kind("NodePort"), ServiceKind::kNodePort);
  EXPECT_STREQ(name(ServiceKind::kExternalIp), "ExternalIP");
  EXPECT_FALSE(parse_service_kind("nodeport"));
  EXPECT_FALSE(parse_service_kind("ExternalName"));
}

TEST(Kinds, Protocol) {
  check_table<Protocol>(2);
  EXPECT_EQ(static_cast<int>(Protocol::kTcp), 6);
  EXPECT_EQ(static_cast<int>(Protocol::kUdp), 17);
  EXPECT_EQ(parse_protocol("udp"), Protocol::kUdp);
  EXPECT_EQ(parse_protocol("Tcp"), Protocol::kTcp);
  EXPECT_FALSE(parse_protocol("SCTP"));
  EXPECT_FALSE(parse_protocol("tcpx"));
}

TEST(Kinds, ForwardMethod) {
  check_table<ForwardMethod>(2);
  EXPECT_EQ(parse_forward_method("nat"), ForwardMethod::kNat);
  EXPECT_FALSE(parse_forward_method("dr"));
  EXPECT_EQ(names<ForwardMethod>(" or "), "fnat or nat");
}

TEST(Kinds, WhenEmpty) {
  check_table<WhenEmpty>(2);
  EXPECT_STREQ(name(WhenEmpty::kDrop), "drop");
  EXPECT_EQ(parse_when_empty("reject"), WhenEmpty::kReject);
  EXPECT_FALSE(parse_when_empty("DROP"));
}

// ProxyProtocol's "none" is spelled "" (the dry-run JSON's value), so it is
// the one table where the empty string parses.
TEST(Kinds, ProxyProtocol) {
  EXPECT_EQ(std::size(kProxyProtocolNames), 3u);
  for (const auto& e : kProxyProtocolNames) EXPECT_EQ(parse_proxy_protocol(e.name), e.value);
  EXPECT_EQ(parse_proxy_protocol(""), ProxyProtocol::kNone);
  EXPECT_EQ(parse_proxy_protocol("v2"), ProxyProtocol::kV2);
  EXPECT_FALSE(parse_proxy_protocol("V1"));
  EXPECT_FALSE(parse_proxy_protocol("v3"));
  EXPECT_EQ(names<ProxyProtocol>("|"), "v1|v2");  // "" adds no separator
}

// The tables are usable at compile time (the fast path needs no linking).
static_assert(parse_scheduler("mh") == Scheduler::kMh);
static_assert(name(Protocol::kUdp)[0] == 'U');

}  // namespace
}  // namespace vipd::cp
