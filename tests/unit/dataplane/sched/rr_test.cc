// Round robin against a reference model of IPVS "rr": the next destination
// with a weight above 0, in table order, after the last one chosen (the first
// pick is the first such destination).
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

#include "dataplane/sched/sched.h"
#include "tests/unit/dataplane/sched/service_builder.h"

namespace vipd::dp {
namespace {

using namespace test;

struct RefRr {
  std::vector<uint32_t> w;
  int last = -1;  // ip_vs_rr: sched_data starts at the list head
  int next() {
    const int n = static_cast<int>(w.size());
    for (int k = 1; k <= n; ++k) {
      const int i = ((last + k) % n + n) % n;
      if (w[i] > 0) {
        last = i;
        return i;
      }
    }
    return -1;
  }
};

TEST(SchedRr, MatchesReferenceRandomWeights) {
  std::mt19937 rng(21);
  for (int it = 0; it < 500; ++it) {
    const size_t n = 1 + rng() % 9;
    std::vector<uint32_t> w(n);
    for (auto& x : w) x = (rng() % 3 == 0) ? 0 : 1 + rng() % 5;
    auto svc = make_service(w, Sched::kRr);
    RefRr ref{w};
    SchedState st;
    for (int k = 0; k < 50; ++k) {
      const int want = ref.next();
      ASSERT_EQ(sched_pick(*svc, st), want) << "weights case " << it << " pick " << k;
    }
  }
}

TEST(SchedRr, CyclesThroughWeightedInOrder) {
  auto svc = make_service({1, 0, 5, 1, 0}, Sched::kRr);
  SchedState st;
  std::vector<int> got;
  for (int k = 0; k < 9; ++k) got.push_back(sched_pick(*svc, st));
  EXPECT_EQ(got, (std::vector<int>{0, 2, 3, 0, 2, 3, 0, 2, 3})) << "weights do not matter beyond > 0";
}

TEST(SchedRr, EqualDistributionAndZeroWeightNeverChosen) {
  auto svc = make_service({3, 0, 1, 7, 0, 2}, Sched::kRr);
  SchedState st;
  std::map<int, int> count;
  for (int k = 0; k < 4000; ++k) ++count[sched_pick(*svc, st)];
  EXPECT_EQ(count.size(), 4u);
  EXPECT_EQ(count[0], 1000);
  EXPECT_EQ(count[2], 1000);
  EXPECT_EQ(count[3], 1000);
  EXPECT_EQ(count[5], 1000);
  EXPECT_EQ(count.count(1), 0u);
  EXPECT_EQ(count.count(4), 0u);
}

TEST(SchedRr, AllZeroOrEmptyReturnsMinusOne) {
  auto zero = make_service({0, 0, 0}, Sched::kRr);
  SchedState st;
  EXPECT_EQ(sched_pick(*zero, st), -1);
  EXPECT_EQ(sched_pick(*zero, st), -1);
  auto empty = make_service({}, Sched::kRr);
  EXPECT_EQ(sched_pick(*empty, st), -1);
  EXPECT_EQ(sched_rr(*empty, st), -1);
}

TEST(SchedRr, SingleDestination) {
  auto svc = make_service({4}, Sched::kRr);
  SchedState st;
  for (int k = 0; k < 5; ++k) EXPECT_EQ(sched_pick(*svc, st), 0);
}

TEST(SchedRr, StateResetsWhenServiceObjectChanges) {
  auto a = make_service({1, 1, 1}, Sched::kRr);
  auto b = make_service({1, 1, 1}, Sched::kRr);  // a republished copy
  SchedState st;
  EXPECT_EQ(sched_pick(*a, st), 0);
  EXPECT_EQ(sched_pick(*a, st), 1);
  EXPECT_EQ(st.svc, a.get());
  EXPECT_EQ(sched_pick(*b, st), 0) << "a new object starts from the beginning";
  EXPECT_EQ(st.svc, b.get());
  EXPECT_EQ(sched_pick(*b, st), 1);
  EXPECT_EQ(sched_pick(*b, st), 2);
  EXPECT_EQ(sched_pick(*a, st), 0) << "and so does switching back";
}

TEST(SchedRr, ShrunkServiceWithStaleIndexStaysInRange) {
  // A state whose last index is beyond the (new, same-address) object.
  auto svc = make_service({1, 1}, Sched::kRr);
  SchedState st;
  st.svc = svc.get();
  st.last = 7;
  const int k = sched_pick(*svc, st);
  EXPECT_GE(k, 0);
  EXPECT_LT(k, 2);
}

TEST(SchedRr, DispatchBySchedField) {
  // sched_pick uses rr for kRr even when weights differ.
  auto svc = make_service({5, 1}, Sched::kRr);
  SchedState st;
  EXPECT_EQ(sched_pick(*svc, st), 0);
  EXPECT_EQ(sched_pick(*svc, st), 1);
  EXPECT_EQ(sched_pick(*svc, st), 0);
}

}  // namespace
}  // namespace vipd::dp
