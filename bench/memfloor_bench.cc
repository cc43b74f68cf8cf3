// Thread: main.
//
// The memory floor: what this machine charges per packet for the random cache
// lines an established packet must read, with nothing else done — the part of
// benchmark 1's cost that no instruction saving removes (the aim: "drive the
// fast path towards the machine's limit").
//
// A *shape* is a chain of levels; each level reads one line from each of its
// regions, at an index that depends on the line read at the level before (the
// way an established packet goes rte_hash bucket -> key slot (which holds
// the Conn) -> destination). Packets go in bursts of kBurst (worker.h), level by level
// across the burst, with every line of a level prefetched for the whole burst
// before the first is read: the pipeline's own pattern (dataplane/fastpath/
// burst.cc and DPDK's bulk lookup), i.e. the most memory parallelism that
// structure allows. Timed per chunk of 256 packets (median, like benchmark 1);
// between chunks the untimed generator draws the next 256 first-level indices
// (the pipeline's generator writes frames there).
//
// Shapes (sizes in bytes from the real structures, sized as benchmark 1
// sizes them for --services/--flows/--backends):
//   est      the established packet at that size (full NAT, one key per
//            connection in the hash): 2 buckets (rte_hash's bulk lookup
//            prefetches the primary and the secondary bucket and compares the
//            signatures of both), the key slot, which holds the Conn
//            (conn_table.h; written: expiry), and the DestCounters (written;
//            they hold the worker's copy of the destination's generation
//            too) — 4 lines, 3 levels
//   reply    a full-NAT reply: its port index entry (conn_table.h), the key
//            slot with the Conn and the DestCounters — 3 lines, 3 levels
//   chainN   N levels of one line each in regions of --chain-mb MiB (N = 1..5):
//            the cost of one more dependent level
//   wide     min(N, 3) lines of one level, in as many such regions: the same
//            lines without the dependency
//   sizeN    one random line per packet (one level) out of a packed region
//            of N MiB (N = 1, 4, 16, 64): where the machine's caches end,
//            as this process sees them (a shared L3 holds other tenants'
//            lines too)
//   xlat     one random line per packet out of 16384 lines (1 MiB, as size1)
//            spread one per 4 KiB page (64 MiB of address space): against
//            size1, the same lines in the same number, so the difference is
//            the cost of finding their pages (TLB misses and page walks,
//            nested ones in a VM)
// Everything stays in memory of this process (DPDK's heap, the same pages as
// benchmark 1: --no-huge unless --hugepages / --huge-dir).
#include <rte_cycles.h>
#include <rte_malloc.h>
#include <rte_prefetch.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "dataplane/fastpath/conn_table.h"
#include "dataplane/fastpath/tables.h"

