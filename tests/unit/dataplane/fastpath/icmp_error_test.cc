// ICMP errors quoting a NATed flow (dataplane/fastpath/icmp_error.h), through
// the whole per-packet pipeline on real mbufs: the net_ring2 and net_ring3
// vdevs (main.cc) loop every tx queue back into the rx queue of the same
// index, like worker_test.cc's pair. A flow is opened by a real packet, the
// forwarded packet is read back, and an ICMP error quoting it (as a router or
// the peer would send it) must come out translated: the quote equal to the
// packet the other side sent (but for the TTL vipd decremented), every
// checksum valid (the quoted TCP/UDP one included).
#include "dataplane/fastpath/icmp_error.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "tests/unit/dataplane/worker_fixture.h"

namespace vipd::dp {
namespace {

using namespace test;
using cp::Protocol;

// Port 0 faces clients, port 1 backends (worker_fixture.h); a router on each
// side.
const uint32_t kClient = ip4(10, 0, 0, 10), kClientRouter = ip4(10, 0, 0, 254);
const uint32_t kVip = ip4(10, 96, 0, 100);
const uint32_t kB1 = ip4(10, 1, 0, 11), kPodRouter = ip4(10, 1, 0, 254);
const MacAddr kClientMac{0x02, 0xc1, 0, 0, 0, 0x10}, kB1Mac{0x02, 0xb0, 0, 0, 0, 0x11};

}  // namespace

namespace test {
// The net_ring2/3 pair (main.cc): this suite's own ports and mempool.
struct IcmpRings {
  static constexpr const char* kPorts[2] = {"net_ring2", "net_ring3"};
  static constexpr const char* kPool = "icmpt_pool";
  static constexpr unsigned kPoolSize = 1023;
  static constexpr uint16_t kRingSize = 256;
  static inline const MacAddr kMac[2] = {{{0x02, 0x00, 0x00, 0x00, 0xb0, 0x00}}, {{0x02, 0x00, 0x00, 0x00, 0xb1, 0x00}}};
};
}  // namespace test

namespace {

const MacAddr (&kPortMac)[2] = IcmpRings::kMac;

class IcmpErrorTest : public WorkerFixture<IcmpRings>, public ::testing::WithParamInterface<Forward> {
 protected:
  void SetUp() override {
    WorkerFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    serve_rings_ = true;  // rx(): the owning worker handles a redirected packet at once
    build(GetParam(), 1);
  }

  void build(Forward fwd, uint32_t n_workers) {
    build_workers(fwd, n_workers, 1024, 1024, 8, 16, 256);
    if (HasFatalFailure()) return;
    Shared& s = sh();
    std::string err;
    put(table_, vsvc(kVip, 8080, Protocol::kTcp, {rs(kB1, 80)}));
    put(table_, vsvc(kVip, 5353, Protocol::kUdp, {rs(kB1, 53)}));
    ASSERT_TRUE(pub_->apply(table_, cp::TableDiff{}, true, &err)) << err;
    for (uint32_t a : {kClient, kClientRouter}) s.neigh.update(a, kClientMac.data(), kT0);
    s.neigh.update(kB1, kB1Mac.data(), kT0);
  }

  bool fnat() const { return GetParam() == Forward::kFnat; }
  uint64_t total_drops() { return drops_of_all_workers(); }

  void none_out(const Frame& f, uint16_t in_port, DropReason want, const char* what) {
    const uint64_t before = drops(want);
    rx(f, in_port);
    EXPECT_EQ(tx(0).size() + tx(1).size(), 0u) << what;
    EXPECT_EQ(drops(want), before + 1) << what << ": want a drop as " << drop_reason_name(want);
  }

