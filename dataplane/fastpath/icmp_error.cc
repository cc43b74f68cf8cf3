// Thread: worker. No allocation, no locks, no exceptions, no logging.
#include "dataplane/fastpath/icmp_error.h"

#include <rte_hash.h>

#include <cstring>

#include "dataplane/fastpath/bytes.h"
#include "dataplane/fastpath/checksum.h"
#include "dataplane/fastpath/worker.h"

namespace vipd::dp {
namespace {

using namespace bytes;  // rd16/wr16/raw16/... (bytes.h)

// The port vipd reaches `addr` through (the same choice as worker.cc's
// route(): a connected subnet first, then the first port with a gateway).
int facing_port(const Shared& sh, uint32_t addr) {
  for (uint16_t i = 0; i < sh.n_ports; ++i)
    if ((addr & sh.ports[i].mask) == (sh.ports[i].ip & sh.ports[i].mask)) return i;
  for (uint16_t i = 0; i < sh.n_ports; ++i)
    if (sh.ports[i].gateway) return i;
  return -1;
}

// Largest region of the quote that translation changes: IPv4 header (up to
// 60 bytes) + the first 18 bytes of a TCP header.
constexpr size_t kMaxRegion = 60 + 18;

}  // namespace

DropReason parse_icmp_quote(const Shared& sh, const uint8_t* f, const Parsed& p,
                            IcmpQuote* q) noexcept {
  if (is_port_ip(sh, p.dst)) return kLocalUnhandled;
  if (rte_hash_lookup(sh.vip_addrs, &p.dst) >= 0) {
    q->to_client = false;  // quotes a reply vipd sent from the VIP
  } else if (sh.forward == Forward::kNat || local_addr_index(sh, p.dst) >= 0) {
    q->to_client = true;  // quotes a packet vipd sent to a destination
  } else {
    return kNoService;
  }
  // ICMP header (8) + quoted IPv4 header (>= 20) + 8 bytes of its payload.
  if (p.l4_len < 8 + 20 + 8) return kBadL4Header;
  const uint8_t* ip = f + p.l4_off + 8;
  const unsigned ihl = (ip[0] & 0x0f) * 4u;
  if ((ip[0] >> 4) != 4 || ihl < 20 || size_t{8} + ihl + 8 > p.l4_len) return kBadL4Header;
  if (rd16(ip + 6) & 0x1fff) return kIcmpErrorNoConn;  // a later fragment: no ports
  q->proto = ip[9];
  if (q->proto != kProtoTcp && q->proto != kProtoUdp) return kIcmpErrorNoConn;
  q->ip_off = static_cast<uint16_t>(p.l4_off + 8);
  q->l4_off = static_cast<uint16_t>(q->ip_off + ihl);
  q->l4_quoted = static_cast<uint16_t>(p.l4_len - 8 - ihl);
  q->src = rd32(ip + 12);
  q->dst = rd32(ip + 16);
  // An error goes to the source of the packet it quotes.
  if (q->src != p.dst) return kIcmpErrorNoConn;
  const uint8_t* l4 = f + q->l4_off;
  q->sport = rd16(l4);
  q->dport = rd16(l4 + 2);
  return kIcmpOk;
}

uint32_t icmp_quote_owner(const Shared& sh, const IcmpQuote& q) noexcept {
  if (!q.to_client) return flow_owner(q.dst, q.dport, sh.n_workers);  // the client: v -> c
  if (sh.forward == Forward::kFnat) return q.sport % sh.n_workers;   // the local port: l -> d
  return flow_owner(q.src, q.sport, sh.n_workers);                   // nat: c -> d
}

DropReason translate_icmp_error(Worker& w, uint8_t* f, const Parsed& p, const IcmpQuote& q,
                                uint16_t rx_port, uint32_t* next_dst) noexcept {
  const Shared& sh = *w.sh;
  if (p.ttl <= 1) return kTtlExceeded;
  // The quoted packet went out as q.src -> q.dst; the table knows the flow
  // by the packets coming in: the reverse of the quote.
  bool reply = false;
  const Conn* c = w.conns.lookup(make_key(q.dst, q.dport, q.src, q.sport, q.proto), &reply);
  // A quote of a packet sent to a destination matches the reply key, one of a
  // packet sent to a client the client's key.
  if (!c || reply != q.to_client) return kIcmpErrorNoConn;
  const int side = facing_port(sh, q.to_client ? c->daddr : c->caddr);
  if (side < 0 || sh.ports[side].port_id != rx_port) return kIcmpErrorNoConn;
  if (dest_gen(w, c->dest_slot) != c->dest_gen) return kDestExpired;

  const IcmpRewrite<uint32_t> r = icmp_rewrite(*c, q.to_client, sh.forward == Forward::kFnat, p.src);

  // The quoted packet. Remember the region that changes, for the ICMP
  // checksum (it covers the whole message, the quote included).
  uint8_t* iip = f + q.ip_off;
  uint8_t* il4 = f + q.l4_off;
  const bool tcp_sum = q.proto == kProtoTcp && q.l4_quoted >= 18;
  const size_t region = static_cast<size_t>(q.l4_off - q.ip_off) + (tcp_sum ? 18 : 8);
  uint8_t before[kMaxRegion];
  std::memcpy(before, iip, region);

  const uint32_t old_isrc = raw32(iip + 12), old_idst = raw32(iip + 16);
  wr32(iip + 12, r.isrc);
  wr32(iip + 16, r.idst);
  const uint32_t addr_delta = csum_delta4(old_isrc, raw32(iip + 12)) + csum_delta4(old_idst, raw32(iip + 16));
  put_raw16(iip + 10, csum_apply(raw16(iip + 10), addr_delta));
  const uint16_t old_isport = raw16(il4), old_idport = raw16(il4 + 2);
  wr16(il4, r.isport);
  wr16(il4 + 2, r.idport);
  // PROXY protocol: a quoted client segment carries the seq shifted by the
  // header; the client's TCP checks the seq of an ICMP error against what
  // it sent, so it gets its own back.
  uint32_t seq_delta = 0;
  if (q.to_client && c->proxy && q.proto == kProtoTcp && q.l4_quoted >= 8) {
    const uint32_t old_seq = raw32(il4 + 4);
    wr32(il4 + 4, proxy_seq_to_client(w.proxy.at(c->proxy), rd32(il4 + 4)));
    seq_delta = csum_delta4(old_seq, raw32(il4 + 4));
  }
  const size_t coff = q.proto == kProtoTcp ? 16 : 6;
  const uint16_t check = raw16(il4 + coff);
  if (tcp_sum || (q.proto == kProtoUdp && check != 0)) {
    uint16_t c2 = csum_apply(check, addr_delta + seq_delta + csum_delta2(old_isport, raw16(il4)) +
                                        csum_delta2(old_idport, raw16(il4 + 2)));
    if (q.proto == kProtoUdp && c2 == 0) c2 = 0xffff;
    put_raw16(il4 + coff, c2);
  }
  uint32_t delta = 0;
  for (size_t i = 0; i < region; i += 2) {
    const uint16_t o = raw16(before + i), n = raw16(iip + i);
    if (o != n) delta += csum_delta2(o, n);
  }
  uint8_t* icmp = f + p.l4_off;
  if (delta) put_raw16(icmp + 2, csum_apply(raw16(icmp + 2), delta));

  // The outer header: new addresses, TTL - 1, checksum from scratch (it was
  // verified on the way in).
  uint8_t* ip = f + p.l3_off;
  wr32(ip + 12, r.osrc);
  wr32(ip + 16, r.odst);
  ip[8] = static_cast<uint8_t>(ip[8] - 1);
  put_raw16(ip + 10, ipv4_header_checksum(ip, p.l4_off - p.l3_off));
  *next_dst = r.odst;
  return kIcmpOk;
}

}  // namespace vipd::dp