namespace vipd::bench {
namespace {

using dp::kBurst;

constexpr unsigned kLine = 64;
constexpr unsigned kChunk = 256;
constexpr unsigned kMaxLevels = 5;
constexpr unsigned kMaxReads = 3;  // lines per level

struct Region {
  uint8_t* base = nullptr;
  uint64_t lines = 0;      // lines that are read
  unsigned shift = 0;      // line i is at line (i << shift) + ((i * 7) & mask) of the region
  uint64_t mask = 0;       // 0: packed; shift 6, mask 63: one line per 4 KiB page
};

// One line read of a level: region r, index word w of the previous level's
// line (a region read twice per level reads two different lines).
struct Read {
  unsigned region;
  bool write;  // read-modify-write (the pipeline writes Conn and counters)
};

struct Level {
  Read reads[kMaxReads];
  unsigned n = 0;
};

struct Shape {
  std::string name;
  std::vector<Region> regions;
  Level levels[kMaxLevels];
  unsigned n_levels = 0;
  unsigned lines_per_pkt() const {
    unsigned s = 0;
    for (unsigned l = 0; l < n_levels; ++l) s += levels[l].n;
    return s;
  }
};

// Every line holds 16 random words: word k of a line at level l is the index
// (modulo the region's lines) of read k of level l + 1.
// A sparse region (shift > 0) reads one line out of every 1 << shift.
bool alloc_region(Region* r, uint64_t bytes, Rng& rng, std::string* err, unsigned shift = 0) {
  const uint64_t total = std::max<uint64_t>(1, (bytes + kLine - 1) / kLine);
  r->shift = shift;
  r->mask = (uint64_t{1} << shift) - 1;
  r->lines = std::max<uint64_t>(1, total >> shift);
  const uint64_t alloc_lines = r->lines << shift;
  r->base = static_cast<uint8_t*>(rte_malloc("memfloor", alloc_lines * kLine, 4096));
  if (!r->base) {
    *err = "rte_malloc of " + std::to_string(alloc_lines * kLine >> 20) + " MiB failed (raise --mem)";
    return false;
  }
  auto* w = reinterpret_cast<uint32_t*>(r->base);
  for (uint64_t i = 0; i < alloc_lines * (kLine / 4); ++i) w[i] = static_cast<uint32_t>(rng.next() >> 32);
  return true;
}

void free_shape(Shape& s) {
  for (auto& r : s.regions) rte_free(r.base);
  s.regions.clear();
}

// Adds one region per size to `s`; false, with the error printed, when the
// heap is too small.
bool add_regions(Shape& s, const std::vector<uint64_t>& sizes, Rng& rng, unsigned shift = 0) {
  for (uint64_t b : sizes) {
    s.regions.emplace_back();
    std::string err;
    if (!alloc_region(&s.regions.back(), b, rng, &err, shift)) {
      fprintf(stderr, "vipd_bench: memfloor: %s\n", err.c_str());
      return false;
    }
  }
  return true;
}

inline uint8_t* line_at(const Region& r, uint32_t word) {
  const uint64_t i = uint64_t{word} % r.lines;
  return r.base + ((i << r.shift) + ((i * 7) & r.mask)) * kLine;
}

// One burst: `first[i]` is packet i's random word for level 0.
uint64_t run_burst(const Shape& s, const uint32_t* first, unsigned n) {
  const uint8_t* cur[kBurst];  // the line of read 0 at the level just read
  uint8_t* lines[kMaxReads][kBurst];
  uint64_t sink = 0;
  for (unsigned l = 0; l < s.n_levels; ++l) {
    const Level& lv = s.levels[l];
    // Addresses of this level from the level before; prefetch all of them.
    for (unsigned i = 0; i < n; ++i) {
      for (unsigned k = 0; k < lv.n; ++k) {
        uint32_t word;
        if (l == 0) {
          word = first[i] * (k + 1) + k;  // two reads of level 0: two lines
        } else {
          std::memcpy(&word, cur[i] + 4 * k, 4);
        }
        lines[k][i] = line_at(s.regions[lv.reads[k].region], word);
        rte_prefetch0(lines[k][i]);
      }
    }
    // Read them (the next level's indices come from read 0's line).
    for (unsigned i = 0; i < n; ++i) {
      for (unsigned k = 0; k < lv.n; ++k) {
        uint64_t v;
        std::memcpy(&v, lines[k][i] + 56, 8);
        sink += v;
        if (lv.reads[k].write) {
          ++v;
          std::memcpy(lines[k][i] + 56, &v, 8);
        }
      }
      cur[i] = lines[0][i];
    }
  }
  return sink;
}

struct Result {
  std::vector<double> chunk_ns;
  uint64_t sink = 0;
};

// KEY_ns (median chunk), KEY_ns_p10, KEY_ns_p90.
void add_result(Json& j, const std::string& key, const Result& r) {
  j.num(key + "_ns", median(r.chunk_ns));
  j.num(key + "_ns_p10", percentile(r.chunk_ns, 10));
  j.num(key + "_ns_p90", percentile(r.chunk_ns, 90));
}

Result run_shape(const Shape& s, uint64_t packets, unsigned reps, Rng& rng, double ns_per_cycle) {
  Result r;
  uint32_t first[kChunk];
  const uint64_t chunks = std::max<uint64_t>(1, packets / kChunk);
  // One untimed pass first (the pipeline's phases follow a warm-up too).
  for (unsigned rep = 0; rep <= reps; ++rep) {
    for (uint64_t c = 0; c < chunks; ++c) {
      for (unsigned i = 0; i < kChunk; ++i) first[i] = static_cast<uint32_t>(rng.next() >> 32);
      const uint64_t t0 = rte_rdtsc();
      for (unsigned b = 0; b < kChunk; b += kBurst) r.sink += run_burst(s, first + b, kBurst);
      const uint64_t t1 = rte_rdtsc();
      if (rep > 0) r.chunk_ns.push_back(static_cast<double>(t1 - t0) * ns_per_cycle / kChunk);
    }
  }
  return r;
}

}  // namespace

int run_memfloor(const Args& a) {
  const uint32_t services = static_cast<uint32_t>(a.num("services", 100000));
  const uint32_t flows = static_cast<uint32_t>(a.num("flows", 1000000));
  const uint32_t backends = static_cast<uint32_t>(a.num("backends", 4));
  const uint64_t chain_mb = a.num("chain-mb", 64);
  const uint64_t packets = a.num("packets", 1000000);
  const unsigned reps = static_cast<unsigned>(a.num("reps", 3));
  const unsigned max_chain = static_cast<unsigned>(std::min<uint64_t>(kMaxLevels, a.num("max-chain", 5)));

  // The sizes benchmark 1 gives the structures (pipeline_bench.cc: full NAT,
  // kPipelineLocalAddrs local addresses), and rte_hash's own layout for a
  // table of one key per connection (the replies are in the port index):
  // buckets of 8 entries (64 bytes) for the next power of two of the entries,
  // and one 64-byte key slot (8-byte data pointer + the Conn as the key) per
  // entry.
  const uint64_t conn_cap = pipeline_conn_capacity(flows);
  const uint64_t dests = pipeline_dests(services, backends);
  const uint64_t entries = conn_cap;
  const uint64_t port_index_bytes = uint64_t{kPipelineLocalAddrs} << 16 << 2;
  uint64_t pow2 = 1;
  while (pow2 < entries) pow2 <<= 1;
  const uint64_t bucket_bytes = pow2 / 8 * 64;
  const uint64_t key_bytes = (entries + 1) * 64;
  static_assert(sizeof(dp::Conn) + 8 <= 64, "a key slot holds the Conn");
  const uint64_t counter_bytes = dests * sizeof(dp::DestCounters);
  const uint64_t est_total = bucket_bytes + key_bytes + counter_bytes + port_index_bytes;
  const uint64_t chain_total = std::max<uint64_t>(chain_mb * max_chain << 20, uint64_t{64} << 20);

  EalOptions eo;
  eo.hugepages = a.flag("hugepages") || a.flag("huge-dir");
  eo.huge_dir = a.str("huge-dir", "");
  eo.mem_mb = static_cast<unsigned>(a.num("mem", 128 + (std::max(est_total, chain_total) >> 20) * 11 / 10));
  std::string err;
  if (!eal_start(eo, &err)) {
    fprintf(stderr, "vipd_bench: %s\n", err.c_str());
    return 2;
  }
  const double ns_per_cycle = 1e9 / static_cast<double>(tsc_hz());
  Rng rng(0xf100f);

  Json j;
  j.str("bench", "memfloor");
  j.integer("services", services);
  j.integer("flows", flows);
  j.integer("backends", backends);
  j.integer("hugepages", eo.hugepages ? 1 : 0);
  j.integer("reps", reps);
  j.integer("packets_per_rep", static_cast<int64_t>(packets / kChunk * kChunk));
  j.num("tsc_hz", static_cast<double>(tsc_hz()));
  j.integer("est_bucket_bytes", static_cast<int64_t>(bucket_bytes));
  j.integer("est_key_bytes", static_cast<int64_t>(key_bytes));
  j.integer("est_destcounters_bytes", static_cast<int64_t>(counter_bytes));
  j.integer("reply_portindex_bytes", static_cast<int64_t>(port_index_bytes));
  j.integer("chain_region_bytes", static_cast<int64_t>(chain_mb << 20));

  std::vector<Shape> shapes;
  {
    Shape s;
    s.name = "est";
    if (!add_regions(s, {bucket_bytes, key_bytes, counter_bytes}, rng)) return 2;
    s.levels[0] = Level{{{0, false}, {0, false}}, 2};  // primary, secondary bucket
    s.levels[1] = Level{{{1, true}}, 1};               // key slot = Conn
    s.levels[2] = Level{{{2, true}}, 1};               // DestCounters
    s.n_levels = 3;
    Result r = run_shape(s, packets, reps, rng, ns_per_cycle);
    add_result(j, "est", r);
    j.integer("est_lines", s.lines_per_pkt());
    j.integer("est_levels", s.n_levels);
    j.integer("est_sink", static_cast<int64_t>(r.sink & 0xffff));
    free_shape(s);
  }
  {
    Shape s;
    s.name = "reply";
    if (!add_regions(s, {port_index_bytes, key_bytes, counter_bytes}, rng)) return 2;
    s.levels[0] = Level{{{0, false}}, 1};  // port index entry
    s.levels[1] = Level{{{1, true}}, 1};   // key slot = Conn
    s.levels[2] = Level{{{2, true}}, 1};   // DestCounters
    s.n_levels = 3;
    Result r = run_shape(s, packets, reps, rng, ns_per_cycle);
    add_result(j, "reply", r);
    j.integer("reply_lines", s.lines_per_pkt());
    free_shape(s);
  }
  for (unsigned n = 1; n <= max_chain; ++n) {
    Shape s;
    s.name = "chain" + std::to_string(n);
    if (!add_regions(s, std::vector<uint64_t>(n, chain_mb << 20), rng)) return 2;
    for (unsigned l = 0; l < n; ++l) s.levels[l] = Level{{{l, false}}, 1};
    s.n_levels = n;
    add_result(j, s.name, run_shape(s, packets, reps, rng, ns_per_cycle));
    free_shape(s);
  }
  // The same lines with no dependency between them: one level of
  // min(max-chain, 3) independent lines. Close to the chain of as many lines
  // if the machine is bound by how many lines it fetches, far below it if by
  // how long one fetch takes.
  {
    Shape s;
    const unsigned n = std::min(max_chain, kMaxReads);
    s.name = "wide";
    if (!add_regions(s, std::vector<uint64_t>(n, chain_mb << 20), rng)) return 2;
    for (unsigned k = 0; k < n; ++k) s.levels[0].reads[k] = Read{k, false};
    s.levels[0].n = n;
    s.n_levels = 1;
    j.integer("wide_lines", n);
    add_result(j, s.name, run_shape(s, packets, reps, rng, ns_per_cycle));
    free_shape(s);
  }
  // Where the caches end, and what finding a line's page costs: one random
  // line per packet from packed regions of growing size, then the lines of
  // size1 spread one per 4 KiB page.
  for (const unsigned mb : {1u, 4u, 16u, 64u, 0u}) {
    Shape s;
    const unsigned shift = mb ? 0 : 6;
    s.name = mb ? "size" + std::to_string(mb) : "xlat";
    if (!add_regions(s, {(mb ? mb : 1u) << 20 << shift}, rng, shift)) return 2;
    s.levels[0] = Level{{{0, false}}, 1};
    s.n_levels = 1;
    add_result(j, s.name, run_shape(s, packets, reps, rng, ns_per_cycle));
    free_shape(s);
  }
  printf("%s\n", j.dump().c_str());
  return 0;
}

}  // namespace vipd::bench
