// ConnTable: both-direction keys, capacity, duplicate keys and the
// incremental expiry sweep, with both keys in the hash (NAT) and with the
// replies in the port index (full NAT); the cuckoo hash's full table,
// displacement and reuse. Needs EAL (rte_malloc).
#include "dataplane/fastpath/conn_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <map>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "dataplane/fastpath/flow_hash.h"
#include "dataplane/fastpath/packet.h"
#include "tests/unit/dataplane/test_util.h"

namespace vipd::dp {
namespace {

using namespace test;

// A connection client c:cp -> VIP v:vp sent as l:lp -> d:dp.
struct Flow {
  uint32_t c, v, l, d;
  uint16_t cp, vp, lp, dp;
  uint8_t proto = kProtoTcp;
  FlowKey fwd() const { return make_key(c, cp, v, vp, proto); }
  FlowKey rev() const { return make_key(d, dp, l, lp, proto); }
};

Flow flow(uint32_t i) {
  return Flow{ip4(10, 0, 0, 10) + i, ip4(10, 96, 0, 100), ip4(10, 1, 0, 100), ip4(10, 1, 0, 11),
              static_cast<uint16_t>(30000 + i), 8080, static_cast<uint16_t>(1024 + i), 80};
}

// Inserts f's keys (insert fills the entry's addresses and ports from them,
// as the worker relies on); nullptr when refused.
Conn* add(ConnTable& t, const Flow& f) { return t.insert(f.fwd(), f.rev()); }

// Local addresses of the full-NAT variant: the flows' l, and two more.
const uint32_t kLocals[] = {ip4(10, 1, 0, 99), ip4(10, 1, 0, 100), ip4(10, 1, 0, 101)};

// Parameter: the replies go to the port index (full NAT: the flows' l is a
// local address) rather than into the hash.
class ConnTableTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    VIPD_REQUIRE_EAL();
  }
  // Initialises t with `cap` entries; false (and a failure) on error.
  static bool init(ConnTable& t, uint32_t cap) {
    std::string err;
    const bool ok = GetParam() ? t.init(uniq("ct_"), cap, 0, &err, kLocals, 3) : t.init(uniq("ct_"), cap, 0, &err);
    EXPECT_TRUE(ok) << err;
    return ok;
  }
};

TEST_P(ConnTableTest, InsertLookupBothDirections) {
  ConnTable t;
  ASSERT_TRUE(init(t, 64));
  EXPECT_EQ(t.capacity(), 64u);
  EXPECT_EQ(t.size(), 0u);
  std::vector<Conn*> conns;
  for (uint32_t i = 0; i < 10; ++i) {
    const Flow f = flow(i);
    Conn* c = t.insert(f.fwd(), f.rev());
    ASSERT_NE(c, nullptr) << i;
    EXPECT_EQ(c->in_use, 1);
    EXPECT_EQ(c->state, ConnState::kNone) << "a fresh entry is zeroed";
    conns.push_back(c);
  }
  EXPECT_EQ(t.size(), 10u);
  EXPECT_EQ(std::set<Conn*>(conns.begin(), conns.end()).size(), 10u) << "distinct entries";
  for (uint32_t i = 0; i < 10; ++i) {
    const Flow f = flow(i);
    bool reply = true;
    EXPECT_EQ(t.lookup(f.fwd(), &reply), conns[i]);
    EXPECT_FALSE(reply);
    reply = false;
    EXPECT_EQ(t.lookup(f.rev(), &reply), conns[i]);
    EXPECT_TRUE(reply);
  }
  // Keys that differ in one field only are different flows.
  bool reply;
  FlowKey k = flow(0).fwd();
  k.proto = kProtoUdp;
  EXPECT_EQ(t.lookup(k, &reply), nullptr);
  k = flow(0).fwd();
  k.sport ^= 1;
  EXPECT_EQ(t.lookup(k, &reply), nullptr);
  k = flow(0).fwd();
  std::swap(k.src, k.dst);
  EXPECT_EQ(t.lookup(k, &reply), nullptr);
}