  FrameSpec client_pkt(uint8_t proto, uint16_t cport, uint16_t vport) {
    FrameSpec s;
    s.dmac = kPortMac[0];
    s.smac = kClientMac;
    s.src = kClient;
    s.dst = kVip;
    s.proto = proto;
    s.sport = cport;
    s.dport = vport;
    s.tcp_flags = kTcpSyn;
    s.tcp_opts = {2, 4, 0x05, 0xb4};
    s.payload = proto == kProtoUdp ? std::vector<uint8_t>{'p', 'i', 'n', 'g', '\n'} : std::vector<uint8_t>{};
    return s;
  }
  // The backend's reply to the forwarded packet `fwd` (addresses swapped).
  FrameSpec backend_reply(const Frame& fwd) {
    FrameSpec s;
    s.dmac = kPortMac[1];
    s.smac = kB1Mac;
    s.src = ip_dst(fwd.data());
    s.dst = ip_src(fwd.data());
    s.proto = ip_proto(fwd.data());
    s.sport = l4_dport(fwd.data());
    s.dport = l4_sport(fwd.data());
    s.tcp_flags = kTcpSyn | kTcpAck;
    s.seq = 7000;
    s.ack = 1001;
    s.payload = s.proto == kProtoUdp ? std::vector<uint8_t>{'p', 'o', 'd', '1', '\n'} : std::vector<uint8_t>{};
    return s;
  }
  // An ICMP error from `from` to `to` quoting `quoted_bytes` of the IPv4
  // packet in frame `pkt` (all of it when 0), arriving from the side of port
  // `side`. The type/code/mtu words are the caller's.
  Frame icmp_error(uint16_t side, uint32_t from, uint32_t to, const Frame& pkt, size_t quoted_bytes,
                   uint8_t type = 3, uint8_t code = 4, uint16_t mtu = 1200, uint8_t ttl = 64) {
    FrameSpec s;
    s.dmac = kPortMac[side];
    s.smac = side == 0 ? kClientMac : kB1Mac;
    s.src = from;
    s.dst = to;
    s.proto = kProtoIcmp;
    s.icmp_type = type;
    s.icmp_code = code;
    s.icmp_id = 0;
    s.icmp_seq = mtu;  // "next-hop MTU" (RFC 1191) in the low half of the second word
    s.ttl = ttl;
    const size_t all = pkt.size() - kEth;
    s.payload.assign(pkt.begin() + kEth, pkt.begin() + kEth + (quoted_bytes ? quoted_bytes : all));
    return build_frame(s);
  }

