// IPv6 through the per-packet pipeline (worker_test_fixture.h): NS and echo
// for the port's IPv6 address answered, other NDP and IPv6 traffic counted
// under its drop reason, hostile frames dropped without harm, IPv4 unchanged.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#else
#define RUNNING_ON_VALGRIND 0
#define CALLGRIND_TOGGLE_COLLECT
#define CALLGRIND_ZERO_STATS
#define CALLGRIND_DUMP_STATS_AT(x)
#endif

#include "dataplane/fastpath/ipv6.h"
#include "dataplane/fastpath/proxy_proto.h"
#include "tests/unit/dataplane/fastpath/handover_test_util.h"
#include "dataplane/fastpath/resteer.h"
#include "tests/unit/dataplane/fastpath/ipv6_test_util.h"
#include "tests/unit/dataplane/fastpath/worker_test_fixture.h"

namespace vipd::dp {
namespace {

using namespace test;

const Addr6 kPort6 = a6({0xfd00, 0x10, 0, 0, 0, 0, 0, 0x1});
const Addr6 kClient6 = a6({0xfd00, 0x10, 0, 0, 0, 0, 0, 0x10});
const Addr6 kVip6 = a6({0xfd00, 0x10, 0x96, 0, 0, 0, 0, 0x100});

class WorkerIpv6Test : public WorkerTest {
 protected:
  void SetUp() override {
    WorkerTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    build(Forward::kFnat);
    if (HasFatalFailure()) return;
    sh().ports[0].has_ip6 = true;
    std::copy(kPort6.begin(), kPort6.end(), sh().ports[0].ip6);
  }