// A fresh entry keeps no route; move_reply (a connection re-steered to
// another destination) forgets the route to the old one, keeps the client's.
TEST_P(ConnTableTest, MoveReplyForgetsTheKeptRoute) {
  ConnTable t;
  ASSERT_TRUE(init(t, 64));
  const Flow f = flow(1);
  Conn* c = add(t, f);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->route_d, 0);
  EXPECT_EQ(c->route_c, 0);
  c->route_d = 0x82;
  c->route_c = 0x81;
  const uint32_t d2 = ip4(10, 2, 0, 12);
  ASSERT_TRUE(t.move_reply(c, d2, 81));
  EXPECT_EQ(c->daddr, d2);
  EXPECT_EQ(c->route_d, 0) << "the new destination's route is worked out again";
  EXPECT_EQ(c->route_c, 0x81);
  bool reply = false;
  if (!GetParam()) EXPECT_EQ(t.lookup(make_key(d2, 81, f.l, f.lp, f.proto), &reply), c);
}

TEST_P(ConnTableTest, RemoveDeletesBothKeysAndFreesEntry) {
  ConnTable t;
  ASSERT_TRUE(init(t, 16));
  const Flow a = flow(1), b = flow(2);
  Conn* ca = add(t, a);
  ASSERT_NE(ca, nullptr);
  Conn* cb = add(t, b);
  ASSERT_NE(cb, nullptr);
  t.remove(ca);
  EXPECT_EQ(ca->in_use, 0);
  EXPECT_EQ(t.size(), 1u);
  bool reply;
  EXPECT_EQ(t.lookup(a.fwd(), &reply), nullptr);
  EXPECT_EQ(t.lookup(a.rev(), &reply), nullptr);
  EXPECT_EQ(t.lookup(b.fwd(), &reply), cb);
  // Removing twice is harmless.
  t.remove(ca);
  EXPECT_EQ(t.size(), 1u);
  // The same flow can be inserted again.
  Conn* again = add(t, a);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(t.lookup(a.rev(), &reply), again);
  EXPECT_TRUE(reply);
  EXPECT_EQ(t.size(), 2u);
}

TEST_P(ConnTableTest, CapacityMinimumAndFull) {
  ConnTable t;
  ASSERT_TRUE(init(t, 3));
  EXPECT_EQ(t.capacity(), 16u) << "capacity is at least 16";
  for (uint32_t i = 0; i < 16; ++i) {
    Conn* c = t.insert(flow(i).fwd(), flow(i).rev());
    ASSERT_NE(c, nullptr) << "entry " << i;
  }
  EXPECT_EQ(t.size(), 16u);
  EXPECT_EQ(t.insert(flow(100).fwd(), flow(100).rev()), nullptr) << "full";
  EXPECT_EQ(t.size(), 16u);
  bool reply;
  EXPECT_EQ(t.lookup(flow(100).fwd(), &reply), nullptr) << "a failed insert leaves no key behind";
  // Freeing one makes room for exactly one.
  Conn* c5 = t.lookup(flow(5).fwd(), &reply);
  ASSERT_NE(c5, nullptr);
  t.remove(c5);
  Conn* n = t.insert(flow(100).fwd(), flow(100).rev());
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(t.insert(flow(101).fwd(), flow(101).rev()), nullptr);
  for (uint32_t i = 0; i < 16; ++i) {
    if (i == 5) continue;
    EXPECT_NE(t.lookup(flow(i).fwd(), &reply), nullptr) << i;
  }
}

// conn_table.h: insert returns nullptr "when full (or the key already
// exists)", and must not disturb the existing connection.
TEST_P(ConnTableTest, DuplicateForwardKeyIsRejected) {
  ConnTable t;
  ASSERT_TRUE(init(t, 16));
  const Flow a = flow(1);
  Conn* ca = add(t, a);
  ASSERT_NE(ca, nullptr);
  Flow dup = flow(2);
  dup.c = a.c;
  dup.cp = a.cp;  // same client key, different reply key
  Conn* cd = t.insert(dup.fwd(), dup.rev());
  EXPECT_EQ(cd, nullptr) << "insert() accepted an existing forward key (rte_hash_add_key_data "
                            "updates an existing key instead of failing)";
  bool reply = true;
  EXPECT_EQ(t.lookup(a.fwd(), &reply), ca) << "the existing connection's forward key was re-pointed";
  EXPECT_FALSE(reply);
  EXPECT_EQ(t.size(), 1u);
  EXPECT_EQ(t.lookup(dup.rev(), &reply), nullptr) << "a refused insert leaves no key behind";
}

