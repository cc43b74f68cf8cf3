// Thread: control (set-up).
#include <rte_hash.h>
#include <rte_hash_crc.h>

#include "dataplane/fastpath/worker.h"

namespace vipd::dp {

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
  return sh.vip_table && sh.vip_addrs;
}

}  // namespace vipd::dp
