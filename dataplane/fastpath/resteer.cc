// Thread: worker (SynPool::init/destroy: control thread). See resteer.h.
#include "dataplane/fastpath/resteer.h"

#include <rte_malloc.h>

#include <cstring>

#include "dataplane/fastpath/bytes.h"
#include "dataplane/fastpath/checksum.h"

namespace vipd::dp {

using namespace bytes;

const char* resteer_reason_name(unsigned r) noexcept {
  switch (r) {
    case kResteerRst: return "rst";
    case kResteerIcmp: return "icmp";
    case kResteerTimeout: return "timeout";
    case kResteerRetransmit: return "retransmit";
    default: return "unknown";
  }
}

SynPool::~SynPool() {
  rte_free(slots_);
  rte_free(free_);
}

bool SynPool::init(const std::string& name, uint32_t capacity, int socket, std::string* error) {
  rte_free(slots_);
  rte_free(free_);
  slots_ = nullptr;
  free_ = nullptr;
  n_free_ = capacity_ = head_ = tail_ = 0;
  if (!capacity) return true;
  slots_ = static_cast<SynMem*>(
      rte_zmalloc_socket(("synmem_" + name).c_str(), sizeof(SynMem) * size_t{capacity}, 64, socket));
  free_ = static_cast<uint32_t*>(
      rte_zmalloc_socket(("synmem_free_" + name).c_str(), sizeof(uint32_t) * size_t{capacity}, 64, socket));
  if (!slots_ || !free_) {
    *error = "dpdk: out of memory for the re-steering pool " + name + " (lower --resteer-pool)";
    return false;
  }
  capacity_ = capacity;
  for (uint32_t i = capacity; i-- > 0;) free_[n_free_++] = i;
  return true;
}

void syn_save(SynMem& s, const uint8_t* f, const Parsed& p) noexcept {
  const uint8_t* ip = f + p.l3_off;
  const uint8_t* tcp = f + p.l4_off;
  s.isn = rd32(tcp + 4);
  s.window = rd16(tcp + 14);
  s.tos = ip[1];
  s.ttl = p.ttl;
  size_t doff = (tcp[12] >> 4) * 4u;  // parse_frame checked 20 <= doff <= l4_len
  size_t n = doff > 20 ? doff - 20 : 0;
  if (n > kTcpOptsMax) n = kTcpOptsMax;
  s.opts_len = static_cast<uint8_t>(n & ~size_t{3});
  std::memcpy(s.opts, tcp + 20, s.opts_len);
}

size_t syn_build(uint8_t* f, const SynMem& s, uint32_t src, uint16_t sport, uint32_t dst, uint16_t dport) noexcept {
  wr16(f + 12, kEtherTypeIpv4);
  uint8_t* ip = f + kEthLen;
  const size_t tcp_len = 20 + size_t{s.opts_len};
  const uint16_t total = static_cast<uint16_t>(20 + tcp_len);
  ip[0] = 0x45;
  ip[1] = s.tos;
  wr16(ip + 2, total);
  wr16(ip + 4, 0);
  wr16(ip + 6, 0x4000);  // DF
  ip[8] = static_cast<uint8_t>(s.ttl > 1 ? s.ttl - 1 : 1);
  ip[9] = kProtoTcp;
  wr16(ip + 10, 0);
  wr32(ip + 12, src);
  wr32(ip + 16, dst);
  put_raw16(ip + 10, ipv4_header_checksum(ip, 20));
  uint8_t* tcp = ip + 20;
  wr16(tcp, sport);
  wr16(tcp + 2, dport);
  wr32(tcp + 4, s.isn);
  wr32(tcp + 8, 0);
  tcp[12] = static_cast<uint8_t>((tcp_len / 4) << 4);
  tcp[13] = kTcpSyn;
  wr16(tcp + 14, s.window);
  wr16(tcp + 16, 0);
  wr16(tcp + 18, 0);
  std::memcpy(tcp + 20, s.opts, s.opts_len);
  put_raw16(tcp + 16, l4_checksum(raw32(ip + 12), raw32(ip + 16), kProtoTcp, tcp, tcp_len, 16));
  return kEthLen + total;
}

}  // namespace vipd::dp
