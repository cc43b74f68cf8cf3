// Thread: built by the control thread at set-up, then read-only for the
// workers (rss_fnat_pick/put change only the calling worker's own pool).
// RSS steering of full-NAT replies: a new connection's local port is chosen so
// that the NIC's RSS hash of the reply (backend -> local address, Toeplitz
// over the 4-tuple with the key vipd programs, low bits indexing the
// redirection table) selects the rx queue of the worker that owns the
// connection; the reply then needs no redirect ring. Without RSS (or with a
// key or table vipd cannot program and read back) steering is off and the
// owner is found as before (local port modulo the worker count), which stays
// the fallback for the ports steering cannot place (docs/operations.md,
// "RSS steering").
//
// The Toeplitz hash is linear over GF(2) in the input bits, so the hash of a
// tuple is the XOR of the hashes of its bytes in place: set-up computes
// those with rte_softrss (256 values for each of the 12 bytes), a new
// connection XORs 8 table entries.
#pragma once

#include <cstdint>

#include "dataplane/fastpath/tables.h"

namespace vipd::dp {

// Largest redirection table steering handles (DPDK's largest is 512; some
// NICs have 2048).
constexpr uint32_t kRssMaxReta = 2048;
// Longest key vipd programs (40 bytes for most NICs, 52 for i40e).
constexpr uint32_t kRssKeyMax = 52;
// vipd's RSS key: the common default 40-byte key (Microsoft's RSS
// verification suite), extended to 52 bytes; a NIC gets its first
// hash_key_size bytes.
// (4-byte aligned: rte_softrss reads it as 32-bit words)
alignas(4) extern const uint8_t kRssKey[kRssKeyMax];

struct RssSteer {
  bool tcp = false, udp = false;  // the ports hash this protocol over the 4-tuple: steered
  uint32_t mask = 0;              // redirection table size - 1 (a power of two)
  uint32_t reta_size = 0;
  // tab[i][b]: the Toeplitz hash of a 12-byte IPv4 tuple (src address, dst
  // address, src port, dst port; network order) that is zero but for byte i = b.
  uint32_t tab[12][256]{};
  // The redirection table's indices grouped by queue: queue q's are
  // by_queue[q_begin[q] .. q_begin[q + 1]).
  uint16_t by_queue[kRssMaxReta]{};
  uint16_t q_begin[kMaxWorkers + 1]{};
};

// Whether a protocol's new connections are steered.
inline bool rss_steered(const RssSteer& s, uint8_t proto) noexcept {
  return proto == 6 ? s.tcp : proto == 17 ? s.udp : false;
}

// The Toeplitz hash of an IPv4 4-tuple (host order), as the NIC computes it.
inline uint32_t rss_hash4(const RssSteer& s, uint32_t src, uint32_t dst, uint16_t sport, uint16_t dport) noexcept {
  return s.tab[0][src >> 24] ^ s.tab[1][(src >> 16) & 255] ^ s.tab[2][(src >> 8) & 255] ^ s.tab[3][src & 255] ^
         s.tab[4][dst >> 24] ^ s.tab[5][(dst >> 16) & 255] ^ s.tab[6][(dst >> 8) & 255] ^ s.tab[7][dst & 255] ^
         s.tab[8][sport >> 8] ^ s.tab[9][sport & 255] ^ s.tab[10][dport >> 8] ^ s.tab[11][dport & 255];
}

// The parts of the reply's redirection-table index that the local port, the
// local address and the destination (the reply's source) add. The last two
// are computed off the fast path: per pool (FnatPool::lbits) and per
// published destination (DestRef::rss).
inline uint32_t rss_lport_bits(const RssSteer& s, uint16_t lport) noexcept {
  return (s.tab[10][lport >> 8] ^ s.tab[11][lport & 255]) & s.mask;
}
inline uint16_t rss_laddr_bits(const RssSteer& s, uint32_t laddr) noexcept {
  return static_cast<uint16_t>(rss_hash4(s, 0, laddr, 0, 0) & s.mask);
}
inline uint16_t rss_dest_bits(const RssSteer& s, uint32_t ip, uint16_t port) noexcept {
  return static_cast<uint16_t>(rss_hash4(s, ip, 0, port, 0) & s.mask);
}

// Builds the tables. key: key_len bytes (>= 16); reta: the queue of each of
// reta_size entries (a power of two, <= kRssMaxReta), every queue < n_queues
// (<= kMaxWorkers); tcp/udp: which protocols the NIC hashes over the 4-tuple
// (at least one). False (s left off: mask 0) when these do not fit. mask != 0
// is what tells the fast path that the pools are bucketed.
bool rss_steer_init(RssSteer& s, const uint8_t* key, uint32_t key_len, const uint16_t* reta, uint32_t reta_size,
                    uint32_t n_queues, bool tcp, bool udp);

// A worker's free full-NAT local ports for one local address: those with
// port % n_workers == worker (the redirect ring's owner rule), 1024..65535.
// Without steering (buckets == 0): one stack, ports[0 .. top). With it: one
// stack per redirection-table index the port's bits select, bucket b's
// free ports at ports[bstart[b] .. bstart[b] + bcount[b]); top counts them all.
struct FnatPool {
  uint16_t* ports = nullptr;  // one allocation with bstart and bcount (rte_free(ports) frees all)
  uint32_t top = 0;
  uint32_t buckets = 0;  // 0: steering off (a plain stack)
  uint32_t* bstart = nullptr;
  uint16_t* bcount = nullptr;
  uint32_t scan = 0;   // where the unsteered fallback looks first
  uint32_t rot = 0;    // where the steered pick starts among the queue's entries (drains buckets evenly)
  uint16_t lbits = 0;  // rss_laddr_bits of the pool's local address
};

// Allocates and fills a pool for local address `laddr` (rte_zmalloc,
// `name`); steer nullptr or off: a plain stack. False: out of memory.
bool fnat_pool_init(FnatPool& fp, const RssSteer* steer, uint32_t worker, uint32_t n_workers, uint32_t laddr,
                    const char* name);

// Returns a local port to the pool it came from.
inline void fnat_put(const RssSteer& s, FnatPool& fp, uint16_t lport) noexcept {
  if (!fp.buckets) {
    fp.ports[fp.top++] = lport;
    return;
  }
  const uint32_t b = rss_lport_bits(s, lport);
  fp.ports[fp.bstart[b] + fp.bcount[b]++] = lport;
  ++fp.top;
}

// A free port whose reply (from the destination whose rss_dest_bits are
// `dest_bits` to the pool's local address) hashes to one of `queue`'s
// redirection-table entries. False when none is free (or the pool is a
// plain stack).
inline bool fnat_take_steered(const RssSteer& s, FnatPool& fp, uint32_t queue, uint32_t dest_bits,
                              uint16_t* lport) noexcept {
  const uint32_t first = s.q_begin[queue], n = s.q_begin[queue + 1] - first;
  if (!fp.buckets || !fp.top || !n) return false;
  const uint32_t base = dest_bits ^ fp.lbits;
  // From a rotating start, so that the buckets drain evenly and a pick
  // scans past empty ones only near exhaustion.
  uint32_t k = fp.rot < n ? fp.rot : 0;
  for (uint32_t j = 0; j < n; ++j) {
    const uint32_t b = (s.by_queue[first + k] ^ base) & s.mask;
    if (fp.bcount[b]) {
      *lport = fp.ports[fp.bstart[b] + --fp.bcount[b]];
      --fp.top;
      fp.rot = k + 1 < n ? k + 1 : 0;
      return true;
    }
    if (++k == n) k = 0;
  }
  return false;
}

// fnat_take_steered's first try, inline on the new-connection path: the
// bucket at the pool's rotating start. False: not free there (or no entries
// for `queue`): the caller searches with fnat_take_steered.
inline bool fnat_take_steered_first(const RssSteer& s, FnatPool& fp, uint32_t queue, uint32_t dest_bits,
                                    uint16_t* lport) noexcept {
  const uint32_t first = s.q_begin[queue], n = s.q_begin[queue + 1] - first;
  if (fp.rot >= n) return false;  // also n == 0
  const uint32_t b = (s.by_queue[first + fp.rot] ^ dest_bits ^ fp.lbits) & s.mask;
  if (!fp.bcount[b]) return false;
  *lport = fp.ports[fp.bstart[b] + --fp.bcount[b]];
  --fp.top;
  fp.rot = fp.rot + 1 < n ? fp.rot + 1 : 0;
  return true;
}

// Any free port (the reply then takes the redirect ring when it lands on
// another worker's queue). False when the pool is empty.
inline bool fnat_take_any(FnatPool& fp, uint16_t* lport) noexcept {
  if (!fp.top) return false;
  if (!fp.buckets) {
    *lport = fp.ports[--fp.top];
    return true;
  }
  for (uint32_t k = 0; k < fp.buckets; ++k) {
    const uint32_t b = (fp.scan + k) & (fp.buckets - 1);
    if (fp.bcount[b]) {
      fp.scan = b;
      *lport = fp.ports[fp.bstart[b] + --fp.bcount[b]];
      --fp.top;
      return true;
    }
  }
  return false;  // unreachable: top counts the buckets' ports
}

}  // namespace vipd::dp
