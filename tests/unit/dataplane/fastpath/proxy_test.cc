// The PROXY protocol in full NAT (proxy_proto.h): the header bytes, and
// through the per-packet pipeline (worker_test_fixture.h) where it goes, how
// seq / ack / SACK move, the MSS clamp, and what stays as it was (services
// without it, UDP, NAT mode). Checksums are checked against test_util.h's
// own from-scratch computation.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "dataplane/fastpath/proxy_proto.h"
#include "tests/unit/dataplane/fastpath/worker_test_fixture.h"

namespace vipd::dp {
namespace {

using namespace test;
using cp::ProxyProtocol;

constexpr uint16_t kPortV1 = 8443, kPortV2 = 8444, kPortUdpV1 = 5454;

std::string header_of(ProxyProtocol v, uint32_t s, uint16_t sp, uint32_t d, uint16_t dp) {
  uint8_t b[kProxyHdrMax];
  const size_t n = proxy_header(v, s, sp, d, dp, b);
  return std::string(reinterpret_cast<const char*>(b), n);
}

TEST(ProxyHeader, V1ExactBytes) {
  EXPECT_EQ(header_of(ProxyProtocol::kV1, ip4(10, 0, 0, 10), 40000, ip4(10, 96, 0, 100), 8080),
            "PROXY TCP4 10.0.0.10 10.96.0.100 40000 8080\r\n");
  EXPECT_EQ(header_of(ProxyProtocol::kV1, ip4(1, 0, 0, 0), 0, ip4(0, 0, 0, 0), 9),
            "PROXY TCP4 1.0.0.0 0.0.0.0 0 9\r\n");
  const std::string longest =
      header_of(ProxyProtocol::kV1, ip4(255, 255, 255, 255), 65535, ip4(255, 255, 255, 255), 65535);
  EXPECT_EQ(longest, "PROXY TCP4 255.255.255.255 255.255.255.255 65535 65535\r\n");
  EXPECT_EQ(longest.size(), kProxyV1Max);
  EXPECT_EQ(header_of(ProxyProtocol::kNone, 1, 2, 3, 4), "");
}

TEST(ProxyHeader, V2ExactBytes) {
  const std::string h = header_of(ProxyProtocol::kV2, ip4(10, 0, 0, 10), 40000, ip4(10, 96, 0, 100), 8080);
  const std::vector<uint8_t> want = {0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a,
                                     0x21, 0x11, 0x00, 0x0c, 10,   0,    0,    10,   10,   96,   0,    100,
                                     0x9c, 0x40, 0x1f, 0x90};
  ASSERT_EQ(h.size(), kProxyV2Len);
  EXPECT_EQ(std::vector<uint8_t>(h.begin(), h.end()), want);
}

// Sizes: a connection without a header is one 64-byte entry as before; one
// with a header adds a pool entry.
TEST(ProxyHeader, BytesPerConnection) {
  EXPECT_EQ(sizeof(Conn), 64u);
  EXPECT_EQ(ProxyPool::kBytesPerEntry, 12u);
  std::printf("[ bytes ] connection entry: %zu without PROXY header, %zu with (+%zu pool entry)\n", sizeof(Conn),
              sizeof(Conn) + ProxyPool::kBytesPerEntry, ProxyPool::kBytesPerEntry);
}

class ProxyTest : public WorkerTest {
 protected:
  void build_proxy(Forward fwd) {
    build(fwd);
    if (HasFatalFailure()) return;
    cp::ServiceTable next = table_;
    auto v1 = vsvc(kVip, kPortV1, Protocol::kTcp, {rs(kB1, 80)});
    v1.proxy_protocol = ProxyProtocol::kV1;
    auto v2 = vsvc(kVip, kPortV2, Protocol::kTcp, {rs(kB1, 80)});
    v2.proxy_protocol = ProxyProtocol::kV2;
    auto u = vsvc(kVip, kPortUdpV1, Protocol::kUdp, {rs(kB1, 53)});
    u.proxy_protocol = ProxyProtocol::kV1;
    put(next, v1);
    put(next, v2);
    put(next, u);
    const cp::TableDiff d = cp::TableDiff::compute(table_, next);
    std::string err;
    ASSERT_TRUE(pub_->apply(next, d, false, &err)) << err;
    table_ = next;
  }