TEST_P(ConnTableTest, DuplicateReverseKeyIsRejected) {
  ConnTable t;
  ASSERT_TRUE(init(t, 16));
  const Flow a = flow(1);
  Conn* ca = add(t, a);
  ASSERT_NE(ca, nullptr);
  Flow dup = flow(2);
  dup.l = a.l;
  dup.lp = a.lp;
  dup.d = a.d;
  dup.dp = a.dp;  // same reply key (NAT: same client to two VIPs sharing a dest)
  Conn* cd = t.insert(dup.fwd(), dup.rev());
  EXPECT_EQ(cd, nullptr) << "insert() accepted an existing reply key";
  EXPECT_EQ(t.size(), 1u);
  bool r2;
  EXPECT_EQ(t.lookup(dup.fwd(), &r2), nullptr) << "a refused insert leaves no key behind";
  bool reply = false;
  EXPECT_EQ(t.lookup(a.rev(), &reply), ca) << "replies of the first connection now map to another entry";
  EXPECT_TRUE(reply);
  if (cd) {
    t.remove(cd);
    // Removing the second connection must not take the first one's key.
    EXPECT_EQ(t.lookup(a.rev(), &reply), ca) << "removing the duplicate deleted the first connection's key";
  }
}

TEST_P(ConnTableTest, SweepExpiresOnlyExpiredWithinBudget) {
  ConnTable t;
  ASSERT_TRUE(init(t, 16));
  // The sweep walks the entries: one per connection of capacity.
  EXPECT_EQ(t.slots(), 16u);
  std::vector<Conn*> c(16);
  for (uint32_t i = 0; i < 16; ++i) {
    c[i] = t.insert(flow(i).fwd(), flow(i).rev());
    ASSERT_NE(c[i], nullptr);
    c[i]->expires = (i % 2) ? 100 : 1000;  // odd ones expire at t=100
  }
  const uint64_t now = 500;
  // The budget counts entries: a quarter of them shows a part of the
  // connections only, each once.
  std::set<Conn*> seen;
  size_t calls = 0;
  t.sweep(t.slots() / 4, [&](Conn& x) {
    ++calls;
    EXPECT_TRUE(seen.insert(&x).second) << "visited twice";
    return x.expires <= now;
  });
  EXPECT_GE(calls, 1u);
  EXPECT_LE(calls, t.slots() / 4);
  const uint32_t removed_first = 16 - t.size();
  EXPECT_LE(removed_first, calls);
  // Budget 0 does nothing.
  size_t none = 0;
  t.sweep(0, [&](Conn&) {
    ++none;
    return true;
  });
  EXPECT_EQ(none, 0u);
  EXPECT_EQ(t.size(), 16 - removed_first);
  // The rest of the round visits the others; every connection once in all.
  t.sweep(t.slots() - t.slots() / 4, [&](Conn& x) {
    EXPECT_TRUE(seen.insert(&x).second) << "visited twice before wrapping";
    return x.expires <= now;
  });
  EXPECT_EQ(seen.size(), 16u) << "every connection visited once over one round of the slots";
  EXPECT_EQ(t.size(), 8u);
  bool reply;
  for (uint32_t i = 0; i < 16; ++i) {
    const bool alive = t.lookup(flow(i).fwd(), &reply) != nullptr;
    EXPECT_EQ(alive, i % 2 == 0) << i;
    EXPECT_EQ(t.lookup(flow(i).rev(), &reply) != nullptr, i % 2 == 0) << i;
  }
  // After wrapping, free entries are skipped: the callback sees
  // connections only, and two rounds see each of the 8 left twice.
  calls = 0;
  t.sweep(2 * t.slots(), [&](Conn& x) {
    ++calls;
    EXPECT_EQ(x.in_use, kSlotConn);
    return false;
  });
  EXPECT_EQ(calls, 16u);
  EXPECT_EQ(t.size(), 8u);
}

