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

// RFC 5952 text: lowercase hex groups without leading zeros, the longest run
// (the first of equal ones) of two or more zero groups as "::".
uint8_t* put_ip6(uint8_t* o, const uint8_t* a) {
  static constexpr char kHex[] = "0123456789abcdef";
  uint16_t g[8];
  for (int i = 0; i < 8; ++i) g[i] = rd16(a + 2 * i);
  int best = -1, best_len = 1;
  for (int i = 0; i < 8;) {
    int j = i;
    while (j < 8 && g[j] == 0) ++j;
    if (j - i > best_len) best = i, best_len = j - i;
    i = j > i ? j : i + 1;
  }
  for (int i = 0; i < 8; ++i) {
    if (i == best) {
      *o++ = ':';
      *o++ = ':';
      i += best_len - 1;
      continue;
    }
    if (i && i != best + best_len) *o++ = ':';
    bool lead = true;
    for (int s = 12; s >= 0; s -= 4) {
      const unsigned d = (g[i] >> s) & 0xf;
      if (lead && d == 0 && s) continue;
      lead = false;
      *o++ = static_cast<uint8_t>(kHex[d]);
    }
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


uint32_t to_client_space(const ProxyConn& pc, uint32_t v) { return proxy_seq_to_client(pc, v); }

// The one's-complement sum of the pseudo header for a TCP segment of `len`.
uint64_t pseudo_sum(const uint8_t* ip, size_t len) {
  return uint64_t{rd16(ip + 12)} + rd16(ip + 14) + rd16(ip + 16) + rd16(ip + 18) + kProtoTcp + len;
}
// The same over the IPv6 pseudo header (source, destination, upper-layer
// length, next header).
uint64_t pseudo_sum6(const uint8_t* ip, size_t len) {
  uint64_t s = kProtoTcp + len;
  for (size_t i = 8; i < 40; i += 2) s += rd16(ip + i);
  return s;
}

// The family-independent part of tcp_insert_payload: `tcp` is the segment
// of l4_len bytes whose pseudo header sums to `ps` (and to ps + n after);
// the caller updates the IP header's length (and IPv4's checksum).
void insert_in_segment(uint8_t* tcp, size_t l4_len, uint64_t ps, const uint8_t* hdr, size_t n) {
  const size_t doff = (tcp[12] >> 4) * 4u;
  const size_t plen = l4_len - doff;
  // What the old segment's checksum sums to (0xffff when it is valid): the
  // new one sums to the same, so a corrupt segment is not made valid.
  const uint16_t residual = fold16(ps + csum_partial(tcp, l4_len, 0));
  std::memmove(tcp + doff + n, tcp + doff, plen);
  std::memcpy(tcp + doff, hdr, n);
  tcp[16] = tcp[17] = 0;
  const uint16_t s = fold16(ps + n + csum_partial(tcp, l4_len + n, 0));
  const uint16_t c = residual == 0xffff ? static_cast<uint16_t>(~s)
                                        : fold16(uint64_t{residual} + static_cast<uint16_t>(~s));
  wr16(tcp + 16, c);
}

void shift_seq(uint8_t* tcp, uint32_t n) {
  uint64_t acc = 0;
  set32(tcp, 4, rd32(tcp + 4) + n, acc);
  apply_delta(tcp, acc);
}

// proxy_from_backend on the TCP header `tcp` of a segment with `flags`.
void from_backend(uint8_t* tcp, uint8_t flags, ProxyConn& pc) {
  uint64_t acc = 0;
  if (flags & kTcpAck) {
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
    if (kind == 2 && len == 4 && (flags & kTcpSyn)) {
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

// The v2 signature, version 2 / command PROXY.
constexpr uint8_t kV2Sig[12] = {0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a};
uint8_t* put_v2_start(uint8_t* out, uint8_t fam, uint16_t len) {
  std::memcpy(out, kV2Sig, 12);
  out[12] = 0x21;  // version 2, PROXY
  out[13] = fam;   // family << 4 | STREAM
  wr16(out + 14, len);
  return out + 16;
}
// v1's ends: " <sport> <dport>\r\n" after the addresses.
uint8_t* put_v1_ports(uint8_t* o, uint16_t sport, uint16_t dport) {
  *o++ = ' ';
  o = put_dec(o, sport);
  *o++ = ' ';
  o = put_dec(o, dport);
  *o++ = '\r';
  *o++ = '\n';
  return o;
}

}  // namespace

uint32_t proxy_seq_to_client(const ProxyConn& pc, uint32_t v) noexcept {
  const uint32_t first = pc.client_isn + 1;
  const int32_t d = static_cast<int32_t>(v - first);
  if (d >= static_cast<int32_t>(pc.hdr_len)) return v - pc.hdr_len;
  return d > 0 ? first : v;  // inside the header: nothing of the client's acked yet
}

size_t proxy_header(cp::ProxyProtocol v, uint32_t src, uint16_t sport, uint32_t dst, uint16_t dport,
                    uint8_t* out) noexcept {
  if (v == cp::ProxyProtocol::kV2) {
    uint8_t* o = put_v2_start(out, 0x11, 12);  // AF_INET, STREAM
    wr32(o, src);
    wr32(o + 4, dst);
    wr16(o + 8, sport);
    wr16(o + 10, dport);
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
  o = put_v1_ports(o, sport, dport);
  return static_cast<size_t>(o - out);
}

size_t proxy_header(cp::ProxyProtocol v, const uint8_t src[16], uint16_t sport, const uint8_t dst[16],
                     uint16_t dport, uint8_t* out) noexcept {
  if (v == cp::ProxyProtocol::kV2) {
    uint8_t* o = put_v2_start(out, 0x21, 36);  // AF_INET6, STREAM
    std::memcpy(o, src, 16);
    std::memcpy(o + 16, dst, 16);
    wr16(o + 32, sport);
    wr16(o + 34, dport);
    return kProxyV2Len6;
  }
  if (v != cp::ProxyProtocol::kV1) return 0;
  static constexpr char kPrefix[] = "PROXY TCP6 ";
  uint8_t* o = out;
  std::memcpy(o, kPrefix, sizeof kPrefix - 1);
  o += sizeof kPrefix - 1;
  o = put_ip6(o, src);
  *o++ = ' ';
  o = put_ip6(o, dst);
  o = put_v1_ports(o, sport, dport);
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

void tcp_shift_seq(uint8_t* frame, const Parsed& p, uint32_t n) noexcept { shift_seq(frame + p.l4_off, n); }
void tcp_shift_seq(uint8_t* frame, const Parsed6& p, uint32_t n) noexcept { shift_seq(frame + p.l4_off, n); }

size_t tcp_insert_payload(uint8_t* frame, const Parsed& p, const uint8_t* hdr, size_t n) noexcept {
  uint8_t* ip = frame + p.l3_off;
  insert_in_segment(frame + p.l4_off, p.l4_len, pseudo_sum(ip, p.l4_len), hdr, n);
  wr16(ip + 2, static_cast<uint16_t>(p.ip_total_len + n));
  ip[10] = ip[11] = 0;
  wr16(ip + 10, csum_fold(csum_partial(ip, p.l4_off - p.l3_off, 0)));
  return p.l3_off + p.ip_total_len + n;
}

size_t tcp_insert_payload(uint8_t* frame, const Parsed6& p, const uint8_t* hdr, size_t n) noexcept {
  uint8_t* ip = frame + p.l3_off;
  insert_in_segment(frame + p.l4_off, p.l4_len, pseudo_sum6(ip, p.l4_len), hdr, n);
  wr16(ip + 4, static_cast<uint16_t>(p.payload_len + n));
  return p.l3_off + kIp6Len + p.payload_len + n;
}

void proxy_from_backend(uint8_t* frame, const Parsed& p, ProxyConn& pc) noexcept {
  from_backend(frame + p.l4_off, p.tcp_flags, pc);
}
void proxy_from_backend(uint8_t* frame, const Parsed6& p, ProxyConn& pc) noexcept {
  from_backend(frame + p.l4_off, p.tcp_flags, pc);
}

}  // namespace vipd::dp
