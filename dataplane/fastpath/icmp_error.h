// Thread: worker (the owning worker's connection table; pure functions over
// one frame otherwise). No allocation, no locks, no exceptions.
//
// ICMP errors that quote a packet of a NATed flow (destination unreachable,
// among them "fragmentation needed" for path MTU discovery; time exceeded;
// parameter problem) are translated like the flow itself, as IPVS does
// (ip_vs_in_icmp / ip_vs_out_icmp):
//
//  - from the destination side: a pod (or a router next to it) reports a
//    problem with a packet vipd forwarded to it, l:lp -> d:dp. The error,
//    addressed to l (fnat: a local address; nat: the client), leaves as
//    v -> c quoting c:cp -> v:vp, the packet the client sent.
//  - from the client side: a client (or a router) reports a problem with a
//    reply v:vp -> c:cp, addressed to the VIP. It leaves as l -> d (nat: the
//    outer source is kept) quoting d:dp -> l:lp, the reply the pod sent.
//
// The quoted IPv4 header's checksum, the quoted TCP/UDP checksum (when quoted:
// TCP needs 18 bytes of its header) and the ICMP checksum are updated
// incrementally (a bad one stays bad); the outer header is rewritten, its TTL
// decremented. Errors that quote no known flow, or arrive on a port that does
// not face the flow's peer, are dropped as icmp_error_no_conn.
#pragma once

#include <cstdint>

#include "dataplane/fastpath/drop_reasons.h"
#include "dataplane/fastpath/packet.h"

namespace vipd::dp {

struct Shared;
struct Worker;

// "No drop": the value the functions below return on success.
constexpr DropReason kIcmpOk = kNumDropReasons;

// ICMP types that quote an offending packet: destination unreachable (3),
// time exceeded (11), parameter problem (12).
inline bool is_icmp_error(const Parsed& p) noexcept {
  if (p.proto != kProtoIcmp) return false;
  const unsigned type = p.dport >> 8;
  return type == 3 || type == 11 || type == 12;
}

// The packet an ICMP error quotes, as it appears in the error (host order).
struct IcmpQuote {
  uint16_t ip_off = 0;     // frame offset of the quoted IPv4 header
  uint16_t l4_off = 0;     // frame offset of its TCP/UDP header
  uint16_t l4_quoted = 0;  // bytes of that header present (>= 8)
  uint8_t proto = 0;
  bool to_client = false;  // travels towards the client (came from the destination side)
  uint32_t src = 0, dst = 0;
  uint16_t sport = 0, dport = 0;
};

// Classifies an ICMP error (is_icmp_error(p)) by its outer destination and
// parses the quoted packet. kIcmpOk, or: local_unhandled (to a port address),
// no_service (fnat: to an address that is neither a VIP nor a local address),
// bad_l4_header (the quote is shorter than an IPv4 header + 8 bytes, or not
// IPv4), icmp_error_no_conn (it quotes a non-first fragment or a protocol
// other than TCP/UDP: vipd NATs neither; or it is not addressed to the source
// of the packet it quotes).
DropReason parse_icmp_quote(const Shared& sh, const uint8_t* frame, const Parsed& p,
                            IcmpQuote* q) noexcept;

// The worker that owns the quoted flow (the same function the flow's own
// packets are steered by).
uint32_t icmp_quote_owner(const Shared& sh, const IcmpQuote& q) noexcept;

// The addresses and ports a translated error leaves with, for a connection
// `c` of either family (Conn: A is uint32_t; Conn6: const uint8_t*): the
// quote as the other side sent or received it (isrc:isport -> idst:idport)
// and the outer header (osrc -> odst). to_client: IcmpQuote::to_client;
// nat_src: the error's own source, kept as the outer source of an error
// towards the destination in NAT mode.
template <class A>
struct IcmpRewrite {
  A isrc, idst, osrc, odst;
  uint16_t isport, idport;
};

template <class A, class C>
inline IcmpRewrite<A> icmp_rewrite(const C& c, bool to_client, bool fnat, A nat_src) noexcept {
  if (to_client) return {c.caddr, c.vaddr, c.vaddr, c.caddr, c.cport, c.vport};
  return {c.daddr, c.laddr, fnat ? A{c.laddr} : nat_src, c.daddr, c.dport, c.lport};
}

// On the owning worker: finds the flow, checks that the error came in on the
// port facing the side it reports from (`rx_port`: the ethdev port id), and
// rewrites the frame in place. On kIcmpOk, *next_dst is the address to route
// the error to (the client, or the destination). Drops: ttl_exceeded,
// icmp_error_no_conn, dest_expired (the flow's destination was removed).
DropReason translate_icmp_error(Worker& w, uint8_t* frame, const Parsed& p, const IcmpQuote& q,
                                uint16_t rx_port, uint32_t* next_dst) noexcept;

}  // namespace vipd::dp