// insert fills the entry from the keys, each entry sits within one cache
// line of its own, and writing an entry's own state (everything after the
// client key) changes no lookup, its own or another's.
TEST_P(ConnTableTest, EntriesOneLineEach) {
  ConnTable t;
  ASSERT_TRUE(init(t, 64));
  std::vector<Conn*> c(64);
  std::set<uintptr_t> lines;
  for (uint32_t i = 0; i < 64; ++i) {
    const Flow f = flow(i);
    c[i] = t.insert(f.fwd(), f.rev());
    ASSERT_NE(c[i], nullptr) << i;
    EXPECT_EQ(c[i]->in_use, kSlotConn);
    EXPECT_EQ(c[i]->caddr, f.c);
    EXPECT_EQ(c[i]->cport, f.cp);
    EXPECT_EQ(c[i]->vaddr, f.v);
    EXPECT_EQ(c[i]->vport, f.vp);
    EXPECT_EQ(c[i]->proto, f.proto);
    EXPECT_EQ(c[i]->laddr, f.l);
    EXPECT_EQ(c[i]->lport, f.lp);
    EXPECT_EQ(c[i]->daddr, f.d);
    EXPECT_EQ(c[i]->dport, f.dp);
    EXPECT_EQ(c[i]->expires, 0u);
    const auto a = reinterpret_cast<uintptr_t>(c[i]);
    EXPECT_EQ(a / 64, (a + sizeof(Conn) - 1) / 64) << "entry " << i << " straddles two cache lines";
    EXPECT_TRUE(lines.insert(a / 64).second) << "two entries on one line";
  }
  for (uint32_t i = 0; i < 64; ++i) {
    c[i]->state = ConnState::kEstablished;
    c[i]->laddr_idx = static_cast<uint8_t>(i);
    c[i]->dest_slot = 1000 + i;
    c[i]->dest_gen = 7;
    c[i]->tmpl = i + 1;
    c[i]->expires = ~uint64_t{0} - i;
  }
  for (uint32_t i = 0; i < 64; ++i) {
    bool reply = true;
    ASSERT_EQ(t.lookup(flow(i).fwd(), &reply), c[i]) << i;
    EXPECT_FALSE(reply);
    ASSERT_EQ(t.lookup(flow(i).rev(), &reply), c[i]) << i;
    EXPECT_TRUE(reply);
    EXPECT_EQ(c[i]->dest_slot, 1000 + i);
    EXPECT_EQ(c[i]->expires, ~uint64_t{0} - i);
  }
}

// A lookup compares the 13 bytes of the client key and nothing of the
// entry's state after them.
TEST(ConnTableKey, CompareReadsTheClientKeyOnly) {
  const FlowKey k = flow(7).fwd();
  Conn c{};
  c.caddr = k.src;
  c.vaddr = k.dst;
  c.cport = k.sport;
  c.vport = k.dport;
  c.proto = k.proto;
  c.state = ConnState::kEstablished;
  c.in_use = kSlotConn;
  c.laddr_idx = 9;
  c.laddr = 1;
  c.expires = 12345;
  EXPECT_TRUE(ConnTable::key_equal(k, c));
  for (size_t b = 0; b < 13; ++b) {
    Conn d = c;
    reinterpret_cast<uint8_t*>(&d)[b] ^= 0x10;
    EXPECT_FALSE(ConnTable::key_equal(k, d)) << "byte " << b << " of the key";
  }
  FlowKey padded = k;
  padded.pad[0] = padded.pad[1] = padded.pad[2] = 0xff;
  EXPECT_TRUE(ConnTable::key_equal(padded, c)) << "a FlowKey's padding is not compared";
}

TEST_P(ConnTableTest, SweepOnEmptyTableAndUninitialised) {
  ConnTable t;
  size_t calls = 0;
  t.sweep(100, [&](Conn&) {
    ++calls;
    return true;
  });
  EXPECT_EQ(calls, 0u) << "uninitialised table: nothing to visit";
  ASSERT_TRUE(init(t, 16));
  t.sweep(100, [&](Conn&) {
    ++calls;
    return true;
  });
  EXPECT_EQ(calls, 0u);
}

TEST_P(ConnTableTest, ChurnKeepsCountsConsistent) {
  ConnTable t;
  ASSERT_TRUE(init(t, 64));
  std::mt19937 rng(11);
  std::vector<int> live(200, 0);
  std::vector<Conn*> ptr(200, nullptr);
  uint32_t n = 0;
  for (int it = 0; it < 20000; ++it) {
    const uint32_t i = rng() % 200;
    bool reply;
    if (live[i]) {
      ASSERT_EQ(t.lookup(flow(i).rev(), &reply), ptr[i]);
      t.remove(ptr[i]);
      live[i] = 0;
      --n;
    } else {
      Conn* c = t.insert(flow(i).fwd(), flow(i).rev());
      if (n == 64) {
        ASSERT_EQ(c, nullptr);
        continue;
      }
      ASSERT_NE(c, nullptr);
      ptr[i] = c;
      live[i] = 1;
      ++n;
    }
    ASSERT_EQ(t.size(), n);
  }
  bool reply;
  for (uint32_t i = 0; i < 200; ++i) EXPECT_EQ(t.lookup(flow(i).fwd(), &reply) != nullptr, live[i] != 0);
}

// Capacities that take the hash to its load limit (80 % of the buckets'
// slots) when full: with the replies in the port index one key per
// connection, two without.
uint32_t at_load_limit(bool port_index) { return port_index ? 6553 : 3276; }

