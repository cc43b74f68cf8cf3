// Thread: control (set-up).
#include <rte_hash.h>
#include <rte_hash_crc.h>

#include <cstring>

#include "dataplane/fastpath/worker.h"

namespace vipd::dp {
namespace {

// Key compares for the two tables (0: equal), in place of rte_hash's
// memcmp for keys of these lengths (it has its own only for 16 bytes and
// more): one load and compare of each key, a new flow's VIP lookup pays no
// library call for it.
int vip_key_cmp(const void* a, const void* b, size_t) {
  static_assert(sizeof(VipKey) == 8);
  uint64_t x, y;
  std::memcpy(&x, a, 8);
  std::memcpy(&y, b, 8);
  return x != y;
}
int addr_key_cmp(const void* a, const void* b, size_t) {
  uint32_t x, y;
  std::memcpy(&x, a, 4);
  std::memcpy(&y, b, 4);
  return x != y;
}

}  // namespace

bool create_vip_tables(Shared& sh, const std::string& prefix, uint32_t entries, int socket) {
  rte_hash_parameters hp{};
  const std::string vips = prefix + "vips", addrs = prefix + "vip_addrs";
  hp.name = vips.c_str();
  hp.entries = entries;
  hp.key_len = sizeof(VipKey);
  // CRC32 (one SSE4.2 instruction for the 8-byte key where the CPU has it).
  hp.hash_func = rte_hash_crc;
  hp.hash_func_init_val = kVipHashInit;  // flow_hash.h computes the same signatures
  hp.socket_id = socket;
  hp.extra_flag = RTE_HASH_EXTRA_FLAGS_RW_CONCURRENCY_LF | RTE_HASH_EXTRA_FLAGS_EXT_TABLE;
  sh.vip_table = rte_hash_create(&hp);
  hp.name = addrs.c_str();
  hp.key_len = sizeof(uint32_t);
  sh.vip_addrs = rte_hash_create(&hp);
  if (sh.vip_table) rte_hash_set_cmp_func(sh.vip_table, vip_key_cmp);
  if (sh.vip_addrs) rte_hash_set_cmp_func(sh.vip_addrs, addr_key_cmp);
  return sh.vip_table && sh.vip_addrs;
}

}  // namespace vipd::dp
