// Thread: control (set-up). Builds the RSS steering tables (rss_steer.h)
// with DPDK's software Toeplitz (rte_thash.h) and fills the local-port pools.
#include "dataplane/fastpath/rss_steer.h"

#include <rte_malloc.h>
#include <rte_thash.h>

#include <cstring>

namespace vipd::dp {

alignas(4) const uint8_t kRssKey[kRssKeyMax] = {
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
    0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
    0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa, 0x9c, 0x3e,
    0x51, 0x7a, 0x0d, 0x4b, 0x26, 0xe1, 0xf3, 0x95, 0x8c, 0x19,
};

bool rss_steer_init(RssSteer& s, const uint8_t* key, uint32_t key_len, const uint16_t* reta, uint32_t reta_size,
                    uint32_t n_queues, bool tcp, bool udp) {
  s.tcp = s.udp = false;
  s.mask = s.reta_size = 0;
  // 12 bytes of tuple need 12 + 4 bytes of key.
  if (!(tcp || udp) || key_len < 16 || reta_size == 0 || reta_size > kRssMaxReta || (reta_size & (reta_size - 1)) ||
      n_queues == 0 || n_queues > kMaxWorkers)
    return false;
  for (uint32_t i = 0; i < reta_size; ++i)
    if (reta[i] >= n_queues) return false;
  // rte_softrss reads the key as 32-bit words: an aligned copy.
  alignas(4) uint8_t k[kRssKeyMax + 4]{};
  std::memcpy(k, key, key_len < kRssKeyMax ? key_len : kRssKeyMax);
  for (uint32_t byte = 0; byte < 12; ++byte) {
    for (uint32_t v = 0; v < 256; ++v) {
      // rte_softrss takes the tuple as host-order 32-bit words holding the
      // packet's bytes most significant first.
      uint32_t tuple[3] = {0, 0, 0};
      tuple[byte / 4] = v << (8 * (3 - byte % 4));
      s.tab[byte][v] = rte_softrss(tuple, 3, k);
    }
  }
  uint32_t n = 0;
  for (uint32_t q = 0; q < n_queues; ++q) {
    s.q_begin[q] = static_cast<uint16_t>(n);
    for (uint32_t i = 0; i < reta_size; ++i)
      if (reta[i] == q) s.by_queue[n++] = static_cast<uint16_t>(i);
  }
  for (uint32_t q = n_queues; q <= kMaxWorkers; ++q) s.q_begin[q] = static_cast<uint16_t>(n);
  s.reta_size = reta_size;
  s.mask = reta_size - 1;
  s.tcp = tcp;
  s.udp = udp;
  return true;
}

bool fnat_pool_init(FnatPool& fp, const RssSteer* steer, uint32_t worker, uint32_t n_workers, uint32_t laddr,
                    const char* name) {
  const bool on = steer && steer->mask;  // rss_steer_init succeeded
  const uint32_t nb = on ? steer->reta_size : 0;
  const size_t bytes = sizeof(uint16_t) * 65536 + sizeof(uint32_t) * nb + sizeof(uint16_t) * nb;
  auto* mem = static_cast<uint8_t*>(rte_zmalloc(name, bytes, 64));
  if (!mem) return false;
  fp = FnatPool{};
  fp.ports = reinterpret_cast<uint16_t*>(mem);
  if (!on) {
    for (uint32_t port = 65535; port >= 1024; --port)
      if (port % n_workers == worker) fp.ports[fp.top++] = static_cast<uint16_t>(port);
    return true;
  }
  fp.buckets = nb;
  fp.lbits = rss_laddr_bits(*steer, laddr);
  fp.bstart = reinterpret_cast<uint32_t*>(mem + sizeof(uint16_t) * 65536);
  fp.bcount = reinterpret_cast<uint16_t*>(mem + sizeof(uint16_t) * 65536 + sizeof(uint32_t) * nb);
  // Count each bucket's ports, lay the buckets out, then push (highest port
  // first, so that a bucket hands out its lowest port first, like the stack).
  for (uint32_t port = 1024; port <= 65535; ++port)
    if (port % n_workers == worker) ++fp.bcount[rss_lport_bits(*steer, static_cast<uint16_t>(port))];
  uint32_t at = 0;
  for (uint32_t b = 0; b < nb; ++b) {
    fp.bstart[b] = at;
    at += fp.bcount[b];
    fp.bcount[b] = 0;
  }
  for (uint32_t port = 65535; port >= 1024; --port)
    if (port % n_workers == worker) fnat_put(*steer, fp, static_cast<uint16_t>(port));
  return true;
}

}  // namespace vipd::dp