// Fills a table whose capacity takes it to the load limit: every insert
// succeeds and is found in both directions, then the next is refused as
// full; a refusal for a key in use is not "full".
TEST_P(ConnTableTest, FillsToTheLoadLimitThenFull) {
  ConnTable t;
  const uint32_t cap = at_load_limit(GetParam());
  ASSERT_TRUE(init(t, cap));
  const uint64_t keys = GetParam() ? cap : 2 * uint64_t{cap};
  EXPECT_LE(keys * 10, uint64_t{t.buckets()} * 8 * 8) << "at most 80 % of the slots";
  EXPECT_GT(keys * 10, uint64_t{t.buckets()} * 8 * 7) << "the test's capacity is near the limit";
  std::vector<Conn*> c(cap);
  for (uint32_t i = 0; i < cap; ++i) {
    c[i] = add(t, flow(i));
    ASSERT_NE(c[i], nullptr) << "entry " << i << " of " << cap;
  }
  EXPECT_EQ(t.size(), cap);
  bool reply;
  for (uint32_t i = 0; i < cap; ++i) {
    ASSERT_EQ(t.lookup(flow(i).fwd(), &reply), c[i]) << i;
    EXPECT_FALSE(reply);
    ASSERT_EQ(t.lookup(flow(i).rev(), &reply), c[i]) << i;
    EXPECT_TRUE(reply);
  }
  EXPECT_EQ(add(t, flow(cap)), nullptr);
  EXPECT_TRUE(t.last_insert_full());
  EXPECT_EQ(t.lookup(flow(cap).fwd(), &reply), nullptr);
  t.remove(c[7]);
  EXPECT_EQ(add(t, flow(8)), nullptr) << "flow 8's keys are in use";
  EXPECT_FALSE(t.last_insert_full()) << "a key in use is not a full table";
  EXPECT_NE(add(t, flow(cap)), nullptr);
  EXPECT_EQ(t.size(), cap);
}

// Every entry can be removed and the table filled again, in another order,
// with the same entries.
TEST_P(ConnTableTest, RemoveAllAndReinsert) {
  ConnTable t;
  const uint32_t cap = 1000;
  ASSERT_TRUE(init(t, cap));
  std::vector<uint32_t> order(cap);
  for (uint32_t i = 0; i < cap; ++i) order[i] = i;
  std::mt19937 rng(5);
  std::set<Conn*> first, second;
  for (int round = 0; round < 3; ++round) {
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<Conn*> c(cap);
    for (uint32_t i : order) {
      c[i] = add(t, flow(i));
      ASSERT_NE(c[i], nullptr) << "round " << round << " flow " << i;
    }
    ASSERT_EQ(t.size(), cap);
    (round == 0 ? first : second) = std::set<Conn*>(c.begin(), c.end());
    std::shuffle(order.begin(), order.end(), rng);
    bool reply;
    for (uint32_t i : order) {
      ASSERT_EQ(t.lookup(flow(i).rev(), &reply), c[i]);
      t.remove(c[i]);
      ASSERT_EQ(t.lookup(flow(i).fwd(), &reply), nullptr) << i;
      ASSERT_EQ(t.lookup(flow(i).rev(), &reply), nullptr) << i;
    }
    EXPECT_EQ(t.size(), 0u);
  }
  EXPECT_EQ(first.size(), cap);
  EXPECT_EQ(first, second) << "the same entries, reused";
}

// After random inserts and removes, one round of the sweep (slots() entries,
// in any number of calls) shows every connection exactly once and nothing
// else.
TEST_P(ConnTableTest, SweepRoundSeesEveryConnectionOnce) {
  ConnTable t;
  ASSERT_TRUE(init(t, 256));
  std::mt19937 rng(17);
  std::vector<Conn*> ptr(600, nullptr);
  for (int it = 0; it < 5000; ++it) {
    const uint32_t i = rng() % 600;
    if (ptr[i]) {
      t.remove(ptr[i]);
      ptr[i] = nullptr;
    } else {
      ptr[i] = add(t, flow(i));
    }
  }
  std::set<Conn*> live;
  for (Conn* c : ptr)
    if (c) live.insert(c);
  ASSERT_EQ(live.size(), t.size());
  ASSERT_GT(live.size(), 100u);
  std::map<Conn*, int> seen;
  for (uint32_t done = 0; done < t.slots();) {
    const uint32_t step = std::min<uint32_t>(1 + rng() % 40, t.slots() - done);
    t.sweep(step, [&](Conn& c) {
      ++seen[&c];
      return false;
    });
    done += step;
  }
  EXPECT_EQ(seen.size(), live.size());
  for (const auto& [c, n] : seen) {
    EXPECT_EQ(n, 1) << "visited " << n << " times";
    EXPECT_TRUE(live.count(c)) << "not a live connection";
  }
  // A round that expires everything empties the table.
  t.sweep(t.slots(), [](Conn&) { return true; });
  EXPECT_EQ(t.size(), 0u);
  bool reply;
  for (uint32_t i = 0; i < 600; ++i) EXPECT_EQ(t.lookup(flow(i).fwd(), &reply), nullptr) << i;
}

