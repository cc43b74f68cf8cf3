// Thread: worker (ProxyPool::init/destroy: control thread). See proxy_proto.h.
#include "dataplane/fastpath/proxy_proto.h"

#include <rte_malloc.h>

#include <cstring>

#include "dataplane/fastpath/bytes.h"
#include "dataplane/fastpath/checksum.h"

namespace vipd::dp {
namespace {

using namespace bytes;

// Decimal digits of v (no terminator); returns the position after them.
uint8_t* put_dec(uint8_t* o, uint32_t v) {
  uint8_t tmp[10];
  unsigned n = 0;
  do {
    tmp[n++] = static_cast<uint8_t>('0' + v % 10);
    v /= 10;
  } while (v);
  while (n) *o++ = tmp[--n];
  return o;
}

uint8_t* put_ip(uint8_t* o, uint32_t ip) {
  for (int s = 24; s >= 0; s -= 8) {
    o = put_dec(o, (ip >> s) & 0xff);
    if (s) *o++ = '.';
  }
  return o;
}

// One's-complement sum (folded, not complemented) of a host-order sum.
uint16_t fold16(uint64_t s) {
  while (s >> 16) s = (s & 0xffff) + (s >> 16);
  return static_cast<uint16_t>(s);
}

// The sum of bytes b[0..n) as they lie at an even (odd = false) or odd
// offset of the segment: at an odd offset each byte sits in the other half
// of its 16-bit word.
uint16_t sum_at(const uint8_t* b, size_t n, bool odd) {
  uint64_t s = 0;
  for (size_t i = 0; i < n; ++i) {
    const bool high = ((i & 1) == 0) != odd;
    s += high ? uint32_t{b[i]} << 8 : b[i];
  }
  return fold16(s);
}

// Accumulates the checksum change of a field at segment offset `off` going
// from old[0..n) to now[0..n).
void field_delta(uint64_t& acc, size_t off, const uint8_t* old, const uint8_t* now, size_t n) {
  acc += static_cast<uint16_t>(~sum_at(old, n, off & 1)) + uint32_t{sum_at(now, n, off & 1)};
}

void apply_delta(uint8_t* tcp, uint64_t acc) {
  const uint16_t c = rd16(tcp + 16);
  wr16(tcp + 16, static_cast<uint16_t>(~fold16(uint64_t{static_cast<uint16_t>(~c)} + acc)));
}

// Writes a 32-bit field at offset `off` of the segment, accounting its delta.
void set32(uint8_t* tcp, size_t off, uint32_t v, uint64_t& acc) {
  uint8_t old[4];
  std::memcpy(old, tcp + off, 4);
  wr32(tcp + off, v);
  field_delta(acc, off, old, tcp + off, 4);
}

// An ack (or SACK edge) of the backend's, in the client's sequence space.
uint32_t to_client_space(const ProxyConn& pc, uint32_t v) {
  const uint32_t first = pc.client_isn + 1;
  const int32_t d = static_cast<int32_t>(v - first);
  if (d >= static_cast<int32_t>(pc.hdr_len)) return v - pc.hdr_len;
  return d > 0 ? first : v;  // inside the header: nothing of the client's acked yet
}

// The one's-complement sum of the pseudo header for a TCP segment of `len`.
uint64_t pseudo_sum(const uint8_t* ip, size_t len) {
  return uint64_t{rd16(ip + 12)} + rd16(ip + 14) + rd16(ip + 16) + rd16(ip + 18) + kProtoTcp + len;
}

}  // namespace

size_t proxy_header(cp::ProxyProtocol v, uint32_t src, uint16_t sport, uint32_t dst, uint16_t dport,
                    uint8_t* out) noexcept {
  if (v == cp::ProxyProtocol::kV2) {
    static constexpr uint8_t kSig[12] = {0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a};
    std::memcpy(out, kSig, 12);
    out[12] = 0x21;  // version 2, PROXY
    out[13] = 0x11;  // AF_INET, STREAM
    wr16(out + 14, 12);
    wr32(out + 16, src);
    wr32(out + 20, dst);
    wr16(out + 24, sport);
    wr16(out + 26, dport);
    return kProxyV2Len;
  }
  if (v != cp::ProxyProtocol::kV1) return 0;
  static constexpr char kPrefix[] = "PROXY TCP4 ";
  uint8_t* o = out;
  std::memcpy(o, kPrefix, sizeof kPrefix - 1);
  o += sizeof kPrefix - 1;
  o = put_ip(o, src);
  *o++ = ' ';
  o = put_ip(o, dst);
  *o++ = ' ';
  o = put_dec(o, sport);
  *o++ = ' ';
  o = put_dec(o, dport);
  *o++ = '\r';
  *o++ = '\n';
  return static_cast<size_t>(o - out);
}

ProxyPool::~ProxyPool() {
  rte_free(slots_);
  rte_free(free_);
}

bool ProxyPool::init(const std::string& name, uint32_t capacity, int socket, std::string* error) {
  rte_free(slots_);
  rte_free(free_);
  slots_ = nullptr;
  free_ = nullptr;
  n_free_ = capacity_ = 0;
  if (!capacity) return true;
  slots_ = static_cast<ProxyConn*>(
      rte_zmalloc_socket(("proxy_" + name).c_str(), sizeof(ProxyConn) * size_t{capacity}, 64, socket));
  free_ = static_cast<uint32_t*>(
      rte_zmalloc_socket(("proxy_free_" + name).c_str(), sizeof(uint32_t) * size_t{capacity}, 64, socket));
  if (!slots_ || !free_) {
    *error = "dpdk: out of memory for the PROXY protocol pool " + name;
    return false;
  }
  capacity_ = capacity;
  for (uint32_t i = capacity; i-- > 0;) free_[n_free_++] = i;
  return true;
}

void tcp_shift_seq(uint8_t* frame, const Parsed& p, uint32_t n) noexcept {
  uint8_t* tcp = frame + p.l4_off;
  uint64_t acc = 0;
  set32(tcp, 4, rd32(tcp + 4) + n, acc);
  apply_delta(tcp, acc);
}

size_t tcp_insert_payload(uint8_t* frame, const Parsed& p, const uint8_t* hdr, size_t n) noexcept {
  uint8_t* ip = frame + p.l3_off;
  uint8_t* tcp = frame + p.l4_off;
  const size_t doff = (tcp[12] >> 4) * 4u;
  const size_t plen = p.l4_len - doff;
  // What the old segment's checksum sums to (0xffff when it is valid): the
  // new one sums to the same, so a corrupt segment is not made valid.
  const uint16_t residual = fold16(pseudo_sum(ip, p.l4_len) + csum_partial(tcp, p.l4_len, 0));
  std::memmove(tcp + doff + n, tcp + doff, plen);
  std::memcpy(tcp + doff, hdr, n);
  const size_t l4_len = p.l4_len + n;
  wr16(ip + 2, static_cast<uint16_t>(p.ip_total_len + n));
  ip[10] = ip[11] = 0;
  wr16(ip + 10, csum_fold(csum_partial(ip, p.l4_off - p.l3_off, 0)));
  tcp[16] = tcp[17] = 0;
  const uint16_t s = fold16(pseudo_sum(ip, l4_len) + csum_partial(tcp, l4_len, 0));
  const uint16_t c = residual == 0xffff ? static_cast<uint16_t>(~s)
                                        : fold16(uint64_t{residual} + static_cast<uint16_t>(~s));
  wr16(tcp + 16, c);
  return p.l3_off + p.ip_total_len + n;
}

void proxy_from_backend(uint8_t* frame, const Parsed& p, ProxyConn& pc) noexcept {
  uint8_t* tcp = frame + p.l4_off;
  uint64_t acc = 0;
  if (p.tcp_flags & kTcpAck) {
    const uint32_t ack = rd32(tcp + 8);
    if (static_cast<int32_t>(ack - (pc.client_isn + 1)) >= static_cast<int32_t>(pc.hdr_len)) pc.acked = 1;
    const uint32_t a = to_client_space(pc, ack);
    if (a != ack) set32(tcp, 8, a, acc);
  }
  const size_t doff = (tcp[12] >> 4) * 4u;
  for (size_t i = 20; i < doff;) {
    const uint8_t kind = tcp[i];
    if (kind == 0) break;  // end of options
    if (kind == 1) {       // no-op
      ++i;
      continue;
    }
    if (i + 1 >= doff) break;
    const size_t len = tcp[i + 1];
    if (len < 2 || i + len > doff) break;
    if (kind == 2 && len == 4 && (p.tcp_flags & kTcpSyn)) {
      // MSS: what the client may send; the first segment also carries the header.
      const uint16_t mss = rd16(tcp + i + 2);
      const uint16_t lowered = mss > pc.hdr_len + 64u ? static_cast<uint16_t>(mss - pc.hdr_len) : 64;
      if (lowered < mss) {
        uint8_t old[2];
        std::memcpy(old, tcp + i + 2, 2);
        wr16(tcp + i + 2, lowered);
        field_delta(acc, i + 2, old, tcp + i + 2, 2);
      }
    } else if (kind == 5 && len >= 10 && (len - 2) % 8 == 0) {
      for (size_t e = i + 2; e < i + len; e += 4) {  // SACK: left and right edges
        const uint32_t v = rd32(tcp + e);
        const uint32_t a = to_client_space(pc, v);
        if (a != v) set32(tcp, e, a, acc);
      }
    }
    i += len;
  }
  if (acc) apply_delta(tcp, acc);
}

}  // namespace vipd::dp
