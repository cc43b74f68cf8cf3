// Thread: any (pure functions). The CRC32 signatures of the fast-path hash
// tables' keys, computed inline: the VIP and template tables are created
// with hash_func = rte_hash_crc and these initial values (vip_tables.cc,
// templates.cc), so a signature computed here can be handed to
// rte_hash_*_with_hash*; the connection table (conn_table.cc) hashes its
// keys with conn_hash and takes the same precomputed values. One SSE4.2
// crc32 instruction per 8 bytes of key (a table lookup on CPUs without it;
// the same values either way).
#pragma once

#include <rte_hash_crc.h>
#if defined(__SSE4_2__) && defined(__x86_64__)
#include <nmmintrin.h>
#endif

#include <cstdint>
#include <cstring>

#include "dataplane/fastpath/conn_table.h"
#include "dataplane/fastpath/tables.h"

namespace vipd::dp {

// Equal to rte_hash_crc(&k, sizeof k, init), which the tables call: CRC32C
// over the key's 8-byte words in order. (The words are copied out with memcpy:
// rte_hash_crc reads them through a uint64_t*, which inlined here would break
// strict aliasing and let the compiler read a key before it is written.)
// One 8-byte word of CRC32C: rte_hash_crc_8byte's value. Built for a CPU
// with SSE4.2 (-march=corei7 and later) it is the crc32 instruction itself,
// without rte_hash_crc_8byte's run-time check of the algorithm (which picks
// the same instruction there).
inline uint32_t crc32c_word(uint64_t data, uint32_t init) noexcept {
#if defined(__SSE4_2__) && defined(__x86_64__)
  return static_cast<uint32_t>(_mm_crc32_u64(init, data));
#else
  return rte_hash_crc_8byte(data, init);
#endif
}
// The 16-byte FlowKey as its two 8-byte words (little-endian: src | dst,
// then sport | dport | proto, the padding zero), built in registers.
inline uint64_t flow_word0(uint32_t src, uint32_t dst) noexcept { return uint64_t{src} | (uint64_t{dst} << 32); }
inline uint64_t flow_word1(uint16_t sport, uint16_t dport, uint8_t proto) noexcept {
  return uint64_t{sport} | (uint64_t{dport} << 16) | (uint64_t{proto} << 32);
}
// conn_hash of the key whose words are a, b.
inline uint32_t conn_hash_words(uint64_t a, uint64_t b) noexcept {
  return crc32c_word(b, crc32c_word(a, kConnHashInit));
}
inline uint32_t conn_hash(const FlowKey& k) noexcept {
  static_assert(sizeof k == 16);
  uint64_t a, b;
  std::memcpy(&a, &k, 8);
  std::memcpy(&b, reinterpret_cast<const char*>(&k) + 8, 8);
  return conn_hash_words(a, b);
}
inline uint32_t vip_hash(const VipKey& k) noexcept {
  static_assert(sizeof k == 8);
  uint64_t a;
  std::memcpy(&a, &k, 8);
  return crc32c_word(a, kVipHashInit);
}

}  // namespace vipd::dp