INSTANTIATE_TEST_SUITE_P(Replies, ConnTableTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "PortIndex" : "Hash"; });

// The port index finds a reply by local address and port alone: the rest of
// the key (backend address and port, protocol) must still match the entry.
TEST_P(ConnTableTest, ReplyKeyMustMatchWhole) {
  ConnTable t;
  ASSERT_TRUE(init(t, 16));
  const Flow a = flow(1);
  Conn* ca = add(t, a);
  ASSERT_NE(ca, nullptr);
  bool reply = false;
  ASSERT_EQ(t.lookup(a.rev(), &reply), ca);
  EXPECT_TRUE(reply);
  FlowKey k = a.rev();
  k.src ^= 1;  // another backend
  EXPECT_EQ(t.lookup(k, &reply), nullptr);
  k = a.rev();
  k.sport ^= 1;
  EXPECT_EQ(t.lookup(k, &reply), nullptr);
  k = a.rev();
  k.proto = kProtoUdp;
  EXPECT_EQ(t.lookup(k, &reply), nullptr);
  k = a.rev();
  k.dport ^= 1;  // a free port of the same local address
  EXPECT_EQ(t.lookup(k, &reply), nullptr);
  k = a.rev();
  k.dst = kLocals[2];  // the same port of another local address
  EXPECT_EQ(t.lookup(k, &reply), nullptr);
  EXPECT_EQ(t.local_index(a.l), GetParam() ? 1 : -1);
  EXPECT_EQ(t.local_index(kLocals[0]), GetParam() ? 0 : -1);
  EXPECT_EQ(t.local_index(a.d), -1);
}

// With a port index, a key to a local address is only ever a reply: a
// client's key to one is refused, as is a reply key to a local address and
// port another connection holds (whatever its backend), and the hash holds
// one key per connection, so `capacity` of them fit.
TEST(ConnTablePortIndex, RefusesClientKeysToLocalAddressesAndTakenPorts) {
  VIPD_REQUIRE_EAL();
  ConnTable t;
  std::string err;
  ASSERT_TRUE(t.init(uniq("ct_"), 16, 0, &err, kLocals, 3)) << err;
  Flow a = flow(1);
  Conn* ca = add(t, a);
  ASSERT_NE(ca, nullptr);
  Flow b = flow(2);
  b.lp = a.lp;
  b.d = ip4(10, 1, 0, 12);  // another backend, the same local port
  EXPECT_EQ(t.insert(b.fwd(), b.rev()), nullptr) << "a local port held by another connection";
  Flow c = flow(3);
  c.v = kLocals[0];  // a client's key to a local address
  EXPECT_EQ(t.insert(c.fwd(), c.rev()), nullptr);
  EXPECT_EQ(t.size(), 1u);
  bool reply = false;
  EXPECT_EQ(t.lookup(a.rev(), &reply), ca) << "refused inserts leave the first connection's port alone";
  t.remove(ca);
  EXPECT_EQ(t.lookup(a.rev(), &reply), nullptr);
  Conn* cb = add(t, b);  // the other backend, a.lp
  ASSERT_NE(cb, nullptr) << "a freed port can be handed out again";
  EXPECT_EQ(t.lookup(b.rev(), &reply), cb);
  EXPECT_EQ(t.lookup(a.rev(), &reply), nullptr) << "the port's former connection does not match its new one";
}