  Bytes ns(const Addr6& target, const Addr6& to, uint8_t hop = 255) {
    Frame6 s;
    s.dmac = ip6_is_multicast(to.data()) ? mcast_mac(to) : kPortMac[0];
    s.smac = kClientMac;
    s.src = kClient6;
    s.dst = to;
    s.next = kProtoIcmp6;
    s.hop_limit = hop;
    s.l4 = ns6(target, &kClientMac);
    Bytes f = build6(s);
    fix_cksum6(f, 54, kProtoIcmp6, 2);
    return f;
  }
  Bytes to_port(uint8_t next, Bytes l4, const Addr6& dst = kPort6) {
    Frame6 s;
    s.dmac = kPortMac[0];
    s.smac = kClientMac;
    s.src = kClient6;
    s.dst = dst;
    s.next = next;
    s.l4 = std::move(l4);
    return build6(s);
  }
};

TEST_F(WorkerIpv6Test, NeighborSolicitationForPortAddressIsAnswered) {
  for (bool unicast : {false, true}) {
    const Frame out = one_out(ns(kPort6, unicast ? kPort6 : sol_node(kPort6)), 0, 0);
    ASSERT_EQ(out.size(), 86u) << unicast;
    EXPECT_TRUE(mac_is(out.data(), kClientMac)) << "to the source link-layer address";
    EXPECT_TRUE(mac_is(out.data() + 6, kPortMac[0]));
    Parsed6 p;
    ASSERT_TRUE(parse_ipv6(out.data(), out.size(), &p)) << drop_reason_name(p.drop);
    NdInfo nd;
    ASSERT_EQ(parse_nd(out.data(), p, &nd), kNumDropReasons) << "a valid NA";
    EXPECT_EQ(nd.type, kNdNeighborAdvert);
    EXPECT_EQ(nd.flags, 0x60);
    EXPECT_TRUE(std::equal(kPort6.begin(), kPort6.end(), nd.target));
    ASSERT_TRUE(nd.has_lladdr);
    EXPECT_TRUE(std::equal(nd.lladdr, nd.lladdr + 6, kPortMac[0].begin()));
    EXPECT_TRUE(std::equal(kClient6.begin(), kClient6.end(), p.dst));
  }
  EXPECT_EQ(drops(kNdpIgnored) + drops(kNdpInvalid), 0u);
}

TEST_F(WorkerIpv6Test, OtherNdpIsCountedNotAnswered) {
  // For another address; for our address on the port without one; invalid.
  rx(ns(kVip6, sol_node(kVip6)), 0);
  expect_nothing_out("NS for an address not ours");
  EXPECT_EQ(drops(kNdpIgnored), 1u);
  rx(ns(kPort6, sol_node(kPort6)), 1);
  expect_nothing_out("NS on the port without an IPv6 address");
  EXPECT_EQ(drops(kNdpIgnored), 2u);
  rx(ns(kPort6, sol_node(kPort6), 64), 0);
  expect_nothing_out("NS with hop limit 64");
  EXPECT_EQ(drops(kNdpInvalid), 1u);
  // A router advertisement.
  Bytes ra = to_port(kProtoIcmp6, Bytes{134, 0, 0, 0, 64, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
  rx(ra, 0);
  expect_nothing_out("RA");
  EXPECT_EQ(drops(kNdpIgnored), 3u);
}

TEST_F(WorkerIpv6Test, SolicitationFromMulticastSourceIsInvalid) {
  // Found by fuzz_packet: the NA would go to a multicast address with S set.
  Bytes f = ns(kPort6, sol_node(kPort6));
  const Addr6 mc = a6({0xff00, 0x10, 0, 0, 0, 0, 0, 0x10});
  std::copy(mc.begin(), mc.end(), f.begin() + 22);
  fix_cksum6(f, 54, kProtoIcmp6, 2);
  rx(f, 0);
  expect_nothing_out("NS from a multicast source");
  // parse_ipv6 refuses a multicast source for every IPv6 packet (parse_nd
  // would refuse it too, should a caller ever skip parse_ipv6).
  EXPECT_EQ(drops(kIpv6BadHeader), 1u);
  EXPECT_EQ(drops(kNdpInvalid), 0u);
}

TEST_F(WorkerIpv6Test, EchoToPortAddressIsAnswered) {
  Bytes f = to_port(kProtoIcmp6, echo6(9, 1, 32));
  fix_cksum6(f, 54, kProtoIcmp6, 2);
  const Frame out = one_out(f, 0, 0);
  ASSERT_EQ(out.size(), f.size());
  EXPECT_TRUE(mac_is(out.data(), kClientMac));
  EXPECT_TRUE(mac_is(out.data() + 6, kPortMac[0]));
  EXPECT_EQ(out[54], kIcmp6EchoReply);
  EXPECT_TRUE(cksum6_matches(kPort6, kClient6, 58, Bytes(out.begin() + 54, out.end()), 2));
  // A bad checksum is counted, not answered.
  f[60] ^= 1;
  rx(f, 0);
  expect_nothing_out("echo with a bad checksum");
  EXPECT_EQ(drops(kIcmp6BadChecksum), 1u);
}

TEST_F(WorkerIpv6Test, Ipv6TrafficIsCountedByReason) {
  struct Case {
    Bytes frame;
    DropReason want;
    const char* what;
  };
  Bytes tcp_vip = to_port(kProtoTcp, tcp6(40000, 80, kTcpSyn), kVip6);
  Bytes tcp_port = to_port(kProtoTcp, tcp6(40000, 80, kTcpSyn));
  Bytes cut = tcp_vip;
  cut.resize(60);
  Bytes chain = to_port(kIp6DestOpts, Bytes{}, kVip6);
  {
    Frame6 s;
    s.dmac = kPortMac[0];
    s.src = kClient6;
    s.dst = kVip6;
    s.next = kIp6DestOpts;
    for (unsigned i = 0; i < kMaxExtHeaders + 1; ++i) {
      Bytes h = ext_hdr(kIp6DestOpts, 0);
      s.ext.insert(s.ext.end(), h.begin(), h.end());
    }
    chain = build6(s);
  }
  Bytes frag = to_port(kIp6Fragment, frag_hdr(kProtoUdp, 8, false), kVip6);
  Bytes hbh2 = to_port(kIp6DestOpts, ext_hdr(kIp6HopByHop, 0), kVip6);
  const Case cases[] = {
      {tcp_vip, kIpv6NoService, "TCP to an IPv6 VIP (not served yet)"},
      {tcp_port, kLocalUnhandled, "TCP to the port's IPv6 address"},
      {cut, kIpv6BadHeader, "payload length beyond the frame"},
      {chain, kIpv6ExtChainTooLong, "extension chain too long"},
      {frag, kIpv6Fragment, "non-first fragment"},
      {hbh2, kIpv6BadExtHeader, "hop-by-hop after another header"},
  };
  for (const auto& c : cases) {
    const uint64_t before = drops(c.want);
    rx(c.frame, 0);
    expect_nothing_out(c.what);
    EXPECT_EQ(drops(c.want), before + 1) << c.what << "; drops:" << drop_summary();
  }
  EXPECT_EQ(drops(kBadEthertype), 0u) << "IPv6 is no longer an unknown ethertype";
}

TEST_F(WorkerIpv6Test, Ipv4IsUnchanged) {
  // The IPv4 path next to IPv6 traffic: an ICMP echo to the port address and
  // a new flow still go through.
  rx(to_port(kProtoTcp, tcp6(1, 80, kTcpSyn), kVip6), 0);
  const Frame out = one_out(build_frame(from_client(40000, kTcpSyn)), 0, 1);
  ASSERT_FALSE(out.empty());
  expect_valid_ipv4(out, "SYN to the IPv4 VIP");
}

// ---- IPv6 forwarding (Shared::v6 set up) ----

const Addr6 kPortB6 = a6({0xfd00, 0x244, 0, 0, 0, 0, 0, 0x1});
const Addr6 kLocal6 = a6({0xfd00, 0x244, 0, 0, 0, 0, 0xff, 0x1});
const Addr6 kVipEmpty6 = a6({0xfd00, 0x10, 0x96, 0, 0, 0, 0, 0x101});
const Addr6 kB16 = a6({0xfd00, 0x244, 0, 0, 0, 0, 1, 0x15});
const Addr6 kB26 = a6({0xfd00, 0x244, 0, 0, 0, 0, 2, 0x88});
const Addr6 kB36 = a6({0xfd00, 0x244, 0, 0, 0, 0, 3, 0x12});

cp::IpAddr ip6(const Addr6& a) { return cp::IpAddr::v6(a); }
Addr6 addr_at(const uint8_t* p) {
  Addr6 a;
  std::copy(p, p + 16, a.begin());
  return a;
}

class WorkerIpv6FwdTest : public WorkerTest, public ::testing::WithParamInterface<Forward> {
 protected:
  void SetUp() override {
    WorkerTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    setup(GetParam(), 1);
  }
  void setup(Forward fwd, uint32_t n_workers) {
    for (auto& x : w6_) free_worker6_pending(*x);
    w6_.clear();
    build(fwd);
    if (n_workers > 1) build_workers(fwd, n_workers, 1024, 1024, 16, 64, 1024);
    if (HasFatalFailure()) return;
    Shared& s = sh();
    s.ports[0].has_ip6 = true;
    std::copy(kPort6.begin(), kPort6.end(), s.ports[0].ip6);
    s.ports[1].has_ip6 = true;
    std::copy(kPortB6.begin(), kPortB6.end(), s.ports[1].ip6);
    v6_ = std::make_unique<Shared6>();
    std::string err;
    ASSERT_TRUE(init_v6(s, *v6_, uniq("t6_"), 64, 256, 60 * s.tsc_hz, {kLocal6}, 0, &err)) << err;
    for (uint32_t i = 0; i < n_workers; ++i) {
      w6_.push_back(std::make_unique<Worker6>());
      init_worker6(w(i), *w6_.back(), 256);
    }
    put(table_, vsvc(ip6(kVip6), 8080, Protocol::kTcp, {rs(ip6(kB16), 80), rs(ip6(kB26), 80)}));
    put(table_, vsvc(ip6(kVip6), 5353, Protocol::kUdp, {rs(ip6(kB16), 53)}));
    put(table_, vsvc(ip6(kVip6), 81, Protocol::kTcp, {rs(ip6(kB36), 80)}));
    put(table_, vsvc(ip6(kVipEmpty6), 80, Protocol::kTcp, {}));
    put(table_, vsvc(ip6(kVipEmpty6), 53, Protocol::kUdp, {}));
    ASSERT_TRUE(pub_->apply(table_, cp::TableDiff{}, true, &err)) << err;
    v6_->neigh.update(kClient6.data(), kClientMac.data(), kT0);
    v6_->neigh.update(kB16.data(), kB1Mac.data(), kT0);
    v6_->neigh.update(kB26.data(), kB2Mac.data(), kT0);
  }
  void TearDown() override {
    for (auto& x : w6_) free_worker6_pending(*x);
    WorkerTest::TearDown();
    w6_.clear();
    v6_.reset();
  }
  bool fnat() const { return GetParam() == Forward::kFnat; }

  Bytes client_pkt(uint8_t proto, uint16_t cport, uint16_t vport, uint8_t flags = kTcpSyn,
                   const Addr6& vip = kVip6, size_t payload = 0) {
    Frame6 s;
    s.dmac = kPortMac[0];
    s.smac = kClientMac;
    s.src = kClient6;
    s.dst = vip;
    s.next = proto;
    s.l4 = proto == kProtoTcp ? tcp6(cport, vport, flags, payload) : udp6(cport, vport, payload);
    Bytes f = build6(s);
    fix_cksum6(f, 54, proto, proto == kProtoTcp ? 16 : 6);
    return f;
  }
  Bytes backend_pkt(uint8_t proto, const Addr6& b, const MacAddr& bmac, uint16_t bport, const Addr6& to,
                    uint16_t to_port, uint8_t flags = kTcpSyn | kTcpAck, size_t payload = 0) {
    Frame6 s;
    s.dmac = kPortMac[1];
    s.smac = bmac;
    s.src = b;
    s.dst = to;
    s.next = proto;
    s.l4 = proto == kProtoTcp ? tcp6(bport, to_port, flags, payload) : udp6(bport, to_port, payload);
    Bytes f = build6(s);
    fix_cksum6(f, 54, proto, proto == kProtoTcp ? 16 : 6);
    return f;
  }
  // A forwarded frame: parses, checksum exactly as from scratch.
  Parsed6 expect_valid6(const Frame& f, const char* what) {
    Parsed6 p;
    EXPECT_TRUE(parse_ipv6(f.data(), f.size(), &p)) << what << ": " << drop_reason_name(p.drop);
    const Bytes l4(f.begin() + p.l4_off, f.end());
    EXPECT_TRUE(cksum6_matches(addr_at(p.src), addr_at(p.dst), p.proto, l4, p.proto == kProtoTcp ? 16 : 6))
        << what << ": L4 checksum over the IPv6 pseudo header";
    return p;
  }

  std::unique_ptr<Shared6> v6_;
  std::vector<std::unique_ptr<Worker6>> w6_;
};

TEST_P(WorkerIpv6FwdTest, TcpRoundTripAndReuse) {
  const Frame out = one_out(client_pkt(kProtoTcp, 40000, 8080, kTcpSyn, kVip6, 12), 0, 1);
  ASSERT_FALSE(out.empty());
  const Parsed6 p = expect_valid6(out, "SYN to the backend");
  const Addr6 dst = addr_at(p.dst), src = addr_at(p.src);
  ASSERT_TRUE(dst == kB16 || dst == kB26);
  EXPECT_TRUE(mac_is(out.data(), dst == kB16 ? kB1Mac : kB2Mac));
  EXPECT_TRUE(mac_is(out.data() + 6, kPortMac[1]));
  EXPECT_EQ(p.dport, 80);
  EXPECT_EQ(p.hop_limit, 63) << "hop limit decremented";
  if (fnat()) {
    EXPECT_EQ(src, kLocal6);
    EXPECT_NE(p.sport, 40000);
  } else {
    EXPECT_EQ(src, kClient6);
    EXPECT_EQ(p.sport, 40000);
  }
  // The backend's answer goes back to the client as from the VIP.
  const Frame back = one_out(backend_pkt(kProtoTcp, dst, dst == kB16 ? kB1Mac : kB2Mac, 80, src, p.sport,
                                         kTcpSyn | kTcpAck, 5), 1, 0);
  ASSERT_FALSE(back.empty());
  const Parsed6 q = expect_valid6(back, "SYN-ACK to the client");
  EXPECT_EQ(addr_at(q.src), kVip6);
  EXPECT_EQ(addr_at(q.dst), kClient6);
  EXPECT_EQ(q.sport, 8080);
  EXPECT_EQ(q.dport, 40000);
  EXPECT_TRUE(mac_is(back.data(), kClientMac));
  // The connection is reused: the ACK goes to the same backend and port.
  for (int i = 0; i < 3; ++i) {
    const Frame again = one_out(client_pkt(kProtoTcp, 40000, 8080, kTcpAck, kVip6, 100), 0, 1);
    ASSERT_FALSE(again.empty());
    const Parsed6 r = expect_valid6(again, "ACK");
    EXPECT_EQ(addr_at(r.dst), dst);
    EXPECT_EQ(addr_at(r.src), src);
    EXPECT_EQ(r.sport, p.sport);
  }
  EXPECT_EQ(w6_[0]->conns.size(), 1u);
  EXPECT_EQ(w(0).counters.new_flows.load(), 1u);
  EXPECT_EQ(w(0).conns.size(), 0u) << "the IPv4 table is not used";
  // A second client port: a second connection, spread by rr to the other backend.
  const Frame out2 = one_out(client_pkt(kProtoTcp, 40001, 8080), 0, 1);
  ASSERT_FALSE(out2.empty());
  const Parsed6 p2 = expect_valid6(out2, "second SYN");
  EXPECT_NE(addr_at(p2.dst), dst);
  EXPECT_EQ(w6_[0]->conns.size(), 2u);
  EXPECT_EQ(total_drops(), 0u) << drop_summary();
}

TEST_P(WorkerIpv6FwdTest, UdpRoundTrip) {
  const Frame out = one_out(client_pkt(kProtoUdp, 5000, 5353, 0, kVip6, 33), 0, 1);
  ASSERT_FALSE(out.empty());
  const Parsed6 p = expect_valid6(out, "UDP to the backend");
  EXPECT_EQ(addr_at(p.dst), kB16);
  EXPECT_EQ(p.dport, 53);
  const Frame back = one_out(backend_pkt(kProtoUdp, kB16, kB1Mac, 53, addr_at(p.src), p.sport, 0, 40), 1, 0);
  ASSERT_FALSE(back.empty());
  const Parsed6 q = expect_valid6(back, "UDP reply");
  EXPECT_EQ(addr_at(q.src), kVip6);
  EXPECT_EQ(q.sport, 5353);
  EXPECT_EQ(q.dport, 5000);
  EXPECT_EQ(total_drops(), 0u) << drop_summary();
}

TEST_P(WorkerIpv6FwdTest, RejectWithoutEndpoints) {
  for (uint8_t proto : {kProtoTcp, kProtoUdp}) {
    const Bytes in = client_pkt(proto, 41000, proto == kProtoTcp ? 80 : 53, kTcpSyn, kVipEmpty6, 10);
    const Frame out = one_out(in, 0, 0);
    ASSERT_FALSE(out.empty());
    Parsed6 p;
    ASSERT_TRUE(parse_ipv6(out.data(), out.size(), &p)) << drop_reason_name(p.drop);
    EXPECT_EQ(p.proto, kProtoIcmp6);
    EXPECT_EQ(p.dport, (kIcmp6DestUnreach << 8) | 4) << "port unreachable";
    EXPECT_EQ(addr_at(p.src), kVipEmpty6);
    EXPECT_EQ(addr_at(p.dst), kClient6);
    EXPECT_TRUE(mac_is(out.data(), kClientMac));
    const Bytes l4(out.begin() + p.l4_off, out.end());
    EXPECT_TRUE(cksum6_matches(kVipEmpty6, kClient6, kProtoIcmp6, l4, 2));
    EXPECT_EQ(l4.size(), 8 + in.size() - 14) << "quotes the whole packet";
  }
  EXPECT_EQ(w(0).counters.icmp_unreach_sent.load(), 2u);
  // A port the VIP does not serve: counted.
  rx(client_pkt(kProtoTcp, 41000, 9999), 0);
  expect_nothing_out("VIP without that port");
  EXPECT_EQ(drops(kVipNoPort), 1u);
}

// ---- ICMPv6 errors about a flow (docs/reliability.md "ICMP error translation") ----

// An ICMPv6 error from `from` to `to` quoting `quoted` (an IPv6 packet from
// its fixed header on), received from `smac` on port `dmac`.
Bytes icmp6_err(const MacAddr& smac, const MacAddr& dmac, const Addr6& from, const Addr6& to, uint8_t type,
                uint8_t code, uint32_t param, const Bytes& quoted, uint8_t hop = 64) {
  Frame6 s;
  s.dmac = dmac;
  s.smac = smac;
  s.src = from;
  s.dst = to;
  s.next = kProtoIcmp6;
  s.hop_limit = hop;
  s.l4 = {type, code, 0, 0, static_cast<uint8_t>(param >> 24), static_cast<uint8_t>(param >> 16),
          static_cast<uint8_t>(param >> 8), static_cast<uint8_t>(param)};
  s.l4.insert(s.l4.end(), quoted.begin(), quoted.end());
  Bytes f = build6(s);
  fix_cksum6(f, 54, kProtoIcmp6, 2);
  return f;
}
Bytes l3_of(const Bytes& frame, size_t max = SIZE_MAX) {
  const size_t n = std::min(frame.size() - 14, max);
  return Bytes(frame.begin() + 14, frame.begin() + 14 + static_cast<long>(n));
}
const Addr6 kPodRouter6 = a6({0xfd00, 0x244, 0, 0, 0, 0, 0, 0xfe});
const MacAddr kRouterMac{0x02, 0xee, 0, 0, 0, 0xfe};

// Checks an error that came out: outer from/to, hop limit, type/code/param
// kept, ICMPv6 checksum (reference), and the quote equal to `want` (the
// packet as that side sent or received it) except its hop limit, with its
// L4 checksum also verified from scratch where the quote holds it.
void expect_translated(const Frame& out, const Addr6& from, const Addr6& to, uint8_t type, uint8_t code,
                       uint32_t param, const Bytes& want, uint8_t want_hop, size_t quote_len) {
  Parsed6 p;
  ASSERT_TRUE(parse_ipv6(out.data(), out.size(), &p)) << drop_reason_name(p.drop);
  ASSERT_EQ(p.proto, kProtoIcmp6);
  EXPECT_EQ(addr_at(p.src), from);
  EXPECT_EQ(addr_at(p.dst), to);
  EXPECT_EQ(p.hop_limit, 63);
  const Bytes msg(out.begin() + p.l4_off, out.end());
  ASSERT_EQ(msg.size(), 8 + quote_len) << "length as received";
  EXPECT_LE(out.size() - 14, kIp6MinMtu);
  EXPECT_EQ(msg[0], type);
  EXPECT_EQ(msg[1], code);
  EXPECT_EQ((uint32_t{msg[4]} << 24) | (uint32_t{msg[5]} << 16) | (uint32_t{msg[6]} << 8) | msg[7], param)
      << "MTU / pointer passed on unchanged";
  EXPECT_TRUE(cksum6_matches(from, to, kProtoIcmp6, msg, 2)) << "ICMPv6 checksum over the new pseudo header";
  Bytes quote(msg.begin() + 8, msg.end());
  ASSERT_LE(quote.size(), want.size());
  EXPECT_EQ(quote[7], want_hop) << "the quoted hop limit is the translated packet's";
  quote[7] = want[7];
  EXPECT_TRUE(std::equal(quote.begin(), quote.end(), want.begin()))
      << "the quote is the packet as the other side knows it";
  const uint8_t proto = quote[6];
  const size_t coff = proto == kProtoTcp ? 16 : 6;
  const size_t plen = (size_t{quote[4]} << 8) | quote[5];
  if (quote.size() == 40 + plen) {  // whole packet quoted: its checksum from scratch
    const Bytes l4(quote.begin() + 40, quote.end());
    EXPECT_TRUE(cksum6_matches(addr_at(quote.data() + 8), addr_at(quote.data() + 24), proto, l4, coff))
        << "quoted L4 checksum";
  }
}

TEST_P(WorkerIpv6FwdTest, PacketTooBigFromPodSideReachesClient) {
  for (uint8_t proto : {kProtoTcp, kProtoUdp}) {
    const uint16_t vport = proto == kProtoTcp ? 8080 : 5353;
    const Bytes syn = client_pkt(proto, 40100, vport, kTcpSyn, kVip6, 1400);
    const Frame out = one_out(syn, 0, 1);
    ASSERT_FALSE(out.empty());
    Parsed6 p;
    ASSERT_TRUE(parse_ipv6(out.data(), out.size(), &p));
    // A router on the pod side says the packet vipd sent is too big; the
    // error quotes that packet (as much as fits in 1280 bytes).
    const Bytes quote = l3_of(out, kIp6MinMtu - 48);
    const Bytes err = icmp6_err(kRouterMac, kPortMac[1], kPodRouter6, addr_at(p.src), kIcmp6PacketTooBig, 0, 1300,
                                quote);
    ASSERT_LE(err.size() - 14, kIp6MinMtu);
    const Frame back = one_out(err, 1, 0);
    ASSERT_FALSE(back.empty()) << drop_summary();
    EXPECT_TRUE(mac_is(back.data(), kClientMac));
    EXPECT_TRUE(mac_is(back.data() + 6, kPortMac[0]));
    // The client gets it from the VIP, quoting its own packet (VIP and
    // service port, its port; hop limit as vipd sent it).
    expect_translated(back, kVip6, kClient6, kIcmp6PacketTooBig, 0, 1300, l3_of(syn), 63, quote.size());
  }
  EXPECT_EQ(total_drops(), 0u) << drop_summary();
}

TEST_P(WorkerIpv6FwdTest, ErrorsFromTheClientSideReachTheBackend) {
  const Frame out = one_out(client_pkt(kProtoUdp, 5100, 5353, 0, kVip6, 20), 0, 1);
  ASSERT_FALSE(out.empty());
  Parsed6 p;
  ASSERT_TRUE(parse_ipv6(out.data(), out.size(), &p));
  const Bytes reply = backend_pkt(kProtoUdp, kB16, kB1Mac, 53, addr_at(p.src), p.sport, 0, 30);
  const Frame back = one_out(reply, 1, 0);
  ASSERT_FALSE(back.empty());
  // The client's port is closed now: it says so to the VIP, quoting the reply.
  const Bytes err = icmp6_err(kClientMac, kPortMac[0], kClient6, kVip6, kIcmp6DestUnreach, 4, 0, l3_of(back));
  const Frame to_b = one_out(err, 0, 1);
  ASSERT_FALSE(to_b.empty()) << drop_summary();
  EXPECT_TRUE(mac_is(to_b.data(), kB1Mac));
  // To the backend as the flow's packets reach it: from the local address
  // (fnat) or the client (nat), quoting the backend's own reply.
  expect_translated(to_b, fnat() ? kLocal6 : kClient6, kB16, kIcmp6DestUnreach, 4, 0, l3_of(reply), 63,
                    back.size() - 14);
  // Time exceeded and parameter problem, the TCP quote cut after the ports.
  const Frame syn_out = one_out(client_pkt(kProtoTcp, 40200, 8080), 0, 1);
  ASSERT_FALSE(syn_out.empty());
  ASSERT_TRUE(parse_ipv6(syn_out.data(), syn_out.size(), &p));
  for (uint8_t type : {kIcmp6TimeExceeded, kIcmp6ParamProblem}) {
    const Bytes q = l3_of(syn_out, 40 + 8);
    const Frame o = one_out(icmp6_err(kRouterMac, kPortMac[1], kPodRouter6, addr_at(p.src), type, 0, 7, q), 1, 0);
    ASSERT_FALSE(o.empty()) << drop_summary();
    Parsed6 e;
    ASSERT_TRUE(parse_ipv6(o.data(), o.size(), &e));
    const Bytes msg(o.begin() + e.l4_off, o.end());
    EXPECT_TRUE(cksum6_matches(kVip6, kClient6, kProtoIcmp6, msg, 2));
    EXPECT_EQ(addr_at(msg.data() + 8 + 8), kClient6);
    EXPECT_EQ(addr_at(msg.data() + 8 + 24), kVip6);
    EXPECT_EQ((msg[48] << 8) | msg[49], 40200);
    EXPECT_EQ((msg[50] << 8) | msg[51], 8080);
  }
  EXPECT_EQ(total_drops(), 0u) << drop_summary();
}

TEST_P(WorkerIpv6FwdTest, UnmatchedIcmp6ErrorsAreCounted) {
  const Frame out = one_out(client_pkt(kProtoTcp, 40300, 8080), 0, 1);
  ASSERT_FALSE(out.empty());
  Parsed6 p;
  ASSERT_TRUE(parse_ipv6(out.data(), out.size(), &p));
  const Addr6 l = addr_at(p.src);
  // Quoting a flow vipd does not have (another port).
  Bytes other = l3_of(out);
  other[40 + 0] ^= 0x55;
  rx(icmp6_err(kRouterMac, kPortMac[1], kPodRouter6, l, kIcmp6PacketTooBig, 0, 1300, other), 1);
  expect_nothing_out("no such flow");
  EXPECT_EQ(drops(kIcmpErrorNoConn), 1u);
  // The right flow, from the wrong side (the client's port).
  rx(icmp6_err(kClientMac, kPortMac[0], kClient6, l, kIcmp6PacketTooBig, 0, 1300, l3_of(out)), 0);
  expect_nothing_out("wrong side");
  EXPECT_EQ(drops(kIcmpErrorNoConn), 2u);
  // A quote not addressed from the error's destination.
  Bytes wrong_src = l3_of(out);
  wrong_src[8 + 15] ^= 1;
  rx(icmp6_err(kRouterMac, kPortMac[1], kPodRouter6, l, kIcmp6PacketTooBig, 0, 1300, wrong_src), 1);
  expect_nothing_out("quote from elsewhere");
  EXPECT_EQ(drops(kIcmpErrorNoConn), 3u);
  // A quote too short for the ports.
  rx(icmp6_err(kRouterMac, kPortMac[1], kPodRouter6, l, kIcmp6PacketTooBig, 0, 1300, l3_of(out, 44)), 1);
  expect_nothing_out("short quote");
  EXPECT_EQ(drops(kBadL4Header), 1u);
  // A bad ICMPv6 checksum.
  Bytes bad = icmp6_err(kRouterMac, kPortMac[1], kPodRouter6, l, kIcmp6PacketTooBig, 0, 1300, l3_of(out));
  bad[54 + 2] ^= 1;
  rx(bad, 1);
  expect_nothing_out("bad checksum");
  EXPECT_EQ(drops(kIcmp6BadChecksum), 1u);
  // Hop limit 1: not forwarded.
  rx(icmp6_err(kRouterMac, kPortMac[1], kPodRouter6, l, kIcmp6PacketTooBig, 0, 1300, l3_of(out), 1), 1);
  expect_nothing_out("hop limit 1");
  EXPECT_EQ(drops(kTtlExceeded), 1u);
  // An error to a VIP quoting no reply of vipd's.
  rx(icmp6_err(kClientMac, kPortMac[0], kClient6, kVip6, kIcmp6DestUnreach, 4, 0, l3_of(out)), 0);
  expect_nothing_out("to the VIP, quoting no reply");
  EXPECT_EQ(drops(kIcmpErrorNoConn), 4u);
}

TEST_P(WorkerIpv6FwdTest, NextHopResolvedOverNdp) {
  // kB36 is not in the cache: the SYN waits, a Neighbor Solicitation goes out.
  rx(client_pkt(kProtoTcp, 42000, 81), 0);
  auto out = tx(1);
  ASSERT_EQ(out.size(), 1u) << drop_summary();
  Parsed6 p;
  ASSERT_TRUE(parse_ipv6(out[0].data(), out[0].size(), &p));
  NdInfo nd;
  ASSERT_EQ(parse_nd(out[0].data(), p, &nd), kNumDropReasons) << "a valid NS";
  EXPECT_EQ(nd.type, kNdNeighborSolicit);
  EXPECT_EQ(addr_at(nd.target), kB36);
  EXPECT_EQ(addr_at(p.dst), sol_node(kB36));
  EXPECT_EQ(addr_at(p.src), kPortB6);
  EXPECT_EQ(w6_[0]->n_pending, 1u);
  // The NA teaches the MAC; the parked SYN leaves with it.
  const MacAddr b3mac{0x02, 0xb0, 0, 0, 0, 0x33};
  Frame6 na;
  na.dmac = kPortMac[1];
  na.smac = b3mac;
  na.src = kB36;
  na.dst = kPortB6;
  na.next = kProtoIcmp6;
  na.hop_limit = 255;
  na.l4 = ns6(kB36, &b3mac);
  na.l4[0] = kNdNeighborAdvert;
  na.l4[4] = 0x60;  // solicited, override
  na.l4[24] = 2;    // target link-layer address option
  Bytes naf = build6(na);
  fix_cksum6(naf, 54, kProtoIcmp6, 2);
  rx(naf, 1);
  service_pending(w(0));
  flush_tx(w(0));
  out = tx(1);
  ASSERT_EQ(out.size(), 1u) << drop_summary();
  EXPECT_TRUE(mac_is(out[0].data(), b3mac));
  const Parsed6 fwd = expect_valid6(out[0], "the parked SYN");
  EXPECT_EQ(addr_at(fwd.dst), kB36);
  EXPECT_EQ(w6_[0]->n_pending, 0u);
  // Aged out (past 4 x the reachable time): solicited again, the packet parked.
  w(0).now = kT0 + 300 * sh().tsc_hz;
  rx(client_pkt(kProtoTcp, 42000, 81, kTcpAck), 0);
  out = tx(1);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_TRUE(parse_ipv6(out[0].data(), out[0].size(), &p));
  EXPECT_EQ(p.proto, kProtoIcmp6);
  EXPECT_EQ(p.dport >> 8, kNdNeighborSolicit);
  // Nobody answers: dropped and counted after the give-up time.
  w(0).now += 2 * sh().tsc_hz;
  service_pending(w(0));
  flush_tx(w(0));
  tx(1);
  EXPECT_EQ(w6_[0]->n_pending, 0u);
  EXPECT_EQ(drops(kNeighUnresolved), 1u);
}

// ---- Off-link IPv6 next hops (--port-ipv6 "ADDR/PREFIX via GATEWAY") ----

const Addr6 kFar6 = a6({0xfd00, 0x99, 0, 0, 0, 0, 0, 0x10});  // behind the router
const Addr6 kGw6 = a6({0xfd00, 0x10, 0, 0, 0, 0, 0, 0xfe});
const Addr6 kGwLl6 = a6({0xfe80, 0, 0, 0, 0, 0, 0, 0xfe});
const MacAddr kGwMac{0x02, 0x9e, 0, 0, 0, 0xfe};

class WorkerIpv6GatewayTest : public WorkerIpv6FwdTest {
 protected:
  // A SYN from `client` (arriving from the router's MAC) to the VIP's TCP
  // 8080, forwarded to a backend; returns the backend's SYN-ACK back.
  Bytes syn_and_reply(const Addr6& client, uint16_t cport) {
    Frame6 s;
    s.dmac = kPortMac[0];
    s.smac = kGwMac;
    s.src = client;
    s.dst = kVip6;
    s.next = kProtoTcp;
    s.l4 = tcp6(cport, 8080, kTcpSyn);
    Bytes f = build6(s);
    fix_cksum6(f, 54, kProtoTcp, 16);
    const Frame out = one_out(f, 0, 1);
    if (out.empty()) {
      ADD_FAILURE() << "SYN not forwarded: " << drop_summary();
      return {};
    }
    const Parsed6 p = expect_valid6(out, "SYN to the backend");
    const Addr6 b = addr_at(p.dst);
    return backend_pkt(kProtoTcp, b, b == kB16 ? kB1Mac : kB2Mac, 80, addr_at(p.src), p.sport);
  }
  void set_gateway(const Addr6& gw) {
    v6_->port_has_gw[0] = true;
    std::copy(gw.begin(), gw.end(), v6_->port_gw[0]);
  }
  // The router's Neighbor Advertisement for `target` (its address), to the port.
  Bytes na_from_router(const Addr6& target) {
    Frame6 na;
    na.dmac = kPortMac[0];
    na.smac = kGwMac;
    na.src = target;
    na.dst = kPort6;
    na.next = kProtoIcmp6;
    na.hop_limit = 255;
    na.l4 = ns6(target, &kGwMac);
    na.l4[0] = kNdNeighborAdvert;
    na.l4[4] = 0xe0;  // router, solicited, override
    na.l4[24] = 2;    // target link-layer address option
    Bytes f = build6(na);
    fix_cksum6(f, 54, kProtoIcmp6, 2);
    return f;
  }
  // The gateway is solicited (and the reply parked) until its NA; then the
  // reply leaves to the router's MAC, still addressed to `client`.
  void expect_via_gateway(const Addr6& gw, const Addr6& client, uint16_t cport) {
    const Bytes reply = syn_and_reply(client, cport);
    ASSERT_FALSE(reply.empty());
    rx(reply, 1);
    auto out = tx(0);
    ASSERT_EQ(out.size(), 1u) << drop_summary();
    Parsed6 p;
    ASSERT_TRUE(parse_ipv6(out[0].data(), out[0].size(), &p));
    NdInfo nd;
    ASSERT_EQ(parse_nd(out[0].data(), p, &nd), kNumDropReasons) << "a valid NS";
    EXPECT_EQ(nd.type, kNdNeighborSolicit);
    EXPECT_EQ(addr_at(nd.target), gw) << "the gateway is solicited, not the client";
    EXPECT_EQ(addr_at(p.dst), sol_node(gw));
    EXPECT_EQ(addr_at(p.src), kPort6);
    EXPECT_EQ(w6_[0]->n_pending, 1u) << "the reply is parked";
    EXPECT_TRUE(tx(1).empty());
    const uint64_t learned = w(0).counters.nd_learned;
    rx(na_from_router(gw), 0);
    EXPECT_EQ(w(0).counters.nd_learned, learned + 1);
    service_pending(w(0));
    flush_tx(w(0));
    out = tx(0);
    ASSERT_EQ(out.size(), 1u) << drop_summary();
    EXPECT_TRUE(mac_is(out[0].data(), kGwMac)) << "to the router's MAC";
    EXPECT_TRUE(mac_is(out[0].data() + 6, kPortMac[0]));
    const Parsed6 fwd = expect_valid6(out[0], "the parked SYN-ACK");
    EXPECT_EQ(addr_at(fwd.dst), client);
    EXPECT_EQ(addr_at(fwd.src), kVip6);
    EXPECT_EQ(fwd.dport, cport);
    EXPECT_EQ(w6_[0]->n_pending, 0u);
    // The next packet finds the router's MAC at once.
    rx(reply, 1);
    out = tx(0);
    ASSERT_EQ(out.size(), 1u) << drop_summary();
    EXPECT_TRUE(mac_is(out[0].data(), kGwMac));
  }
};

TEST_P(WorkerIpv6GatewayTest, OffLinkWithoutGatewayIsNoRoute) {
  const Bytes reply = syn_and_reply(kFar6, 43000);
  ASSERT_FALSE(reply.empty());
  rx(reply, 1);
  expect_nothing_out("no gateway: the off-link client is unreachable");
  EXPECT_EQ(drops(kNoRoute), 1u);
}

TEST_P(WorkerIpv6GatewayTest, OffLinkGoesToTheGatewayOnLinkStaysDirect) {
  set_gateway(kGw6);
  expect_via_gateway(kGw6, kFar6, 43000);
  // An on-link client (kClient6, in fd00:10::/64) is still sent to directly.
  const Bytes reply = syn_and_reply(kClient6, 43001);
  ASSERT_FALSE(reply.empty());
  const Frame out = one_out(reply, 1, 0);
  ASSERT_FALSE(out.empty()) << drop_summary();
  EXPECT_TRUE(mac_is(out.data(), kClientMac)) << "on-link: the client's own MAC";
  EXPECT_EQ(drops(kNoRoute), 0u);
}

TEST_P(WorkerIpv6GatewayTest, PrefixLengthDecidesOnLink) {
  // With a /32 (fd00:10::/32), fd00:10:55::/64 beside the port's /64 is
  // on-link: its hosts are solicited themselves, not the gateway.
  set_gateway(kGw6);
  v6_->port_prefix[0] = 32;
  const Addr6 near = a6({0xfd00, 0x10, 0x55, 0, 0, 0, 0, 0x7});
  const Bytes reply = syn_and_reply(near, 43002);
  ASSERT_FALSE(reply.empty());
  rx(reply, 1);
  auto out = tx(0);
  ASSERT_EQ(out.size(), 1u) << drop_summary();
  Parsed6 p;
  ASSERT_TRUE(parse_ipv6(out[0].data(), out[0].size(), &p));
  NdInfo nd;
  ASSERT_EQ(parse_nd(out[0].data(), p, &nd), kNumDropReasons);
  EXPECT_EQ(addr_at(nd.target), near);
  // With a /64 it is off-link and goes through the gateway.
  v6_->port_prefix[0] = 64;
  free_worker6_pending(*w6_[0]);
  expect_via_gateway(kGw6, a6({0xfd00, 0x10, 0x55, 0, 0, 0, 0, 0x8}), 43003);
}

TEST_P(WorkerIpv6GatewayTest, LinkLocalGatewayResolvedOverNdp) {
  set_gateway(kGwLl6);
  expect_via_gateway(kGwLl6, kFar6, 43004);
  // A link-local destination is never sent to the gateway.
  const Bytes reply = syn_and_reply(a6({0xfe80, 0, 0, 0, 0, 0, 0, 0x77}), 43005);
  ASSERT_FALSE(reply.empty());
  rx(reply, 1);
  expect_nothing_out("a link-local client outside the port's prefix");
  EXPECT_EQ(drops(kNoRoute), 1u);
}

INSTANTIATE_TEST_SUITE_P(Modes, WorkerIpv6GatewayTest, ::testing::Values(Forward::kFnat, Forward::kNat),
                         [](const auto& i) { return std::string(i.param == Forward::kFnat ? "fnat" : "nat"); });

TEST_P(WorkerIpv6FwdTest, NsForLocalAndVipAddressesAnswered) {
  std::vector<Addr6> ours = {kVip6};
  if (fnat()) ours.push_back(kLocal6);
  for (const Addr6& t : ours) {
    Frame6 s;
    s.dmac = mcast_mac(sol_node(t));
    s.smac = kB1Mac;
    s.src = kB16;
    s.dst = sol_node(t);
    s.next = kProtoIcmp6;
    s.hop_limit = 255;
    s.l4 = ns6(t, &kB1Mac);
    Bytes f = build6(s);
    fix_cksum6(f, 54, kProtoIcmp6, 2);
    const Frame out = one_out(f, 1, 1);
    ASSERT_EQ(out.size(), 86u);
    Parsed6 p;
    ASSERT_TRUE(parse_ipv6(out.data(), out.size(), &p));
    NdInfo nd;
    ASSERT_EQ(parse_nd(out.data(), p, &nd), kNumDropReasons);
    EXPECT_EQ(nd.type, kNdNeighborAdvert);
    EXPECT_EQ(addr_at(nd.target), t);
  }
}

TEST_P(WorkerIpv6FwdTest, EndpointRemovalExpiresConnections) {
  const Frame out = one_out(client_pkt(kProtoUdp, 5001, 5353), 0, 1);
  ASSERT_FALSE(out.empty());
  // The only backend goes: the next datagram finds no endpoint and is refused.
  put(table_, vsvc(ip6(kVip6), 5353, Protocol::kUdp, {}));
  std::string err;
  ASSERT_TRUE(pub_->apply(table_, cp::TableDiff{}, true, &err)) << err;
  const Frame rej = one_out(client_pkt(kProtoUdp, 5001, 5353), 0, 0);
  ASSERT_FALSE(rej.empty());
  EXPECT_EQ(w6_[0]->conns.size(), 0u);
  EXPECT_EQ(w(0).counters.icmp_unreach_sent.load(), 1u);
}

TEST_P(WorkerIpv6FwdTest, TwoWorkersRedirectToTheOwner) {
  setup(GetParam(), 2);
  if (HasFatalFailure()) return;
  serve_rings_ = true;
  uint32_t n_out = 0;
  for (uint16_t cport = 43000; cport < 43016; ++cport) {
    rx(client_pkt(kProtoTcp, cport, 8080), 0, cport % 2);
    auto o = tx(1);
    ASSERT_EQ(o.size(), 1u) << drop_summary(0) << " /" << drop_summary(1);
    const Parsed6 p = expect_valid6(o[0], "SYN");
    // The reply arrives at the other worker first: redirected to the owner.
    rx(backend_pkt(kProtoTcp, addr_at(p.dst), addr_at(p.dst) == kB16 ? kB1Mac : kB2Mac, 80, addr_at(p.src),
                   p.sport), 1, (cport + 1) % 2);
    auto b = tx(0);
    ASSERT_EQ(b.size(), 1u) << drop_summary(0) << " /" << drop_summary(1);
    // ICMPv6 errors about the flow, arriving at either worker, are
    // translated by the owner: packet too big from the pod side, port
    // unreachable from the client.
    rx(icmp6_err(kRouterMac, kPortMac[1], kPodRouter6, addr_at(p.src), kIcmp6PacketTooBig, 0, 1280, l3_of(o[0])), 1,
       cport % 2);
    auto e = tx(0);
    ASSERT_EQ(e.size(), 1u) << drop_summary(0) << " /" << drop_summary(1);
    rx(icmp6_err(kClientMac, kPortMac[0], kClient6, kVip6, kIcmp6DestUnreach, 4, 0, l3_of(b[0])), 0,
       (cport + 1) % 2);
    auto e2 = tx(1);
    ASSERT_EQ(e2.size(), 1u) << drop_summary(0) << " /" << drop_summary(1);
    n_out += 1;
  }
  EXPECT_EQ(n_out, 16u);
  EXPECT_EQ(w6_[0]->conns.size() + w6_[1]->conns.size(), 16u);
  EXPECT_EQ(drops_of_all_workers(), 0u);
}

// The explain mailbox (vipctl explain) for an IPv6 flow, asked as
// DpdkDataplane::explain asks it.
ExplainQuery query6(uint8_t proto, const Addr6& src, uint16_t sport, const Addr6& dst, uint16_t dport) {
  ExplainQuery q{};
  q.proto = proto;
  q.v6 = 1;
  q.sport = sport;
  q.dport = dport;
  std::copy(src.begin(), src.end(), q.src6);
  std::copy(dst.begin(), dst.end(), q.dst6);
  return q;
}
ExplainAnswer ask6(Worker& w, uint8_t proto, const Addr6& src, uint16_t sport, const Addr6& dst, uint16_t dport) {
  w.mailbox.q = query6(proto, src, sport, dst, dport);
  w.mailbox.req.store(w.mailbox.req.load() + 1);
  serve_mailbox(w);
  EXPECT_EQ(w.mailbox.done.load(), w.mailbox.req.load()) << "answered";
  return w.mailbox.a;
}

// explain predicts the backend a new IPv6 connection gets without moving the
// scheduler (the SYN then goes there), then reports the connection entry
// (backend; fnat: the local address and port) in both directions; the
// destination's counters (the per-backend metric series) count the flow.
TEST_P(WorkerIpv6FwdTest, ExplainAndDestCountersOfAnIpv6Flow) {
  ExplainAnswer a = ask6(w(0), kProtoTcp, kClient6, 40000, kVip6, 8080);
  EXPECT_TRUE(a.service_found);
  EXPECT_TRUE(a.vip_address);
  EXPECT_FALSE(a.conn_found);
  EXPECT_EQ(a.n_dests, 2u);
  EXPECT_EQ(a.n_weighted, 2u);
  ASSERT_GE(a.next_idx, 0);
  EXPECT_EQ(a.next_port, 80);
  const Addr6 predicted = addr_at(a.next_ip6);
  ASSERT_TRUE(predicted == kB16 || predicted == kB26);
  EXPECT_EQ(addr_at(ask6(w(0), kProtoTcp, kClient6, 40000, kVip6, 8080).next_ip6), predicted)
      << "explain does not move the scheduler";

  const Frame out = one_out(client_pkt(kProtoTcp, 40000, 8080, kTcpSyn, kVip6, 12), 0, 1);
  ASSERT_FALSE(out.empty());
  const Parsed6 p = expect_valid6(out, "SYN");
  EXPECT_EQ(addr_at(p.dst), predicted) << "the SYN goes where explain said";

  a = ask6(w(0), kProtoTcp, kClient6, 40000, kVip6, 8080);
  EXPECT_TRUE(a.conn_found);
  EXPECT_FALSE(a.conn_reply);
  EXPECT_TRUE(a.conn_alive);
  EXPECT_EQ(a.state, static_cast<uint8_t>(ConnState::kSynRecv));
  EXPECT_EQ(addr_at(a.conn_dest_ip6), predicted);
  EXPECT_EQ(a.conn_dest_port, 80);
  EXPECT_GT(a.conn_expires_in_tsc, 0u);
  if (fnat()) {
    EXPECT_EQ(addr_at(a.conn_local_ip6), kLocal6);
    EXPECT_EQ(a.conn_local_port, p.sport);
  } else {
    EXPECT_EQ(addr_at(a.conn_local_ip6), Addr6{}) << "nat: no local address of its own";
  }
  // The reply direction: backend -> (local or client) address.
  a = ask6(w(0), kProtoTcp, predicted, 80, addr_at(p.src), p.sport);
  EXPECT_TRUE(a.conn_found);
  EXPECT_TRUE(a.conn_reply);
  EXPECT_FALSE(a.service_found);
  EXPECT_EQ(addr_at(a.conn_dest_ip6), predicted);
  // Not a VIP, and a VIP's other port.
  a = ask6(w(0), kProtoTcp, kClient6, 40000, kB36, 8080);
  EXPECT_FALSE(a.service_found || a.vip_address || a.conn_found);
  a = ask6(w(0), kProtoTcp, kClient6, 40000, kVip6, 9999);
  EXPECT_FALSE(a.service_found);
  EXPECT_TRUE(a.vip_address);

  // SYN-ACK back, two ACKs with data: established.
  const MacAddr bmac = predicted == kB16 ? kB1Mac : kB2Mac;
  ASSERT_FALSE(one_out(backend_pkt(kProtoTcp, predicted, bmac, 80, addr_at(p.src), p.sport, kTcpSyn | kTcpAck, 5),
                       1, 0).empty());
  for (int i = 0; i < 2; ++i)
    ASSERT_FALSE(one_out(client_pkt(kProtoTcp, 40000, 8080, kTcpAck, kVip6, 100), 0, 1).empty());
  const int64_t slot = pub_->dest_slot(cp::ServiceKey{ip6(kVip6), 8080, Protocol::kTcp}, ip6(predicted), 80);
  ASSERT_GE(slot, 0);
  const DestCounters& dc = w(0).dest_counters[slot];
  EXPECT_EQ(dc.conns, 1u);
  EXPECT_EQ(dc.inpkts, 3u);
  EXPECT_EQ(dc.outpkts, 1u);
  EXPECT_EQ(dc.inbytes, (40u + 20 + 12) + 2 * (40u + 20 + 100));
  EXPECT_EQ(dc.outbytes, 40u + 20 + 5);
  EXPECT_EQ(dc.active, 1);
  EXPECT_EQ(dc.inactive, 0);
  const int64_t other =
      pub_->dest_slot(cp::ServiceKey{ip6(kVip6), 8080, Protocol::kTcp}, ip6(predicted == kB16 ? kB26 : kB16), 80);
  ASSERT_GE(other, 0);
  EXPECT_EQ(w(0).dest_counters[other].conns, 0u);
  EXPECT_EQ(total_drops(), 0u) << drop_summary();
}

// Two workers: explain asks the worker that owns the flow in the query's
// direction (explain_owner, as DpdkDataplane::explain does). A UDP flow to
// kVip6:5353 (one backend, kB16, whose address another worker owns than
// kClient6's): in nat mode its reply (kB16 -> client) belongs to the client's
// worker, in fnat mode to the local port's; the worker chosen from the
// reply's source would miss the connection.
TEST_P(WorkerIpv6FwdTest, ExplainAsksTheOwnerOfEitherDirection) {
  setup(GetParam(), 2);
  if (HasFatalFailure()) return;
  serve_rings_ = true;
  const uint32_t owner = flow_owner(fold6(kClient6.data()), 0, 2);
  ASSERT_NE(flow_owner(fold6(kB16.data()), 0, 2), owner) << "the test needs the two addresses on two workers";
  rx(client_pkt(kProtoUdp, 41000, 5353), 0, 1 - owner);  // arrives at the other worker: redirected
  auto out = tx(1);
  ASSERT_EQ(out.size(), 1u) << drop_summary(0) << " /" << drop_summary(1);
  const Parsed6 p = expect_valid6(out[0], "to the backend");
  ASSERT_EQ(addr_at(p.dst), kB16);
  EXPECT_EQ(addr_at(p.src), fnat() ? kLocal6 : kClient6);
  EXPECT_EQ(w6_[owner]->conns.size(), 1u);
  EXPECT_EQ(w6_[1 - owner]->conns.size(), 0u);
  const ExplainQuery fq = query6(kProtoUdp, kClient6, 41000, kVip6, 5353);
  EXPECT_EQ(explain_owner(sh(), fq), owner) << "client direction: the client's worker";
  ExplainAnswer a = ask6(w(explain_owner(sh(), fq)), kProtoUdp, kClient6, 41000, kVip6, 5353);
  EXPECT_TRUE(a.service_found);
  EXPECT_TRUE(a.conn_found);
  EXPECT_FALSE(a.conn_reply);
  const ExplainQuery rq = query6(kProtoUdp, kB16, 53, addr_at(p.src), p.sport);
  const uint32_t rowner = explain_owner(sh(), rq);
  EXPECT_EQ(rowner, fnat() ? p.sport % 2u : owner) << "reply direction: the reply's owner";
  a = ask6(w(rowner), kProtoUdp, kB16, 53, addr_at(p.src), p.sport);
  EXPECT_TRUE(a.conn_found) << "the reply's owner holds the connection";
  EXPECT_TRUE(a.conn_reply);
  EXPECT_EQ(addr_at(a.conn_dest_ip6), kB16);
  EXPECT_EQ(a.conn_dest_port, 53);
}

// Instructions per packet through process_burst + flush_tx, IPv6 next to
// IPv4 in the same harness (bursts of 32; building and reading back the
// frames not counted). Not a test: run by hand under callgrind, e.g.
//   valgrind --tool=callgrind --collect-atstart=no build/tests/unit/dataplane/dp_unit_tests \
//     --gtest_also_run_disabled_tests --gtest_filter='*DISABLED_InstructionsPerPacket*'
// and divide each dump (ipv4-est, ipv6-est, ipv4-new, ipv6-new) by 512.
TEST_P(WorkerIpv6FwdTest, DISABLED_InstructionsPerPacket) {
  constexpr unsigned kN = 512, kB = 32;
  init_worker6(w(0), *w6_[0], 2048);
  auto run = [&](const char* phase, auto make) {
    std::vector<Frame> frames;
    for (unsigned i = 0; i < kN; ++i) frames.push_back(make(i));
    if (RUNNING_ON_VALGRIND) CALLGRIND_ZERO_STATS;
    for (unsigned i = 0; i < kN; i += kB) {
      rte_mbuf* m[kB];
      for (unsigned k = 0; k < kB; ++k) m[k] = mbuf_of(frames[i + k], 0);
      if (RUNNING_ON_VALGRIND) CALLGRIND_TOGGLE_COLLECT;
      process_burst(w(0), m, kB, false);
      flush_tx(w(0));
      if (RUNNING_ON_VALGRIND) CALLGRIND_TOGGLE_COLLECT;
      tx(1);
    }
    if (RUNNING_ON_VALGRIND) CALLGRIND_DUMP_STATS_AT(phase);
  };
  auto v4 = [&](uint16_t cport, uint8_t flags) {
    FrameSpec f = from_client(cport, flags);
    return build_frame(f);
  };
  // Connections 40000..40255 first (SYN), then established packets to them.
  for (uint16_t c = 0; c < 256; ++c) {
    rx(v4(static_cast<uint16_t>(40000 + c), kTcpSyn), 0);
    rx(client_pkt(kProtoTcp, static_cast<uint16_t>(40000 + c), 8080), 0);
  }
  tx(1);
  for (uint16_t c = 0; c < 256; ++c) {
    rx(v4(static_cast<uint16_t>(40000 + c), kTcpAck), 0);
    rx(client_pkt(kProtoTcp, static_cast<uint16_t>(40000 + c), 8080, kTcpAck), 0);
  }
  tx(1);
  run("ipv4-est", [&](unsigned i) { return v4(static_cast<uint16_t>(40000 + i % 256), kTcpAck); });
  run("ipv6-est", [&](unsigned i) { return client_pkt(kProtoTcp, static_cast<uint16_t>(40000 + i % 256), 8080, kTcpAck); });
  run("ipv4-new", [&](unsigned i) { return v4(static_cast<uint16_t>(50000 + i), kTcpSyn); });
  run("ipv6-new", [&](unsigned i) { return client_pkt(kProtoTcp, static_cast<uint16_t>(50000 + i), 8080); });
  EXPECT_EQ(total_drops(), 0u) << drop_summary();
}

INSTANTIATE_TEST_SUITE_P(Modes, WorkerIpv6FwdTest, ::testing::Values(Forward::kFnat, Forward::kNat),
                         [](const auto& info) { return info.param == Forward::kFnat ? "fnat" : "nat"; });

// Connection hand-over of IPv6 full-NAT flows (docs/gateway.md, "Hand-over"),
// as HandoverTest (worker_handover_test.cc) for IPv4: the same peers (known
// by their IPv4 addresses, MACs by ARP), ethertype 0x88b5 on the copy, the
// IPv6 packet unchanged; the receiver tells IPv6 by the version nibble.
class Handover6Test : public WorkerIpv6FwdTest {
 protected:
  void SetUp() override {
    WorkerIpv6FwdTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    set_handover_peers(sh());
  }
  // Opens a connection (SYN, SYN-ACK) through worker `wi` and returns the forwarded SYN.
  Frame open6(uint16_t cport, unsigned wi = 0) {
    rx(client_pkt(kProtoTcp, cport, 8080), 0, wi);
    const auto out = tx(1);
    EXPECT_EQ(out.size(), 1u) << drop_summary(wi);
    if (out.size() != 1) return Frame{};
    Parsed6 p;
    EXPECT_TRUE(parse_ipv6(out[0].data(), out[0].size(), &p));
    const Addr6 b = addr_at(p.dst);
    rx(backend_pkt(kProtoTcp, b, b == kB16 ? kB1Mac : kB2Mac, 80, addr_at(p.src), p.sport), 1, wi);
    EXPECT_EQ(tx(0).size(), 1u) << drop_summary(wi);
    return out[0];
  }
  Bytes ack6(uint16_t cport) { return client_pkt(kProtoTcp, cport, 8080, kTcpAck, kVip6, 10); }
};

TEST_P(Handover6Test, AckOfNoConnectionGoesToEveryPeerUnchanged) {
  const Bytes in = ack6(44000);
  rx(in, 0);
  expect_handed_over(w(), tx(1), in);
  if (HasFatalFailure()) return;
  EXPECT_EQ(w6_[0]->conns.size() + tx(0).size() + total_drops(), 0u) << "no connection, nothing else out; "
                                                                      << drop_summary();
  // FIN and RST too; not SYN+ACK nor SYN+FIN (they carry SYN).
  rx(client_pkt(kProtoTcp, 44001, 8080, kTcpFin | kTcpAck), 0);
  rx(client_pkt(kProtoTcp, 44002, 8080, kTcpRst), 0);
  EXPECT_EQ(tx(1).size(), 4u);
  rx(client_pkt(kProtoTcp, 44003, 8080, kTcpSyn | kTcpAck), 0);
  rx(client_pkt(kProtoTcp, 44004, 8080, kTcpSyn | kTcpFin), 0);
  expect_nothing_out("SYN-carrying non-starts");
  EXPECT_EQ(drops(kNoConn), 2u);
  EXPECT_EQ(w().counters.handovers.load(), 3u);
}

TEST_P(Handover6Test, SynAndUdpAreNotHandedOver) {
  const Frame syn = one_out(client_pkt(kProtoTcp, 44100, 8080), 0, 1);
  ASSERT_FALSE(syn.empty());
  EXPECT_EQ(addr_at(expect_valid6(syn, "SYN").src), kLocal6) << "a SYN starts a connection here";
  const Frame udp = one_out(client_pkt(kProtoUdp, 44101, 5353), 0, 1);
  ASSERT_FALSE(udp.empty());
  EXPECT_EQ(addr_at(expect_valid6(udp, "UDP").src), kLocal6) << "UDP without an entry starts a flow here";
  EXPECT_EQ(w().counters.handovers.load(), 0u);
  EXPECT_EQ(w6_[0]->conns.size(), 2u);
  EXPECT_EQ(total_drops(), 0u) << drop_summary();
}

TEST_P(Handover6Test, PeerFrameOfAConnectionHereIsForwardedAfterTheBurst) {
  const Frame syn = open6(44200);
  ASSERT_FALSE(syn.empty());
  const Parsed6 s = expect_valid6(syn, "SYN");
  rx(as_peer_frame(ack6(44200), kPeer1Mac), 1);
  expect_nothing_out("queued for serve_peer_frames");
  EXPECT_EQ(w().counters.handover_matched.load(), 1u);
  serve_handed_over(w());
  const auto out = tx(1);
  ASSERT_EQ(out.size(), 1u) << drop_summary();
  const Parsed6 p = expect_valid6(out[0], "forwarded peer frame");
  EXPECT_EQ(get16(&out[0][12]), 0x86dd);
  EXPECT_TRUE(mac_is(out[0].data(), addr_at(p.dst) == kB16 ? kB1Mac : kB2Mac));
  EXPECT_EQ(addr_at(p.src), kLocal6);
  EXPECT_EQ(p.sport, s.sport) << "the connection's own local port";
  EXPECT_EQ(addr_at(p.dst), addr_at(s.dst));
  EXPECT_EQ(p.hop_limit, 63);
  EXPECT_EQ(w().counters.handovers.load(), 0u);
  EXPECT_EQ(total_drops(), 0u) << drop_summary();
}

TEST_P(Handover6Test, PeerFrameOfNoConnectionIsDroppedNeverHandedOverAgain) {
  rx(as_peer_frame(ack6(44300), kPeer2Mac), 1);
  serve_handed_over(w());
  expect_nothing_out("not held here");
  EXPECT_EQ(drops(kHandoverNotHeld), 1u);
  // A peer's SYN (none sends one) or UDP starts nothing either.
  rx(as_peer_frame(client_pkt(kProtoTcp, 44301, 8080), kPeer2Mac), 1);
  rx(as_peer_frame(client_pkt(kProtoUdp, 44302, 5353), kPeer2Mac), 1);
  serve_handed_over(w());
  expect_nothing_out("a peer's SYN or UDP");
  EXPECT_EQ(drops(kHandoverNotHeld), 3u);
  // Held but for the other direction (a backend's packet): not the client's.
  const Parsed6 s = expect_valid6(open6(44303), "SYN");
  rx(as_peer_frame(backend_pkt(kProtoTcp, addr_at(s.dst), kB1Mac, 80, kLocal6, s.sport, kTcpAck), kPeer2Mac), 1);
  serve_handed_over(w());
  expect_nothing_out("the reply direction");
  EXPECT_EQ(drops(kHandoverNotHeld), 4u) << drop_summary();
  EXPECT_EQ(w().counters.handovers.load(), 0u);
  EXPECT_EQ(w().counters.handover_matched.load(), 0u);
  EXPECT_EQ(w6_[0]->conns.size(), 1u);
}

// A frame from a peer whose connection went between the burst and
// serve_peer_frames is dropped as not held, never handed over again.
TEST_P(Handover6Test, ConnectionGoneBeforeServeIsNotHandedOverAgain) {
  ASSERT_FALSE(open6(44350).empty());
  rx(as_peer_frame(ack6(44350), kPeer1Mac), 1);
  EXPECT_EQ(w().counters.handover_matched.load(), 1u);
  bool reply = false;
  Conn6* c = w6_[0]->conns.lookup(make_key6(kClient6.data(), 44350, kVip6.data(), 8080, kProtoTcp), &reply);
  ASSERT_NE(c, nullptr);
  w6_[0]->conns.remove(c);  // as an expiry between the burst and serve_peer_frames
  serve_handed_over(w());
  expect_nothing_out("gone");
  EXPECT_EQ(drops(kHandoverNotHeld), 1u) << drop_summary();
  EXPECT_EQ(w().counters.handovers.load(), 0u);
}

TEST_P(Handover6Test, FrameNotFromAPeerIsDropped) {
  ASSERT_FALSE(open6(44250).empty());
  const Bytes ack = ack6(44250);
  rx(as_peer_frame(ack, kB1Mac), 1);  // a resolved neighbour, but no peer
  Frame wrong_port = as_peer_frame(ack, kPeer1Mac);
  std::copy(kPortMac[0].begin(), kPortMac[0].end(), wrong_port.begin());
  rx(wrong_port, 0);  // a peer's MAC where no peer is
  rx(as_peer_frame(ack, MacAddr{0x02, 0xee, 0, 0, 0, 0x09}), 1);  // unknown MAC
  serve_handed_over(w());
  expect_nothing_out("not from a peer");
  EXPECT_EQ(drops(kHandoverNotPeer), 3u) << drop_summary();
  EXPECT_EQ(w().counters.handover_matched.load(), 0u);
  rx(as_peer_frame(ack, kPeer2Mac), 1);
  serve_handed_over(w());
  EXPECT_EQ(tx(1).size(), 1u) << drop_summary();
  EXPECT_EQ(w().counters.handover_matched.load(), 1u);
}

// One bucket per worker for both families.
TEST_P(Handover6Test, RateLimitedPerWorker) {
  sh().handover_tau = 1000 * 2;  // 3 at once, then one per 1000 TSC
  for (uint16_t i = 0; i < 5; ++i) rx(ack6(static_cast<uint16_t>(44400 + i)), 0);
  EXPECT_EQ(tx(1).size(), 6u) << "3 packets, 2 copies each";
  EXPECT_EQ(w().counters.handovers.load(), 3u);
  EXPECT_EQ(drops(kHandoverRateLimited), 2u);
  rx(build_frame(from_client(44410, kTcpAck)), 0);
  EXPECT_EQ(drops(kHandoverRateLimited), 3u) << "an IPv4 packet draws on the same bucket";
  w().now += 1000;
  rx(ack6(44411), 0);
  rx(ack6(44412), 0);
  EXPECT_EQ(w().counters.handovers.load(), 4u);
  EXPECT_EQ(drops(kHandoverRateLimited), 4u);
  EXPECT_EQ(tx(1).size(), 2u);
}

// Two workers: a peer's frame that reaches the worker that does not own its
// flow goes through the ring, still marked, and is held by the owner.
TEST_P(Handover6Test, TwoWorkersRedirectPeerFramesToTheOwner) {
  setup(GetParam(), 2);
  if (HasFatalFailure()) return;
  set_handover_peers(sh());
  serve_rings_ = true;
  for (uint16_t cport = 44500; cport < 44504; ++cport) {
    const unsigned owner = flow_owner(fold6(kClient6.data()), cport, 2);
    ASSERT_FALSE(open6(cport, owner).empty());
    rx(as_peer_frame(ack6(cport), kPeer1Mac), 1, 1 - owner);
    EXPECT_EQ(w(owner).counters.handover_matched.load(), cport - 44500 + 1u);
    serve_handed_over(w(owner));
    EXPECT_EQ(tx(1).size(), 1u) << drop_summary(0) << " /" << drop_summary(1);
  }
  // Not held anywhere: dropped by the owner, after the peer check on the receiver.
  rx(as_peer_frame(ack6(44510), kPeer1Mac), 1, 0);
  rx(as_peer_frame(ack6(44511), kPeer1Mac), 1, 1);
  expect_nothing_out("not held");
  EXPECT_EQ(drops(kHandoverNotHeld, 0) + drops(kHandoverNotHeld, 1), 2u);
  EXPECT_EQ(drops_of_all_workers(), 2u) << drop_summary(0) << " /" << drop_summary(1);
}

INSTANTIATE_TEST_SUITE_P(Fnat, Handover6Test, ::testing::Values(Forward::kFnat),
                         [](const auto&) { return std::string("fnat"); });


// ---- Re-steering, outlier ejection and the mid-flow RST over IPv6 ----
// (resteer.h, eject.h; worker6.cc) as resteer_test.cc and worker_conn_test.cc
// check them for IPv4: the same steps over the IPv6 tables, the SYN rebuilt
// as an IPv6 packet.

// A mid-flow segment of a connection whose backend was removed gets the RST
// the backend would have sent, from the VIP (seq = its ack); a mid-flow RST
// is dropped as dest_expired; the kept backend's connection goes on.
TEST_P(WorkerIpv6FwdTest, RemovedBackendMidFlowGetsRst) {
  const Frame a = one_out(client_pkt(kProtoTcp, 45000, 8080), 0, 1);
  const Frame b = one_out(client_pkt(kProtoTcp, 45001, 8080), 0, 1);
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  Parsed6 pa, pb;
  ASSERT_TRUE(parse_ipv6(a.data(), a.size(), &pa));
  ASSERT_TRUE(parse_ipv6(b.data(), b.size(), &pb));
  const Addr6 gone = addr_at(pa.dst), kept = addr_at(pb.dst);
  ASSERT_NE(gone, kept);
  one_out(client_pkt(kProtoTcp, 45000, 8080, kTcpAck), 0, 1);
  one_out(client_pkt(kProtoTcp, 45001, 8080, kTcpAck), 0, 1);
  const int64_t slot = pub_->dest_slot(cp::ServiceKey{ip6(kVip6), 8080, Protocol::kTcp}, ip6(gone), 80);
  ASSERT_GE(slot, 0);
  put(table_, vsvc(ip6(kVip6), 8080, Protocol::kTcp, {rs(ip6(kept), 80)}));
  std::string err;
  ASSERT_TRUE(pub_->apply(table_, cp::TableDiff{}, true, &err)) << err;
  // Mid-flow ACK with data on a: RST back to the client, from the VIP.
  Bytes mid = client_pkt(kProtoTcp, 45000, 8080, kTcpAck | kTcpPsh, kVip6, 3);
  put32(&mid[54 + 8], 0xabcdef01);  // ack
  fix_cksum6(mid, 54, kProtoTcp, 16);
  const Frame rst = one_out(mid, 0, 0);
  ASSERT_FALSE(rst.empty()) << drop_summary();
  const Parsed6 r = expect_valid6(rst, "RST for a removed backend");
  EXPECT_TRUE(mac_is(rst.data(), kClientMac));
  EXPECT_TRUE(mac_is(rst.data() + 6, kPortMac[0]));
  EXPECT_EQ(addr_at(r.src), kVip6);
  EXPECT_EQ(addr_at(r.dst), kClient6);
  EXPECT_EQ(r.sport, 8080);
  EXPECT_EQ(r.dport, 45000);
  EXPECT_EQ(r.tcp_flags, kTcpRst) << "ACK was set: plain RST";
  EXPECT_EQ(get32(rst.data() + r.l4_off + 4), 0xabcdef01u) << "seq = the segment's ack";
  EXPECT_EQ(r.l4_len, 20u);
  EXPECT_EQ(w(0).counters.rst_sent.load(), 1u);
  EXPECT_EQ(w6_[0]->conns.size(), 1u) << "a's connection removed, b's kept";
  EXPECT_EQ(w(0).dest_counters[slot].active, 0);
  EXPECT_EQ(w(0).dest_counters[slot].inactive, 0);
  // b's connection (on the kept backend) is unaffected.
  const Frame bout = one_out(client_pkt(kProtoTcp, 45001, 8080, kTcpAck), 0, 1);
  ASSERT_FALSE(bout.empty());
  EXPECT_EQ(addr_at(bout.data() + 38), kept);
  EXPECT_EQ(total_drops(), 0u) << drop_summary();
  // Without ACK: RST+ACK acking the segment (seq 1000 + 3 bytes + FIN).
  const Frame c = one_out(client_pkt(kProtoTcp, 45002, 8080), 0, 1);
  ASSERT_FALSE(c.empty());
  put(table_, vsvc(ip6(kVip6), 8080, Protocol::kTcp, {rs(ip6(gone), 80)}));
  ASSERT_TRUE(pub_->apply(table_, cp::TableDiff{}, true, &err)) << err;
  const Frame rst2 = one_out(client_pkt(kProtoTcp, 45002, 8080, kTcpFin, kVip6, 3), 0, 0);
  ASSERT_FALSE(rst2.empty()) << drop_summary();
  const Parsed6 r2 = expect_valid6(rst2, "RST+ACK");
  EXPECT_EQ(r2.tcp_flags, kTcpRst | kTcpAck);
  EXPECT_EQ(get32(rst2.data() + r2.l4_off + 8), 1000u + 3 + 1);
  // A mid-flow RST to a removed backend (b's: `kept` is gone now): dropped,
  // not answered.
  rx(client_pkt(kProtoTcp, 45001, 8080, kTcpRst | kTcpAck), 0);
  expect_nothing_out("RST to a removed backend");
  EXPECT_EQ(drops(kDestExpired), 1u) << drop_summary();
  EXPECT_EQ(w(0).counters.rst_sent.load(), 2u);
}

constexpr uint16_t kPortRs6 = 9090;       // 4 backends, rr
constexpr uint16_t kPortRs6Mh = 9091;     // 4 backends, mh
constexpr uint16_t kPortRs6Persist = 9092;  // 4 backends, rr, persistence
constexpr uint32_t kIsn6 = 0x11223344;
const Addr6 kB46 = a6({0xfd00, 0x244, 0, 0, 0, 0, 4, 0x40});
const MacAddr kB4Mac6{0x02, 0xb0, 0, 0, 0, 0x14};
const std::vector<uint8_t> kSynOpts6 = {2, 4, 0x05, 0xa0, 4, 2, 1, 3, 3, 7, 0, 0};  // MSS, SACK ok, NOP, WS 7, pad

class Resteer6Test : public WorkerIpv6FwdTest {
 protected:
  void SetUp() override {
    WorkerIpv6FwdTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    resteer_services();
  }
  // The re-steering services, the backends' neighbour entries, a pool of 64
  // saved SYNs on every worker (setup builds them afresh: called again after
  // setup(..., 2)).
  void resteer_services() {
    const std::vector<cp::RealServer> four = {rs(ip6(kB16), 80), rs(ip6(kB26), 80), rs(ip6(kB36), 80),
                                              rs(ip6(kB46), 80)};
    put(table_, vsvc(ip6(kVip6), kPortRs6, Protocol::kTcp, four));
    put(table_, vsvc(ip6(kVip6), kPortRs6Mh, Protocol::kTcp, four, cp::Scheduler::kMh));
    auto ps = vsvc(ip6(kVip6), kPortRs6Persist, Protocol::kTcp, four);
    ps.persistence_timeout_s = 600;
    put(table_, ps);
    std::string err;
    ASSERT_TRUE(pub_->apply(table_, cp::TableDiff{}, true, &err)) << err;
    v6_->neigh.update(kB36.data(), kB3Mac.data(), kT0);
    v6_->neigh.update(kB46.data(), kB4Mac6.data(), kT0);
    set_pool(64);
    sh().resteer_attempts = 3;
    sh().t_resteer = 200'000;  // TSC ticks (the tests move w.now themselves)
  }
  // Every worker's pool: n saved SYNs, with the IPv6 extension area (as
  // DpdkDataplane with IPv6 forwarding on) unless ext6 is false.
  void set_pool(uint32_t n, bool ext6 = true) {
    std::string err;
    for (uint32_t i = 0; i < sh().n_workers; ++i) {
      ASSERT_TRUE(w(i).syn.init(uniq("t6syn_"), n, 0, &err)) << err;
      if (ext6) {
        ASSERT_TRUE(w(i).syn.init_ext6(uniq("t6synx_"), 0, &err)) << err;
      }
    }
  }
  // A TCP segment as the wire has it (checksum filled in), after the
  // extension headers `ext` (the fixed header's next header `first`).
  static Bytes seg6(const MacAddr& smac, const MacAddr& dmac, const Addr6& src, uint16_t sport, const Addr6& dst,
                    uint16_t dport, uint8_t flags, uint32_t seq, uint32_t ack, const std::vector<uint8_t>& opts = {},
                    const Bytes& ext = {}, uint8_t first = kProtoTcp) {
    Frame6 s{.dmac = dmac, .smac = smac, .src = src, .dst = dst, .next = first, .ext = ext,
             .l4 = tcp6(sport, dport, flags)};
    put32(&s.l4[4], seq);
    put32(&s.l4[8], ack);
    s.l4[12] = static_cast<uint8_t>((20 + opts.size()) / 4 << 4);
    put16(&s.l4[14], 29200);
    s.l4.insert(s.l4.end(), opts.begin(), opts.end());
    Bytes f = build6(s);
    fix_cksum6(f, 54 + ext.size(), kProtoTcp, 16);
    return f;
  }
  // The client's SYN: traffic class 0x28, flow label 0x12345, options; with
  // the extension headers `ext` when given.
  static Bytes syn(uint16_t cport, uint16_t vport, uint32_t isn = kIsn6, const Bytes& ext = {},
                   uint8_t first = kProtoTcp, const Addr6& client = kClient6) {
    Bytes f = seg6(kClientMac, kPortMac[0], client, cport, kVip6, vport, kTcpSyn, isn, 0, kSynOpts6, ext, first);
    f[14] = 0x62, f[15] = 0x81, f[16] = 0x23, f[17] = 0x45;  // not in the checksum
    return f;
  }
  static const MacAddr& mac_of(const Addr6& b) {
    return b == kB16 ? kB1Mac : b == kB26 ? kB2Mac : b == kB36 ? kB3Mac : kB4Mac6;
  }
  static Parsed6 parsed(const Frame& f) {
    Parsed6 p;
    EXPECT_TRUE(parse_ipv6(f.data(), f.size(), &p)) << drop_reason_name(p.drop);
    return p;
  }
  static Addr6 dst_of(const Frame& f) { return f.size() >= 54 ? addr_at(f.data() + 38) : Addr6{}; }
  // The backend that got SYN `out` answers it.
  static Bytes answer(const Frame& out, uint8_t flags, uint32_t ack) {
    const Parsed6 p = parsed(out);
    return seg6(mac_of(addr_at(p.dst)), kPortMac[1], addr_at(p.dst), p.dport, addr_at(p.src), p.sport, flags,
                flags & kTcpSyn ? 777000 : 0, ack);
  }
  // `out` is the client's SYN as vipd sends it to a backend: traffic class
  // and flow label, hop limit one less than received, seq, window, options,
  // the connection's source; valid checksum.
  void expect_syn(const Frame& out, uint16_t cport, const char* what, const Addr6& client = kClient6) {
    ASSERT_FALSE(out.empty()) << what;
    const Parsed6 p = expect_valid6(out, what);
    EXPECT_EQ(get32(out.data() + 14), 0x62812345u) << what << ": version, traffic class, flow label";
    EXPECT_EQ(p.hop_limit, 63) << what << ": hop limit (64 received)";
    EXPECT_EQ(p.tcp_flags, kTcpSyn) << what;
    const uint8_t* l4 = out.data() + p.l4_off;
    EXPECT_EQ(get32(l4 + 4), kIsn6) << what;
    EXPECT_EQ(get16(l4 + 14), 29200) << what << ": window";
    ASSERT_EQ((l4[12] >> 4) * 4u, 32u) << what << ": options kept";
    EXPECT_EQ(std::vector<uint8_t>(l4 + 20, l4 + 32), kSynOpts6) << what;
    EXPECT_EQ(p.dport, 80) << what;
    EXPECT_TRUE(mac_is(out.data(), mac_of(addr_at(p.dst)))) << what;
    if (fnat()) {
      EXPECT_EQ(addr_at(p.src), kLocal6) << what;
    } else {
      EXPECT_EQ(addr_at(p.src), client) << what;
      EXPECT_EQ(p.sport, cport) << what;
    }
  }
  uint64_t resteers(ResteerReason r) { return w(0).counters.resteers[r].load(); }
  // The re-steering timers at `now`: what they sent toward the backends.
  std::vector<Frame> timers_at(uint64_t now) {
    w(0).now = now;
    resteer_timers(w(0), 64);
    flush_tx(w(0));
    EXPECT_EQ(tx(0).size(), 0u) << "nothing to the client";
    return tx(1);
  }
  int64_t slot(uint16_t vport, const Addr6& b) {
    return pub_->dest_slot(cp::ServiceKey{ip6(kVip6), vport, Protocol::kTcp}, ip6(b), 80);
  }
};

TEST_P(Resteer6Test, RstFromBackendResteersAndTheNextBackendCompletes) {
  const Frame first = one_out(syn(41000, kPortRs6), 0, 1);
  expect_syn(first, 41000, "first SYN");
  // The backend refuses: the client sees nothing, the SYN goes elsewhere.
  const Frame second = one_out(answer(first, kTcpRst | kTcpAck, kIsn6 + 1), 1, 1);
  expect_syn(second, 41000, "re-steered SYN");
  EXPECT_NE(dst_of(second), dst_of(first));
  EXPECT_EQ(parsed(second).sport, parsed(first).sport) << "same local port";
  EXPECT_EQ(resteers(kResteerRst), 1u);
  // A late RST from the first backend is no longer this connection's.
  rx(answer(first, kTcpRst | kTcpAck, kIsn6 + 1), 1);
  expect_nothing_out("the first backend's answers are not passed on");
  // The second backend answers: the client gets its SYN-ACK from the VIP.
  const Frame synack = one_out(answer(second, kTcpSyn | kTcpAck, kIsn6 + 1), 1, 0);
  ASSERT_FALSE(synack.empty()) << drop_summary();
  const Parsed6 sa = expect_valid6(synack, "SYN-ACK");
  EXPECT_EQ(addr_at(sa.src), kVip6);
  EXPECT_EQ(sa.sport, kPortRs6);
  EXPECT_EQ(sa.dport, 41000);
  EXPECT_EQ(w(0).syn.in_use(), 0u) << "the SYN-ACK frees the saved SYN";
  // The handshake's last ACK goes to the second backend.
  const Frame out = one_out(seg6(kClientMac, kPortMac[0], kClient6, 41000, kVip6, kPortRs6, kTcpAck, kIsn6 + 1,
                                 777001), 0, 1);
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(dst_of(out), dst_of(second));
  const int64_t s2 = slot(kPortRs6, dst_of(second)), s1 = slot(kPortRs6, dst_of(first));
  ASSERT_GE(s1, 0);
  ASSERT_GE(s2, 0);
  EXPECT_EQ(w(0).dest_counters[s2].active, 1);
  EXPECT_EQ(w(0).dest_counters[s1].active + w(0).dest_counters[s1].inactive, 0) << "moved off the first";
  // An RST now (established) is the connection's own: passed on.
  Bytes rst = answer(second, kTcpRst | kTcpAck, kIsn6 + 1);
  one_out(rst, 1, 0);
  EXPECT_EQ(resteers(kResteerRst), 1u);
  EXPECT_EQ(w(0).counters.resteer_gave_up.load(), 0u);
  EXPECT_EQ(w(0).conns.size(), 0u) << "the IPv4 table is not used";
}

TEST_P(Resteer6Test, AnswersThatDoNotMatchTheSynArePassedOn) {
  const Frame first = one_out(syn(41001, kPortRs6), 0, 1);
  ASSERT_FALSE(first.empty());
  // Wrong ack: not an answer to this SYN (a client cannot make vipd re-steer).
  const Frame out = one_out(answer(first, kTcpRst | kTcpAck, kIsn6 + 2), 1, 0);
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(parsed(out).tcp_flags & kTcpRst, kTcpRst);
  EXPECT_EQ(resteers(kResteerRst), 0u);
  EXPECT_EQ(w(0).syn.in_use(), 0u) << "the RST closed the connection: its SYN is forgotten";
}

TEST_P(Resteer6Test, AtMostNAttemptsThenAllRefusedClientGetsTheRst) {
  sh().resteer_attempts = 2;
  Frame cur = one_out(syn(41002, kPortRs6), 0, 1);
  ASSERT_FALSE(cur.empty());
  std::set<Addr6> seen{dst_of(cur)};
  for (int i = 0; i < 2; ++i) {
    cur = one_out(answer(cur, kTcpRst | kTcpAck, kIsn6 + 1), 1, 1);
    ASSERT_FALSE(cur.empty()) << "attempt " << i;
    EXPECT_TRUE(seen.insert(dst_of(cur)).second) << "a backend got the SYN twice";
  }
  // Attempts spent: the third RST reaches the client, as without re-steering.
  Frame out = one_out(answer(cur, kTcpRst | kTcpAck, kIsn6 + 1), 1, 0);
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(parsed(out).tcp_flags & kTcpRst, kTcpRst);
  EXPECT_EQ(addr_at(parsed(out).src), kVip6);
  EXPECT_EQ(resteers(kResteerRst), 2u);
  EXPECT_EQ(w(0).counters.resteer_gave_up.load(), 1u);
  // Every backend refuses: each tried once, then the client's RST.
  sh().resteer_attempts = 7;
  cur = one_out(syn(41003, kPortRs6), 0, 1);
  seen = {dst_of(cur)};
  for (int i = 0; i < 3; ++i) {
    cur = one_out(answer(cur, kTcpRst | kTcpAck, kIsn6 + 1), 1, 1);
    ASSERT_FALSE(cur.empty());
    seen.insert(dst_of(cur));
  }
  EXPECT_EQ(seen.size(), 4u) << "every backend tried once";
  out = one_out(answer(cur, kTcpRst | kTcpAck, kIsn6 + 1), 1, 0);
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(w(0).counters.resteer_gave_up.load(), 2u);
  EXPECT_EQ(w(0).syn.in_use(), 0u);
}

// Outlier ejection (eject.h) for IPv6 connections: K refused SYNs eject the
// backend, new IPv6 connections skip it while it is out, its time runs out.
TEST_P(Resteer6Test, KRefusedConnectionsEjectTheBackendUntilItsTimeIsUp) {
  sh().eject = EjectParams{2, 1'000'000, 10'000'000, 50};
  const int64_t s1 = slot(kPortRs6, kB16);
  ASSERT_GE(s1, 0);
  EjectState& e = sh().dest_slots[s1].eject;
  uint16_t cport = 42000;
  int refused = 0;
  for (int i = 0; i < 16 && refused < 2; ++i, ++cport) {
    const Frame first = one_out(syn(cport, kPortRs6), 0, 1);
    ASSERT_FALSE(first.empty());
    Frame got = first;
    if (dst_of(first) == kB16) {
      EXPECT_FALSE(e.ejected(w(0).now)) << "ejected before K failures";
      got = one_out(answer(first, kTcpRst | kTcpAck, kIsn6 + 1), 1, 1);
      ASSERT_FALSE(got.empty());
      ++refused;
    }
    one_out(answer(got, kTcpSyn | kTcpAck, kIsn6 + 1), 1, 0);
  }
  ASSERT_EQ(refused, 2);
  EXPECT_TRUE(e.ejected(w(0).now));
  EXPECT_EQ(e.ejections.load(), 1u);
  for (int i = 0; i < 12; ++i, ++cport) {
    const Frame out = one_out(syn(cport, kPortRs6), 0, 1);
    ASSERT_FALSE(out.empty());
    EXPECT_NE(dst_of(out), kB16) << "an ejected backend got a new connection";
  }
  w(0).now += 1'000'000;
  EXPECT_FALSE(e.ejected(w(0).now));
  bool back = false;
  for (int i = 0; i < 4; ++i, ++cport) {
    const Frame out = one_out(syn(cport, kPortRs6), 0, 1);
    ASSERT_FALSE(out.empty());
    back |= dst_of(out) == kB16;
  }
  EXPECT_TRUE(back);
}

TEST_P(Resteer6Test, NoSynAckInTimeResteers) {
  const Frame first = one_out(syn(41004, kPortRs6), 0, 1);
  ASSERT_FALSE(first.empty());
  EXPECT_EQ(timers_at(kT0 + sh().t_resteer - 1).size(), 0u) << "before the timeout";
  auto out = timers_at(kT0 + sh().t_resteer);
  ASSERT_EQ(out.size(), 1u);
  expect_syn(out[0], 41004, "SYN after the timeout");
  EXPECT_NE(dst_of(out[0]), dst_of(first));
  EXPECT_EQ(resteers(kResteerTimeout), 1u);
  // The first backend's late SYN-ACK is not this connection's any more.
  rx(answer(first, kTcpSyn | kTcpAck, kIsn6 + 1), 1);
  expect_nothing_out("a late SYN-ACK");
  one_out(answer(out[0], kTcpSyn | kTcpAck, kIsn6 + 1), 1, 0);
  EXPECT_EQ(timers_at(w(0).now + 10 * sh().t_resteer).size(), 0u) << "answered: no more timers";
  EXPECT_EQ(resteers(kResteerTimeout), 1u);
}

// IPv4 and IPv6 connections share the worker's pool and its deadline list:
// each times out into its own family's SYN.
TEST_P(Resteer6Test, TimersOfBothFamiliesShareThePool) {
  const Frame f6 = one_out(syn(41014, kPortRs6), 0, 1);
  ASSERT_FALSE(f6.empty());
  FrameSpec s4 = from_client(41015, kTcpSyn, kVip, 8080);
  s4.seq = kIsn6;
  const Frame f4 = one_out(build_frame(s4), 0, 1);
  ASSERT_FALSE(f4.empty());
  EXPECT_EQ(w(0).syn.in_use(), 2u);
  auto out = timers_at(kT0 + sh().t_resteer);
  ASSERT_EQ(out.size(), 2u);
  expect_syn(out[0], 41014, "IPv6 SYN after the timeout");
  EXPECT_NE(dst_of(out[0]), dst_of(f6));
  expect_valid_ipv4(out[1], "IPv4 SYN after the timeout");
  EXPECT_NE(ip_dst(out[1].data()), ip_dst(f4.data()));
  EXPECT_EQ(tcp_seq(out[1].data()), kIsn6);
  EXPECT_EQ(resteers(kResteerTimeout), 2u);
}

TEST_P(Resteer6Test, ClientRetransmissionGoesToAnotherBackend) {
  sh().t_resteer = 0;
  const Frame first = one_out(syn(41005, kPortRs6), 0, 1);
  ASSERT_FALSE(first.empty());
  const Frame again = one_out(syn(41005, kPortRs6), 0, 1);
  expect_syn(again, 41005, "retransmitted SYN");
  EXPECT_NE(dst_of(again), dst_of(first));
  EXPECT_EQ(resteers(kResteerRetransmit), 1u);
  EXPECT_EQ(w(0).syn.head(), 0u) << "no timer with t_resteer 0";
}

TEST_P(Resteer6Test, Icmp6UnreachableQuotingTheSynResteers) {
  const Frame first = one_out(syn(41006, kPortRs6), 0, 1);
  ASSERT_FALSE(first.empty());
  const Parsed6 p = parsed(first);
  auto icmp = [&](uint32_t seq_delta, uint8_t type, uint8_t code) {
    Bytes quoted = l3_of(first);
    put32(&quoted[40 + 4], kIsn6 + seq_delta);
    return icmp6_err(kRouterMac, kPortMac[1], kPodRouter6, addr_at(p.src), type, code, 0, quoted);
  };
  // A quote with another seq is not this SYN's: translated to the client.
  one_out(icmp(5, kIcmp6DestUnreach, 3), 1, 0);
  // Nor is a packet too big (not a refusal).
  one_out(icmp(0, kIcmp6PacketTooBig, 0), 1, 0);
  // A bad checksum: not re-steered (and dropped as such).
  Bytes bad = icmp(0, kIcmp6DestUnreach, 4);
  bad[54 + 2] ^= 1;
  rx(bad, 1);
  expect_nothing_out("bad checksum");
  EXPECT_EQ(resteers(kResteerIcmp), 0u);
  const Frame second = one_out(icmp(0, kIcmp6DestUnreach, 4), 1, 1);
  expect_syn(second, 41006, "SYN after ICMPv6 port unreachable");
  EXPECT_NE(dst_of(second), dst_of(first));
  EXPECT_EQ(resteers(kResteerIcmp), 1u);
}

TEST_P(Resteer6Test, PoolFullGoesWithout) {
  set_pool(1);
  const Frame a = one_out(syn(41007, kPortRs6), 0, 1);
  const Frame b = one_out(syn(41008, kPortRs6), 0, 1);
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  EXPECT_EQ(w(0).counters.resteer_pool_full.load(), 1u);
  // b has no saved SYN: its RST reaches the client; a's is re-steered.
  ASSERT_FALSE(one_out(answer(b, kTcpRst | kTcpAck, kIsn6 + 1), 1, 0).empty());
  ASSERT_FALSE(one_out(answer(a, kTcpRst | kTcpAck, kIsn6 + 1), 1, 1).empty());
  EXPECT_EQ(resteers(kResteerRst), 1u);
}

TEST_P(Resteer6Test, OffPassesTheRstOn) {
  sh().resteer_attempts = 0;
  const Frame first = one_out(syn(41009, kPortRs6), 0, 1);
  ASSERT_FALSE(first.empty());
  ASSERT_FALSE(one_out(answer(first, kTcpRst | kTcpAck, kIsn6 + 1), 1, 0).empty());
  EXPECT_EQ(w(0).syn.in_use(), 0u);
}

TEST_P(Resteer6Test, PersistenceFollowsTheBackendThatAnswers) {
  const Frame first = one_out(syn(41010, kPortRs6Persist), 0, 1);
  ASSERT_FALSE(first.empty());
  const Frame second = one_out(answer(first, kTcpRst | kTcpAck, kIsn6 + 1), 1, 1);
  ASSERT_FALSE(second.empty());
  one_out(answer(second, kTcpSyn | kTcpAck, kIsn6 + 1), 1, 0);
  const Frame next = one_out(syn(41011, kPortRs6Persist), 0, 1);
  ASSERT_FALSE(next.empty());
  EXPECT_EQ(dst_of(next), dst_of(second));
}

TEST_P(Resteer6Test, MhResteersInTheKeysOwnOrder) {
  const Frame a = one_out(syn(41012, kPortRs6Mh), 0, 1);
  const Frame b = one_out(syn(41013, kPortRs6Mh), 0, 1);
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  EXPECT_EQ(dst_of(a), dst_of(b));
  const Frame a2 = one_out(answer(a, kTcpRst | kTcpAck, kIsn6 + 1), 1, 1);
  const Frame b2 = one_out(answer(b, kTcpRst | kTcpAck, kIsn6 + 1), 1, 1);
  ASSERT_FALSE(a2.empty());
  ASSERT_FALSE(b2.empty());
  EXPECT_EQ(dst_of(a2), dst_of(b2));
  EXPECT_NE(dst_of(a2), dst_of(a));
}

// A destination options header of 8 * (units + 1) bytes with one option
// that is not padding (type 0x1e: experimental, skipped by a node that does
// not know it) filling it: its bytes tell a kept header from a rebuilt one.
Bytes dest_opts(uint8_t next, uint8_t units = 1) {
  Bytes h = ext_hdr(next, units);
  h[2] = 0x1e;
  h[3] = static_cast<uint8_t>(h.size() - 4);
  for (size_t i = 4; i < h.size(); ++i) h[i] = static_cast<uint8_t>(0xa0 + i);
  return h;
}

// `out` carries the extension headers `ext` (first next header `first`)
// between its IPv6 and TCP headers, the payload length counting them.
void expect_ext(const Frame& out, const Bytes& ext, uint8_t first, const char* what) {
  ASSERT_GE(out.size(), 54 + ext.size() + 20) << what;
  EXPECT_EQ(out[20], first) << what << ": first next header";
  EXPECT_EQ(Bytes(out.begin() + 54, out.begin() + 54 + static_cast<long>(ext.size())), ext) << what;
  Parsed6 p;
  ASSERT_TRUE(parse_ipv6(out.data(), out.size(), &p)) << what;
  EXPECT_EQ(p.l4_off, 54 + ext.size()) << what;
  EXPECT_EQ(p.payload_len, ext.size() + 32) << what << ": extension headers + TCP header with options";
  EXPECT_EQ(out.size(), 54 + ext.size() + 32) << what;
}

// A client's SYN with IPv6 extension headers: the re-sent SYN (after an
// RST, an ICMPv6 unreachable quoting it, the timeout) carries them as
// forwarded the first time, with a TCP checksum valid from scratch; a
// destination options header alone, and a chain of a hop-by-hop, a
// destination options and an atomic fragment header.
TEST_P(Resteer6Test, ExtensionHeadersGoOutAgainWithTheResentSyn) {
  Bytes chain = ext_hdr(kIp6DestOpts, 0);  // hop-by-hop: PadN only
  chain[2] = 1, chain[3] = 4;
  const Bytes d = dest_opts(kIp6Fragment);
  chain.insert(chain.end(), d.begin(), d.end());
  const Bytes fr = frag_hdr(kProtoTcp, 0, false, 0xabcd);
  chain.insert(chain.end(), fr.begin(), fr.end());
  struct Case {
    Bytes ext;
    uint8_t first;
    const char* what;
  } cases[] = {{dest_opts(kProtoTcp), kIp6DestOpts, "destination options"},
               {chain, kIp6HopByHop, "hop-by-hop, destination options, atomic fragment"}};
  uint16_t cport = 41020;
  uint64_t n = 0;
  for (const Case& k : cases) {
    SCOPED_TRACE(k.what);
    ++cport;
    const Frame first = one_out(syn(cport, kPortRs6, kIsn6, k.ext, k.first), 0, 1);
    expect_syn(first, cport, "first SYN");
    expect_ext(first, k.ext, k.first, "first SYN");
    // The backend refuses.
    const Frame second = one_out(answer(first, kTcpRst | kTcpAck, kIsn6 + 1), 1, 1);
    expect_syn(second, cport, "SYN after the RST");
    expect_ext(second, k.ext, k.first, "SYN after the RST");
    EXPECT_NE(dst_of(second), dst_of(first));
    // An ICMPv6 port unreachable quoting it, extension headers and all.
    const Parsed6 p2 = parsed(second);
    const Frame third = one_out(icmp6_err(kRouterMac, kPortMac[1], kPodRouter6, addr_at(p2.src), kIcmp6DestUnreach,
                                          4, 0, l3_of(second)), 1, 1);
    expect_syn(third, cport, "SYN after the ICMPv6 error");
    expect_ext(third, k.ext, k.first, "SYN after the ICMPv6 error");
    EXPECT_NE(dst_of(third), dst_of(second));
    // No answer in time.
    auto out = timers_at(w(0).now + sh().t_resteer);
    ASSERT_EQ(out.size(), 1u);
    expect_syn(out[0], cport, "SYN after the timeout");
    expect_ext(out[0], k.ext, k.first, "SYN after the timeout");
    EXPECT_NE(dst_of(out[0]), dst_of(third));
    n += 3;
    EXPECT_EQ(resteers(kResteerRst) + resteers(kResteerIcmp) + resteers(kResteerTimeout), n);
    // The last backend answers: the client gets its SYN-ACK.
    ASSERT_FALSE(one_out(answer(out[0], kTcpSyn | kTcpAck, kIsn6 + 1), 1, 0).empty());
    EXPECT_EQ(w(0).syn.in_use(), 0u);
  }
  EXPECT_EQ(w(0).counters.resteer_pool_full.load(), 0u);
  EXPECT_EQ(total_drops(), 0u) << drop_summary();
}

// Extension headers up to kSynExtMax bytes are kept; a longer chain, or a
// pool without the extension area, is counted (resteer_pool_full) and the
// connection goes without re-steering: the SYN goes out as forwarded, the
// backend's RST reaches the client.
TEST_P(Resteer6Test, ExtensionHeadersThatDoNotFitGoWithout) {
  const Bytes fits = dest_opts(kProtoTcp, kSynExtMax / 8 - 1), too_long = dest_opts(kProtoTcp, kSynExtMax / 8);
  ASSERT_EQ(fits.size(), kSynExtMax);
  const Frame a = one_out(syn(41030, kPortRs6, kIsn6, fits, kIp6DestOpts), 0, 1);
  expect_ext(a, fits, kIp6DestOpts, "64 bytes");
  const Frame a2 = one_out(answer(a, kTcpRst | kTcpAck, kIsn6 + 1), 1, 1);
  expect_syn(a2, 41030, "64 bytes, re-sent");
  expect_ext(a2, fits, kIp6DestOpts, "64 bytes, re-sent");
  EXPECT_EQ(resteers(kResteerRst), 1u);
  EXPECT_EQ(w(0).counters.resteer_pool_full.load(), 0u);

  auto without = [&](uint16_t cport, const Bytes& ext, uint64_t full, const char* what) {
    SCOPED_TRACE(what);
    const uint32_t in_use = w(0).syn.in_use();
    const Frame b = one_out(syn(cport, kPortRs6, kIsn6, ext, kIp6DestOpts), 0, 1);
    expect_syn(b, cport, "forwarded");
    expect_ext(b, ext, kIp6DestOpts, "forwarded");
    EXPECT_EQ(w(0).counters.resteer_pool_full.load(), full);
    EXPECT_EQ(w(0).syn.in_use(), in_use) << "not kept";
    const Frame rst = one_out(answer(b, kTcpRst | kTcpAck, kIsn6 + 1), 1, 0);
    ASSERT_FALSE(rst.empty());
    EXPECT_EQ(parsed(rst).tcp_flags & kTcpRst, kTcpRst);
    EXPECT_EQ(addr_at(parsed(rst).src), kVip6);
  };
  without(41031, too_long, 1, "72 bytes");
  set_pool(64, false);
  without(41032, dest_opts(kProtoTcp), 2, "no extension area");
  // Without extension headers a SYN is still kept there.
  const Frame c = one_out(syn(41033, kPortRs6), 0, 1);
  ASSERT_FALSE(c.empty());
  expect_syn(one_out(answer(c, kTcpRst | kTcpAck, kIsn6 + 1), 1, 1), 41033, "no extension headers");
  EXPECT_EQ(resteers(kResteerRst), 2u);
  EXPECT_EQ(w(0).counters.resteer_pool_full.load(), 2u);
}

// Two workers (as TwoWorkersRedirectToTheOwner): a connection's packets go
// to the worker that owns it (the client's for the client side; fnat: the
// local port's, nat: the client's for replies and ICMPv6 errors), wherever
// they arrive. Two clients, one owned by each worker; each one's SYN, the
// backend's RST, an ICMPv6 unreachable quoting the re-sent SYN and the
// backend's SYN-ACK all arrive at the other worker; the client's
// retransmitted SYN too. Re-steering happens on the owner (its counters,
// its pool), every re-sent SYN leaves on the owner's queue, the timers of
// the other worker send nothing.
TEST_P(Resteer6Test, TwoWorkersResteerOnTheOwner) {
  setup(GetParam(), 2);
  if (HasFatalFailure()) return;
  resteer_services();
  if (HasFatalFailure()) return;
  sh().resteer_attempts = 4;
  serve_rings_ = true;
  // A second client address that the other worker owns.
  const uint32_t o1 = flow_owner(fold6(kClient6.data()), 0, 2);
  Addr6 client2 = kClient6;
  for (uint8_t i = 0x11; flow_owner(fold6(client2.data()), 0, 2) == o1 && i < 0xff; ++i) client2[15] = i;
  ASSERT_NE(flow_owner(fold6(client2.data()), 0, 2), o1) << "the test needs a client on each worker";
  v6_->neigh.update(client2.data(), kClientMac.data(), kT0);
  auto sent_by = [&](uint16_t port, uint32_t wi, const char* what) {
    auto mine = tx_queue(port, static_cast<uint16_t>(wi)), other = tx_queue(port, static_cast<uint16_t>(1 - wi));
    EXPECT_EQ(other.size(), 0u) << what << ": frames on the other worker's queue";
    EXPECT_EQ(mine.size(), 1u) << what << ": " << drop_summary(0) << " /" << drop_summary(1);
    EXPECT_EQ(tx_queue(static_cast<uint16_t>(1 - port), 0).size() + tx_queue(static_cast<uint16_t>(1 - port), 1).size(),
              0u) << what << ": frames on the other port";
    return mine.empty() ? Frame{} : mine[0];
  };
  uint64_t base[2][kNumResteerReasons] = {};  // each worker's counts before this client's connections
  auto rs = [&](uint32_t wi, ResteerReason r) { return w(wi).counters.resteers[r].load() - base[wi][r]; };
  uint16_t cport = 45000;
  for (const Addr6& client : {kClient6, client2}) {
    const uint32_t own = flow_owner(fold6(client.data()), 0, 2), other = 1 - own;
    SCOPED_TRACE(own);
    for (uint32_t wi = 0; wi < 2; ++wi)
      for (unsigned r = 0; r < kNumResteerReasons; ++r) base[wi][r] = w(wi).counters.resteers[r].load();
    const size_t conns_own = w6_[own]->conns.size(), conns_other = w6_[other]->conns.size();
    ++cport;
    rx(syn(cport, kPortRs6, kIsn6, {}, kProtoTcp, client), 0, other);
    const Frame first = sent_by(1, own, "SYN");
    expect_syn(first, cport, "SYN", client);
    EXPECT_EQ(w(own).syn.in_use(), 1u);
    EXPECT_EQ(w(other).syn.in_use(), 0u);
    EXPECT_EQ(w6_[own]->conns.size(), conns_own + 1);
    EXPECT_EQ(w6_[other]->conns.size(), conns_other);
    // The reply's owner: fnat the local port's worker, nat the client's.
    const Parsed6 p1 = parsed(first);
    if (fnat()) {
      EXPECT_EQ(p1.sport % 2u, own) << "the local port is the owner's";
    }
    // RST at the other worker: redirected, re-steered by the owner.
    rx(answer(first, kTcpRst | kTcpAck, kIsn6 + 1), 1, other);
    const Frame second = sent_by(1, own, "SYN after the RST");
    expect_syn(second, cport, "SYN after the RST", client);
    EXPECT_NE(dst_of(second), dst_of(first));
    EXPECT_EQ(rs(own, kResteerRst), 1u);
    EXPECT_EQ(rs(other, kResteerRst), 0u);
    // ICMPv6 unreachable quoting it, at the other worker.
    const Parsed6 p2 = parsed(second);
    rx(icmp6_err(kRouterMac, kPortMac[1], kPodRouter6, addr_at(p2.src), kIcmp6DestUnreach, 1, 0, l3_of(second)), 1,
       other);
    const Frame third = sent_by(1, own, "SYN after the ICMPv6 error");
    expect_syn(third, cport, "SYN after the ICMPv6 error", client);
    EXPECT_NE(dst_of(third), dst_of(second));
    EXPECT_EQ(rs(own, kResteerIcmp), 1u);
    EXPECT_EQ(rs(other, kResteerIcmp), 0u);
    // The timers: only the owner's has the connection.
    const uint64_t at = w(own).now + sh().t_resteer;
    w(other).now = at;
    resteer_timers(w(other), 64);
    flush_tx(w(other));
    w(own).now = at;
    resteer_timers(w(own), 64);
    flush_tx(w(own));
    const Frame fourth = sent_by(1, own, "SYN after the timeout");
    expect_syn(fourth, cport, "SYN after the timeout", client);
    EXPECT_EQ(rs(own, kResteerTimeout), 1u);
    EXPECT_EQ(rs(other, kResteerTimeout), 0u);
    std::set<Addr6> seen{dst_of(first), dst_of(second), dst_of(third), dst_of(fourth)};
    EXPECT_EQ(seen.size(), 4u) << "every backend once";
    // The SYN-ACK at the other worker: to the client by the owner.
    rx(answer(fourth, kTcpSyn | kTcpAck, kIsn6 + 1), 1, other);
    const Frame synack = sent_by(0, own, "SYN-ACK");
    ASSERT_FALSE(synack.empty());
    EXPECT_EQ(addr_at(parsed(synack).dst), client);
    EXPECT_EQ(w(own).syn.in_use(), 0u);
    w(other).now = w(own).now;

    // A second connection: the client's retransmitted SYN, at the other
    // worker, goes to another backend.
    ++cport;
    rx(syn(cport, kPortRs6, kIsn6, {}, kProtoTcp, client), 0, other);
    const Frame a = sent_by(1, own, "second connection's SYN");
    rx(syn(cport, kPortRs6, kIsn6, {}, kProtoTcp, client), 0, other);
    const Frame b = sent_by(1, own, "retransmitted SYN");
    expect_syn(b, cport, "retransmitted SYN", client);
    EXPECT_NE(dst_of(b), dst_of(a));
    EXPECT_EQ(rs(own, kResteerRetransmit), 1u);
    EXPECT_EQ(rs(other, kResteerRetransmit), 0u);
    // Its SYN-ACK: no timer left behind.
    rx(answer(b, kTcpSyn | kTcpAck, kIsn6 + 1), 1, other);
    sent_by(0, own, "second connection's SYN-ACK");
    EXPECT_EQ(w(own).syn.in_use(), 0u);
    ASSERT_FALSE(HasFatalFailure());
  }
  EXPECT_EQ(w(0).counters.resteer_gave_up.load() + w(1).counters.resteer_gave_up.load(), 0u);
  EXPECT_EQ(drops_of_all_workers(), 0u) << drop_summary(0) << " /" << drop_summary(1);
}

INSTANTIATE_TEST_SUITE_P(Modes, Resteer6Test, ::testing::Values(Forward::kFnat, Forward::kNat),
                         [](const auto& i) { return i.param == Forward::kFnat ? std::string("fnat") : std::string("nat"); });

// The PROXY protocol over IPv6 (proxy_proto.h, worker6.cc), as ProxyTest
// (proxy_test.cc) for IPv4: header bytes, where the header goes, seq / ack /
// SACK shift, MSS room; every frame's checksum checked from scratch.
std::string header6_of(cp::ProxyProtocol v, const Addr6& s, uint16_t sp, const Addr6& d, uint16_t dp) {
  uint8_t b[kProxyHdrMax6];
  const size_t n = proxy_header(v, s.data(), sp, d.data(), dp, b);
  return std::string(reinterpret_cast<const char*>(b), n);
}

TEST(ProxyHeader6, V1ExactBytesRfc5952) {
  using cp::ProxyProtocol;
  EXPECT_EQ(header6_of(ProxyProtocol::kV1, kClient6, 40000, kVip6, 8080),
            "PROXY TCP6 fd00:10::10 fd00:10:96::100 40000 8080\r\n");
  // The longest zero run is compressed (the first of equal ones), a single
  // zero group is not; no leading zeros, lowercase.
  EXPECT_EQ(header6_of(ProxyProtocol::kV1, a6({0x2001, 0xdb8, 0, 0, 1, 0, 0, 1}), 1,
                       a6({0x2001, 0xdb8, 0, 1, 1, 1, 1, 1}), 2),
            "PROXY TCP6 2001:db8::1:0:0:1 2001:db8:0:1:1:1:1:1 1 2\r\n");
  EXPECT_EQ(header6_of(ProxyProtocol::kV1, a6({0, 0, 0, 0, 0, 0, 0, 0}), 0, a6({1, 0, 0, 0, 0, 0, 0, 0}), 0),
            "PROXY TCP6 :: 1:: 0 0\r\n");
  EXPECT_EQ(header6_of(ProxyProtocol::kV1, a6({1, 0, 0, 2, 0, 0, 0, 3}), 0, a6({0, 0, 0, 0, 0, 0, 0, 0xABCD}), 0),
            "PROXY TCP6 1:0:0:2::3 ::abcd 0 0\r\n");
  const Addr6 f = a6({0xffff, 0xffff, 0xffff, 0xffff, 0xffff, 0xffff, 0xffff, 0xffff});
  const std::string longest = header6_of(ProxyProtocol::kV1, f, 65535, f, 65535);
  EXPECT_EQ(longest.size(), kProxyV1Max6);
  EXPECT_EQ(header6_of(ProxyProtocol::kNone, kClient6, 1, kVip6, 2), "");
}

TEST(ProxyHeader6, V2ExactBytes) {
  const std::string h = header6_of(cp::ProxyProtocol::kV2, kClient6, 40000, kVip6, 8080);
  ASSERT_EQ(h.size(), kProxyV2Len6);
  std::vector<uint8_t> want = {0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a,
                               0x21, 0x21, 0x00, 0x24};
  want.insert(want.end(), kClient6.begin(), kClient6.end());
  want.insert(want.end(), kVip6.begin(), kVip6.end());
  want.insert(want.end(), {0x9c, 0x40, 0x1f, 0x90});
  EXPECT_EQ(std::vector<uint8_t>(h.begin(), h.end()), want);
}

class Proxy6Test : public WorkerIpv6FwdTest {
 protected:
  void SetUp() override {
    WorkerIpv6FwdTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    cp::ServiceTable next = table_;
    auto v1 = vsvc(ip6(kVip6), kPortV1, Protocol::kTcp, {rs(ip6(kB16), 80)});
    v1.proxy_protocol = cp::ProxyProtocol::kV1;
    auto v2 = vsvc(ip6(kVip6), kPortV2, Protocol::kTcp, {rs(ip6(kB16), 80)});
    v2.proxy_protocol = cp::ProxyProtocol::kV2;
    put(next, v1);
    put(next, v2);
    put(next, vsvc(ip6(kVip6), kPortPlain, Protocol::kTcp, {rs(ip6(kB16), 80)}));
    const cp::TableDiff d = cp::TableDiff::compute(table_, next);
    std::string err;
    ASSERT_TRUE(pub_->apply(next, d, false, &err)) << err;
    table_ = next;
  }
  static Bytes seg(uint16_t sp, uint16_t dp, uint8_t flags, uint32_t seq, uint32_t ack,
                   const std::vector<uint8_t>& opts, const std::string& data) {
    Bytes t(20 + opts.size(), 0);
    t[0] = static_cast<uint8_t>(sp >> 8), t[1] = static_cast<uint8_t>(sp);
    t[2] = static_cast<uint8_t>(dp >> 8), t[3] = static_cast<uint8_t>(dp);
    put32(&t[4], seq);
    put32(&t[8], ack);
    t[12] = static_cast<uint8_t>((t.size() / 4) << 4);
    t[13] = flags;
    t[14] = 0xff, t[15] = 0xff;
    std::copy(opts.begin(), opts.end(), t.begin() + 20);
    t.insert(t.end(), data.begin(), data.end());
    return t;
  }
  Frame to_backend(uint16_t vport, uint8_t flags, uint32_t seq, const std::string& data, const char* what) {
    Frame6 s;
    s.dmac = kPortMac[0];
    s.smac = kClientMac;
    s.src = kClient6;
    s.dst = kVip6;
    s.next = kProtoTcp;
    s.l4 = seg(kCport, vport, flags, seq, flags & kTcpAck ? kBackendIsn + 1 : 0, {}, data);
    Bytes f = build6(s);
    fix_cksum6(f, 54, kProtoTcp, 16);
    const Frame o = one_out(f, 0, 1);
    if (!o.empty()) {
      const Parsed6 p = expect_valid6(o, what);
      EXPECT_EQ(addr_at(p.src), kLocal6) << what;
      lport_ = p.sport;
    }
    return o;
  }
  Frame to_client(uint8_t flags, uint32_t ack, const std::vector<uint8_t>& opts, const std::string& data,
                  const char* what) {
    Frame6 s;
    s.dmac = kPortMac[1];
    s.smac = kB1Mac;
    s.src = kB16;
    s.dst = kLocal6;
    s.next = kProtoTcp;
    s.l4 = seg(80, lport_, flags, flags & kTcpSyn ? kBackendIsn : kBackendIsn + 1, ack, opts, data);
    Bytes f = build6(s);
    fix_cksum6(f, 54, kProtoTcp, 16);
    const Frame o = one_out(f, 1, 0);
    if (!o.empty()) expect_valid6(o, what);
    return o;
  }
  static const uint8_t* tcp_of(const Frame& f) {
    Parsed6 p;
    EXPECT_TRUE(parse_ipv6(f.data(), f.size(), &p));
    return f.data() + p.l4_off;
  }
  static uint32_t seq_of(const Frame& f) { return get32(tcp_of(f) + 4); }
  static uint32_t ack_of(const Frame& f) { return get32(tcp_of(f) + 8); }
  static uint16_t plen_of(const Frame& f) { return get16(f.data() + 18); }
  static std::string payload(const Frame& f) {
    Parsed6 p;
    EXPECT_TRUE(parse_ipv6(f.data(), f.size(), &p));
    const uint8_t* l4 = f.data() + p.l4_off;
    const size_t doff = (l4[12] >> 4) * 4u;
    return std::string(reinterpret_cast<const char*>(l4 + doff), p.l4_len - doff);
  }
  static uint16_t mss_of(const Frame& f) {
    const uint8_t* l4 = tcp_of(f);
    const size_t doff = (l4[12] >> 4) * 4u;
    for (size_t i = 20; i + 4 <= doff; ++i)
      if (l4[i] == 2 && l4[i + 1] == 4) return get16(l4 + i + 2);
    return 0;
  }
  // SYN, then the SYN-ACK (MSS 1440) the client gets.
  Frame open(uint16_t vport, uint32_t isn) {
    const Frame syn = to_backend(vport, kTcpSyn, isn, "", "SYN");
    if (syn.empty()) return {};
    EXPECT_EQ(seq_of(syn), isn) << "the SYN keeps its seq";
    return to_client(kTcpSyn | kTcpAck, isn + 1, {2, 4, 0x05, 0xa0}, "", "SYN-ACK");
  }
  std::string hdr(cp::ProxyProtocol v) {
    return header6_of(v, kClient6, kCport, kVip6, v == cp::ProxyProtocol::kV1 ? kPortV1 : kPortV2);
  }
  static constexpr uint16_t kPortV1 = 8443, kPortV2 = 8444, kPortPlain = 8445, kCport = 40000;
  static constexpr uint32_t kBackendIsn = 7000;
  uint16_t lport_ = 0;
};

TEST_P(Proxy6Test, FirstDataSegmentCarriesHeaderThenShifts) {
  const uint32_t isn = 100000;
  const std::string h = hdr(cp::ProxyProtocol::kV1);
  const uint32_t n = static_cast<uint32_t>(h.size());
  const Frame sa = open(kPortV1, isn);
  ASSERT_FALSE(sa.empty());
  EXPECT_EQ(ack_of(sa), isn + 1);
  EXPECT_EQ(mss_of(sa), 1440 - n) << "MSS lowered by the header length";
  const Frame d1 = to_backend(kPortV1, kTcpAck | kTcpPsh, isn + 1, "hello", "first data");
  ASSERT_FALSE(d1.empty());
  EXPECT_EQ(seq_of(d1), isn + 1);
  EXPECT_EQ(payload(d1), h + "hello");
  EXPECT_EQ(plen_of(d1), 20u + n + 5u) << "IPv6 payload length";
  EXPECT_EQ(d1.size(), 14u + 40u + 20u + n + 5u);
  EXPECT_EQ(w().counters.proxy_headers.load(), 1u);
  const Frame a = to_client(kTcpAck, isn + 1 + n + 5, {}, "", "backend ack");
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(ack_of(a), isn + 1 + 5);
  const Frame d2 = to_backend(kPortV1, kTcpAck | kTcpPsh, isn + 6, "world", "second data");
  ASSERT_FALSE(d2.empty());
  EXPECT_EQ(seq_of(d2), isn + 6 + n);
  EXPECT_EQ(payload(d2), "world");
  const Frame r = to_backend(kPortV1, kTcpAck | kTcpPsh, isn + 1, "hello", "late retransmission");
  ASSERT_FALSE(r.empty());
  EXPECT_EQ(seq_of(r), isn + 1 + n);
  EXPECT_EQ(payload(r), "hello");
  EXPECT_EQ(w().counters.proxy_headers.load(), 1u);
  EXPECT_EQ(w().counters.proxy_header_retransmits.load(), 0u);
  EXPECT_EQ(total_drops(), 0u) << drop_summary();
}

TEST_P(Proxy6Test, PureAckCarriesHeaderForServerFirstBackend) {
  const uint32_t isn = 5;
  const std::string h = hdr(cp::ProxyProtocol::kV2);
  const uint32_t n = static_cast<uint32_t>(h.size());
  ASSERT_FALSE(open(kPortV2, isn).empty());
  const Frame ack = to_backend(kPortV2, kTcpAck, isn + 1, "", "handshake ACK");
  ASSERT_FALSE(ack.empty());
  EXPECT_EQ(seq_of(ack), isn + 1);
  EXPECT_EQ(payload(ack), h) << "the pure ACK became the header";
  Frame b = to_client(kTcpAck | kTcpPsh, isn + 1, {}, "220 hi", "server banner");
  ASSERT_FALSE(b.empty());
  EXPECT_EQ(ack_of(b), isn + 1);
  EXPECT_EQ(payload(b), "220 hi");
  b = to_client(kTcpAck, isn + 1 + n / 2, {}, "", "header half acked");
  ASSERT_FALSE(b.empty());
  EXPECT_EQ(ack_of(b), isn + 1);
  const Frame again = to_backend(kPortV2, kTcpAck, isn + 1, "", "ACK of the banner");
  ASSERT_FALSE(again.empty());
  EXPECT_EQ(payload(again), h);
  EXPECT_EQ(w().counters.proxy_headers.load(), 1u);
  EXPECT_EQ(w().counters.proxy_header_retransmits.load(), 1u);
  b = to_client(kTcpAck, isn + 1 + n, {}, "", "header acked");
  ASSERT_FALSE(b.empty());
  EXPECT_EQ(ack_of(b), isn + 1);
  const Frame d = to_backend(kPortV2, kTcpAck | kTcpPsh, isn + 1, "EHLO", "first data after header acked");
  ASSERT_FALSE(d.empty());
  EXPECT_EQ(seq_of(d), isn + 1 + n);
  EXPECT_EQ(payload(d), "EHLO");
}

TEST_P(Proxy6Test, RetransmittedFirstSegmentCarriesSameHeader) {
  const uint32_t isn = 77;
  ASSERT_FALSE(open(kPortV1, isn).empty());
  const Frame a = to_backend(kPortV1, kTcpAck | kTcpPsh, isn + 1, "GET /", "first");
  const Frame b = to_backend(kPortV1, kTcpAck | kTcpPsh, isn + 1, "GET /", "retransmission");
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  EXPECT_EQ(a, b) << "byte for byte the same segment";
  EXPECT_EQ(payload(b), hdr(cp::ProxyProtocol::kV1) + "GET /");
  EXPECT_EQ(w().counters.proxy_headers.load(), 1u);
  EXPECT_EQ(w().counters.proxy_header_retransmits.load(), 1u);
}

TEST_P(Proxy6Test, SeqAckSackShiftAtWraparound) {
  const uint32_t isn = 0xfffffff0u;
  const uint32_t n = static_cast<uint32_t>(kProxyV2Len6);
  ASSERT_FALSE(open(kPortV2, isn).empty());
  const Frame d1 = to_backend(kPortV2, kTcpAck | kTcpPsh, isn + 1, "0123456789", "first");
  ASSERT_FALSE(d1.empty());
  EXPECT_EQ(payload(d1).size(), n + 10);
  const Frame d2 = to_backend(kPortV2, kTcpAck | kTcpPsh, isn + 11, "abcdefghij", "second");
  ASSERT_FALSE(d2.empty());
  EXPECT_EQ(seq_of(d2), isn + 11 + n);
  EXPECT_LT(seq_of(d2), 0x100u) << "wrapped";
  const uint32_t l = isn + 1 + n + 20, r = isn + 1 + n + 30;
  std::vector<uint8_t> sack = {1, 1, 5, 10, 0, 0, 0, 0, 0, 0, 0, 0};
  put32(&sack[4], l);
  put32(&sack[8], r);
  const Frame a = to_client(kTcpAck, isn + 1 + n + 10, sack, "", "ack + SACK");
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(ack_of(a), isn + 1 + 10);
  const uint8_t* opt = tcp_of(a) + 20;
  EXPECT_EQ(opt[2], 5);
  EXPECT_EQ(get32(opt + 4), isn + 1 + 20);
  EXPECT_EQ(get32(opt + 8), isn + 1 + 30);
}

// An ICMPv6 error from the backend's side quoting a shifted client segment:
// the client gets its own seq back (its TCP checks it).
TEST_P(Proxy6Test, IcmpErrorQuoteGetsClientSeq) {
  const uint32_t isn = 3000;
  const uint32_t n = static_cast<uint32_t>(hdr(cp::ProxyProtocol::kV1).size());
  ASSERT_FALSE(open(kPortV1, isn).empty());
  ASSERT_FALSE(to_backend(kPortV1, kTcpAck | kTcpPsh, isn + 1, "abc", "first").empty());
  ASSERT_FALSE(to_client(kTcpAck, isn + 1 + n + 3, {}, "", "ack").empty());
  const Frame d = to_backend(kPortV1, kTcpAck | kTcpPsh, isn + 4, "def", "second");
  ASSERT_FALSE(d.empty());
  ASSERT_EQ(seq_of(d), isn + 4 + n);
  const Bytes err = icmp6_err(kB1Mac, kPortMac[1], kB16, kLocal6, kIcmp6DestUnreach, 4, 0, l3_of(d));
  const Frame back = one_out(err, 1, 0);
  ASSERT_FALSE(back.empty()) << drop_summary();
  Parsed6 p;
  ASSERT_TRUE(parse_ipv6(back.data(), back.size(), &p));
  EXPECT_EQ(addr_at(p.dst), kClient6);
  const Bytes icmp(back.begin() + p.l4_off, back.end());
  EXPECT_TRUE(cksum6_matches(addr_at(p.src), addr_at(p.dst), kProtoIcmp6, icmp, 2));
  const uint8_t* quoted_tcp = back.data() + p.l4_off + 8 + 40;
  EXPECT_EQ(get16(quoted_tcp), kCport);
  EXPECT_EQ(get32(quoted_tcp + 4), isn + 4) << "the client's own seq";
}

// A service without the header, over IPv6 in fnat: untouched (MSS too).
TEST_P(Proxy6Test, ServiceWithoutProxyUnchanged) {
  const Frame sa = open(kPortPlain, 1000);
  ASSERT_FALSE(sa.empty());
  EXPECT_EQ(mss_of(sa), 1440);
  const Frame d = to_backend(kPortPlain, kTcpAck | kTcpPsh, 1001, "x", "data");
  ASSERT_FALSE(d.empty());
  EXPECT_EQ(seq_of(d), 1001u);
  EXPECT_EQ(payload(d), "x");
  EXPECT_EQ(w().counters.proxy_headers.load(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Fnat, Proxy6Test, ::testing::Values(Forward::kFnat),
                         [](const auto&) { return std::string("fnat"); });

}  // namespace
}  // namespace vipd::dp
