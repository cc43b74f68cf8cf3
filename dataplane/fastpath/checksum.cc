// Thread: any.
#include "dataplane/fastpath/checksum.h"

#include <cstring>

namespace vipd::dp {

uint32_t csum_partial(const void* data, size_t len, uint32_t sum) noexcept {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t s = sum;
  while (len >= 2) {
    s += static_cast<uint32_t>((p[0] << 8) | p[1]);
    p += 2;
    len -= 2;
  }
  if (len) s += static_cast<uint32_t>(p[0] << 8);
  while (s >> 32) s = (s & 0xffffffffu) + (s >> 32);
  return static_cast<uint32_t>(s);
}

uint16_t csum_fold(uint32_t sum) noexcept {
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum & 0xffff);
}

// All arithmetic here is on host-order views of big-endian words; the result
// is converted back. Values are passed in network order.
static inline uint16_t swap16(uint16_t v) { return static_cast<uint16_t>((v >> 8) | (v << 8)); }

uint16_t csum_replace2(uint16_t check, uint16_t old_v, uint16_t new_v) noexcept {
  uint32_t s = static_cast<uint16_t>(~swap16(check));
  s += static_cast<uint16_t>(~swap16(old_v));
  s += swap16(new_v);
  while (s >> 16) s = (s & 0xffff) + (s >> 16);
  return swap16(static_cast<uint16_t>(~s));
}

uint16_t csum_replace4(uint16_t check, uint32_t old_v, uint32_t new_v) noexcept {
  check = csum_replace2(check, static_cast<uint16_t>(old_v & 0xffff), static_cast<uint16_t>(new_v & 0xffff));
  return csum_replace2(check, static_cast<uint16_t>(old_v >> 16), static_cast<uint16_t>(new_v >> 16));
}

uint16_t ipv4_header_checksum(const void* ip_hdr, size_t ihl_bytes) noexcept {
  uint8_t buf[60];
  if (ihl_bytes > sizeof buf) ihl_bytes = sizeof buf;
  std::memcpy(buf, ip_hdr, ihl_bytes);
  buf[10] = buf[11] = 0;
  uint16_t c = csum_fold(csum_partial(buf, ihl_bytes, 0));
  return swap16(c);  // network order as stored
}

uint16_t l4_checksum(uint32_t src_be, uint32_t dst_be, uint8_t proto, const void* l4, size_t len,
                     size_t check_offset) noexcept {
  uint8_t pseudo[12];
  std::memcpy(pseudo, &src_be, 4);
  std::memcpy(pseudo + 4, &dst_be, 4);
  pseudo[8] = 0;
  pseudo[9] = proto;
  pseudo[10] = static_cast<uint8_t>(len >> 8);
  pseudo[11] = static_cast<uint8_t>(len & 0xff);
  return l4_checksum_finish(csum_partial(pseudo, sizeof pseudo, 0), proto, l4, len, check_offset);
}

uint16_t l4_checksum_finish(uint32_t pseudo_sum, uint8_t proto, const void* l4, size_t len,
                            size_t check_offset) noexcept {
  uint32_t s = pseudo_sum;
  const auto* p = static_cast<const uint8_t*>(l4);
  if (check_offset + 2 <= len) {
    s = csum_partial(p, check_offset, s);
    // The checksum field is at an even offset; skipping it keeps word alignment.
    s = csum_partial(p + check_offset + 2, len - check_offset - 2, s);
  } else {
    s = csum_partial(p, len, s);
  }
  uint16_t c = csum_fold(s);
  if (proto == 17 && c == 0) c = 0xffff;
  return swap16(c);
}

}  // namespace vipd::dp
