// Thread: any (pure functions). Internet checksum helpers (RFC 1071) and
// incremental updates (RFC 1624) for NAT rewrites. No allocation, no throw.
#pragma once

#include <cstddef>
#include <cstdint>

namespace vipd::dp {

// One's-complement sum of `len` bytes (network order data), not folded.
uint32_t csum_partial(const void* data, size_t len, uint32_t sum) noexcept;
// Folds a 32-bit partial sum to 16 bits and complements it.
uint16_t csum_fold(uint32_t sum) noexcept;

// Incremental update of a checksum field `check` (network byte order as
// stored in the header) when a 16-bit word changes from `old_v` to `new_v`
// (both network byte order). RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m').
uint16_t csum_replace2(uint16_t check, uint16_t old_v, uint16_t new_v) noexcept;
// Same for a 32-bit field (an IPv4 address), network byte order.
uint16_t csum_replace4(uint16_t check, uint32_t old_v, uint32_t new_v) noexcept;

// Folded incremental updates (RFC 1624 eqn. 3 for several fields at once):
// accumulate csum_delta2/4 of every changed field, then csum_apply once. The
// one's-complement sum does not depend on byte order, so the raw 16-bit words
// as they sit in the frame are used as they are (no byte swaps). Inline: this
// is the per-packet NAT rewrite.
inline uint32_t csum_delta2(uint16_t old_raw, uint16_t new_raw) noexcept {
  return static_cast<uint16_t>(~old_raw) + uint32_t{new_raw};
}
inline uint32_t csum_delta4(uint32_t old_raw, uint32_t new_raw) noexcept {
  return csum_delta2(static_cast<uint16_t>(old_raw), static_cast<uint16_t>(new_raw)) +
         csum_delta2(static_cast<uint16_t>(old_raw >> 16), static_cast<uint16_t>(new_raw >> 16));
}
// The checksum field `check_raw` after changes whose deltas sum to `delta`
// (at most a few dozen terms: no overflow of 32 bits).
inline uint16_t csum_apply(uint16_t check_raw, uint32_t delta) noexcept {
  uint32_t s = static_cast<uint16_t>(~check_raw) + delta;
  s = (s & 0xffff) + (s >> 16);
  s = (s & 0xffff) + (s >> 16);
  return static_cast<uint16_t>(~s);
}

// IPv4 header checksum from scratch (header with checksum field treated as 0).
uint16_t ipv4_header_checksum(const void* ip_hdr, size_t ihl_bytes) noexcept;
// TCP/UDP checksum from scratch over pseudo header + segment (checksum field
// inside `l4` treated as 0 if `zero_field_at` < len). Addresses network order.
uint16_t l4_checksum(uint32_t src_be, uint32_t dst_be, uint8_t proto, const void* l4,
                     size_t len, size_t check_offset) noexcept;
// The rest of any TCP/UDP/ICMPv6 checksum once the pseudo header's sum is
// known (IPv4 here, IPv6 in ipv6.cc): the segment with its checksum field
// skipped, folded; UDP's 0 becomes 0xffff. Network order as stored.
uint16_t l4_checksum_finish(uint32_t pseudo_sum, uint8_t proto, const void* l4, size_t len,
                            size_t check_offset) noexcept;

}  // namespace vipd::dp
