// Thread: worker.
#include "dataplane/fastpath/packet.h"

#include <cstring>

#include "dataplane/fastpath/bytes.h"
#include "dataplane/fastpath/checksum.h"

namespace vipd::dp {
namespace {

using namespace bytes;  // rd16/wr16/raw16/... (bytes.h)

void swap_eth(uint8_t* frame) {
  uint8_t tmp[6];
  std::memcpy(tmp, frame, 6);
  std::memcpy(frame, frame + 6, 6);
  std::memcpy(frame + 6, tmp, 6);
}

void write_ipv4_header(uint8_t* ip, uint16_t total_len, uint8_t proto, uint32_t src,
                       uint32_t dst) {
  ip[0] = 0x45;
  ip[1] = 0;
  wr16(ip + 2, total_len);
  wr16(ip + 4, 0);       // id
  wr16(ip + 6, 0x4000);  // DF
  ip[8] = 64;
  ip[9] = proto;
  wr16(ip + 10, 0);
  wr32(ip + 12, src);
  wr32(ip + 16, dst);
  put_raw16(ip + 10, ipv4_header_checksum(ip, 20));
}

}  // namespace


void make_tcp_rst_header(uint8_t out[20], const uint8_t* l4, uint32_t l4_len, uint16_t sport, uint16_t dport,
                         uint8_t flags) noexcept {
  const uint32_t seq = rd32(l4 + 4);
  const uint32_t ack = rd32(l4 + 8);
  const unsigned doff = (l4[12] >> 4) * 4u;
  const uint32_t payload = l4_len - doff;
  const uint32_t seg_len = payload + ((flags & kTcpSyn) ? 1 : 0) + ((flags & kTcpFin) ? 1 : 0);
  std::memset(out, 0, 20);
  wr16(out, dport);
  wr16(out + 2, sport);
  if (flags & kTcpAck) {
    wr32(out + 4, ack);
    out[13] = kTcpRst;
  } else {
    wr32(out + 8, seq + seg_len);
    out[13] = kTcpRst | kTcpAck;
  }
  out[12] = 5 << 4;
}

size_t make_tcp_rst_reply(uint8_t* f, const Parsed& p) noexcept {
  swap_eth(f);
  uint8_t* ip = f + kEthLen;
  // Rebuild a plain 20-byte IPv4 header and a 20-byte TCP header after it.
  uint8_t* tcp = ip + 20;
  uint8_t out[20];
  make_tcp_rst_header(out, f + p.l4_off, p.l4_len, p.sport, p.dport, p.tcp_flags);
  std::memcpy(tcp, out, 20);
  write_ipv4_header(ip, 40, kProtoTcp, p.dst, p.src);
  uint32_t dst_be = raw32(ip + 16), src_be = raw32(ip + 12);
  put_raw16(tcp + 16, l4_checksum(src_be, dst_be, kProtoTcp, tcp, 20, 16));
  return kEthLen + 40;
}

size_t make_icmp_unreach(uint8_t* f, const Parsed& p, uint32_t from, uint8_t code) noexcept {
  uint8_t* old = f + 28;
  std::memcpy(f, old, kEthLen);
  swap_eth(f);
  const size_t ihl = p.l4_off - p.l3_off;
  const size_t quoted = ihl + (p.l4_len < 8 ? p.l4_len : 8);
  // The quoted original IP header is already in place at f + 42.
  uint8_t* icmp = f + kEthLen + 20;
  icmp[0] = 3;
  icmp[1] = code;
  wr16(icmp + 2, 0);
  wr32(icmp + 4, 0);
  uint16_t c = csum_fold(csum_partial(icmp, 8 + quoted, 0));
  wr16(icmp + 2, c);
  write_ipv4_header(f + kEthLen, static_cast<uint16_t>(20 + 8 + quoted), kProtoIcmp, from, p.src);
  return kEthLen + 20 + 8 + quoted;
}

bool make_icmp_echo_reply(uint8_t* f, const Parsed& p) noexcept {
  if (p.proto != kProtoIcmp) return false;
  uint8_t* icmp = f + p.l4_off;
  if (icmp[0] != 8 || icmp[1] != 0) return false;
  swap_eth(f);
  uint8_t* ip = f + p.l3_off;
  uint8_t tmp[4];
  std::memcpy(tmp, ip + 12, 4);
  std::memcpy(ip + 12, ip + 16, 4);
  std::memcpy(ip + 16, tmp, 4);
  ip[8] = 64;
  wr16(ip + 10, 0);
  put_raw16(ip + 10, ipv4_header_checksum(ip, p.l4_off - p.l3_off));
  const uint16_t old_word = raw16(icmp);
  icmp[0] = 0;
  uint16_t c = csum_replace2(raw16(icmp + 2), old_word, raw16(icmp));
  // The incremental update gives 0x0000 where a reply of all zero bytes
  // needs 0xffff (receivers reject 0x0000 there). Found by tests/fuzz/fuzz_packet.
  if (c == 0) {
    bool all_zero = true;
    for (size_t i = 4; i < p.l4_len && all_zero; ++i) all_zero = icmp[i] == 0;
    if (all_zero) c = 0xffff;
  }
  put_raw16(icmp + 2, c);
  return true;
}

bool parse_arp(const uint8_t* f, size_t len, ArpInfo* out) noexcept {
  if (len < kEthLen + 28) return false;
  const uint8_t* a = f + kEthLen;
  if (rd16(a) != 1 || rd16(a + 2) != kEtherTypeIpv4 || a[4] != 6 || a[5] != 4) return false;
  out->op = rd16(a + 6);
  std::memcpy(out->sha, a + 8, 6);
  out->spa = rd32(a + 14);
  out->tpa = rd32(a + 24);
  return out->op == 1 || out->op == 2;
}

size_t make_arp_reply(uint8_t* f, const uint8_t our_mac[6], uint32_t our_ip) noexcept {
  uint8_t* a = f + kEthLen;
  uint8_t req_mac[6];
  uint8_t req_ip[4];
  std::memcpy(req_mac, a + 8, 6);
  std::memcpy(req_ip, a + 14, 4);
  std::memcpy(f, req_mac, 6);
  std::memcpy(f + 6, our_mac, 6);
  wr16(a + 6, 2);
  std::memcpy(a + 8, our_mac, 6);
  wr32(a + 14, our_ip);
  std::memcpy(a + 18, req_mac, 6);
  std::memcpy(a + 24, req_ip, 4);
  return kEthLen + 28;
}

size_t make_arp_request(uint8_t* f, const uint8_t our_mac[6], uint32_t our_ip,
                        uint32_t target_ip) noexcept {
  std::memset(f, 0xff, 6);
  std::memcpy(f + 6, our_mac, 6);
  wr16(f + 12, kEtherTypeArp);
  uint8_t* a = f + kEthLen;
  wr16(a, 1);
  wr16(a + 2, kEtherTypeIpv4);
  a[4] = 6;
  a[5] = 4;
  wr16(a + 6, 1);
  std::memcpy(a + 8, our_mac, 6);
  wr32(a + 14, our_ip);
  std::memset(a + 18, 0, 6);
  wr32(a + 24, target_ip);
  return kEthLen + 28;
}

}  // namespace vipd::dp