  // The translated error `out`: outer addresses, TTL 63, every checksum
  // valid, type/code/MTU kept, and the quote equal to `orig` (the packet the
  // receiver of the error sent) but for the TTL vipd took off.
  void expect_translated(const Frame& out, uint32_t osrc, uint32_t odst, const Frame& orig, size_t quoted,
                         const char* what) {
    ASSERT_GE(out.size(), kEth + 20 + 8 + 28) << what;
    const uint8_t* f = out.data();
    EXPECT_EQ(ip_src(f), osrc) << what;
    EXPECT_EQ(ip_dst(f), odst) << what;
    EXPECT_EQ(ip_proto(f), kProtoIcmp) << what;
    EXPECT_EQ(ip_ttl(f), 63) << what;
    EXPECT_TRUE(ip_cksum_exact(f)) << what << ": outer IP checksum";
    EXPECT_TRUE(icmp_cksum_ok(f)) << what << ": ICMP checksum over the whole message";
    const uint8_t* icmp = l4_of(f);
    const uint8_t* quote = icmp + 8;
    const size_t qlen = l4_len_of(f) - 8;
    ASSERT_EQ(qlen, quoted ? quoted : orig.size() - kEth) << what;
    std::vector<uint8_t> want(orig.begin() + kEth, orig.begin() + kEth + qlen);
    want[8] = static_cast<uint8_t>(want[8] - 1);  // vipd forwarded it: TTL - 1
    put16(&want[10], ref_ip_cksum(want.data(), (want[0] & 0x0f) * 4u));
    EXPECT_EQ(std::vector<uint8_t>(quote, quote + qlen), want)
        << what << ": the quote is not the original packet (TTL - 1)";
    Parsed p = parse_frame(f, out.size());
    EXPECT_EQ(p.kind, FrameKind::kIpv4) << what;
  }

};

// Where errors about packets sent to the backend are addressed: the source
// the backend saw (fnat: the local address; nat: the client).
uint32_t backend_side_addr(const Frame& fwd) { return ip_src(fwd.data()); }

// A router next to the pod reports "fragmentation needed" for a UDP datagram
// vipd forwarded: the client gets it from the VIP, quoting its own datagram.
TEST_P(IcmpErrorTest, FragNeededForUdpReachesClientTranslated) {
  const Frame req = build_frame(client_pkt(kProtoUdp, 41000, 5353));
  const Frame fwd = one_out(req, 0, 1);
  ASSERT_FALSE(fwd.empty());
  EXPECT_EQ(ip_src(fwd.data()), fnat() ? kLocal : kClient);
  const Frame err = icmp_error(1, kPodRouter, backend_side_addr(fwd), fwd, 0);
  const Frame out = one_out(err, 1, 0);
  expect_translated(out, kVip, kClient, req, 0, "frag needed (udp, whole datagram quoted)");
  EXPECT_EQ(l4_of(out.data())[0], 3);
  EXPECT_EQ(l4_of(out.data())[1], 4);
  EXPECT_EQ(get16(l4_of(out.data()) + 6), 1200) << "the next-hop MTU is kept";
  EXPECT_TRUE(std::equal(kClientMac.begin(), kClientMac.end(), out.begin())) << "sent to the client's MAC";
  EXPECT_EQ(total_drops(), 0u);
}

// TCP, quoting the IP header + 8 bytes (RFC 792's minimum: no TCP checksum
// in the quote) and the whole SYN (the checksum translated too).
TEST_P(IcmpErrorTest, FragNeededForTcpShortAndLongQuotes) {
  const Frame syn = build_frame(client_pkt(kProtoTcp, 41001, 8080));
  const Frame fwd = one_out(syn, 0, 1);
  ASSERT_FALSE(fwd.empty());
  Frame out = one_out(icmp_error(1, kB1, backend_side_addr(fwd), fwd, 28), 1, 0);
  expect_translated(out, kVip, kClient, syn, 28, "tcp, 28 bytes quoted");
  out = one_out(icmp_error(1, kPodRouter, backend_side_addr(fwd), fwd, 0), 1, 0);
  expect_translated(out, kVip, kClient, syn, 0, "tcp, whole SYN quoted");
  // An odd quote length (IP + 19 bytes of TCP): checksum field quoted.
  out = one_out(icmp_error(1, kPodRouter, backend_side_addr(fwd), fwd, 39), 1, 0);
  expect_translated(out, kVip, kClient, syn, 39, "tcp, 39 bytes quoted");
  // Time exceeded is translated the same way.
  out = one_out(icmp_error(1, kPodRouter, backend_side_addr(fwd), fwd, 0, 11, 0, 0), 1, 0);
  expect_translated(out, kVip, kClient, syn, 0, "time exceeded");
  EXPECT_EQ(total_drops(), 0u);
}

// The client side reports a problem with a reply (port unreachable: the
// client's socket is gone): the backend gets it quoting its own reply.
TEST_P(IcmpErrorTest, ClientSideErrorReachesBackendTranslated) {
  for (uint8_t proto : {kProtoUdp, kProtoTcp}) {
    const uint16_t vport = proto == kProtoUdp ? 5353 : 8080;
    const Frame fwd = one_out(build_frame(client_pkt(proto, 41002, vport)), 0, 1);
    ASSERT_FALSE(fwd.empty());
    const Frame reply = build_frame(backend_reply(fwd));
    const Frame back = one_out(reply, 1, 0);
    ASSERT_FALSE(back.empty());
    ASSERT_EQ(ip_src(back.data()), kVip);
    const Frame out = one_out(icmp_error(0, kClient, kVip, back, 0, 3, 3, 0), 0, 1);
    // fnat: from the local address (the backend knows no client); nat: the
    // outer source stays (the backend routes clients through vipd).
    expect_translated(out, fnat() ? kLocal : kClient, kB1, reply, 0, "port unreachable from the client");
    // From a router on the client side (nat keeps the router as source).
    const Frame out2 = one_out(icmp_error(0, kClientRouter, kVip, back, 28, 11, 0, 0), 0, 1);
    expect_translated(out2, fnat() ? kLocal : kClientRouter, kB1, reply, 28, "time exceeded from a router");
  }
  EXPECT_EQ(total_drops(), 0u);
}

// A bad ICMP checksum stays bad (the receiver drops it), like NAT keeps a bad
// TCP/UDP checksum bad.
TEST_P(IcmpErrorTest, BadIcmpChecksumStaysBad) {
  const Frame fwd = one_out(build_frame(client_pkt(kProtoUdp, 41003, 5353)), 0, 1);
  ASSERT_FALSE(fwd.empty());
  Frame err = icmp_error(1, kPodRouter, backend_side_addr(fwd), fwd, 0);
  err[kEth + 20 + 2] ^= 0x5a;
  const Frame out = one_out(err, 1, 0);
  ASSERT_FALSE(out.empty());
  EXPECT_FALSE(icmp_cksum_ok(out.data()));
  EXPECT_TRUE(ip_cksum_exact(out.data()));
}

// Errors that quote no flow, or cannot be right, are dropped and counted.
TEST_P(IcmpErrorTest, UnmatchedAndMalformedErrorsDropped) {
  const Frame syn = build_frame(client_pkt(kProtoTcp, 41004, 8080));
  const Frame fwd = one_out(syn, 0, 1);
  ASSERT_FALSE(fwd.empty());
  const uint32_t to = backend_side_addr(fwd);
  // A quote of a flow vipd does not know (another source port).
  FrameSpec other = client_pkt(kProtoTcp, 41005, 8080);
  other.src = to;
  other.dst = kB1;
  other.dport = 80;
  none_out(icmp_error(1, kB1, to, build_frame(other), 0), 1, kIcmpErrorNoConn, "unknown flow");
  // The right quote, but from the client side (a spoofed error about
  // someone's flow: the flow's destination is not on that side).
  none_out(icmp_error(0, kClient, to, fwd, 0), 0, kIcmpErrorNoConn, "from the wrong side");
  // The client's packet quoted as if it came back (a reply-direction quote
  // addressed to the VIP matches the flow the wrong way round).
  none_out(icmp_error(0, kClient, kVip, syn, 0), 0, kIcmpErrorNoConn, "wrong direction");
  // Too short: IP header + 4 bytes.
  none_out(icmp_error(1, kB1, to, fwd, 24), 1, kBadL4Header, "quote shorter than IP + 8");
  // A quoted later fragment has no ports.
  Frame frag = fwd;
  put16(&frag[kEth + 6], 0x0010);
  fix_ip_cksum(frag);
  none_out(icmp_error(1, kB1, to, frag, 0), 1, kIcmpErrorNoConn, "quoted later fragment");
  // A quoted ICMP packet (vipd NATs none).
  FrameSpec ping = client_pkt(kProtoIcmp, 0, 0);
  ping.src = to;
  ping.dst = kB1;
  none_out(icmp_error(1, kB1, to, build_frame(ping), 0), 1, kIcmpErrorNoConn, "quoted ICMP");
  // TTL 1: not forwarded.
  none_out(icmp_error(1, kB1, to, fwd, 0, 3, 4, 1200, 1), 1, kTtlExceeded, "ttl 1");
  // To vipd's own port address: not NATed.
  none_out(icmp_error(1, kB1, kPort1Ip, fwd, 0), 1, kLocalUnhandled, "to a port address");
  // The quoted flow's destination was removed by the control plane.
  cp::ServiceTable next = table_;
  put(next, vsvc(kVip, 8080, Protocol::kTcp, {}));
  std::string e;
  ASSERT_TRUE(pub_->apply(next, cp::TableDiff::compute(table_, next), false, &e)) << e;
  none_out(icmp_error(1, kB1, to, fwd, 0), 1, kDestExpired, "destination removed");
}

// fnat with an address that is neither a VIP nor a local address.
TEST_P(IcmpErrorTest, ErrorToUnknownAddress) {
  const Frame fwd = one_out(build_frame(client_pkt(kProtoUdp, 41006, 5353)), 0, 1);
  ASSERT_FALSE(fwd.empty());
  const Frame err = icmp_error(1, kB1, ip4(10, 1, 0, 200), fwd, 0);
  if (fnat()) {
    none_out(err, 1, kNoService, "fnat: not a local address");
  } else {
    // nat: any non-local address may be a client; but an error goes to the
    // source of the packet it quotes (the client), not to 10.1.0.200.
    none_out(err, 1, kIcmpErrorNoConn, "nat: not addressed to the quoted source");
  }
}

// Two workers: the error arrives at the worker that does not own the flow
// and is passed to the owner over the ring, like the flow's packets.
TEST_P(IcmpErrorTest, RedirectedToTheOwningWorker) {
  build(GetParam(), 2);
  if (HasFatalFailure()) return;
  for (uint16_t cport = 42000; cport < 42008; ++cport) {
    const Frame req = build_frame(client_pkt(kProtoUdp, cport, 5353));
    const unsigned owner = flow_owner(kClient, cport, 2);
    const Frame fwd = one_out(req, 0, 1, owner);
    ASSERT_FALSE(fwd.empty());
    // Deliver the error to each worker in turn.
    for (unsigned wi = 0; wi < 2; ++wi) {
      const Frame out = one_out(icmp_error(1, kPodRouter, backend_side_addr(fwd), fwd, 0), 1, 0, wi);
      expect_translated(out, kVip, kClient, req, 0, "two workers");
    }
  }
  EXPECT_GT(w(0).counters.redirects_out.load() + w(1).counters.redirects_out.load(), 0u);
  EXPECT_EQ(total_drops(), 0u);
}

// Not an ICMP case, but part of the same hostile-traffic work (docs/reliability.md) and
// this fixture fits: SYN+FIN (and SYN+RST) start no connection, as in IPVS;
// the rr service drops them as no_connection, a plain SYN still works.
TEST_P(IcmpErrorTest, SynWithFinOrRstStartsNoConnection) {
  for (uint8_t fl : {uint8_t(kTcpSyn | kTcpFin), uint8_t(kTcpSyn | kTcpFin | kTcpPsh), uint8_t(kTcpSyn | kTcpRst)}) {
    FrameSpec s = client_pkt(kProtoTcp, 41100, 8080);
    s.tcp_flags = fl;
    none_out(build_frame(s), 0, kNoConn, "SYN with FIN or RST");
  }
  EXPECT_EQ(w().conns.size(), 0u);
  one_out(build_frame(client_pkt(kProtoTcp, 41100, 8080)), 0, 1);
  EXPECT_EQ(w().conns.size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Modes, IcmpErrorTest, ::testing::Values(Forward::kFnat, Forward::kNat),
                         [](const auto& i) { return i.param == Forward::kFnat ? std::string("Fnat") : std::string("Nat"); });

}  // namespace
}  // namespace vipd::dp
