// Thread: control (off the fast path; allocates). Builders for the lookup
// tables of the hashing schedulers. Pure functions of the destinations (in
// their sorted order) and weights: two vipd instances given the same service
// build byte-identical tables.
#pragma once

#include <cstdint>
#include <vector>

#include "dataplane/fastpath/tables.h"

namespace vipd::dp {

constexpr uint16_t kNoDest = 0xffff;

// sh/dh: kShTableSize buckets filled in destination order, each destination
// taking `weight` consecutive buckets in turn (IPVS), weight-0 ones skipped.
std::vector<uint16_t> build_sh_table(const DestRef* dests, uint32_t n);

// Maglev (Eisenbud et al., NSDI 2016): every destination with a weight above 0
// walks its own permutation of the m slots (offset and skip from two hashes of
// "ip:port") and claims the next free slot in turn; a destination with weight
// w takes w turns per max-weight round. m must be a prime above the number of
// destinations. Entries are indexes into `dests` (kNoDest if none is usable).
std::vector<uint16_t> build_maglev_table(const DestRef* dests, uint32_t n, uint32_t m);

bool is_prime(uint32_t v);

}  // namespace vipd::dp
