// The kernel exception path as the workers see it (docs/gateway.md): with the
// rings set, frames for the port's own address that vipd does not serve go to
// the ring for the kernel (nothing sent, nothing counted as a drop); VIP
// traffic, replies, ARP requests and echo to a VIP are handled as before; a
// full ring is the drop exception_queue_full; what the kernel sent leaves
// through worker 0 on the tagged port. The exception thread itself (tap,
// token bucket) is covered by tests/integration/exception_test.sh.
#include <gtest/gtest.h>
#include <rte_ring.h>

#include <vector>

#include "tests/unit/dataplane/fastpath/worker_test_fixture.h"

namespace vipd::dp {
namespace {

using namespace test;

class WorkerExceptionTest : public WorkerTest {
 protected:
  void with_rings(unsigned size = 16) {
    to_ = rte_ring_create(uniq("texc_in_").c_str(), size, 0, RING_F_SC_DEQ);
    from_ = rte_ring_create(uniq("texc_out_").c_str(), size, 0, RING_F_SP_ENQ | RING_F_SC_DEQ);
    ASSERT_NE(to_, nullptr);
    ASSERT_NE(from_, nullptr);
    sh().exc_to_kernel = to_;
    sh().exc_from_kernel = from_;
  }
  // What the workers handed to the kernel, in order (freed).
  std::vector<Frame> to_kernel() {
    std::vector<Frame> out;
    void* p;
    while (rte_ring_sc_dequeue(to_, &p) == 0) {
      auto* m = static_cast<rte_mbuf*>(p);
      const uint8_t* d = rte_pktmbuf_mtod(m, const uint8_t*);
      out.emplace_back(d, d + rte_pktmbuf_data_len(m));
      rte_pktmbuf_free(m);
    }
    return out;
  }
  void TearDown() override {
    if (to_) {
      to_kernel();
      rte_ring_free(to_);
    }
    if (from_) {
      void* p;
      while (rte_ring_sc_dequeue(from_, &p) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(p));
      rte_ring_free(from_);
    }
    if (holder_) sh().exc_to_kernel = sh().exc_from_kernel = nullptr;
    WorkerTest::TearDown();
  }
  rte_ring* to_ = nullptr;
  rte_ring* from_ = nullptr;
};

TEST_F(WorkerExceptionTest, PortAddressTrafficGoesToTheKernel) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  with_rings();
  if (HasFatalFailure()) return;
  // BGP (TCP 179), BFD (UDP 3784), echo to the port address.
  FrameSpec bgp = from_client(40000, kTcpSyn, kPort0Ip, 179);
  FrameSpec bfd = from_client(49152, 0, kPort0Ip, 3784);
  bfd.proto = kProtoUdp;
  FrameSpec echo = from_client(0, 0, kPort0Ip, 0);
  echo.proto = kProtoIcmp;
  echo.icmp_type = 8;
  echo.payload.assign(16, 0x61);
  const std::vector<Frame> in = {build_frame(bgp), build_frame(bfd), build_frame(echo)};
  for (const Frame& f : in) rx(f, 0);
  expect_nothing_out("frames for the kernel");
  const std::vector<Frame> got = to_kernel();
  ASSERT_EQ(got.size(), 3u);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], in[i]) << "handed over unchanged, frame " << i;
  EXPECT_EQ(total_drops(), 0u) << drop_summary();
  // An ARP reply to the port address: learned by vipd and passed on.
  rx(build_arp(2, kClientMac, kClient2, kPortMac[0], kPort0Ip, kPortMac[0]), 0);
  uint8_t mac[6];
  EXPECT_EQ(sh().neigh.lookup(kClient2, mac, w().now), NeighState::kReachable);
  EXPECT_EQ(to_kernel().size(), 1u);
  // An ARP request for the port address: answered by vipd, not passed on.
  EXPECT_FALSE(one_out(build_arp(1, kClientMac, kClient, MacAddr{}, kPort0Ip, kBcast), 0, 0).empty());
  EXPECT_TRUE(to_kernel().empty());
  // Echo to a VIP: still vipd's.
  echo.dst = kVip;
  EXPECT_FALSE(one_out(build_frame(echo), 0, 0).empty());
  // VIP traffic: forwarded, never to the kernel.
  EXPECT_FALSE(one_out(build_frame(from_client(40001, kTcpSyn)), 0, 1).empty());
  EXPECT_TRUE(to_kernel().empty());
  EXPECT_EQ(total_drops(), 0u) << drop_summary();
}

TEST_F(WorkerExceptionTest, OffMeansDropsAsBefore) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  rx(build_frame(from_client(40000, kTcpSyn, kPort0Ip, 179)), 0);
  expect_nothing_out("TCP to the port address, no exception path");
  EXPECT_EQ(drops(kLocalUnhandled), 1u);
  FrameSpec echo = from_client(0, 0, kPort0Ip, 0);
  echo.proto = kProtoIcmp;
  echo.icmp_type = 8;
  EXPECT_FALSE(one_out(build_frame(echo), 0, 0).empty()) << "vipd answers ping itself";
}

TEST_F(WorkerExceptionTest, FullRingIsACountedDrop) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  with_rings(4);  // 3 usable slots
  if (HasFatalFailure()) return;
  for (uint16_t i = 0; i < 5; ++i) rx(build_frame(from_client(40000 + i, kTcpSyn, kPort0Ip, 179)), 0);
  EXPECT_EQ(to_kernel().size(), 3u);
  EXPECT_EQ(drops(kExceptionQueueFull), 2u);
  // VIP traffic goes on meanwhile.
  EXPECT_FALSE(one_out(build_frame(from_client(41000, kTcpSyn)), 0, 1).empty());
}

TEST_F(WorkerExceptionTest, KernelFramesLeaveThroughWorkerZero) {
  build(Forward::kFnat);
  if (HasFatalFailure()) return;
  with_rings();
  if (HasFatalFailure()) return;
  // The kernel's ARP request for the client, tagged with port index 0, and
  // a frame with a port index out of range (counted, not sent).
  const Frame arp = build_arp(1, kPortMac[0], kPort0Ip, MacAddr{}, kClient, kBcast);
  rte_mbuf* a = mbuf_of(arp, 0);
  rte_mbuf* b = mbuf_of(arp, 0);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  a->port = 0;
  b->port = 7;
  ASSERT_EQ(rte_ring_sp_enqueue(from_, a), 0);
  ASSERT_EQ(rte_ring_sp_enqueue(from_, b), 0);
  send_from_kernel(w());
  flush_tx(w());
  const std::vector<Frame> out = tx(0);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], arp);
  EXPECT_TRUE(tx(1).empty());
  EXPECT_EQ(drops(kNoRoute), 1u);
}

}  // namespace
}  // namespace vipd::dp
