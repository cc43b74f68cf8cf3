// Thread: test main thread. Tests for the message building and parsing of
// controlplane/backends/ipvs/netlink_ipvs.cc (wire::), no kernel needed: the
// attributes of IPv4 and IPv6 services and real servers as NEW/SET/DEL requests
// carry them (family, 4 or 16 address bytes, netmask), and requests read back
// through the answer parsers (same nested layout), also a short IPv6 address.
#include "controlplane/backends/ipvs/netlink_ipvs.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/ip_vs.h>
#include <netinet/in.h>
#include <netlink/attr.h>
#include <netlink/genl/genl.h>
#include <netlink/msg.h>
#include <sys/socket.h>

#include <cstring>
#include <memory>

#include "tests/unit/ipvs/fake_kernel.h"

namespace vipd::cp::ipvs {
namespace {

using namespace ::vipd::cp::ipvs::testing;

struct MsgFree {
  void operator()(nl_msg* m) const { nlmsg_free(m); }
};
using Msg = std::unique_ptr<nl_msg, MsgFree>;

Msg new_msg(uint8_t cmd) {
  Msg m(nlmsg_alloc());
  EXPECT_NE(genlmsg_put(m.get(), NL_AUTO_PORT, NL_AUTO_SEQ, 0x1d, 0, 0, cmd, IPVS_GENL_VERSION), nullptr);
  return m;
}

// The nested attributes of `which` (IPVS_CMD_ATTR_SERVICE / _DEST) in `m`.
template <int Max>
bool nested(nl_msg* m, int which, nlattr* (&t)[Max + 1]) {
  nlattr* top[IPVS_CMD_ATTR_MAX + 1] = {};
  if (genlmsg_parse(nlmsg_hdr(m), 0, top, IPVS_CMD_ATTR_MAX, nullptr) < 0 || !top[which]) return false;
  return nla_parse_nested(t, Max, top[which], nullptr) == 0;
}

IpvsService service(const ServiceKey& k, uint32_t persist) {
  IpvsService s;
  s.key = k;
  s.scheduler = "wrr";
  if (persist) s.flags = kFlagPersistent, s.timeout_s = persist;
  s.netmask = host_netmask(k.vip);
  return s;
}

TEST(IpvsWire, Ipv6ServiceAttributes) {
  const IpvsService s = service(tcp("fd00:96::100", 8080), 300);
  Msg m = new_msg(IPVS_CMD_NEW_SERVICE);
  ASSERT_TRUE(wire::put_service(m.get(), s, true));
  nlattr* t[IPVS_SVC_ATTR_MAX + 1] = {};
  ASSERT_TRUE((nested<IPVS_SVC_ATTR_MAX>(m.get(), IPVS_CMD_ATTR_SERVICE, t)));
  ASSERT_NE(t[IPVS_SVC_ATTR_AF], nullptr);
  EXPECT_EQ(nla_get_u16(t[IPVS_SVC_ATTR_AF]), AF_INET6);
  EXPECT_EQ(nla_get_u16(t[IPVS_SVC_ATTR_PROTOCOL]), IPPROTO_TCP);
  ASSERT_NE(t[IPVS_SVC_ATTR_ADDR], nullptr);
  ASSERT_EQ(nla_len(t[IPVS_SVC_ATTR_ADDR]), 16);
  in6_addr want{};
  ASSERT_EQ(inet_pton(AF_INET6, "fd00:96::100", &want), 1);
  EXPECT_EQ(std::memcmp(nla_data(t[IPVS_SVC_ATTR_ADDR]), &want, 16), 0);
  EXPECT_EQ(ntohs(nla_get_u16(t[IPVS_SVC_ATTR_PORT])), 8080);
  EXPECT_EQ(nla_get_u32(t[IPVS_SVC_ATTR_NETMASK]), 128u);  // the kernel wants 1..128 for IPv6
  EXPECT_EQ(nla_get_u32(t[IPVS_SVC_ATTR_TIMEOUT]), 300u);
  EXPECT_STREQ(nla_get_string(t[IPVS_SVC_ATTR_SCHED_NAME]), "wrr");
}

TEST(IpvsWire, Ipv4ServiceAttributesUnchanged) {
  Msg m = new_msg(IPVS_CMD_DEL_SERVICE);
  ASSERT_TRUE(wire::put_service(m.get(), service(udp("10.96.0.100", 53), 0), false));
  nlattr* t[IPVS_SVC_ATTR_MAX + 1] = {};
  ASSERT_TRUE((nested<IPVS_SVC_ATTR_MAX>(m.get(), IPVS_CMD_ATTR_SERVICE, t)));
  EXPECT_EQ(nla_get_u16(t[IPVS_SVC_ATTR_AF]), AF_INET);
  EXPECT_EQ(nla_get_u16(t[IPVS_SVC_ATTR_PROTOCOL]), IPPROTO_UDP);
  ASSERT_EQ(nla_len(t[IPVS_SVC_ATTR_ADDR]), 4);
  uint32_t be;
  std::memcpy(&be, nla_data(t[IPVS_SVC_ATTR_ADDR]), 4);
  EXPECT_EQ(ntohl(be), 0x0a600064u);
  EXPECT_EQ(t[IPVS_SVC_ATTR_SCHED_NAME], nullptr);  // identity only
  EXPECT_EQ(t[IPVS_SVC_ATTR_NETMASK], nullptr);
}

TEST(IpvsWire, ServiceRoundTripsBothFamilies) {
  for (const ServiceKey& k : {tcp("fd00:96::100", 8080), udp("fd00:96::101", 53), tcp("10.96.0.102", 8080)}) {
    SCOPED_TRACE(to_string(k));
    const IpvsService s = service(k, k.protocol == Protocol::kTcp ? 10800 : 0);
    Msg m = new_msg(IPVS_CMD_NEW_SERVICE);
    ASSERT_TRUE(wire::put_service(m.get(), s, true));
    IpvsServiceState got;
    ASSERT_EQ(wire::parse_service(nlmsg_hdr(m.get()), &got), 1);
    EXPECT_EQ(got.service, s);
  }
}

TEST(IpvsWire, Ipv6DestAttributesAndRoundTrip) {
  IpvsDest d;
  d.ip = ip("fd00:244::3:44");
  d.port = 8080;
  d.weight = 3;
  Msg m = new_msg(IPVS_CMD_NEW_DEST);
  ASSERT_TRUE(wire::put_service(m.get(), service(tcp("fd00:96::100", 8080), 0), false));
  ASSERT_TRUE(wire::put_dest(m.get(), d, true));
  nlattr* t[IPVS_DEST_ATTR_MAX + 1] = {};
  ASSERT_TRUE((nested<IPVS_DEST_ATTR_MAX>(m.get(), IPVS_CMD_ATTR_DEST, t)));
  ASSERT_EQ(nla_len(t[IPVS_DEST_ATTR_ADDR]), 16);
  ASSERT_NE(t[IPVS_DEST_ATTR_ADDR_FAMILY], nullptr);
  EXPECT_EQ(nla_get_u16(t[IPVS_DEST_ATTR_ADDR_FAMILY]), AF_INET6);
  EXPECT_EQ(nla_get_u32(t[IPVS_DEST_ATTR_FWD_METHOD]), kFwdMasq);
  EXPECT_EQ(nla_get_u32(t[IPVS_DEST_ATTR_WEIGHT]), 3u);
  IpvsDest got;
  // Read back with the service's family only (an answer without ADDR_FAMILY).
  ASSERT_TRUE(wire::parse_dest(nlmsg_hdr(m.get()), AF_INET6, &got));
  EXPECT_EQ(got.ip, d.ip);
  EXPECT_EQ(got.port, 8080);
  EXPECT_EQ(got.weight, 3u);
  // IPv4 real servers keep the request they always had (no ADDR_FAMILY).
  IpvsDest d4;
  d4.ip = ip("10.244.1.15");
  d4.port = 80;
  Msg m4 = new_msg(IPVS_CMD_NEW_DEST);
  ASSERT_TRUE(wire::put_dest(m4.get(), d4, true));
  nlattr* t4[IPVS_DEST_ATTR_MAX + 1] = {};
  ASSERT_TRUE((nested<IPVS_DEST_ATTR_MAX>(m4.get(), IPVS_CMD_ATTR_DEST, t4)));
  EXPECT_EQ(nla_len(t4[IPVS_DEST_ATTR_ADDR]), 4);
  EXPECT_EQ(t4[IPVS_DEST_ATTR_ADDR_FAMILY], nullptr);
  ASSERT_TRUE(wire::parse_dest(nlmsg_hdr(m4.get()), AF_INET, &got));
  EXPECT_EQ(got.ip, d4.ip);
  // A DEL_DEST request names the real server only.
  Msg del = new_msg(IPVS_CMD_DEL_DEST);
  ASSERT_TRUE(wire::put_dest(del.get(), d, false));
  nlattr* td[IPVS_DEST_ATTR_MAX + 1] = {};
  ASSERT_TRUE((nested<IPVS_DEST_ATTR_MAX>(del.get(), IPVS_CMD_ATTR_DEST, td)));
  EXPECT_EQ(nla_len(td[IPVS_DEST_ATTR_ADDR]), 16);
  EXPECT_EQ(td[IPVS_DEST_ATTR_WEIGHT], nullptr);
}

// An IPv6 service whose address attribute is too short for IPv6: malformed,
// not read past its end; another family (or a fwmark service): skipped.
TEST(IpvsWire, ShortOrForeignAnswers) {
  Msg m = new_msg(IPVS_CMD_NEW_SERVICE);
  nlattr* nest = nla_nest_start(m.get(), IPVS_CMD_ATTR_SERVICE);
  const uint32_t four = htonl(0x0a000001);
  nla_put_u16(m.get(), IPVS_SVC_ATTR_AF, AF_INET6);
  nla_put_u16(m.get(), IPVS_SVC_ATTR_PROTOCOL, IPPROTO_TCP);
  nla_put(m.get(), IPVS_SVC_ATTR_ADDR, 4, &four);
  nla_put_u16(m.get(), IPVS_SVC_ATTR_PORT, htons(80));
  nla_nest_end(m.get(), nest);
  IpvsServiceState got;
  EXPECT_EQ(wire::parse_service(nlmsg_hdr(m.get()), &got), -1);

  Msg f = new_msg(IPVS_CMD_NEW_SERVICE);
  nest = nla_nest_start(f.get(), IPVS_CMD_ATTR_SERVICE);
  nla_put_u16(f.get(), IPVS_SVC_ATTR_AF, AF_INET6);
  nla_put_u32(f.get(), IPVS_SVC_ATTR_FWMARK, 7);
  nla_nest_end(f.get(), nest);
  EXPECT_EQ(wire::parse_service(nlmsg_hdr(f.get()), &got), 0);

  Msg d = new_msg(IPVS_CMD_NEW_DEST);
  nest = nla_nest_start(d.get(), IPVS_CMD_ATTR_DEST);
  nla_put(d.get(), IPVS_DEST_ATTR_ADDR, 4, &four);
  nla_put_u16(d.get(), IPVS_DEST_ATTR_PORT, htons(80));
  nla_put_u32(d.get(), IPVS_DEST_ATTR_WEIGHT, 1);
  nla_nest_end(d.get(), nest);
  IpvsDest dest;
  EXPECT_FALSE(wire::parse_dest(nlmsg_hdr(d.get()), AF_INET6, &dest));
  EXPECT_TRUE(wire::parse_dest(nlmsg_hdr(d.get()), AF_INET, &dest));
}

}  // namespace
}  // namespace vipd::cp::ipvs
