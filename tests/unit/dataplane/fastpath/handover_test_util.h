// Connection hand-over in the worker suites, for both families
// (worker_handover_test.cc: IPv4, worker_ipv6_test.cc: IPv6): two peers on
// port 1's subnet (the backends' side, as in the ECMP lab), known by their
// IPv4 addresses and resolved, and the frames they hand over.
#pragma once

#include <algorithm>
#include <vector>

#include "tests/unit/dataplane/fastpath/worker_test_fixture.h"

namespace vipd::dp::test {

inline const uint32_t kPeer1 = ip4(10, 1, 0, 201), kPeer2 = ip4(10, 1, 0, 202);
inline const MacAddr kPeer1Mac{0x02, 0xee, 0, 0, 0, 0x01}, kPeer2Mac{0x02, 0xee, 0, 0, 0, 0x02};

// kPeer1 and kPeer2 as --handover-peers, their MACs known; the rate: one
// packet per 1000 TSC, 100 at once.
inline void set_handover_peers(Shared& s) {
  s.handover_peers[0] = kPeer1;
  s.handover_peers[1] = kPeer2;
  s.n_handover_peers = 2;
  s.handover_interval = 1000;
  s.handover_tau = 1000 * 99;
  s.neigh.update(kPeer1, kPeer1Mac.data(), kT0);
  s.neigh.update(kPeer2, kPeer2Mac.data(), kT0);
}

// `f` as a peer hands it over: from the peer's MAC to port 1's, ethertype 0x88b5.
inline Frame as_peer_frame(Frame f, const MacAddr& peer_mac) {
  std::copy(kPortMac[1].begin(), kPortMac[1].end(), f.begin());
  std::copy(peer_mac.begin(), peer_mac.end(), f.begin() + 6);
  f[12] = 0x88;
  f[13] = 0xb5;
  return f;
}

// `out` (port 1's frames) is `in` handed over by `w`: one copy to each
// peer, from port 1's MAC, ethertype 0x88b5, the IP packet unchanged (TTL /
// hop limit too), counted (once).
inline void expect_handed_over(const Worker& w, const std::vector<Frame>& out, const Frame& in) {
  EXPECT_EQ(w.counters.handovers.load(), 1u);
  ASSERT_EQ(out.size(), 2u);
  std::vector<MacAddr> dsts;
  for (const Frame& o : out) {
    ASSERT_EQ(o.size(), in.size());
    dsts.push_back(MacAddr{o[0], o[1], o[2], o[3], o[4], o[5]});
    EXPECT_TRUE(mac_is(o.data() + 6, kPortMac[1])) << "from the port the peers are on";
    EXPECT_EQ(get16(&o[12]), 0x88b5) << "the hand-over ethertype";
    EXPECT_TRUE(std::equal(o.begin() + 14, o.end(), in.begin() + 14)) << "IP packet unchanged";
  }
  std::sort(dsts.begin(), dsts.end());
  EXPECT_EQ(dsts, (std::vector<MacAddr>{kPeer1Mac, kPeer2Mac}));
}

// What the worker does after a burst: the peers' frames that matched go
// through the usual path; then tx.
inline void serve_handed_over(Worker& w) {
  if (w.n_peer_frames) serve_peer_frames(w);
  flush_tx(w);
}

}  // namespace vipd::dp::test