  FrameSpec client(uint16_t vport, uint8_t flags, uint32_t seq, const std::string& data = "") {
    FrameSpec s = from_client(kCport, flags, kVip, vport);
    s.seq = seq;
    s.ack = flags & kTcpAck ? kBackendIsn + 1 : 0;
    s.payload.assign(data.begin(), data.end());
    return s;
  }
  FrameSpec backend(uint8_t flags, uint32_t ack, std::vector<uint8_t> opts = {}, const std::string& data = "") {
    FrameSpec s = from_backend(kB1, kB1Mac, 80, kLocal, lport_, flags);
    s.seq = flags & kTcpSyn ? kBackendIsn : kBackendIsn + 1;
    s.ack = ack;
    s.tcp_opts = std::move(opts);
    s.payload.assign(data.begin(), data.end());
    return s;
  }
  // Client -> backend, checked: one frame on port 1, valid checksums.
  Frame to_backend(const FrameSpec& s, const char* what) {
    const Frame f = one_out(build_frame(s), 0, 1);
    if (!f.empty()) expect_valid_ipv4(f, what);
    return f;
  }
  Frame to_client(const FrameSpec& s, const char* what) {
    const Frame f = one_out(build_frame(s), 1, 0);
    if (!f.empty()) expect_valid_ipv4(f, what);
    return f;
  }
  // Opens a connection with client ISN `isn` (SYN, SYN-ACK with an MSS
  // option); returns the SYN-ACK the client got.
  Frame open(uint16_t vport, uint32_t isn) {
    const Frame syn = to_backend(client(vport, kTcpSyn, isn), "SYN");
    if (syn.empty()) return {};
    EXPECT_EQ(tcp_seq(syn.data()), isn) << "the SYN keeps its seq";
    lport_ = l4_sport(syn.data());
    return to_client(backend(kTcpSyn | kTcpAck, isn + 1, {2, 4, 0x05, 0xb4}), "SYN-ACK");
  }
  static std::string payload(const Frame& f) {
    const uint8_t* l4 = l4_of(f.data());
    const size_t doff = (l4[12] >> 4) * 4u;
    return std::string(reinterpret_cast<const char*>(l4 + doff), l4_len_of(f.data()) - doff);
  }
  static uint16_t mss_of(const Frame& f) {
    const uint8_t* l4 = l4_of(f.data());
    const size_t doff = (l4[12] >> 4) * 4u;
    for (size_t i = 20; i + 4 <= doff; ++i)
      if (l4[i] == 2 && l4[i + 1] == 4) return get16(l4 + i + 2);
    return 0;
  }
  std::string hdr(ProxyProtocol v) { return header_of(v, kClient, kCport, kVip, v == ProxyProtocol::kV1 ? kPortV1 : kPortV2); }

