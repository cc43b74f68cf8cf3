// RSS steering of full-NAT replies (rss_steer.h): the byte tables equal
// DPDK's software Toeplitz (rte_softrss, rte_softrss_be); a steered local
// port's reply hashes to a redirection-table entry of the owning worker's
// queue, for many tuples, keys, table sizes and worker counts; when no
// suitable port is left the pool hands out the others (counted) and their
// replies still reach the owner through the redirect ring.
#include <gtest/gtest.h>
#include <rte_malloc.h>
#include <rte_thash.h>

#include <random>
#include <set>
#include <vector>

#include "dataplane/fastpath/rss_steer.h"
#include "tests/unit/dataplane/fastpath/worker_test_fixture.h"

namespace vipd::dp {
namespace {

using test::ip4;

std::vector<uint8_t> random_key(std::mt19937& rng, size_t len) {
  std::vector<uint8_t> k(len);
  for (auto& b : k) b = static_cast<uint8_t>(rng());
  return k;
}

uint32_t softrss4(const uint8_t* key, uint32_t src, uint32_t dst, uint16_t sport, uint16_t dport) {
  uint32_t t[3] = {src, dst, uint32_t{sport} << 16 | dport};
  return rte_softrss(t, 3, key);
}

// A pool per worker, freed at the end.
struct Pools {
  std::vector<FnatPool> p;
  Pools(const RssSteer* s, uint32_t nw, uint32_t laddr) : p(nw) {
    for (uint32_t i = 0; i < nw; ++i) EXPECT_TRUE(fnat_pool_init(p[i], s, i, nw, laddr, "t_steer_pool"));
  }
  ~Pools() {
    for (auto& fp : p) rte_free(fp.ports);
  }
};

TEST(RssSteer, KnownAnswerOfTheDefaultKey) {
  // Microsoft's RSS verification suite, IPv4 with TCP ports:
  // 66.9.149.187:2794 -> 161.142.100.80:1766 hashes to 0x51ccc178.
  RssSteer s;
  const uint16_t reta[1] = {0};
  ASSERT_TRUE(rss_steer_init(s, kRssKey, 40, reta, 1, 1, true, true));
  EXPECT_EQ(rss_hash4(s, ip4(66, 9, 149, 187), ip4(161, 142, 100, 80), 2794, 1766), 0x51ccc178u);
  EXPECT_EQ(softrss4(kRssKey, ip4(66, 9, 149, 187), ip4(161, 142, 100, 80), 2794, 1766), 0x51ccc178u);
}

TEST(RssSteer, TablesEqualSoftToeplitz) {
  std::mt19937 rng(7);
  const uint16_t reta[1] = {0};
  for (int key_i = 0; key_i < 6; ++key_i) {
    const auto key = key_i == 0 ? std::vector<uint8_t>(kRssKey, kRssKey + kRssKeyMax) : random_key(rng, key_i % 2 ? 40 : 52);
    RssSteer s;
    ASSERT_TRUE(rss_steer_init(s, key.data(), static_cast<uint32_t>(key.size()), reta, 1, 1, true, true));
    alignas(4) uint8_t be_key[kRssKeyMax];
    rte_convert_rss_key(reinterpret_cast<const uint32_t*>(key.data()), reinterpret_cast<uint32_t*>(be_key),
                        static_cast<int>(key.size()));
    for (int n = 0; n < 2000; ++n) {
      const uint32_t src = rng(), dst = rng();
      const uint16_t sp = static_cast<uint16_t>(rng()), dp = static_cast<uint16_t>(rng());
      const uint32_t want = softrss4(key.data(), src, dst, sp, dp);
      ASSERT_EQ(rss_hash4(s, src, dst, sp, dp), want) << "key " << key_i;
      uint32_t t[3] = {src, dst, uint32_t{sp} << 16 | dp};
      ASSERT_EQ(rte_softrss_be(t, 3, be_key), want) << "key " << key_i;
    }
  }
}

TEST(RssSteer, RejectsWhatItCannotModel) {
  RssSteer s;
  std::vector<uint16_t> reta(96, 0);
  EXPECT_FALSE(rss_steer_init(s, kRssKey, 40, reta.data(), 96, 2, true, true)) << "not a power of two";
  reta.assign(128, 0);
  reta[5] = 2;
  EXPECT_FALSE(rss_steer_init(s, kRssKey, 40, reta.data(), 128, 2, true, true)) << "queue past the workers";
  EXPECT_FALSE(rss_steer_init(s, kRssKey, 8, reta.data(), 128, 4, true, true)) << "key too short";
  EXPECT_FALSE(s.tcp || s.udp);
  EXPECT_FALSE(rss_steered(s, 6));
}

// For many keys, table sizes and worker counts (round-robin tables and
// random ones), every steered port of every worker makes its reply hash to
// an entry of that worker's queue, and keeps the redirect ring's owner rule.
TEST(RssSteer, SteeredPortsHashToTheOwnersQueue) {
  std::mt19937 rng(11);
  int checked = 0;
  for (uint32_t reta_size : {64u, 128u, 512u}) {
    for (uint32_t nw : {2u, 3u, 4u, 8u}) {
      for (int variant = 0; variant < 2; ++variant) {
        const auto key = random_key(rng, 40);
        std::vector<uint16_t> reta(reta_size);
        for (uint32_t e = 0; e < reta_size; ++e) reta[e] = static_cast<uint16_t>(variant ? rng() % nw : e % nw);
        RssSteer s;
        ASSERT_TRUE(rss_steer_init(s, key.data(), 40, reta.data(), reta_size, nw, true, true));
        const uint32_t laddr = ip4(10, 1, 0, static_cast<uint8_t>(100 + rng() % 16));
        Pools pools(&s, nw, laddr);
        for (int n = 0; n < 300; ++n) {
          const uint32_t dst = ip4(10, 1, static_cast<uint8_t>(rng()), static_cast<uint8_t>(rng()));
          const uint16_t dport = static_cast<uint16_t>(rng());
          for (uint32_t wi = 0; wi < nw; ++wi) {
            uint16_t lport = 0;
            const bool has_entries = s.q_begin[wi + 1] > s.q_begin[wi];
            const bool got = fnat_take_steered(s, pools.p[wi], wi, rss_dest_bits(s, dst, dport), &lport);
            ASSERT_EQ(got, has_entries) << "worker " << wi;
            if (!got) continue;
            EXPECT_EQ(lport % nw, wi);
            EXPECT_GE(lport, 1024);
            const uint32_t h = softrss4(key.data(), dst, laddr, dport, lport);
            ASSERT_EQ(reta[h & (reta_size - 1)], wi)
                << "reta " << reta_size << " workers " << nw << " variant " << variant;
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 10000);
}

// One destination, one worker of two: the steered ports run out (about half
// of the worker's), then the rest come unsteered, every port once; returned
// ports are steered again.
TEST(RssSteer, ExhaustionFallsBackToAnyPort) {
  std::vector<uint16_t> reta(128);
  for (uint32_t e = 0; e < 128; ++e) reta[e] = static_cast<uint16_t>(e % 2);
  RssSteer s;
  ASSERT_TRUE(rss_steer_init(s, kRssKey, 40, reta.data(), 128, 2, true, true));
  const uint32_t dst = ip4(10, 1, 0, 11), laddr = ip4(10, 1, 0, 100);
  Pools pools(&s, 2, laddr);
  FnatPool& fp = pools.p[1];
  const uint32_t total = fp.top;
  EXPECT_EQ(total, (65536u - 1024u) / 2u);
  std::set<uint16_t> seen;
  uint16_t lport;
  uint32_t steered = 0;
  while (fnat_take_steered(s, fp, 1, rss_dest_bits(s, dst, 80), &lport)) {
    ASSERT_EQ(reta[softrss4(kRssKey, dst, laddr, 80, lport) & 127], 1);
    ASSERT_TRUE(seen.insert(lport).second);
    ++steered;
  }
  EXPECT_GT(steered, total / 3);
  EXPECT_LT(steered, total * 2 / 3);
  // Another destination: steered ports are left for it unless its base
  // selects the same buckets (with this table only the hash's lowest bit
  // counts: one destination in two).
  uint16_t other;
  const uint32_t dst2 = ip4(10, 1, 0, 12);
  const bool same_bit = ((rss_hash4(s, dst, laddr, 80, 0) ^ rss_hash4(s, dst2, laddr, 8080, 0)) & 1) == 0;
  const bool got_other = fnat_take_steered(s, fp, 1, rss_dest_bits(s, dst2, 8080), &other);
  EXPECT_EQ(got_other, !same_bit);
  if (got_other) fnat_put(s, fp, other);
  uint32_t unsteered = 0, foreign = 0;
  while (fnat_take_any(fp, &lport)) {
    ASSERT_TRUE(seen.insert(lport).second) << "port " << lport << " twice";
    EXPECT_EQ(lport % 2, 1);
    if (reta[softrss4(kRssKey, dst, laddr, 80, lport) & 127] != 1) ++foreign;
    ++unsteered;
  }
  EXPECT_EQ(steered + unsteered, total);
  EXPECT_EQ(foreign, unsteered) << "only ports that cannot be steered were left";
  EXPECT_FALSE(fnat_take_steered(s, fp, 1, rss_dest_bits(s, dst, 80), &lport));
  EXPECT_FALSE(fnat_take_any(fp, &lport));
  for (uint16_t p : seen) fnat_put(s, fp, p);
  EXPECT_EQ(fp.top, total);
  ASSERT_TRUE(fnat_take_steered(s, fp, 1, rss_dest_bits(s, dst, 80), &lport));
  EXPECT_EQ(reta[softrss4(kRssKey, dst, laddr, 80, lport) & 127], 1);
}

// Steering off (no tables): the plain stack, as before.
TEST(RssSteer, OffIsThePlainStack) {
  RssSteer s;
  Pools pools(&s, 2, 1);
  EXPECT_EQ(pools.p[0].buckets, 0u);
  uint16_t lport;
  EXPECT_FALSE(fnat_take_steered(s, pools.p[0], 0, 1, &lport));
  ASSERT_TRUE(fnat_take_any(pools.p[0], &lport));
  EXPECT_EQ(lport, 1024);
}

}  // namespace

namespace test {
namespace {

// The whole pipeline on two workers with steering on: new connections get
// local ports whose replies hash to their owner's queue; with the steered
// ports of a destination gone, a new connection still opens (counted
// unsteered), and its reply, arriving at the queue its hash selects, reaches
// the owner through the redirect ring.
class RssSteerWorkerTest : public WorkerTest {
 protected:
  // Steering on before the services are published (the publisher stamps
  // each destination's share of the hash).
  void before_services() override {
    for (uint32_t e = 0; e < 128; ++e) reta_[e] = static_cast<uint16_t>(e % 2);
    ASSERT_TRUE(rss_steer_init(sh().rss, kRssKey, 40, reta_, 128, 2, true, true));
    for (uint32_t i = 0; i < 2; ++i) {
      rte_free(w(i).fnat[0].ports);
      ASSERT_TRUE(fnat_pool_init(w(i).fnat[0], &sh().rss, i, 2, kLocal, "t_fnat"));
    }
  }
  unsigned queue_of_reply(uint32_t b, uint16_t bport, uint16_t lport) {
    return reta_[softrss4(kRssKey, b, kLocal, bport, lport) & 127];
  }
  // Opens a connection from (c, cport) at its owner; returns the backend
  // frame's (backend, local port).
  bool open(uint32_t c, uint16_t cport, uint32_t* b, uint16_t* lport) {
    sh().neigh.update(c, kClientMac.data(), kT0);
    FrameSpec syn = from_client(cport, kTcpSyn);
    syn.src = c;
    const unsigned owner = flow_owner(c, cport, 2);
    rx(build_frame(syn), 0, owner);
    auto q = tx_queue(1, static_cast<uint16_t>(owner));
    if (q.size() != 1) return false;
    *b = ip_dst(q[0].data());
    *lport = l4_sport(q[0].data());
    return true;
  }
  uint16_t reta_[128];
};

TEST_F(RssSteerWorkerTest, RepliesLandOnTheOwnersQueue) {
  build(Forward::kFnat, 2, 4096);
  if (HasFatalFailure()) return;
  unsigned per_owner[2] = {0, 0};
  for (uint32_t a = 10; a < 60; ++a) {
    for (uint16_t cp = 40000; cp < 40010; ++cp) {
      const uint32_t c = ip4(10, 0, 0, static_cast<uint8_t>(a));
      uint32_t b;
      uint16_t lport;
      ASSERT_TRUE(open(c, cp, &b, &lport)) << drop_summary(flow_owner(c, cp, 2));
      const unsigned owner = flow_owner(c, cp, 2);
      EXPECT_EQ(queue_of_reply(b, 80, lport), owner) << "lport " << lport;
      EXPECT_EQ(lport % 2, owner);
      ++per_owner[owner];
      // The reply, on the queue RSS picks: processed in place.
      rx(build_frame(from_backend(b, b == kB1 ? kB1Mac : kB2Mac, 80, kLocal, lport, kTcpSyn | kTcpAck)), 1,
         queue_of_reply(b, 80, lport));
      ASSERT_EQ(tx(0).size(), 1u) << drop_summary(owner);
    }
  }
  EXPECT_GT(per_owner[0], 0u);
  EXPECT_GT(per_owner[1], 0u);
  for (unsigned i = 0; i < 2; ++i) {
    EXPECT_EQ(w(i).counters.reply_redirects.load(), 0u);
    EXPECT_EQ(w(i).counters.fnat_unsteered.load(), 0u);
  }
  EXPECT_EQ(drops_of_all_workers(), 0u);
}

TEST_F(RssSteerWorkerTest, ExhaustedSteeredPortsFallBackToTheRedirectRing) {
  build(Forward::kFnat, 2, 4096);
  if (HasFatalFailure()) return;
  serve_rings_ = true;
  // A client of worker 1; take every port that steers replies from kB1:80
  // to worker 1. The scheduler (rr) sends one of two connections to kB1.
  uint32_t c = 0;
  for (uint32_t a = 10; a < 250 && !c; ++a)
    if (flow_owner(ip4(10, 0, 0, static_cast<uint8_t>(a)), 0, 2) == 1) c = ip4(10, 0, 0, static_cast<uint8_t>(a));
  ASSERT_NE(c, 0u);
  FnatPool& fp = w(1).fnat[0];
  std::vector<uint16_t> taken;
  uint16_t lport;
  while (fnat_take_steered(sh().rss, fp, 1, rss_dest_bits(sh().rss, kB1, 80), &lport)) taken.push_back(lport);
  ASSERT_GT(fp.top, 0u) << "ports that steer elsewhere are left";
  uint32_t b = 0;
  for (uint16_t cp = 41000; cp < 41004 && b != kB1; ++cp) {
    ASSERT_TRUE(open(c, cp, &b, &lport)) << drop_summary(1);
    if (b != kB1) {
      EXPECT_EQ(queue_of_reply(b, 80, lport), 1u) << "kB2: still steered";
    }
  }
  ASSERT_EQ(b, kB1);
  EXPECT_EQ(w(1).counters.fnat_unsteered.load(), 1u);
  EXPECT_EQ(lport % 2, 1u) << "still one of worker 1's ports (the redirect ring's owner rule)";
  EXPECT_EQ(queue_of_reply(b, 80, lport), 0u) << "its reply lands on worker 0's queue";
  rx(build_frame(from_backend(b, b == kB1 ? kB1Mac : kB2Mac, 80, kLocal, lport, kTcpSyn | kTcpAck)), 1, 0);
  EXPECT_EQ(w(0).counters.reply_redirects.load(), 1u);
  auto back = tx(0);
  ASSERT_EQ(back.size(), 1u) << drop_summary(1);
  EXPECT_EQ(ip_dst(back[0].data()), c);
  for (uint16_t p : taken) fnat_put(sh().rss, fp, p);
  EXPECT_EQ(drops_of_all_workers(), 0u);
}

}  // namespace
}  // namespace test
}  // namespace vipd::dp
