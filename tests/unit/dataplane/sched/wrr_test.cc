// Weighted round robin against two reference models of IPVS "wrr":
//  * the classic LVS description (i = -1, cw = 0; step i, on wrap cw -= gcd,
//    reset to max; pick i when W(i) >= cw), and
//  * the current Linux ip_vs_wrr.c (mark starts at the list head with
//    cw = mw = max - (gcd - 1), list_for_each_entry_continue, last_pass/stop).
#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <random>
#include <vector>

#include "dataplane/sched/sched.h"
#include "tests/unit/dataplane/sched/service_builder.h"
#include "tests/unit/dataplane/test_util.h"

namespace vipd::dp {
namespace {

using namespace test;

int gcd_of(const std::vector<uint32_t>& w) {
  int g = 0;
  for (uint32_t x : w)
    if (x > 0) g = std::gcd(g, static_cast<int>(x));
  return g ? g : 1;
}
int max_of(const std::vector<uint32_t>& w) {
  int m = 0;
  for (uint32_t x : w) m = std::max(m, static_cast<int>(x));
  return m;
}

// http://kb.linuxvirtualserver.org/wiki/Weighted_Round-Robin_Scheduling
struct RefWrrClassic {
  std::vector<uint32_t> w;
  int i = -1, cw = 0;
  int next() {
    const int n = static_cast<int>(w.size());
    if (n == 0 || max_of(w) == 0) return -1;
    for (;;) {
      i = (i + 1) % n;
      if (i == 0) {
        cw -= gcd_of(w);
        if (cw <= 0) cw = max_of(w);
      }
      if (static_cast<int>(w[i]) >= cw) return i;
    }
  }
};

// Linux net/netfilter/ipvs/ip_vs_wrr.c (ip_vs_wrr_init_svc/_schedule); index
// -1 stands for the list head. No overload flags here.
struct RefWrrKernel {
  std::vector<uint32_t> w;
  int cl = -1, cw = 0, mw = 0, di = 1;
  explicit RefWrrKernel(std::vector<uint32_t> weights) : w(std::move(weights)) {
    di = gcd_of(w);
    mw = max_of(w) - (di - 1);
    cw = mw;
  }
  int next() {
    const int n = static_cast<int>(w.size());
    if (mw <= 0) return -1;
    int dest = cl;
    const int last = dest;
    int stop = -2;  // none
    bool last_pass = false, restarted = false;
    for (;;) {
      for (int d = dest + 1; d < n; ++d) {
        if (static_cast<int>(w[d]) >= cw) {
          cl = d;
          return d;
        }
        if (d == stop) return -1;
      }
      dest = -1;
      cw -= di;
      if (cw <= 0) {
        cw = mw;
        if (last_pass || last == -1) return -1;
        restarted = true;
      }
      last_pass = cw <= di;
      if (last_pass && restarted && last != -1) stop = last;
    }
  }
};

std::vector<uint32_t> random_weights(std::mt19937& rng) {
  const size_t n = 1 + rng() % 8;
  std::vector<uint32_t> w(n);
  const uint32_t mult = (rng() % 3 == 0) ? 1 + rng() % 4 : 1;  // common factors exercise gcd
  for (auto& x : w) x = (rng() % 4 == 0) ? 0 : mult * (1 + rng() % 10);
  return w;
}

TEST(SchedWrr, ReferenceModelsAgree) {
  // Sanity check of the two references against each other.
  std::mt19937 rng(30);
  for (int it = 0; it < 2000; ++it) {
    auto w = random_weights(rng);
    RefWrrClassic a{w};
    RefWrrKernel b(w);
    for (int k = 0; k < 200; ++k) ASSERT_EQ(a.next(), b.next()) << "case " << it << " pick " << k;
  }
}

TEST(SchedWrr, MatchesReferenceRandomWeights) {
  std::mt19937 rng(31);
  for (int it = 0; it < 2000; ++it) {
    auto w = random_weights(rng);
    auto svc = make_service(w, Sched::kWrr);
    RefWrrKernel ref(w);
    SchedState st;
    uint32_t sum = 0;
    for (uint32_t x : w) sum += x;
    const int picks = static_cast<int>(3 * sum / static_cast<uint32_t>(gcd_of(w))) + 5;
    for (int k = 0; k < picks; ++k) {
      const int want = ref.next();
      ASSERT_EQ(sched_pick(*svc, st), want) << "case " << it << " pick " << k;
    }
  }
}

TEST(SchedWrr, KnownSequence) {
  // Weights 4, 3, 2 (gcd 1): cw 4: a; cw 3: a b; cw 2: a b c; cw 1: a b c.
  auto svc = make_service({4, 3, 2}, Sched::kWrr);
  SchedState st;
  std::vector<int> got;
  for (int k = 0; k < 18; ++k) got.push_back(sched_pick(*svc, st));
  EXPECT_EQ(got, (std::vector<int>{0, 0, 1, 0, 1, 2, 0, 1, 2, 0, 0, 1, 0, 1, 2, 0, 1, 2}));
}

TEST(SchedWrr, DistributionProportionalToWeights) {
  std::mt19937 rng(32);
  for (int it = 0; it < 300; ++it) {
    auto w = random_weights(rng);
    auto svc = make_service(w, Sched::kWrr);
    const uint32_t g = static_cast<uint32_t>(gcd_of(w));
    uint32_t cycle = 0;
    for (uint32_t x : w) cycle += x / g;
    if (cycle == 0) continue;
    SchedState st;
    std::map<int, uint32_t> count;
    const uint32_t cycles = 7;
    for (uint32_t k = 0; k < cycles * cycle; ++k) ++count[sched_pick(*svc, st)];
    for (size_t i = 0; i < w.size(); ++i) {
      EXPECT_EQ(count[static_cast<int>(i)], cycles * w[i] / g) << "case " << it << " dest " << i;
    }
    EXPECT_EQ(count.count(-1), 0u);
  }
}

TEST(SchedWrr, ZeroWeightNeverChosen) {
  auto svc = make_service({0, 5, 0, 1, 0}, Sched::kWrr);
  SchedState st;
  std::map<int, int> count;
  for (int k = 0; k < 6000; ++k) ++count[sched_pick(*svc, st)];
  EXPECT_EQ(count[1], 5000);
  EXPECT_EQ(count[3], 1000);
  EXPECT_EQ(count.size(), 2u);
}

TEST(SchedWrr, AllZeroOrEmptyReturnsMinusOne) {
  auto zero = make_service({0, 0}, Sched::kWrr);
  SchedState st;
  EXPECT_EQ(sched_pick(*zero, st), -1);
  EXPECT_EQ(sched_pick(*zero, st), -1);
  auto empty = make_service({}, Sched::kWrr);
  EXPECT_EQ(sched_pick(*empty, st), -1);
}

TEST(SchedWrr, LargeWeightsTerminateAndAlternate) {
  auto svc = make_service({1000000, 1}, Sched::kWrr);
  SchedState st;
  int ones = 0;
  for (int k = 0; k < 2000002; ++k)  // two cycles of 1000001
    if (sched_pick(*svc, st) == 1) ++ones;
  EXPECT_EQ(ones, 2);
}

TEST(SchedWrr, StateResetsWhenServiceObjectChanges) {
  auto a = make_service({3, 1}, Sched::kWrr);
  auto b = make_service({3, 1}, Sched::kWrr);
  SchedState st;
  EXPECT_EQ(sched_pick(*a, st), 0);
  EXPECT_EQ(sched_pick(*a, st), 0);
  EXPECT_EQ(sched_pick(*a, st), 0);
  EXPECT_EQ(sched_pick(*a, st), 1);
  EXPECT_EQ(sched_pick(*a, st), 0);
  // Republished (new object): cw and position restart.
  RefWrrKernel ref({3, 1});
  for (int k = 0; k < 8; ++k) EXPECT_EQ(sched_pick(*b, st), ref.next()) << k;
  EXPECT_EQ(st.svc, b.get());
}

TEST(SchedWrr, DefaultConstructedAndZeroedStatesAgree) {
  // Workers get their SchedState array from rte_zmalloc (all zero, not the
  // default member initialisers): the first pick must be the same.
  auto svc = make_service({2, 5, 5}, Sched::kWrr);
  SchedState a;
  SchedState b;
  std::memset(static_cast<void*>(&b), 0, sizeof b);
  for (int k = 0; k < 30; ++k) EXPECT_EQ(sched_pick(*svc, a), sched_pick(*svc, b)) << k;
}

// The SchedState reset is keyed on the Service address only. A republished
// object may land at the address of a freed one (same rte_malloc slot) while
// keeping the same dense id, and then inherits a current weight that is
// larger than its own max weight. sched_wrr must still pick a destination
// whenever one has a weight above 0 (sched.h: -1 only "when no destination
// has a weight above 0"). (Regression test: fixed in 8ab6334 by clamping cw.)
TEST(SchedWrr, StaleCurrentWeightAboveMaxStillPicks) {
  auto svc = make_service({1, 1}, Sched::kWrr);
  SchedState st;
  st.svc = svc.get();  // same address as the state's old object
  st.last = 0;
  st.cw = 100;  // from an old object with max weight 100
  const int k = sched_pick(*svc, st);
  EXPECT_GE(k, 0) << "no destination chosen although both have weight 1 (stale cw 100)";
  // And from then on it follows the normal sequence for these weights.
  std::map<int, int> count;
  for (int j = 0; j < 100; ++j) ++count[sched_pick(*svc, st)];
  EXPECT_EQ(count[0], 50);
  EXPECT_EQ(count[1], 50);
}

}  // namespace
}  // namespace vipd::dp
