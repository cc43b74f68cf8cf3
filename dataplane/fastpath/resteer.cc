// Thread: worker (SynPool::init/destroy: control thread). See resteer.h.
#include "dataplane/fastpath/resteer.h"

#include <rte_malloc.h>

#include <cstring>

#include "dataplane/fastpath/bytes.h"
#include "dataplane/fastpath/checksum.h"
#include "dataplane/fastpath/ipv6.h"

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
  rte_free(ext_);
}

bool SynPool::init(const std::string& name, uint32_t capacity, int socket, std::string* error) {
  rte_free(slots_);
  rte_free(free_);
  rte_free(ext_);
  slots_ = nullptr;
  free_ = nullptr;
  ext_ = nullptr;
  n_free_ = capacity_ = 0;
  if (!capacity) return true;
  slots_ = static_cast<SynMem*>(
      rte_zmalloc_socket(("synmem_" + name).c_str(), sizeof(SynMem) * (size_t{capacity} + 1), 64, socket));
  free_ = static_cast<uint32_t*>(
      rte_zmalloc_socket(("synmem_free_" + name).c_str(), sizeof(uint32_t) * size_t{capacity}, 64, socket));
  if (!slots_ || !free_) {
    *error = "dpdk: out of memory for the re-steering pool " + name + " (lower --resteer-pool)";
    return false;
  }
  capacity_ = capacity;
  for (uint32_t h = capacity; h > 0; --h) free_[n_free_++] = h;  // handle 1 on top
  return true;
}

bool SynPool::init_ext6(const std::string& name, int socket, std::string* error) {
  rte_free(ext_);
  ext_ = nullptr;
  if (!capacity_) return true;
  ext_ = static_cast<uint8_t*>(
      rte_zmalloc_socket(("synmem_ext_" + name).c_str(), kSynExtMax * (size_t{capacity_} + 1), 64, socket));
  if (!ext_) {
    *error = "dpdk: out of memory for the re-steering pool's IPv6 area " + name + " (lower --resteer-pool)";
    return false;
  }
  return true;
}

namespace {

// The saved TCP header at `tcp` with the new ports, its checksum field 0.
// Returns its length.
size_t syn_tcp(uint8_t* tcp, const SynMem& s, uint16_t sport, uint16_t dport) noexcept {
  const size_t tcp_len = syn_tcp_len(s);
  std::memcpy(tcp, s.tcp, tcp_len);
  wr16(tcp, sport);
  wr16(tcp + 2, dport);
  wr16(tcp + 16, 0);
  return tcp_len;
}

}  // namespace

size_t syn_build(uint8_t* f, const SynMem& s, uint32_t src, uint16_t sport, uint32_t dst, uint16_t dport) noexcept {
  wr16(f + 12, kEtherTypeIpv4);
  uint8_t* ip = f + kEthLen;
  uint8_t* tcp = ip + 20;
  const size_t tcp_len = syn_tcp(tcp, s, sport, dport);
  const uint16_t total = static_cast<uint16_t>(20 + tcp_len);
  ip[0] = 0x45;
  ip[1] = s.ip[0];
  wr16(ip + 2, total);
  wr16(ip + 4, 0);
  wr16(ip + 6, 0x4000);  // DF
  ip[8] = s.ip[7] ? s.ip[7] : 1;  // as sent first (the received one less)
  ip[9] = kProtoTcp;
  wr16(ip + 10, 0);
  wr32(ip + 12, src);
  wr32(ip + 16, dst);
  put_raw16(ip + 10, ipv4_header_checksum(ip, 20));
  put_raw16(tcp + 16, l4_checksum(raw32(ip + 12), raw32(ip + 16), kProtoTcp, tcp, tcp_len, 16));
  return kEthLen + total;
}

size_t syn_build6(uint8_t* f, const SynMem& s, const uint8_t* ext, const uint8_t src[16], uint16_t sport,
                  const uint8_t dst[16], uint16_t dport) noexcept {
  wr16(f + 12, kEtherTypeIpv6);
  uint8_t* ip = f + kEthLen;
  const size_t ext_len = s.ext_len;
  uint8_t* tcp = ip + kIp6Len + ext_len;
  const size_t tcp_len = syn_tcp(tcp, s, sport, dport);
  std::memcpy(ip, s.ip, 4);  // version, traffic class, flow label
  wr16(ip + 4, static_cast<uint16_t>(ext_len + tcp_len));
  // The extension headers as the client sent them (their last next header
  // is TCP), the first one's type as saved.
  if (ext_len) std::memcpy(ip + kIp6Len, ext, ext_len);
  ip[6] = ext_len ? s.ip[6] : kProtoTcp;
  ip[7] = s.ip[7] ? s.ip[7] : 1;  // as sent first (the received one less)
  std::memcpy(ip + 8, src, 16);
  std::memcpy(ip + 24, dst, 16);
  put_raw16(tcp + 16, l4_checksum6(src, dst, kProtoTcp, tcp, tcp_len, 16));
  return kEthLen + kIp6Len + ext_len + tcp_len;
}

}  // namespace vipd::dp
