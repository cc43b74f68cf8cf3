// IpAddr / IpPrefix: strict parsing, RFC 5952 printing, the table order (every
// IPv4 address before every IPv6 address) and prefix host-bit clearing.
#include "model/ip_addr.h"

#include <gtest/gtest.h>

#include <array>
#include <set>
#include <tuple>
#include <unordered_set>
#include <vector>

namespace vipd::cp {
namespace {

std::string fmt(const char* s) {
  auto a = IpAddr::parse(s);
  return a ? a->to_string() : "<invalid>";
}

TEST(IpAddr, Ipv4FromHostOrder) {
  const IpAddr a(0x0a600001u);
  EXPECT_TRUE(a.is_v4());
  EXPECT_FALSE(a.is_v6());
  EXPECT_EQ(a.v4(), 0x0a600001u);
  EXPECT_EQ(a.to_string(), "10.96.0.1");
  EXPECT_EQ(IpAddr().to_string(), "0.0.0.0");
  EXPECT_EQ(IpAddr(0xffffffffu).to_string(), "255.255.255.255");
  EXPECT_EQ(a.bits(), 32u);
}

TEST(IpAddr, Ipv6FromBytes) {
  std::array<uint8_t, 16> b{};
  b[0] = 0xfd;
  b[15] = 1;
  const IpAddr a = IpAddr::v6(b);
  EXPECT_TRUE(a.is_v6());
  EXPECT_EQ(a.v4(), 0u);
  EXPECT_EQ(a.v6_bytes(), b);
  EXPECT_EQ(a.to_string(), "fd00::1");
  EXPECT_EQ(IpAddr::v6(b.data()), a);
  EXPECT_EQ(a.bits(), 128u);
  EXPECT_EQ(IpAddr::v6(std::array<uint8_t, 16>{}).to_string(), "::");
}

TEST(IpAddr, StrictParse) {
  for (const char* bad : {"", " 10.0.0.1", "10.0.0.1 ", "10.0.0", "10.0.0.256", "010.0.0.1", "10.0.0.1/32",
                          "fd00::1%eth0", "[fd00::1]", "fd00:::1", "1:2:3:4:5:6:7:8:9", "fd00::g", "::1::",
                          "1.2.3.4.5", "localhost", "fd00::1/64", "0x0a000001"}) {
    EXPECT_FALSE(IpAddr::parse(bad)) << bad;
  }
  EXPECT_FALSE(IpAddr::parse(std::string("10.0.0.1\0x", 10)));
  auto a = IpAddr::parse("10.96.0.10");
  ASSERT_TRUE(a);
  EXPECT_EQ(*a, IpAddr(0x0a60000au));
  auto b = IpAddr::parse("FD00::A");
  ASSERT_TRUE(b);
  EXPECT_TRUE(b->is_v6());
  EXPECT_EQ(b->to_string(), "fd00::a");
}

TEST(IpAddr, Rfc5952Printing) {
  // Leading zeros dropped, lowercase.
  EXPECT_EQ(fmt("2001:0DB8:0000:0000:0000:0000:0000:0001"), "2001:db8::1");
  // A single zero field is not compressed.
  EXPECT_EQ(fmt("2001:db8:0:1:1:1:1:1"), "2001:db8:0:1:1:1:1:1");
  EXPECT_EQ(fmt("2001:db8::1:1:1:1:1"), "2001:db8:0:1:1:1:1:1");
  // The longest run is compressed; on a tie, the first.
  EXPECT_EQ(fmt("2001:0:0:1:0:0:0:1"), "2001:0:0:1::1");
  EXPECT_EQ(fmt("2001:db8:0:0:1:0:0:1"), "2001:db8::1:0:0:1");
  // Runs at either end.
  EXPECT_EQ(fmt("0:0:0:0:0:0:0:1"), "::1");
  EXPECT_EQ(fmt("1:0:0:0:0:0:0:0"), "1::");
  EXPECT_EQ(fmt("0:0:1:0:0:0:0:0"), "0:0:1::");
  EXPECT_EQ(fmt("0:1:0:0:0:0:0:0"), "0:1::");
  EXPECT_EQ(fmt("0:0:0:0:0:0:0:0"), "::");
  // No zero field at all.
  EXPECT_EQ(fmt("1:2:3:4:5:6:7:8"), "1:2:3:4:5:6:7:8");
  EXPECT_EQ(fmt("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"), "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff");
  // Zero fields inside a field are kept ("0" per field, "a0" not "a").
  EXPECT_EQ(fmt("fd00:a0:b00:c000::"), "fd00:a0:b00:c000::");
  // IPv4-mapped in the mixed notation (RFC 5952 section 5); other embeddings in hex.
  EXPECT_EQ(fmt("::ffff:10.0.0.1"), "::ffff:10.0.0.1");
  EXPECT_EQ(fmt("::ffff:a00:1"), "::ffff:10.0.0.1");
  EXPECT_EQ(fmt("::10.0.0.1"), "::a00:1");
  EXPECT_EQ(fmt("64:ff9b::10.0.0.1"), "64:ff9b::a00:1");
  // Round trip: printing then parsing gives the same address.
  for (const char* s : {"fd00::1", "2001:db8::1:0:0:1", "::", "1::", "fe80::1:2", "2001:db8:0:1:1:1:1:1"}) {
    auto a = IpAddr::parse(s);
    ASSERT_TRUE(a) << s;
    EXPECT_EQ(a->to_string(), s);
    EXPECT_EQ(IpAddr::parse(a->to_string()), a);
  }
}

TEST(IpAddr, OrderEveryIpv4BeforeEveryIpv6) {
  const IpAddr v4max(0xffffffffu);
  const IpAddr v6min = *IpAddr::parse("::");
  EXPECT_LT(v4max, v6min);
  EXPECT_LT(IpAddr(1u), IpAddr(2u));
  EXPECT_LT(IpAddr(0x0a000002u), IpAddr(0x0b000001u));
  EXPECT_LT(*IpAddr::parse("fd00::1"), *IpAddr::parse("fd00::2"));
  EXPECT_LT(*IpAddr::parse("fd00::ffff"), *IpAddr::parse("fd00:0:0:1::"));
  // "::ffff:10.0.0.1" is an IPv6 address, not equal to 10.0.0.1.
  EXPECT_NE(*IpAddr::parse("::ffff:10.0.0.1"), IpAddr(0x0a000001u));
  std::set<IpAddr> s = {*IpAddr::parse("fd00::1"), IpAddr(0x0a000001u), *IpAddr::parse("::"), IpAddr(0u)};
  std::vector<std::string> order;
  for (const auto& a : s) order.push_back(a.to_string());
  EXPECT_EQ(order, (std::vector<std::string>{"0.0.0.0", "10.0.0.1", "::", "fd00::1"}));
}

// The hand-written comparison (word compares) gives the order of the plain
// member-wise one: family, then the IPv4 value, then the IPv6 bytes
// lexicographically, on addresses that differ in each byte of either half,
// with the byte's high bit set or not (a signed or little-endian word compare
// would get these wrong).
TEST(IpAddr, OrderMatchesMemberwiseOrder) {
  std::vector<IpAddr> v = {IpAddr(0u), IpAddr(1u), IpAddr(0x7fffffffu), IpAddr(0x80000000u), IpAddr(0xffffffffu)};
  for (unsigned i = 0; i < 16; ++i)
    for (uint8_t b : {uint8_t{0x01}, uint8_t{0x7f}, uint8_t{0x80}, uint8_t{0xff}}) {
      std::array<uint8_t, 16> a{};
      a[i] = b;
      v.push_back(IpAddr::v6(a));
      a[15 - i] ^= 0x40;
      v.push_back(IpAddr::v6(a));
    }
  v.push_back(IpAddr::v6(std::array<uint8_t, 16>{}));
  auto ref = [](const IpAddr& x) { return std::tuple(x.family(), x.v4(), x.v6_bytes()); };
  for (const IpAddr& x : v)
    for (const IpAddr& y : v) {
      EXPECT_EQ(x <=> y, ref(x) <=> ref(y)) << x << " vs " << y;
      EXPECT_EQ(x == y, ref(x) == ref(y)) << x << " vs " << y;
    }
}

TEST(IpAddr, Hash) {
  std::unordered_set<IpAddr> s;
  s.insert(IpAddr(0u));
  s.insert(*IpAddr::parse("::"));
  s.insert(IpAddr(0x0a000001u));
  s.insert(*IpAddr::parse("::ffff:10.0.0.1"));
  s.insert(IpAddr(0x0a000001u));
  EXPECT_EQ(s.size(), 4u);
  EXPECT_NE(IpAddr(0u).hash(), IpAddr::parse("::")->hash());
  EXPECT_EQ(IpAddr::parse("fd00::1")->hash(), IpAddr::parse("fd00:0::1")->hash());
}

TEST(IpPrefix, Parse) {
  auto p = IpPrefix::parse("10.1.2.3/8");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->to_string(), "10.0.0.0/8");  // host bits cleared
  EXPECT_EQ(p->family(), IpAddr::Family::kV4);
  EXPECT_EQ(IpPrefix::parse("0.0.0.0/0")->to_string(), "0.0.0.0/0");
  EXPECT_EQ(IpPrefix::parse("1.2.3.4/0")->to_string(), "0.0.0.0/0");
  EXPECT_EQ(IpPrefix::parse("1.2.3.4/32")->to_string(), "1.2.3.4/32");
  EXPECT_EQ(IpPrefix::parse("10.0.0.255/25")->to_string(), "10.0.0.128/25");
  EXPECT_EQ(IpPrefix::parse("fd00::1/8")->to_string(), "fd00::/8");
  EXPECT_EQ(IpPrefix::parse("FD12:3456::1/127")->to_string(), "fd12:3456::/127");
  EXPECT_EQ(IpPrefix::parse("fd12:3456::ff/121")->to_string(), "fd12:3456::80/121");
  EXPECT_EQ(IpPrefix::parse("2001:db8::1/128")->to_string(), "2001:db8::1/128");
  EXPECT_EQ(IpPrefix::parse("::/0")->to_string(), "::/0");
  EXPECT_EQ(IpPrefix::parse("ffff::/1")->to_string(), "8000::/1");
  EXPECT_EQ(IpPrefix::parse("fd00::/64")->family(), IpAddr::Family::kV6);
  for (const char* bad : {"10.0.0.0", "10.0.0.0/", "10.0.0.0/33", "10.0.0.0/08", "10.0.0.0/-1", "10.0.0.0/8 ",
                          "fd00::/129", "fd00::/1000", "fd00::", "/8", "fd00::/x", "10.0.0/8", "10.0.0.0/8/8"}) {
    EXPECT_FALSE(IpPrefix::parse(bad)) << bad;
  }
}

TEST(IpPrefix, ParseOrHostAndContains) {
  EXPECT_EQ(IpPrefix::parse_or_host("10.0.0.1")->to_string(), "10.0.0.1/32");
  EXPECT_EQ(IpPrefix::parse_or_host("fd00::1")->to_string(), "fd00::1/128");
  EXPECT_EQ(IpPrefix::parse_or_host("10.0.0.1/24")->to_string(), "10.0.0.0/24");
  EXPECT_FALSE(IpPrefix::parse_or_host("10.0.0.1/"));
  const IpPrefix v4 = *IpPrefix::parse("10.0.0.0/8");
  EXPECT_TRUE(v4.contains(IpAddr(0x0a010203u)));
  EXPECT_FALSE(v4.contains(IpAddr(0x0b000000u)));
  EXPECT_FALSE(v4.contains(*IpAddr::parse("::ffff:10.0.0.1")));
  const IpPrefix v6 = *IpPrefix::parse("fd00::/8");
  EXPECT_TRUE(v6.contains(*IpAddr::parse("fdff::1")));
  EXPECT_FALSE(v6.contains(*IpAddr::parse("fe00::1")));
  EXPECT_FALSE(v6.contains(IpAddr(0u)));
  EXPECT_TRUE(IpPrefix::parse("::/0")->contains(*IpAddr::parse("2001:db8::1")));
  EXPECT_FALSE(IpPrefix::parse("0.0.0.0/0")->contains(*IpAddr::parse("2001:db8::1")));
}

}  // namespace
}  // namespace vipd::cp
