// Outlier ejection arithmetic (eject.h): K consecutive failures eject, the
// time grows with ejections in a row and is capped, the service's share is
// respected, a SYN-ACK or the time readmits, a success resets the count.
#include "dataplane/fastpath/eject.h"

#include <gtest/gtest.h>

namespace vipd::dp {
namespace {

constexpr uint64_t kSec = 1000;  // TSC ticks per "second" in these tests
const EjectParams kP{3, 5 * kSec, 300 * kSec, 50};

TEST(Eject, TimeGrowsWithEjectionsInARowAndIsCapped) {
  EXPECT_EQ(eject_time(kP, 1), 5 * kSec);
  EXPECT_EQ(eject_time(kP, 2), 10 * kSec);
  EXPECT_EQ(eject_time(kP, 60), 300 * kSec);
  EXPECT_EQ(eject_time(kP, 61), 300 * kSec);
  EXPECT_EQ(eject_time(kP, 0xffffffffu), 300 * kSec) << "no overflow";
  EXPECT_EQ(eject_time(kP, 0), 5 * kSec);
}

TEST(Eject, ShareOfTheServicesBackends) {
  EXPECT_FALSE(eject_allowed(kP, 1, 0)) << "a lone backend stays";
  EXPECT_TRUE(eject_allowed(kP, 2, 0));
  EXPECT_FALSE(eject_allowed(kP, 2, 1));
  EXPECT_TRUE(eject_allowed(kP, 4, 1));
  EXPECT_FALSE(eject_allowed(kP, 4, 2));
  EXPECT_FALSE(eject_allowed(kP, 3, 1)) << "50 % of 3 is 1";
  const EjectParams all{3, kSec, kSec, 100};
  EXPECT_TRUE(eject_allowed(all, 3, 1));
  EXPECT_FALSE(eject_allowed(all, 3, 2)) << "one always stays";
  const EjectParams none{3, kSec, kSec, 0};
  EXPECT_FALSE(eject_allowed(none, 4, 0));
}

TEST(Eject, KConsecutiveFailuresEjectASuccessStartsOver) {
  EjectState e;
  uint64_t now = 1000 * kSec;
  EXPECT_FALSE(eject_failure(e, kP, now, true));
  EXPECT_FALSE(eject_failure(e, kP, now, true));
  EXPECT_FALSE(eject_success(e, now)) << "not ejected: nothing to readmit";
  EXPECT_EQ(e.fails.load(), 0u) << "a success resets the count";
  EXPECT_FALSE(eject_failure(e, kP, now, true));
  EXPECT_FALSE(eject_failure(e, kP, now, true));
  EXPECT_FALSE(e.ejected(now));
  EXPECT_TRUE(eject_failure(e, kP, now, true)) << "the third in a row";
  EXPECT_TRUE(e.ejected(now));
  EXPECT_TRUE(e.ejected(now + 5 * kSec - 1));
  EXPECT_FALSE(e.ejected(now + 5 * kSec)) << "readmitted after the time";
  EXPECT_EQ(e.ejections.load(), 1u);
  // Failures of connections sent before the ejection do not extend it.
  EXPECT_FALSE(eject_failure(e, kP, now + 1, true));
  EXPECT_EQ(e.fails.load(), 0u);
}

TEST(Eject, RepeatedEjectionsLastLongerUntilTheBackendStaysHealthy) {
  EjectState e;
  uint64_t now = 1000 * kSec;
  for (uint32_t n = 1; n <= 3; ++n) {
    for (int i = 0; i < 3; ++i) eject_failure(e, kP, now, true);
    ASSERT_TRUE(e.ejected(now)) << n;
    EXPECT_EQ(e.until.load() - now, n * 5 * kSec) << "ejection " << n;
    now = e.until.load();  // time is up
  }
  // Healthy for longer than the longest ejection: the multiplier starts over.
  now += 1000 * kSec;
  for (int i = 0; i < 3; ++i) eject_failure(e, kP, now, true);
  EXPECT_EQ(e.until.load() - now, 5 * kSec);
  EXPECT_EQ(e.ejections.load(), 4u);
}

TEST(Eject, ASynAckReadmitsAtOnceButKeepsTheMultiplier) {
  EjectState e;
  const uint64_t now = 1000 * kSec;
  for (int i = 0; i < 3; ++i) eject_failure(e, kP, now, true);
  ASSERT_TRUE(e.ejected(now + 1));
  EXPECT_TRUE(eject_success(e, now + 1));
  EXPECT_FALSE(e.ejected(now + 1));
  EXPECT_EQ(e.readmissions.load(), 1u);
  for (int i = 0; i < 3; ++i) eject_failure(e, kP, now + 2, true);
  EXPECT_EQ(e.until.load() - (now + 2), 10 * kSec) << "second ejection in a row";
}

TEST(Eject, OverTheShareCountsButDoesNotEject) {
  EjectState e;
  const uint64_t now = 1000 * kSec;
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(eject_failure(e, kP, now, false));
  EXPECT_FALSE(e.ejected(now));
  EXPECT_TRUE(eject_failure(e, kP, now, true)) << "ejected once the share allows it";
}

TEST(Eject, OffWithKZero) {
  EjectState e;
  const EjectParams off{0, kSec, kSec, 100};
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(eject_failure(e, off, 1000, true));
  EXPECT_FALSE(e.ejected(1000));
}

TEST(Eject, ResetForgetsAReleasedSlotsState) {
  EjectState e;
  for (int i = 0; i < 3; ++i) eject_failure(e, kP, 1000, true);
  e.reset();
  EXPECT_FALSE(e.ejected(1000));
  EXPECT_EQ(e.fails.load(), 0u);
  EXPECT_EQ(e.streak.load(), 0u);
}

}  // namespace
}  // namespace vipd::dp
