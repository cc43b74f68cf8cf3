// The fixture of the worker suites (worker_test.cc, worker_conn_test.cc,
// worker_arp_test.cc, worker_burst_test.cc): WorkerFixture (worker_fixture.h)
// on the net_ring0/net_ring1 pair, with a set of services and neighbours.
#pragma once

#include <algorithm>
#include <string>

#include "dataplane/fastpath/packet.h"
#include "tests/unit/dataplane/worker_fixture.h"

namespace vipd::dp::test {

using cp::Protocol;

// Port 0 faces clients, port 1 backends (worker_fixture.h).
inline const uint32_t kClient = ip4(10, 0, 0, 10), kClient2 = ip4(10, 0, 0, 20);
inline const uint32_t kVip = ip4(10, 96, 0, 100), kVipEmpty = ip4(10, 96, 0, 101), kVipArp = ip4(10, 96, 0, 102);
inline const uint32_t kB1 = ip4(10, 1, 0, 11), kB2 = ip4(10, 1, 0, 12), kB3 = ip4(10, 1, 0, 13), kB4 = ip4(10, 1, 0, 14);
inline const MacAddr kClientMac{0x02, 0xc1, 0, 0, 0, 0x10};
inline const MacAddr kB1Mac{0x02, 0xb0, 0, 0, 0, 0x11}, kB2Mac{0x02, 0xb0, 0, 0, 0, 0x12}, kB3Mac{0x02, 0xb0, 0, 0, 0, 0x13};
inline const MacAddr kBcast{0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

// The net_ring0/1 pair (main.cc), shared by the worker suites.
struct WorkerRings {
  static constexpr const char* kPorts[2] = {"net_ring0", "net_ring1"};
  static constexpr const char* kPool = "dpt_pool";
  static constexpr unsigned kPoolSize = 4095;
  static constexpr uint16_t kRingSize = 512;
  static inline const MacAddr kMac[2] = {{{0x02, 0x00, 0x00, 0x00, 0xa0, 0x00}}, {{0x02, 0x00, 0x00, 0x00, 0xa1, 0x00}}};
};
inline const MacAddr (&kPortMac)[2] = WorkerRings::kMac;
constexpr unsigned kPoolSize = WorkerRings::kPoolSize;

class WorkerTest : public WorkerFixture<WorkerRings> {
 protected:
  // Builds Shared (+ the given number of workers) and the publisher.
  void build(Forward fwd, uint32_t n_workers = 1, uint32_t conn_capacity = 1024) {
    build_workers(fwd, n_workers, conn_capacity, std::max<uint32_t>(conn_capacity / 4, 1024), 16, 64, 1024);
    if (HasFatalFailure()) return;
    before_services();
    if (HasFatalFailure()) return;
    Shared& s = sh();
    std::string err;
    // Services.
    put(table_, vsvc(kVip, 8080, Protocol::kTcp, {rs(kB1, 80), rs(kB2, 80)}));
    put(table_, vsvc(kVip, 5353, Protocol::kUdp, {rs(kB1, 53)}));
    put(table_, vsvc(kVipEmpty, 80, Protocol::kTcp, {}));
    put(table_, vsvc(kVipEmpty, 53, Protocol::kUdp, {}));
    auto dropper = vsvc(kVipEmpty, 81, Protocol::kTcp, {});
    dropper.when_empty = cp::WhenEmpty::kDrop;
    put(table_, dropper);
    put(table_, vsvc(kVipArp, 80, Protocol::kTcp, {rs(kB3, 80)}));
    put(table_, vsvc(kVipArp, 81, Protocol::kTcp, {rs(kB4, 80)}));
    ASSERT_TRUE(pub_->apply(table_, cp::TableDiff{}, true, &err)) << err;
    // Neighbours: the client and two backends (not kB3/kB4).
    s.neigh.update(kClient, kClientMac.data(), kT0);
    s.neigh.update(kB1, kB1Mac.data(), kT0);
    s.neigh.update(kB2, kB2Mac.data(), kT0);
  }

  // A suite's set-up of Shared and the workers that must precede the
  // services' publication (e.g. RSS steering: the publisher stamps it on the
  // destinations).
  virtual void before_services() {}

  // Frames the test sends.
  FrameSpec from_client(uint16_t cport, uint8_t flags, uint32_t vip = kVip, uint16_t vport = 8080) {
    FrameSpec s;
    s.dmac = kPortMac[0];
    s.smac = kClientMac;
    s.src = kClient;
    s.dst = vip;
    s.proto = kProtoTcp;
    s.sport = cport;
    s.dport = vport;
    s.tcp_flags = flags;
    s.seq = 1000;
    s.ack = flags & kTcpAck ? 5000 : 0;
    s.ttl = 64;
    return s;
  }
  FrameSpec from_backend(uint32_t b, const MacAddr& bmac, uint16_t bport, uint32_t to, uint16_t to_port,
                         uint8_t flags) {
    FrameSpec s;
    s.dmac = kPortMac[1];
    s.smac = bmac;
    s.src = b;
    s.dst = to;
    s.proto = kProtoTcp;
    s.sport = bport;
    s.dport = to_port;
    s.tcp_flags = flags;
    s.seq = 5000;
    s.ack = 1001;
    s.ttl = 64;
    return s;
  }

  // A forwarded IPv4 frame: checksums exactly as from scratch, parses.
  void expect_valid_ipv4(const Frame& f, const char* what) {
    ASSERT_GE(f.size(), 34u) << what;
    EXPECT_EQ(get16(&f[12]), 0x0800) << what;
    EXPECT_TRUE(ip_cksum_exact(f.data())) << what << ": IP checksum";
    if (ip_proto(f.data()) == kProtoTcp || ip_proto(f.data()) == kProtoUdp) {
      EXPECT_TRUE(l4_cksum_exact(f.data(), true)) << what << ": L4 checksum";
    }
    if (ip_proto(f.data()) == kProtoIcmp) {
      EXPECT_TRUE(icmp_cksum_ok(f.data())) << what << ": ICMP checksum";
    }
    Parsed p = parse_frame(f.data(), f.size());
    EXPECT_EQ(p.kind, FrameKind::kIpv4) << what << ": " << drop_reason_name(p.drop);
  }

  int64_t slot_of(uint32_t vip, uint16_t port, Protocol proto, uint32_t ip, uint16_t dport) {
    return pub_->dest_slot(cp::ServiceKey{vip, port, proto}, ip, dport);
  }
};

class WorkerModeTest : public WorkerTest, public ::testing::WithParamInterface<Forward> {};

}  // namespace vipd::dp::test