// Keys whose two buckets are both among the first four (of 256): 32 slots
// for all of them, so inserts must move keys to their other bucket. An
// insert succeeds exactly when some placement of all the keys exists (no
// set of buckets is asked to hold more than 8 keys each: Hall's condition,
// which the breadth-first search is complete for on 4 buckets), and every
// key stays found, singly and in bulk.
TEST(ConnTableCuckoo, DisplacementWithManyCollisions) {
  VIPD_REQUIRE_EAL();
  ConnTable t;
  std::string err;
  ASSERT_TRUE(t.init(uniq("ct_"), 1024, 0, &err, kLocals, 3)) << err;  // one key per connection
  ASSERT_EQ(t.buckets(), 256u);
  std::vector<Flow> flows;
  std::vector<uint32_t> pair;  // bit set of the key's two buckets
  for (uint32_t i = 0; flows.size() < 40 && i < 4000000; ++i) {
    Flow f = flow(i);
    const uint32_t h = conn_hash(f.fwd());
    const uint32_t b1 = t.first_bucket(h), b2 = t.other_bucket(b1, ConnTable::tag_of(h));
    if (b1 >= 4 || b2 >= 4) continue;
    ASSERT_EQ(t.other_bucket(b2, ConnTable::tag_of(h)), b1) << "the other bucket of the other is the first";
    f.lp = static_cast<uint16_t>(1024 + flows.size());  // a port of its own
    flows.push_back(f);
    pair.push_back((1u << b1) | (1u << b2));
  }
  ASSERT_EQ(flows.size(), 40u);
  // Whether keys `in` (plus key `extra`) can all be placed.
  auto placeable = [&](const std::vector<uint32_t>& in, uint32_t extra) {
    for (uint32_t u = 1; u < 16; ++u) {
      uint32_t n = (pair[extra] & ~u) == 0;
      for (uint32_t k : in) n += (pair[k] & ~u) == 0;
      if (n > 8u * static_cast<uint32_t>(std::popcount(u))) return false;
    }
    return true;
  };
  std::vector<uint32_t> in;
  std::vector<Conn*> c(flows.size(), nullptr);
  uint32_t refused = 0;
  for (uint32_t k = 0; k < flows.size(); ++k) {
    const bool expect = placeable(in, k);
    c[k] = add(t, flows[k]);
    ASSERT_EQ(c[k] != nullptr, expect) << "key " << k << " with " << in.size() << " in";
    if (c[k]) {
      in.push_back(k);
    } else {
      EXPECT_TRUE(t.last_insert_full()) << "no slot is a full table";
      ++refused;
    }
    bool reply;
    for (uint32_t j : in) ASSERT_EQ(t.lookup(flows[j].fwd(), &reply), c[j]) << "key " << j << " after " << k;
  }
  EXPECT_GE(in.size(), 24u);
  EXPECT_LE(in.size(), 32u);
  EXPECT_EQ(refused + in.size(), flows.size());
  EXPECT_EQ(t.size(), in.size());
  // In bulk, as the burst path looks up: candidates, then each checked or
  // looked up by itself.
  std::vector<FlowKey> keys(flows.size());
  std::vector<uint32_t> sigs(flows.size());
  for (uint32_t k = 0; k < flows.size(); ++k) {
    keys[k] = flows[k].fwd();
    sigs[k] = conn_hash(keys[k]);
  }
  std::vector<uint32_t> cand(flows.size());
  t.lookup_candidates(sigs.data(), static_cast<uint32_t>(flows.size()), cand.data());
  for (uint32_t k = 0; k < flows.size(); ++k) {
    const int32_t first = static_cast<int32_t>(cand[k]) - 1;
    const int32_t pos = first >= 0 && t.holds(first, keys[k]) ? first : t.find_pos(keys[k], sigs[k]);
    ASSERT_EQ(pos >= 0, c[k] != nullptr) << k;
    if (!c[k]) continue;
    bool reply = true;
    EXPECT_EQ(t.decode(pos, &reply), c[k]);
    EXPECT_FALSE(reply);
  }
  // Removing every other one and inserting the refused ones again.
  for (uint32_t j = 0; j < in.size(); j += 2) {
    t.remove(c[in[j]]);
    c[in[j]] = nullptr;
  }
  in.clear();
  for (uint32_t k = 0; k < flows.size(); ++k)
    if (c[k]) in.push_back(k);
  for (uint32_t k = 0; k < flows.size(); ++k) {
    if (c[k]) continue;
    const bool expect = placeable(in, k);
    c[k] = add(t, flows[k]);
    ASSERT_EQ(c[k] != nullptr, expect) << "again: key " << k;
    if (c[k]) in.push_back(k);
  }
  bool reply;
  for (uint32_t k = 0; k < flows.size(); ++k) EXPECT_EQ(t.lookup(flows[k].fwd(), &reply), c[k]) << k;
}