  static constexpr uint16_t kCport = 40000;
  static constexpr uint32_t kBackendIsn = 7000;
  uint16_t lport_ = 0;
};

TEST_F(ProxyTest, FirstDataSegmentCarriesHeaderThenShifts) {
  build_proxy(Forward::kFnat);
  if (HasFatalFailure()) return;
  const uint32_t isn = 100000;
  const std::string h = hdr(ProxyProtocol::kV1);
  const uint32_t n = static_cast<uint32_t>(h.size());
  const Frame sa = open(kPortV1, isn);
  ASSERT_FALSE(sa.empty());
  EXPECT_EQ(tcp_ack(sa.data()), isn + 1) << "the SYN-ACK's ack is the client's own";
  EXPECT_EQ(mss_of(sa), 1460 - n) << "MSS lowered by the header length";
  // The handshake's ACK is lost; the first data segment carries the header.
  const Frame d1 = to_backend(client(kPortV1, kTcpAck | kTcpPsh, isn + 1, "hello"), "first data");
  ASSERT_FALSE(d1.empty());
  EXPECT_EQ(tcp_seq(d1.data()), isn + 1);
  EXPECT_EQ(payload(d1), h + "hello");
  EXPECT_EQ(ip_total(d1.data()), 20u + 20u + n + 5u);
  EXPECT_EQ(w().counters.proxy_headers.load(), 1u);
  // The backend acknowledges header and data: the client sees its 5 bytes acked.
  const Frame a = to_client(backend(kTcpAck, isn + 1 + n + 5), "backend ack");
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(tcp_ack(a.data()), isn + 1 + 5);
  // Later client bytes: shifted by the header.
  const Frame d2 = to_backend(client(kPortV1, kTcpAck | kTcpPsh, isn + 6, "world"), "second data");
  ASSERT_FALSE(d2.empty());
  EXPECT_EQ(tcp_seq(d2.data()), isn + 6 + n);
  EXPECT_EQ(payload(d2), "world");
  // After the backend acked past the header, a retransmitted first segment
  // gets no header: only the shift.
  const Frame r = to_backend(client(kPortV1, kTcpAck | kTcpPsh, isn + 1, "hello"), "late retransmission");
  ASSERT_FALSE(r.empty());
  EXPECT_EQ(tcp_seq(r.data()), isn + 1 + n);
  EXPECT_EQ(payload(r), "hello");
  EXPECT_EQ(w().counters.proxy_headers.load(), 1u);
  EXPECT_EQ(w().counters.proxy_header_retransmits.load(), 0u);
  // FIN and RST: state as always, seq shifted.
  const Frame fin = to_backend(client(kPortV1, kTcpAck | kTcpFin, isn + 11), "FIN");
  ASSERT_FALSE(fin.empty());
  EXPECT_EQ(tcp_seq(fin.data()), isn + 11 + n);
  EXPECT_EQ(tcp_flags(fin.data()), kTcpAck | kTcpFin);
}

TEST_F(ProxyTest, PureAckCarriesHeaderForServerFirstBackend) {
  build_proxy(Forward::kFnat);
  if (HasFatalFailure()) return;
  const uint32_t isn = 5;
  const std::string h = hdr(ProxyProtocol::kV2);
  const uint32_t n = static_cast<uint32_t>(h.size());
  ASSERT_FALSE(open(kPortV2, isn).empty());
  const Frame ack = to_backend(client(kPortV2, kTcpAck, isn + 1), "handshake ACK");
  ASSERT_FALSE(ack.empty());
  EXPECT_EQ(tcp_seq(ack.data()), isn + 1);
  EXPECT_EQ(payload(ack), h) << "the pure ACK became the header";
  // The server speaks first, not having the header yet: its ack is the
  // client's own; part of the header acked: still nothing of the client's.
  Frame b = to_client(backend(kTcpAck | kTcpPsh, isn + 1, {}, "220 hi"), "server banner");
  ASSERT_FALSE(b.empty());
  EXPECT_EQ(tcp_ack(b.data()), isn + 1);
  EXPECT_EQ(payload(b), "220 hi");
  b = to_client(backend(kTcpAck, isn + 1 + n / 2), "header half acked");
  ASSERT_FALSE(b.empty());
  EXPECT_EQ(tcp_ack(b.data()), isn + 1);
  // The client's ACK of the banner (seq still isn + 1, header not acked):
  // the header again, the same bytes; counted as a retransmission.
  const Frame again = to_backend(client(kPortV2, kTcpAck, isn + 1), "ACK of the banner");
  ASSERT_FALSE(again.empty());
  EXPECT_EQ(payload(again), h);
  EXPECT_EQ(w().counters.proxy_headers.load(), 1u);
  EXPECT_EQ(w().counters.proxy_header_retransmits.load(), 1u);
  b = to_client(backend(kTcpAck, isn + 1 + n), "header acked");
  ASSERT_FALSE(b.empty());
  EXPECT_EQ(tcp_ack(b.data()), isn + 1);
  const Frame d = to_backend(client(kPortV2, kTcpAck | kTcpPsh, isn + 1, "EHLO"), "first data after header acked");
  ASSERT_FALSE(d.empty());
  EXPECT_EQ(tcp_seq(d.data()), isn + 1 + n);
  EXPECT_EQ(payload(d), "EHLO");
}

TEST_F(ProxyTest, RetransmittedFirstSegmentCarriesSameHeader) {
  build_proxy(Forward::kFnat);
  if (HasFatalFailure()) return;
  const uint32_t isn = 77;
  ASSERT_FALSE(open(kPortV1, isn).empty());
  const Frame a = to_backend(client(kPortV1, kTcpAck | kTcpPsh, isn + 1, "GET /"), "first");
  const Frame b = to_backend(client(kPortV1, kTcpAck | kTcpPsh, isn + 1, "GET /"), "retransmission");
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  EXPECT_EQ(a, b) << "byte for byte the same segment";
  EXPECT_EQ(payload(b), hdr(ProxyProtocol::kV1) + "GET /");
  EXPECT_EQ(w().counters.proxy_headers.load(), 1u);
  EXPECT_EQ(w().counters.proxy_header_retransmits.load(), 1u);
}

// Client ISN just below 2^32: every shift wraps.
TEST_F(ProxyTest, SeqAckSackShiftAtWraparound) {
  build_proxy(Forward::kFnat);
  if (HasFatalFailure()) return;
  const uint32_t isn = 0xfffffff0u;
  const uint32_t n = static_cast<uint32_t>(kProxyV2Len);
  ASSERT_FALSE(open(kPortV2, isn).empty());
  const Frame d1 = to_backend(client(kPortV2, kTcpAck | kTcpPsh, isn + 1, "0123456789"), "first");
  ASSERT_FALSE(d1.empty());
  EXPECT_EQ(payload(d1).size(), n + 10);
  const Frame d2 = to_backend(client(kPortV2, kTcpAck | kTcpPsh, isn + 11, "abcdefghij"), "second");
  ASSERT_FALSE(d2.empty());
  EXPECT_EQ(tcp_seq(d2.data()), isn + 11 + n);
  EXPECT_LT(tcp_seq(d2.data()), 0x100u) << "wrapped";
  // The backend acks the header and the first segment, SACKs a later range.
  const uint32_t l = isn + 1 + n + 20, r = isn + 1 + n + 30;
  std::vector<uint8_t> sack = {1, 1, 5, 10, 0, 0, 0, 0, 0, 0, 0, 0};
  put32(&sack[4], l);
  put32(&sack[8], r);
  const Frame a = to_client(backend(kTcpAck, isn + 1 + n + 10, sack), "ack + SACK");
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(tcp_ack(a.data()), isn + 1 + 10);
  const uint8_t* opt = l4_of(a.data()) + 20;
  EXPECT_EQ(opt[2], 5);
  EXPECT_EQ(get32(opt + 4), isn + 1 + 20);
  EXPECT_EQ(get32(opt + 8), isn + 1 + 30);
}

TEST_F(ProxyTest, ServiceWithoutProxyUnchanged) {
  build_proxy(Forward::kFnat);
  if (HasFatalFailure()) return;
  const uint32_t isn = 1000;
  const Frame sa = open(8080, isn);
  ASSERT_FALSE(sa.empty());
  EXPECT_EQ(mss_of(sa), 1460);
  const Frame d = to_backend(client(8080, kTcpAck | kTcpPsh, isn + 1, "hello"), "data");
  ASSERT_FALSE(d.empty());
  EXPECT_EQ(tcp_seq(d.data()), isn + 1);
  EXPECT_EQ(payload(d), "hello");
  const Frame a = to_client(backend(kTcpAck, isn + 6), "ack");
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(tcp_ack(a.data()), isn + 6);
  EXPECT_EQ(w().counters.proxy_headers.load(), 0u);
  EXPECT_EQ(w().proxy.in_use(), 0u);
}

TEST_F(ProxyTest, UdpUnchanged) {
  build_proxy(Forward::kFnat);
  if (HasFatalFailure()) return;
  FrameSpec s = from_client(kCport, 0, kVip, kPortUdpV1);
  s.proto = kProtoUdp;
  s.payload = {1, 2, 3, 4};
  const Frame f = to_backend(s, "UDP");
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(l4_len_of(f.data()), 8u + 4u);
  EXPECT_EQ(w().proxy.in_use(), 0u);
}

TEST_F(ProxyTest, NatModeUnchanged) {
  build_proxy(Forward::kNat);
  if (HasFatalFailure()) return;
  const Frame syn = to_backend(client(kPortV1, kTcpSyn, 50), "SYN");
  ASSERT_FALSE(syn.empty());
  const Frame d = to_backend(client(kPortV1, kTcpAck | kTcpPsh, 51, "hello"), "data");
  ASSERT_FALSE(d.empty());
  EXPECT_EQ(payload(d), "hello");
  EXPECT_EQ(tcp_seq(d.data()), 51u);
  EXPECT_EQ(w().proxy.in_use(), 0u);
}

TEST_F(ProxyTest, PoolFullDropsNewConnectionsOfProxyServicesOnly) {
  proxy_capacity_ = 1;
  build_proxy(Forward::kFnat);
  if (HasFatalFailure()) return;
  ASSERT_FALSE(open(kPortV1, 10).empty());
  EXPECT_EQ(w().proxy.in_use(), 1u);
  FrameSpec s = client(kPortV1, kTcpSyn, 20);
  s.sport = kCport + 1;
  rx(build_frame(s), 0);
  expect_nothing_out("SYN with the pool empty");
  EXPECT_EQ(drops(kProxyPoolFull), 1u) << drop_summary();
  s.dport = 8080;  // a service without the header: served
  EXPECT_FALSE(one_out(build_frame(s), 0, 1).empty());
  // Expiring the connection gives its entry back.
  w().now += sh().t_syn * 100 + sh().t_est * 2;
  sweep_conns(w(), w().conns.slots());
  EXPECT_EQ(w().proxy.in_use(), 0u);
}

TEST_F(ProxyTest, NoRoomIsACountedDrop) {
  build_proxy(Forward::kFnat);
  if (HasFatalFailure()) return;
  ASSERT_FALSE(open(kPortV1, 10).empty());
  sh().ports[1].mtu = 60;  // 20 + 20 + 5 fits, not with the header
  rx(build_frame(client(kPortV1, kTcpAck | kTcpPsh, 11, "hello")), 0);
  expect_nothing_out("no room");
  EXPECT_EQ(drops(kProxyHeaderNoRoom), 1u) << drop_summary();
  sh().ports[1].mtu = 1500;
  const Frame d = to_backend(client(kPortV1, kTcpAck | kTcpPsh, 11, "hello"), "room again");
  ASSERT_FALSE(d.empty());
  EXPECT_EQ(payload(d), hdr(ProxyProtocol::kV1) + "hello");
}

// A segment that came in with a bad TCP checksum still has a bad one after
// the header went in (it is not made valid).
TEST_F(ProxyTest, BadChecksumStaysBad) {
  build_proxy(Forward::kFnat);
  if (HasFatalFailure()) return;
  ASSERT_FALSE(open(kPortV1, 10).empty());
  Frame in = build_frame(client(kPortV1, kTcpAck | kTcpPsh, 11, "hello"));
  l4_of(in.data())[16] ^= 0x5a;
  const Frame f = one_out(in, 0, 1);
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(payload(f), hdr(ProxyProtocol::kV1) + "hello");
  EXPECT_TRUE(ip_cksum_exact(f.data()));
  EXPECT_FALSE(l4_cksum_exact(f.data()));
}

}  // namespace
}  // namespace vipd::dp
