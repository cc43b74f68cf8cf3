// NeighborTable: learning, aging by timestamps, ARP request rate limiting,
// a full table and concurrent writers. Pure (no EAL).
#include "dataplane/fastpath/neighbor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "tests/unit/dataplane/test_util.h"

namespace vipd::dp {
namespace {

using namespace test;

// Owns zeroed memory for a table.
struct Mem {
  explicit Mem(size_t n) : p(std::aligned_alloc(64, (n + 63) / 64 * 64)) { std::memset(p, 0, (n + 63) / 64 * 64); }
  ~Mem() { std::free(p); }
  void* p;
};

struct Table {
  Table(uint32_t cap, uint64_t reach, uint64_t expire, uint64_t unresolved = 0) : mem(NeighborTable::bytes_for(cap)) {
    t.init(mem.p, cap, reach, expire, unresolved);
  }
  Mem mem;
  NeighborTable t;
};

MacAddr mac_of(uint32_t v) {
  return MacAddr{0x02, static_cast<uint8_t>(v >> 24), static_cast<uint8_t>(v >> 16), static_cast<uint8_t>(v >> 8),
                 static_cast<uint8_t>(v), 0x5a};
}

TEST(Neighbor, BytesForRoundsUpToPowerOfTwo) {
  EXPECT_EQ(NeighborTable::bytes_for(5), NeighborTable::bytes_for(8));
  EXPECT_EQ(NeighborTable::bytes_for(8) * 2, NeighborTable::bytes_for(9));
  EXPECT_EQ(NeighborTable::bytes_for(1) * 1024, NeighborTable::bytes_for(1024));
}

TEST(Neighbor, UpdateAndLookup) {
  Table tb(64, 100, 400);
  uint8_t mac[6];
  EXPECT_EQ(tb.t.lookup(ip4(10, 0, 0, 1), mac, 1000), NeighState::kMissing);
  EXPECT_EQ(tb.t.size(), 0u);
  for (uint32_t i = 1; i <= 20; ++i) {
    const MacAddr m = mac_of(i);
    ASSERT_TRUE(tb.t.update(ip4(10, 0, 0, i), m.data(), 1000));
  }
  EXPECT_EQ(tb.t.size(), 20u);
  for (uint32_t i = 1; i <= 20; ++i) {
    ASSERT_EQ(tb.t.lookup(ip4(10, 0, 0, i), mac, 1000), NeighState::kReachable) << i;
    const MacAddr m = mac_of(i);
    EXPECT_TRUE(std::equal(mac, mac + 6, m.begin())) << i;
  }
  // A new MAC replaces the old one; no new entry.
  const MacAddr m2{0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f};
  ASSERT_TRUE(tb.t.update(ip4(10, 0, 0, 3), m2.data(), 1001));
  ASSERT_EQ(tb.t.lookup(ip4(10, 0, 0, 3), mac, 1001), NeighState::kReachable);
  EXPECT_TRUE(std::equal(mac, mac + 6, m2.begin()));
  EXPECT_EQ(tb.t.size(), 20u);
  // A MAC with every bit set (bit 63 is the valid flag) round-trips.
  const MacAddr ff{0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  ASSERT_TRUE(tb.t.update(ip4(10, 0, 0, 4), ff.data(), 1001));
  ASSERT_EQ(tb.t.lookup(ip4(10, 0, 0, 4), mac, 1001), NeighState::kReachable);
  EXPECT_TRUE(std::equal(mac, mac + 6, ff.begin()));
  // An all-zero MAC is still a valid entry.
  const MacAddr zero{};
  ASSERT_TRUE(tb.t.update(ip4(10, 0, 0, 5), zero.data(), 1001));
  ASSERT_EQ(tb.t.lookup(ip4(10, 0, 0, 5), mac, 1001), NeighState::kReachable);
  EXPECT_TRUE(std::equal(mac, mac + 6, zero.begin()));
}

TEST(Neighbor, AddressZeroIsNeverStored) {
  Table tb(16, 100, 400);
  const MacAddr m = mac_of(1);
  uint8_t mac[6];
  EXPECT_FALSE(tb.t.update(0, m.data(), 10));
  EXPECT_EQ(tb.t.lookup(0, mac, 10), NeighState::kMissing);
  EXPECT_EQ(tb.t.size(), 0u);
}

TEST(Neighbor, AgingReachableStaleMissing) {
  const uint64_t reach = 100, expire = 400, t0 = 1'000'000;
  Table tb(16, reach, expire);
  const uint32_t ip = ip4(10, 1, 0, 11);
  const MacAddr m = mac_of(7);
  ASSERT_TRUE(tb.t.update(ip, m.data(), t0));
  uint8_t mac[6];
  EXPECT_EQ(tb.t.lookup(ip, mac, t0), NeighState::kReachable);
  EXPECT_EQ(tb.t.lookup(ip, mac, t0 + reach), NeighState::kReachable) << "age == reachable time";
  EXPECT_EQ(tb.t.lookup(ip, mac, t0 + reach + 1), NeighState::kStale);
  EXPECT_TRUE(std::equal(mac, mac + 6, m.begin())) << "a stale entry still gives its MAC";
  EXPECT_EQ(tb.t.lookup(ip, mac, t0 + expire), NeighState::kStale) << "age == expire time";
  EXPECT_EQ(tb.t.lookup(ip, mac, t0 + expire + 1), NeighState::kMissing);
  EXPECT_EQ(tb.t.lookup(ip, mac, t0 + 100 * expire), NeighState::kMissing);
  // A refresh makes it reachable again.
  ASSERT_TRUE(tb.t.update(ip, m.data(), t0 + 1000));
  EXPECT_EQ(tb.t.lookup(ip, mac, t0 + 1000), NeighState::kReachable);
  EXPECT_EQ(tb.t.lookup(ip, mac, t0 + 1000 + reach + 1), NeighState::kStale);
}

TEST(Neighbor, ClaimRequestRateLimit) {
  const uint64_t interval = 50;
  Table tb(16, 100, 400);
  const uint32_t ip = ip4(10, 1, 0, 13);
  EXPECT_TRUE(tb.t.claim_request(ip, 1000, interval)) << "first request";
  EXPECT_FALSE(tb.t.claim_request(ip, 1000, interval)) << "same time";
  EXPECT_FALSE(tb.t.claim_request(ip, 1000 + interval - 1, interval)) << "within interval";
  EXPECT_TRUE(tb.t.claim_request(ip, 1000 + interval, interval)) << "interval elapsed";
  EXPECT_FALSE(tb.t.claim_request(ip, 1000 + interval + 1, interval));
  // Per address.
  EXPECT_TRUE(tb.t.claim_request(ip4(10, 1, 0, 14), 1000 + interval + 1, interval));
  // A claimed-but-unresolved address is still missing.
  uint8_t mac[6];
  EXPECT_EQ(tb.t.lookup(ip, mac, 1000 + interval), NeighState::kMissing);
  // Learning it later works and keeps the rate limit state.
  const MacAddr m = mac_of(3);
  ASSERT_TRUE(tb.t.update(ip, m.data(), 1060));  // last claim was at 1050
  EXPECT_EQ(tb.t.lookup(ip, mac, 1060), NeighState::kReachable);
  EXPECT_FALSE(tb.t.claim_request(ip, 1060, interval));
  EXPECT_TRUE(tb.t.claim_request(ip, 1100, interval));
}

TEST(Neighbor, ClaimRequestOneWinnerAcrossThreads) {
  Table tb(1024, 100, 400);
  const uint64_t interval = 1'000'000;
  for (int round = 0; round < 200; ++round) {
    const uint32_t ip = ip4(10, 2, round / 250, round % 250 + 1);
    std::atomic<int> winners{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> th;
    for (int k = 0; k < 4; ++k)
      th.emplace_back([&] {
        while (!go.load()) {
        }
        if (tb.t.claim_request(ip, 5000, interval)) winners.fetch_add(1);
      });
    go.store(true);
    for (auto& t : th) t.join();
    ASSERT_EQ(winners.load(), 1) << "round " << round;
  }
}

TEST(Neighbor, TableFull) {
  Table tb(4, 100, 400);
  uint8_t mac[6];
  for (uint32_t i = 1; i <= 4; ++i) {
    const MacAddr m = mac_of(i);
    ASSERT_TRUE(tb.t.update(ip4(10, 0, 0, i), m.data(), 10)) << i;
  }
  EXPECT_EQ(tb.t.size(), 4u);
  const MacAddr m5 = mac_of(5);
  EXPECT_FALSE(tb.t.update(ip4(10, 0, 0, 5), m5.data(), 10)) << "table full";
  EXPECT_EQ(tb.t.lookup(ip4(10, 0, 0, 5), mac, 10), NeighState::kMissing);
  EXPECT_FALSE(tb.t.claim_request(ip4(10, 0, 0, 5), 10, 1)) << "no slot to rate-limit in";
  // Existing entries still update and resolve.
  const MacAddr m2 = mac_of(22);
  EXPECT_TRUE(tb.t.update(ip4(10, 0, 0, 2), m2.data(), 11));
  for (uint32_t i = 1; i <= 4; ++i) {
    ASSERT_EQ(tb.t.lookup(ip4(10, 0, 0, i), mac, 11), NeighState::kReachable) << i;
    const MacAddr want = i == 2 ? m2 : mac_of(i);
    EXPECT_TRUE(std::equal(mac, mac + 6, want.begin())) << i;
  }
  EXPECT_EQ(tb.t.size(), 4u);
}

// A flood of spoofed sources leaves entries that never resolve (an ARP request
// each): once their last request is older than the unresolved time, their
// slots serve new addresses; a full table of such entries recovers by itself.
TEST(Neighbor, UnresolvedEntriesAreReusedAfterTheirTime) {
  Table tb(4, 100, 400, 50);
  for (uint32_t i = 1; i <= 4; ++i) ASSERT_TRUE(tb.t.claim_request(ip4(10, 0, 0, i), 10, 5)) << i;
  EXPECT_EQ(tb.t.size(), 4u);
  const MacAddr m5 = mac_of(5);
  EXPECT_FALSE(tb.t.update(ip4(10, 0, 0, 5), m5.data(), 60)) << "requests 50 ticks old: still pending";
  EXPECT_FALSE(tb.t.claim_request(ip4(10, 0, 0, 5), 60, 5));
  ASSERT_TRUE(tb.t.update(ip4(10, 0, 0, 5), m5.data(), 61)) << "older than 50: a slot is reused";
  uint8_t mac[6];
  ASSERT_EQ(tb.t.lookup(ip4(10, 0, 0, 5), mac, 61), NeighState::kReachable);
  EXPECT_TRUE(std::equal(mac, mac + 6, m5.begin()));
  EXPECT_EQ(tb.t.size(), 4u) << "reused in place, not grown";
  int missing = 0;
  for (uint32_t i = 1; i <= 4; ++i) missing += tb.t.lookup(ip4(10, 0, 0, i), mac, 61) == NeighState::kMissing;
  EXPECT_EQ(missing, 4) << "the old, never resolved, entries stay unresolved";
  // The reused slot belongs to .5 now: a request for it is rate-limited afresh.
  EXPECT_TRUE(tb.t.claim_request(ip4(10, 0, 0, 5), 62, 5));
  EXPECT_FALSE(tb.t.claim_request(ip4(10, 0, 0, 5), 63, 5));
}

// Resolved entries keep their slot until their MAC expires (and no request is
// pending); a reachable one is never taken over.
TEST(Neighbor, ResolvedEntriesAreReusedOnlyOnceExpired) {
  Table tb(2, 100, 400, 50);
  const MacAddr m1 = mac_of(1), m2 = mac_of(2), m3 = mac_of(3);
  ASSERT_TRUE(tb.t.update(ip4(10, 0, 0, 1), m1.data(), 10));
  ASSERT_TRUE(tb.t.update(ip4(10, 0, 0, 2), m2.data(), 300));
  EXPECT_FALSE(tb.t.update(ip4(10, 0, 0, 3), m3.data(), 400)) << ".1 is 390 ticks old: not expired";
  // .1 is refreshed by a stale-entry request at 405: pending, so kept for 50 more.
  ASSERT_TRUE(tb.t.claim_request(ip4(10, 0, 0, 1), 405, 5));
  EXPECT_FALSE(tb.t.update(ip4(10, 0, 0, 3), m3.data(), 420));
  ASSERT_TRUE(tb.t.update(ip4(10, 0, 0, 3), m3.data(), 460)) << ".1 expired, its request 55 ticks old";
  uint8_t mac[6];
  EXPECT_EQ(tb.t.lookup(ip4(10, 0, 0, 1), mac, 460), NeighState::kMissing);
  ASSERT_NE(tb.t.lookup(ip4(10, 0, 0, 2), mac, 460), NeighState::kMissing) << ".2 kept its slot";
  EXPECT_TRUE(std::equal(mac, mac + 6, m2.begin()));
  ASSERT_EQ(tb.t.lookup(ip4(10, 0, 0, 3), mac, 460), NeighState::kReachable);
  EXPECT_TRUE(std::equal(mac, mac + 6, m3.begin()));
}

TEST(Neighbor, RefreshNeverCreates) {
  Table tb(8, 100, 400);
  const MacAddr m1 = mac_of(1), m9 = mac_of(9);
  EXPECT_FALSE(tb.t.refresh(ip4(10, 0, 0, 1), m1.data(), 10));
  EXPECT_EQ(tb.t.size(), 0u);
  ASSERT_TRUE(tb.t.update(ip4(10, 0, 0, 1), m1.data(), 10));
  ASSERT_TRUE(tb.t.refresh(ip4(10, 0, 0, 1), m9.data(), 20));
  uint8_t mac[6];
  ASSERT_EQ(tb.t.lookup(ip4(10, 0, 0, 1), mac, 20), NeighState::kReachable);
  EXPECT_TRUE(std::equal(mac, mac + 6, m9.begin()));
}

// Slots reused all the time (every entry is dead 8 ticks after it was learned)
// while a reader looks addresses up: whatever it finds must be that address's
// own MAC, never the MAC of the address that had the slot before.
TEST(Neighbor, ReusedSlotsNeverHandOutAnotherAddressesMac) {
  Table tb(16, 4, 8, 8);
  constexpr uint32_t kIps = 200;
  std::atomic<uint64_t> clock{100};
  std::atomic<bool> stop{false};
  std::atomic<long> bad{0}, found{0};
  std::thread reader([&] {
    uint8_t mac[6];
    for (long pass = 0; !stop.load() || pass < 200; ++pass) {
      for (uint32_t k = 1; k <= kIps; ++k) {
        const uint32_t ip = ip4(10, 7, 0, k);
        if (tb.t.lookup(ip, mac, clock.load()) == NeighState::kMissing) continue;
        found.fetch_add(1, std::memory_order_relaxed);
        const MacAddr want = mac_of(ip);
        if (!std::equal(mac, mac + 6, want.begin())) bad.fetch_add(1);
      }
    }
  });
  auto writer = [&](uint32_t offset) {
    for (uint32_t it = 0; it < 300000; ++it) {
      const uint32_t ip = ip4(10, 7, 0, 1 + (it * 7 + offset) % kIps);
      const MacAddr m = mac_of(ip);
      const uint64_t now = clock.fetch_add(1) + 1;
      if (it % 3 == 0) tb.t.claim_request(ip, now, 2);
      else tb.t.update(ip, m.data(), now);
    }
  };
  std::thread w1(writer, 0), w2(writer, 101);
  w1.join();
  w2.join();
  stop.store(true);
  reader.join();
  EXPECT_EQ(bad.load(), 0) << "a lookup returned a MAC learned for another address";
  EXPECT_GT(found.load(), 0) << "the reader never found an entry: the test checked nothing";
  EXPECT_LE(tb.t.size(), 16u);
}

TEST(Neighbor, ManyAddressesProbeBounded) {
  // More addresses than slots: every accepted one resolves to its own MAC,
  // rejected ones are missing, and the table never exceeds its capacity.
  Table tb(256, 100, 400);
  std::vector<uint32_t> ok, rejected;
  for (uint32_t i = 1; i <= 600; ++i) {
    const uint32_t ip = ip4(172, 16, i >> 8, i & 0xff);
    const MacAddr m = mac_of(ip);
    (tb.t.update(ip, m.data(), 10) ? ok : rejected).push_back(ip);
  }
  EXPECT_LE(ok.size(), 256u);
  EXPECT_GE(ok.size(), 200u) << "the table fills reasonably before refusing";
  EXPECT_EQ(tb.t.size(), ok.size());
  uint8_t mac[6];
  for (uint32_t ip : ok) {
    ASSERT_EQ(tb.t.lookup(ip, mac, 10), NeighState::kReachable);
    const MacAddr m = mac_of(ip);
    ASSERT_TRUE(std::equal(mac, mac + 6, m.begin()));
  }
  for (uint32_t ip : rejected) ASSERT_EQ(tb.t.lookup(ip, mac, 10), NeighState::kMissing);
}

// Two writers update the same addresses with their own MACs while a reader
// checks every MAC it sees is one that was written (no torn values), and
// concurrent learners of new addresses never create duplicate slots.
TEST(Neighbor, ConcurrentUpdatesDoNotCorrupt) {
  Table tb(1024, 1'000'000'000, 4'000'000'000);
  constexpr int kIps = 64;
  const MacAddr a{0x02, 0x11, 0x11, 0x11, 0x11, 0x11};
  const MacAddr b{0x02, 0xee, 0xee, 0xee, 0xee, 0xee};
  std::atomic<bool> stop{false};
  std::atomic<long> bad{0}, seen_a{0}, seen_b{0};
  auto writer = [&](const MacAddr& m, int offset) {
    uint64_t now = 1000;
    for (int it = 0; it < 200000; ++it) {
      const int k = (it + offset) % kIps;
      tb.t.update(ip4(10, 9, 0, k + 1), m.data(), ++now);
    }
  };
  std::atomic<bool> reader_up{false};
  std::thread reader([&] {
    uint8_t mac[6];
    reader_up.store(true);
    // Keeps reading while the writers run, and 2000 passes after they are
    // done (counted from then: a reader the scheduler kept off the CPU for the
    // writers' whole run still sees the entries).
    for (long after = 0; after < 2000;) {
      if (stop.load()) ++after;
      for (int k = 0; k < kIps; ++k) {
        if (tb.t.lookup(ip4(10, 9, 0, k + 1), mac, 1'000'000) == NeighState::kMissing) continue;
        if (std::equal(mac, mac + 6, a.begin())) {
          seen_a.fetch_add(1, std::memory_order_relaxed);
        } else if (std::equal(mac, mac + 6, b.begin())) {
          seen_b.fetch_add(1, std::memory_order_relaxed);
        } else {
          bad.fetch_add(1);
        }
      }
    }
  });
  while (!reader_up.load()) {
  }
  std::thread w1(writer, a, 0), w2(writer, b, 17);
  w1.join();
  w2.join();
  stop.store(true);
  reader.join();
  EXPECT_EQ(bad.load(), 0) << "torn or foreign MAC observed";
  EXPECT_GT(seen_a.load() + seen_b.load(), 0);
  EXPECT_EQ(tb.t.size(), static_cast<uint32_t>(kIps)) << "one slot per address";
  uint8_t mac[6];
  for (int k = 0; k < kIps; ++k) {
    ASSERT_EQ(tb.t.lookup(ip4(10, 9, 0, k + 1), mac, 1'000'000), NeighState::kReachable);
    EXPECT_TRUE(std::equal(mac, mac + 6, a.begin()) || std::equal(mac, mac + 6, b.begin()));
  }

  // Both threads learning the same new addresses at the same time.
  Table t2(1024, 100, 400);
  std::atomic<bool> go{false};
  auto learner = [&](const MacAddr& m) {
    while (!go.load()) {
    }
    for (uint32_t i = 1; i <= 500; ++i) t2.t.update(ip4(10, 20, i >> 8, i & 0xff), m.data(), 10);
  };
  std::thread l1(learner, a), l2(learner, b);
  go.store(true);
  l1.join();
  l2.join();
  EXPECT_EQ(t2.t.size(), 500u) << "an address raced by two learners took two slots";
  for (uint32_t i = 1; i <= 500; ++i)
    ASSERT_EQ(t2.t.lookup(ip4(10, 20, i >> 8, i & 0xff), mac, 10), NeighState::kReachable) << i;
}

}  // namespace
}  // namespace vipd::dp
