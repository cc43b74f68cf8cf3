// Thread: any (pure functions). Byte access to frame fields: big-endian reads
// and writes (rd/wr), and raw words as they sit in the frame (what the
// checksum helpers in checksum.h take). No allocation, no throw.
#pragma once

#include <cstdint>
#include <cstring>

namespace vipd::dp::bytes {

inline uint16_t rd16(const uint8_t* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }
inline uint32_t rd32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}
inline void wr16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
inline void wr32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 24);
  p[1] = static_cast<uint8_t>(v >> 16);
  p[2] = static_cast<uint8_t>(v >> 8);
  p[3] = static_cast<uint8_t>(v);
}
inline uint16_t raw16(const uint8_t* p) { uint16_t v; std::memcpy(&v, p, 2); return v; }
inline uint32_t raw32(const uint8_t* p) { uint32_t v; std::memcpy(&v, p, 4); return v; }
inline void put_raw16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }
inline void put_raw32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }

}  // namespace vipd::dp::bytes
