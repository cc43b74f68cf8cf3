// Persistence templates: insert/lookup/remove, capacity, and expiry by the
// incremental sweep under a fake clock (TSC values chosen by the test).
#include <gtest/gtest.h>

#include <rte_eal.h>

#include "dataplane/fastpath/templates.h"
#include "tests/unit/dataplane/test_util.h"

namespace vipd::dp {
namespace {

TEST(Templates, InsertLookupExpire) {
  VIPD_REQUIRE_EAL();
  TemplateTable t;
  std::string err;
  ASSERT_TRUE(t.init("tmpl_test_a", 64, 0, &err)) << err;
  const TemplateKey k{0x0a600064, 0x0a000002, 8080, 6, 0};
  Template* a = t.insert(k);
  ASSERT_NE(a, nullptr);
  a->dest_slot = 3;
  a->expires = 1000;
  EXPECT_EQ(t.lookup(k), a);
  EXPECT_EQ(t.insert(k), nullptr) << "duplicate key";
  const TemplateKey other{0x0a600064, 0x0a000003, 8080, 6, 0};
  EXPECT_EQ(t.lookup(other), nullptr);
  t.sweep(999, 1000);
  EXPECT_EQ(t.lookup(k), a) << "not expired yet";
  t.sweep(1000, 1000);
  EXPECT_EQ(t.lookup(k), nullptr) << "expired at its time";
  EXPECT_EQ(t.size(), 0u);
}

TEST(Templates, FullTableRefuses) {
  VIPD_REQUIRE_EAL();
  TemplateTable t;
  std::string err;
  ASSERT_TRUE(t.init("tmpl_test_b", 16, 0, &err)) << err;
  uint32_t n = 0;
  while (t.insert(TemplateKey{1, n + 1, 80, 6, 0}) && n < 100) ++n;
  EXPECT_EQ(n, 16u);
  EXPECT_EQ(t.size(), 16u);
}

}  // namespace
}  // namespace vipd::dp