// lookup_candidates names the entry of the first slot whose tag is the key's,
// without comparing keys: a key whose tag and buckets another key shares gets
// that key's entry as its candidate, which holds() refuses and find_pos
// settles; keys in the table get their own entry.
TEST(ConnTableCuckoo, CandidatesNameTheTaggedEntryWithoutComparing) {
  VIPD_REQUIRE_EAL();
  ConnTable t;
  std::string err;
  ASSERT_TRUE(t.init(uniq("ct_"), 1024, 0, &err, kLocals, 3)) << err;  // one key per connection
  const uint32_t mask = t.buckets() - 1;
  // Two flows with the same first bucket and tag (so the same two buckets).
  std::unordered_map<uint32_t, uint32_t> seen;
  int64_t a = -1, b = -1;
  for (uint32_t i = 0; i < 4000000 && a < 0; ++i) {
    const uint32_t h = conn_hash(flow(i).fwd());
    const uint32_t id = (uint32_t{ConnTable::tag_of(h)} << 16) | (h & mask);
    auto [it, fresh] = seen.emplace(id, i);
    if (!fresh) {
      a = it->second;
      b = i;
    }
  }
  ASSERT_GE(a, 0) << "no two flows share a tag and bucket";
  Flow fa = flow(static_cast<uint32_t>(a)), fb = flow(static_cast<uint32_t>(b));
  fa.lp = 2000;
  fb.lp = 2001;
  Conn* ca = add(t, fa);
  ASSERT_NE(ca, nullptr);
  const FlowKey ka = fa.fwd(), kb = fb.fwd();
  uint32_t sigs[2] = {conn_hash(ka), conn_hash(kb)};
  uint32_t cand[2] = {9, 9};
  t.lookup_candidates(sigs, 2, cand);
  ASSERT_NE(cand[0], 0u);
  ASSERT_NE(cand[1], 0u) << "the shared tag names a's entry";
  EXPECT_EQ(cand[0], cand[1]);
  bool reply = true;
  EXPECT_EQ(t.decode(static_cast<int32_t>(cand[0] - 1), &reply), ca);
  EXPECT_FALSE(reply);
  EXPECT_TRUE(t.holds(static_cast<int32_t>(cand[0] - 1), ka));
  EXPECT_FALSE(t.holds(static_cast<int32_t>(cand[1] - 1), kb));
  EXPECT_EQ(t.find_pos(kb, sigs[1]), -1);
  // With both in, each key is found: b's candidate is still a's (the first
  // slot with the tag), find_pos gives b's own.
  Conn* cb = add(t, fb);
  ASSERT_NE(cb, nullptr);
  t.lookup_candidates(sigs, 2, cand);
  const int32_t pb = t.holds(static_cast<int32_t>(cand[1] - 1), kb) ? static_cast<int32_t>(cand[1] - 1)
                                                                      : t.find_pos(kb, sigs[1]);
  ASSERT_GE(pb, 0);
  EXPECT_EQ(t.decode(pb, &reply), cb);
  // An empty table's candidates are none.
  t.remove(ca);
  t.remove(cb);
  t.lookup_candidates(sigs, 2, cand);
  EXPECT_EQ(cand[0], 0u);
  EXPECT_EQ(cand[1], 0u);
}

TEST(ConnTablePortIndex, InitRefusesTooManyLocalAddresses) {
  VIPD_REQUIRE_EAL();
  std::vector<uint32_t> many(65);
  for (uint32_t i = 0; i < many.size(); ++i) many[i] = ip4(10, 2, 0, 1) + i;
  ConnTable t;
  std::string err;
  EXPECT_FALSE(t.init(uniq("ct_"), 16, 0, &err, many.data(), static_cast<uint32_t>(many.size())));
  EXPECT_NE(err.find("65 local addresses"), std::string::npos) << err;
}

TEST(ConnStateName, AllNamed) {
  EXPECT_STREQ(conn_state_name(ConnState::kSynRecv), "SYN_RECV");
  EXPECT_STREQ(conn_state_name(ConnState::kEstablished), "ESTABLISHED");
  EXPECT_STREQ(conn_state_name(ConnState::kFinWait), "FIN_WAIT");
  EXPECT_STREQ(conn_state_name(ConnState::kClose), "CLOSE");
  EXPECT_STREQ(conn_state_name(ConnState::kUdp), "UDP");
  EXPECT_STREQ(conn_state_name(ConnState::kNone), "NONE");
}

}  // namespace
}  // namespace vipd::dp
