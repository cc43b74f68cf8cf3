// Thread: test. Frames and helpers shared by the packet tests
// (packet_test.cc: parse_frame; packet_build_test.cc: the rewrite and the
// reply builders).
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "dataplane/fastpath/packet.h"
#include "tests/unit/dataplane/test_util.h"

namespace vipd::dp::packet_test {

using namespace test;

inline const uint32_t kClient = ip4(10, 0, 0, 10);
inline const uint32_t kVip = ip4(10, 96, 0, 100);
inline const MacAddr kMacA{0x02, 0xaa, 0, 0, 0, 1};
inline const MacAddr kMacB{0x02, 0xbb, 0, 0, 0, 2};

inline FrameSpec tcp_spec() {
  FrameSpec s;
  s.dmac = kMacA;
  s.smac = kMacB;
  s.src = kClient;
  s.dst = kVip;
  s.proto = 6;
  s.sport = 40000;
  s.dport = 8080;
  return s;
}
inline FrameSpec udp_spec() {
  FrameSpec s = tcp_spec();
  s.proto = 17;
  s.sport = 5353;
  s.dport = 53;
  s.payload = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  return s;
}
inline FrameSpec icmp_spec() {
  FrameSpec s = tcp_spec();
  s.proto = 1;
  s.payload = {'p', 'i', 'n', 'g', 0, 1, 2};
  return s;
}

inline Parsed parse(const std::vector<uint8_t>& f) { return parse_frame(f.data(), f.size()); }

inline void expect_drop(const std::vector<uint8_t>& f, DropReason r, const char* what) {
  Parsed p = parse(f);
  EXPECT_EQ(p.kind, FrameKind::kDrop) << what;
  EXPECT_EQ(static_cast<int>(p.drop), static_cast<int>(r))
      << what << ": got " << drop_reason_name(p.drop) << ", want " << drop_reason_name(r);
}

}  // namespace vipd::dp::packet_test
