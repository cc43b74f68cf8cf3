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

#include <cstdint>
#include <cstring>

#include "dataplane/fastpath/conn_table.h"
#include "dataplane/fastpath/tables.h"

namespace vipd::dp {

// Equal to rte_hash_crc(&k, sizeof k, init), which the tables call: CRC32C
// over the key's 8-byte words in order. (The words are copied out with memcpy:
// rte_hash_crc reads them through a uint64_t*, which inlined here would break
// strict aliasing and let the compiler read a key before it is written.)
inline uint32_t conn_hash(const FlowKey& k) noexcept {
  static_assert(sizeof k == 16);
  uint64_t a, b;
  std::memcpy(&a, &k, 8);
  std::memcpy(&b, reinterpret_cast<const char*>(&k) + 8, 8);
  return rte_hash_crc_8byte(b, rte_hash_crc_8byte(a, kConnHashInit));
}
inline uint32_t vip_hash(const VipKey& k) noexcept {
  static_assert(sizeof k == 8);
  uint64_t a;
  std::memcpy(&a, &k, 8);
  return rte_hash_crc_8byte(a, kVipHashInit);
}

}  // namespace vipd::dp
