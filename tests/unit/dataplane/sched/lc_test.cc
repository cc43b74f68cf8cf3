// The least-connection family against reference models written from the IPVS
// definitions (overhead = active * 256 + inactive; wlc: overhead / weight;
// sed: (active + 1) / weight; nq: an idle server first, else sed). The
// references use doubles; the code under test compares cross products.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "dataplane/sched/sched.h"
#include "tests/unit/dataplane/sched/service_builder.h"

namespace vipd::dp {
namespace {

using namespace test;

struct Load {
  std::vector<DestCounters> c;
  explicit Load(size_t n) : c(n) {}
  SchedCtx ctx() const { return SchedCtx{c.data(), 0, 0}; }
};

int ref_pick(const std::vector<uint32_t>& w, const Load& l, Sched s) {
  int best = -1;
  double best_v = 0;
  if (s == Sched::kNq) {
    for (size_t i = 0; i < w.size(); ++i)
      if (w[i] > 0 && l.c[i].active == 0) return static_cast<int>(i);
    s = Sched::kSed;
  }
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i] == 0) continue;
    const double over = static_cast<double>(l.c[i].active) * 256 + static_cast<double>(l.c[i].inactive);
    double v = 0;
    switch (s) {
      case Sched::kLc: v = over; break;
      case Sched::kWlc: v = over / w[i]; break;
      case Sched::kSed: v = (static_cast<double>(l.c[i].active) + 1) / w[i]; break;
      default: break;
    }
    if (best < 0 || v < best_v) {
      best = static_cast<int>(i);
      best_v = v;
    }
  }
  return best;
}

class LcFamily : public ::testing::TestWithParam<Sched> {};

TEST_P(LcFamily, MatchesReferenceOnRandomLoads) {
  std::mt19937 rng(7);
  for (int round = 0; round < 2000; ++round) {
    const size_t n = 1 + rng() % 6;
    std::vector<uint32_t> w(n);
    for (auto& x : w) x = rng() % 4;  // includes weight 0
    auto svc = make_service(w, GetParam());
    Load l(n);
    for (auto& c : l.c) {
      c.active = rng() % 5;
      c.inactive = rng() % 700;
    }
    SchedState st;
    EXPECT_EQ(sched_pick(*svc, st, l.ctx()), ref_pick(w, l, GetParam())) << "round " << round;
  }
}

TEST_P(LcFamily, SequenceWithConnectionsOpeningAndNoWeightZero) {
  // Simulate connections arriving (each becomes active on its server) and
  // check every choice against the model.
  const std::vector<uint32_t> w{3, 1, 0, 2};
  auto svc = make_service(w, GetParam());
  Load l(w.size());
  SchedState st;
  for (int k = 0; k < 60; ++k) {
    const int want = ref_pick(w, l, GetParam());
    const int got = sched_pick(*svc, st, l.ctx());
    ASSERT_EQ(got, want) << "pick " << k;
    ASSERT_NE(got, 2) << "weight 0 chosen";
    ++l.c[got].active;
  }
}

INSTANTIATE_TEST_SUITE_P(Ipvs, LcFamily, ::testing::Values(Sched::kLc, Sched::kWlc, Sched::kSed, Sched::kNq),
                         [](const auto& info) { return std::string(cp::name(info.param)); });

TEST(LcFamilyEdges, AllZeroWeightsGiveNothing) {
  for (Sched s : {Sched::kLc, Sched::kWlc, Sched::kSed, Sched::kNq}) {
    auto svc = make_service({0, 0}, s);
    svc->n_weighted = 0;
    SchedState st;
    EXPECT_EQ(sched_pick(*svc, st), -1) << cp::name(s);
  }
}

TEST(LcFamilyEdges, WlcPrefersHeavierServerAtEqualLoad) {
  auto svc = make_service({1, 4}, Sched::kWlc);
  Load l(2);
  l.c[0].active = 1;
  l.c[1].active = 3;  // 256/1 vs 768/4 = 192: server 1 is less loaded per weight
  SchedState st;
  EXPECT_EQ(sched_pick(*svc, st, l.ctx()), 1);
}

TEST(LcFamilyEdges, NqTakesIdleServerEvenIfSlow) {
  auto svc = make_service({10, 1}, Sched::kNq);
  Load l(2);
  l.c[0].active = 1;  // sed would pick 0 ((1+1)/10 < (0+1)/1)
  SchedState st;
  EXPECT_EQ(sched_pick(*svc, st, l.ctx()), 1);
  auto sed = make_service({10, 1}, Sched::kSed);
  SchedState st2;
  EXPECT_EQ(sched_pick(*sed, st2, l.ctx()), 0);
}

TEST(Lblc, KeepsAssignmentUntilOverloaded) {
  auto svc = make_service({2, 2, 2}, Sched::kLblc);
  Load l(3);
  SchedState st;
  const int first = sched_pick(*svc, st, l.ctx());
  ASSERT_GE(first, 0);
  l.c[first].active = 2;  // at its weight: not overloaded
  EXPECT_EQ(sched_pick(*svc, st, l.ctx()), first);
  l.c[first].active = 3;  // above weight while others are under half load
  const int second = sched_pick(*svc, st, l.ctx());
  EXPECT_NE(second, first);
  EXPECT_EQ(sched_pick(*svc, st, l.ctx()), second) << "new assignment sticks";
}

TEST(Lblcr, GrowsTheSetWhenMembersAreOverloaded) {
  auto svc = make_service({1, 1, 1, 1}, Sched::kLblcr);
  Load l(4);
  SchedState st;
  const int a = sched_pick(*svc, st, l.ctx());
  ASSERT_GE(a, 0);
  EXPECT_EQ(__builtin_popcountll(st.lblcr_set), 1);
  l.c[a].active = 5;
  const int b = sched_pick(*svc, st, l.ctx());
  EXPECT_NE(a, b);
  EXPECT_EQ(__builtin_popcountll(st.lblcr_set), 2);
  l.c[a].active = 0;
  EXPECT_EQ(sched_pick(*svc, st, l.ctx()), a) << "least loaded member of the set";
}

}  // namespace
}  // namespace vipd::dp
