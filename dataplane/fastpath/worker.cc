// Thread: worker. The per-packet path (the poll loop around it is in
// worker_loop.cc). No allocation (mbufs come from the mempool), no locks, no
// exceptions, no logging.
#include "dataplane/fastpath/worker.h"

#include <rte_ethdev.h>
#include <rte_hash.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <bit>
#include <cstddef>
#include <cstring>

#include "dataplane/fastpath/bytes.h"
#include "dataplane/fastpath/flow_hash.h"
#include "dataplane/fastpath/icmp_error.h"
#include "dataplane/fastpath/ipv6.h"
#include "dataplane/fastpath/packet.h"
#include "dataplane/fastpath/tcp_state.h"
#include "dataplane/fastpath/worker_internal.h"

namespace vipd::dp {
namespace {

inline void count_drop(Worker& w, DropReason r) { bump(w.counters.drops[r]); }

inline void drop(Worker& w, rte_mbuf* m, DropReason r) {
  count_drop(w, r);
  rte_pktmbuf_free(m);
}

inline int port_index(const Shared& sh, uint16_t port_id) {
  for (uint16_t i = 0; i < sh.n_ports; ++i)
    if (sh.ports[i].port_id == port_id) return i;
  return -1;
}

// Egress port and next hop for a destination: a connected subnet first, then
// the first port with a gateway.
inline bool route(const Shared& sh, uint32_t dst, uint16_t* port, uint32_t* nexthop) {
  for (uint16_t i = 0; i < sh.n_ports; ++i) {
    const PortInfo& p = sh.ports[i];
    if ((dst & p.mask) == (p.ip & p.mask)) {
      *port = i;
      *nexthop = dst;
      return true;
    }
  }
  for (uint16_t i = 0; i < sh.n_ports; ++i) {
    if (sh.ports[i].gateway) {
      *port = i;
      *nexthop = sh.ports[i].gateway;
      return true;
    }
  }
  return false;
}

// route() as one byte for a connection entry to keep (Conn::route_d,
// route_c): the port's index + 1, with kRouteViaGw when the next hop is its
// gateway (else the destination itself); 0 = no route.
constexpr uint8_t kRouteViaGw = 0x80;
static_assert(kMaxPorts < kRouteViaGw, "a port index + 1 fits below the gateway bit");
inline uint8_t route_code_of(uint16_t pidx, uint32_t nh, uint32_t dst) {
  return static_cast<uint8_t>((pidx + 1) | (nh != dst ? kRouteViaGw : 0));
}

// Worker::nh_key for a route code and destination: the code alone when the
// next hop is the port's gateway (the same for every destination), else the
// destination with it. Never 0 (a code is not).
inline uint64_t nh_key_of(uint8_t rc, uint32_t dst) {
  return (rc & kRouteViaGw) ? uint64_t{rc} : (uint64_t{dst} << 8 | rc);
}

inline void tx_enqueue(Worker& w, uint16_t pidx, rte_mbuf* m) {
  uint16_t n = w.n_tx[pidx];
  if (n >= kBurst * 2) [[unlikely]] {
    flush_tx(w);
    n = 0;  // flush_tx emptied every port's buffer
  }
  w.txbuf[pidx][n] = m;
  w.n_tx[pidx] = static_cast<uint16_t>(n + 1);
}

void send_arp_request(Worker& w, uint16_t pidx, uint32_t target) {
  rte_mbuf* m = rte_pktmbuf_alloc(w.pool);
  if (!m) return;
  const PortInfo& p = w.sh->ports[pidx];
  uint8_t* f = rte_pktmbuf_mtod(m, uint8_t*);
  size_t len = make_arp_request(f, p.mac, p.ip, target);
  m->data_len = static_cast<uint16_t>(len);
  m->pkt_len = static_cast<uint32_t>(len);
  bump(w.counters.arp_requests);
  tx_enqueue(w, pidx, m);
}

// output() for a next hop other than the last one resolved in this burst:
// the neighbour table, and parking (with an ARP request) when it is unknown.
void output_via(Worker& w, rte_mbuf* m, uint16_t pidx, uint32_t nh, uint32_t dst) {
  Shared& sh = *w.sh;
  uint8_t mac[6];
  NeighState st = sh.neigh.lookup(nh, mac, w.now);
  if (st == NeighState::kReachable) {
    std::memcpy(w.nh_hdr, mac, 6);
    std::memcpy(w.nh_hdr + 6, sh.ports[pidx].mac, 6);
    w.nh_key = nh_key_of(route_code_of(pidx, nh, dst), dst);
    w.nh_pidx = pidx;
  }
  if (st == NeighState::kMissing) {
    if (w.n_pending >= kPendingMax) return drop(w, m, kNeighQueueFull);
    w.pending[w.n_pending++] = PendingPkt{m, nh, pidx, w.now};
    if (sh.neigh.claim_request(nh, w.now, sh.arp_retry)) send_arp_request(w, pidx, nh);
    return;
  }
  if (st == NeighState::kStale && sh.neigh.claim_request(nh, w.now, sh.arp_retry))
    send_arp_request(w, pidx, nh);
  uint8_t* f = rte_pktmbuf_mtod(m, uint8_t*);
  std::memcpy(f, mac, 6);
  std::memcpy(f + 6, sh.ports[pidx].mac, 6);
  tx_enqueue(w, pidx, m);
}

// Routes an IPv4 packet to `dst`: fills the Ethernet header and queues it for
// tx, or parks it until the next hop is resolved. Inline: most packets of a
// burst share the next hop resolved for the first.
inline void output(Worker& w, rte_mbuf* m, uint32_t dst) {
  const Shared& sh = *w.sh;
  uint16_t pidx;
  uint32_t nh;
  if (!route(sh, dst, &pidx, &nh)) return drop(w, m, kNoRoute);
  if (nh_key_of(route_code_of(pidx, nh, dst), dst) != w.nh_key) return output_via(w, m, pidx, nh, dst);
  std::memcpy(rte_pktmbuf_mtod(m, uint8_t*), w.nh_hdr, 12);
  tx_enqueue(w, pidx, m);
}

[[gnu::noinline]] uint8_t route_code(const Shared& sh, uint32_t dst) {
  uint16_t pidx;
  uint32_t nh;
  return route(sh, dst, &pidx, &nh) ? route_code_of(pidx, nh, dst) : uint8_t{0};
}

// output() for a connection's packet to `dst`, whose route the entry keeps
// in `code` (worked out and stored on its first packet): the burst's next
// hop is one compare away (nh_key), without route().
// `f`: the frame's start (rte_pktmbuf_mtod), which the caller has at hand.
inline void output_conn(Worker& w, rte_mbuf* m, uint8_t* f, uint32_t dst, uint8_t& code) {
  uint8_t rc = code;
  if (!rc) [[unlikely]] {
    rc = route_code(*w.sh, dst);
    if (!rc) return drop(w, m, kNoRoute);
    code = rc;
  }
  if (nh_key_of(rc, dst) != w.nh_key) [[unlikely]] {
    const uint16_t pidx = static_cast<uint16_t>((rc & ~kRouteViaGw) - 1);
    const uint32_t nh = (rc & kRouteViaGw) ? w.sh->ports[pidx].gateway : dst;
    return output_via(w, m, pidx, nh, dst);
  }
  std::memcpy(f, w.nh_hdr, 12);
  tx_enqueue(w, w.nh_pidx, m);  // (the key's port: the code's, not decoded again)
}

// Sends a locally built reply back out of the port it came in on (the
// builders already swapped the Ethernet addresses).
inline void reply_same_port(Worker& w, rte_mbuf* m, size_t len) {
  int pidx = port_index(*w.sh, m->port);
  if (pidx < 0) return drop(w, m, kNoRoute);
  m->data_len = static_cast<uint16_t>(len);
  m->pkt_len = static_cast<uint32_t>(len);
  uint8_t* f = rte_pktmbuf_mtod(m, uint8_t*);
  std::memcpy(f + 6, w.sh->ports[pidx].mac, 6);
  tx_enqueue(w, static_cast<uint16_t>(pidx), m);
}

void send_rst(Worker& w, rte_mbuf* m, const Parsed& p) {
  size_t len = make_tcp_rst_reply(rte_pktmbuf_mtod(m, uint8_t*), p);
  bump(w.counters.rst_sent);
  reply_same_port(w, m, len);
}

void send_port_unreachable(Worker& w, rte_mbuf* m, const Parsed& p) {
  uint8_t* f = reinterpret_cast<uint8_t*>(rte_pktmbuf_prepend(m, 28));
  if (!f) return drop(w, m, kTruncated);
  size_t len = make_icmp_unreach(f, p, p.dst, 3);
  bump(w.counters.icmp_unreach_sent);
  reply_same_port(w, m, len);
}

// Kernel exception path (docs/gateway.md): hands a frame for the port's own
// address to the exception thread, which rate-limits it and writes it to
// the port's kernel interface. Off (no ring): counted as `off`.
[[gnu::noinline]] void to_kernel(Worker& w, rte_mbuf* m, DropReason off) {
  rte_ring* r = w.sh->exc_to_kernel;
  if (!r) return drop(w, m, off);
  if (rte_ring_mp_enqueue(r, m) != 0) drop(w, m, kExceptionQueueFull);
}

void handle_arp(Worker& w, rte_mbuf* m) {
  Shared& sh = *w.sh;
  w.nh_key = 0;  // what it learns must count from the next packet on
  uint8_t* f = rte_pktmbuf_mtod(m, uint8_t*);
  ArpInfo a;
  if (!parse_arp(f, rte_pktmbuf_data_len(m), &a)) return drop(w, m, kArpIgnored);
  int pidx = port_index(sh, m->port);
  if (pidx < 0) return drop(w, m, kArpIgnored);
  const PortInfo& p = sh.ports[pidx];
  const bool for_us = a.tpa == p.ip || local_addr_index(sh, a.tpa) >= 0 || is_vip_addr(sh, a.tpa);
  // Learn from ARP meant for us (a reply to our request, or a request for one
  // of our addresses: we answer it and will talk back); other ARP on the
  // segment (requests between others, gratuitous ARP) only refreshes entries
  // we have, so it cannot fill the cache.
  if ((a.spa & p.mask) == (p.ip & p.mask) || a.spa == p.gateway) {
    if (for_us) sh.neigh.update(a.spa, a.sha, w.now);
    else sh.neigh.refresh(a.spa, a.sha, w.now);
  }
  if (a.op == 1 && for_us) {
    size_t len = make_arp_reply(f, p.mac, a.tpa);
    bump(w.counters.arp_replies);
    m->data_len = static_cast<uint16_t>(len);
    m->pkt_len = static_cast<uint32_t>(len);
    tx_enqueue(w, static_cast<uint16_t>(pidx), m);
    return;
  }
  if (a.op == 2) {  // a reply: consumed by the learning above
    // ...and, for the port's own address, passed on to the kernel, which
    // resolves its own next hops (vipd answers requests itself).
    if (w.sh->exc_to_kernel && a.tpa == p.ip) return to_kernel(w, m, kArpIgnored);
    rte_pktmbuf_free(m);
    return;
  }
  drop(w, m, kArpIgnored);
}

// ---- Connection hand-over between gateways (docs/gateway.md, "Hand-over") ----
// Full NAT: a gateway's connections are known to their backends by its own
// local address, so a packet that ECMP moved to another gateway can only go
// on through the gateway that holds its connection. The receiving one sends
// the packet, unchanged but for the Ethernet header (ethertype
// kEtherTypeHandover), to its peers; the one that holds the connection
// forwards it as usual, the others drop it. Only here, on the unknown-flow
// branch: the established and reply paths do not change.

// One copy to peer `peer`: by the neighbour table, never parked (a dead
// peer must not fill the queue of packets waiting for ARP): an unresolved
// peer gets an ARP request and the copy is dropped (neigh_unresolved).
void to_peer(Worker& w, rte_mbuf* m, uint32_t peer) {
  Shared& sh = *w.sh;
  uint16_t pidx;
  uint32_t nh;
  if (!route(sh, peer, &pidx, &nh)) return drop(w, m, kNoRoute);
  uint8_t mac[6];
  const NeighState st = sh.neigh.lookup(nh, mac, w.now);
  if (st != NeighState::kReachable && sh.neigh.claim_request(nh, w.now, sh.arp_retry))
    send_arp_request(w, pidx, nh);
  if (st == NeighState::kMissing) return drop(w, m, kNeighUnresolved);
  uint8_t* f = rte_pktmbuf_mtod(m, uint8_t*);
  std::memcpy(f, mac, 6);
  std::memcpy(f + 6, sh.ports[pidx].mac, 6);
  tx_enqueue(w, pidx, m);
}

// A TCP packet without SYN of no connection here: to every peer, within the
// worker's rate (a token bucket: random ACKs cannot be amplified past it).
// One copy per peer from the worker's pool (the last peer gets the packet
// itself); a copy the pool cannot give is left out and counted
// (handover_no_mbuf).
[[gnu::noinline]] void hand_over(Worker& w, rte_mbuf* m) {
  const Shared& sh = *w.sh;
  const uint64_t tat = w.handover_tat > w.now ? w.handover_tat : w.now;
  if (tat - w.now > sh.handover_tau) return drop(w, m, kHandoverRateLimited);
  w.handover_tat = tat + sh.handover_interval;
  bump(w.counters.handovers);
  bytes::wr16(rte_pktmbuf_mtod(m, uint8_t*) + 12, kEtherTypeHandover);
  const uint32_t n = sh.n_handover_peers;
  for (uint32_t i = 0; i < n; ++i) {
    rte_mbuf* c = i + 1 < n ? rte_pktmbuf_copy(m, w.pool, 0, UINT32_MAX) : m;
    if (c) to_peer(w, c, sh.handover_peers[i]);
    else count_drop(w, kHandoverNoMbuf);
  }
}

// A mid-flow packet of no connection (new_flow): handed over when there are
// peers (TCP without SYN), else dropped. A frame from a peer being
// re-injected (serve_peer_frames) whose connection went in between is
// never handed over again.
[[gnu::noinline]] void no_conn(Worker& w, rte_mbuf* m, uint8_t tcp_flags) {
  if (w.sh->n_handover_peers && !(tcp_flags & kTcpSyn)) {
    if (w.peer_frames_now) return drop(w, m, kHandoverNotHeld);
    return hand_over(w, m);
  }
  drop(w, m, kNoConn);
}

// Whether a frame with the hand-over ethertype comes from a configured peer:
// it arrived on the port the peer is reached by, from the MAC the neighbour
// table holds for the peer (learned by ARP: a station on the segment cannot
// use 0x88b5 to inject packets into connections here, or to make us look
// them up, without also taking over a peer's MAC; docs/gateway.md).
bool from_a_peer(const Worker& w, const rte_mbuf* m) {
  const Shared& sh = *w.sh;
  const uint8_t* src = rte_pktmbuf_mtod(m, const uint8_t*) + 6;
  for (uint32_t i = 0; i < sh.n_handover_peers; ++i) {
    uint16_t pidx;
    uint32_t nh;
    uint8_t mac[6];
    if (!route(sh, sh.handover_peers[i], &pidx, &nh) || sh.ports[pidx].port_id != m->port) continue;
    if (sh.neigh.lookup(nh, mac, w.now) != NeighState::kMissing && std::memcmp(mac, src, 6) == 0) return true;
  }
  return false;
}

// A frame a peer handed over (ethertype kEtherTypeHandover): the IPv4 or
// IPv6 frame again (the version nibble of the IP header tells which; IPv6:
// from_peer6), for the worker that owns its flow. When a connection of it
// lives here it is counted as matched and queued for serve_peer_frames,
// which runs it through the usual path after the burst (so that the
// established path is exactly as without hand-over); else dropped
// (handover_not_held). Either way it never goes to a peer again
// (take_peer_frame). Only from a peer (checked by the worker that receives
// it; else handover_not_peer).
// `own` is process_burst's: true for a frame redirected here and for every
// frame with one worker. Only a frame that came through the ring was checked
// already (by the worker that received it), so the peer check keys on that.
[[gnu::noinline]] void from_peer(Worker& w, rte_mbuf* m, bool own) {
  const bool from_ring = own && w.sh->n_workers > 1;
  if (!from_ring && !from_a_peer(w, m)) return drop(w, m, kHandoverNotPeer);
  uint8_t* f = rte_pktmbuf_mtod(m, uint8_t*);
  if (rte_pktmbuf_data_len(m) > kEthLen && (f[kEthLen] >> 4) == 6) return from_peer6(w, m, own);
  bytes::wr16(f + 12, kEtherTypeIpv4);
  const Parsed p = parse_frame(f, rte_pktmbuf_data_len(m));
  if (p.kind == FrameKind::kDrop) return drop(w, m, p.drop);
  if (p.kind != FrameKind::kIpv4 || p.proto != kProtoTcp) return drop(w, m, kHandoverNotHeld);
  if (p.ttl <= 1) return drop(w, m, kTtlExceeded);
  take_peer_frame(w, m, own, flow_owner(p.src, p.sport, w.sh->n_workers), [&w, &p] {
    bool reply = false;
    const FlowKey k = make_key(p.src, p.sport, p.dst, p.dport, p.proto);
    const Conn* c = w.conns.lookup(k, conn_hash(k), &reply);
    return c && !reply && dest_alive(w, *c);
  });
}

// Frames other than IPv4: drops found by the first stages, ARP, IPv6, and
// frames handed over by a peer (only with peers of our own).
[[gnu::noinline]] void process_other(Worker& w, rte_mbuf* m, const Parsed& p, bool from_ring) {
  if (p.kind == FrameKind::kArp) return handle_arp(w, m);
  if (p.kind == FrameKind::kIpv6) return handle_ipv6(w, m, from_ring);
  if (p.drop == kBadEthertype && w.sh->n_handover_peers &&
      bytes::rd16(rte_pktmbuf_mtod(m, const uint8_t*) + 12) == kEtherTypeHandover)
    return from_peer(w, m, from_ring);
  drop(w, m, p.drop);
}

inline void set_state(Worker& w, Conn& c, ConnState s) {
  if (c.state == s) return;
  DestCounters& dc = w.dest_counters[c.dest_slot];
  const bool was = c.state == ConnState::kEstablished;
  const bool is = s == ConnState::kEstablished;
  if (was != is) {
    dc.active += is ? 1 : -1;
    dc.inactive += is ? -1 : 1;
  }
  c.state = s;
}

inline uint64_t timeout_for(const Shared& sh, ConnState s) {
  switch (s) {
    case ConnState::kSynRecv: return sh.t_syn;
    case ConnState::kEstablished: return sh.t_est;
    case ConnState::kFinWait: return sh.t_fin;
    case ConnState::kTimeWait: return sh.t_time_wait;
    case ConnState::kCloseWait: return sh.t_close_wait;
    case ConnState::kLastAck: return sh.t_last_ack;
    case ConnState::kClose: return sh.t_close;
    case ConnState::kUdp: return sh.t_udp;
    default: return sh.t_close;
  }
}

// Re-steering (resteer.h; defined at the end of this file; skip_ejected:
// worker_internal.h).
[[gnu::noinline]] bool syn_waiting(Worker& w, Conn& c, rte_mbuf* m, const Parsed& p, bool from_client);
[[gnu::noinline]] bool icmp_resteer(Worker& w, rte_mbuf* m, const uint8_t* f, const Parsed& p, const IcmpQuote& q);
// Frees the saved SYN of a connection that closed before its SYN-ACK (out
// of line: track stays as small as without it).
[[gnu::noinline]] void syn_closed(Worker& w, Conn& c) {
  w.syn.release(c.syn);
  c.syn = 0;
}

// Follows the connection's state with a packet of it. False when the packet
// was consumed (an answer to the SYN that re-steered the connection:
// syn_waiting); the caller then leaves it and the entry alone. `dc`: the
// caller's pointer to the connection's destination counters, pointed again
// after a packet off the established path (a re-steered connection counts
// on its new destination).
[[gnu::always_inline]] inline bool track(Worker& w, Conn& c, rte_mbuf* m, const Parsed& p, bool from_client,
                                         DestCounters*& dc) {
  const uint8_t flags = p.tcp_flags;
  // Most packets: an established TCP flow stays so unless FIN or RST.
  if (c.state == ConnState::kEstablished && !(flags & (kTcpFin | kTcpRst))) {
    c.expires = w.est_expires;  // w.now + t_est (process_burst)
    return true;
  }
  // Waiting for the SYN-ACK (re-steering): never an established packet.
  if (c.syn) [[unlikely]] {
    const bool kept = syn_waiting(w, c, m, p, from_client);
    dc = &w.dest_counters[c.dest_slot];
    if (!kept) return false;
  }
  if (c.proto == kProtoTcp) set_state(w, c, tcp_next_state(c.state, flags, from_client));
  c.expires = w.now + timeout_for(*w.sh, c.state);
  if (c.syn && c.state != ConnState::kSynRecv) [[unlikely]] syn_closed(w, c);  // closed before its SYN-ACK
  return true;
}

// Keeps the persistence template of a connection alive while it carries
// packets (the template's slot may have been reused: check its key).
inline void refresh_template(Worker& w, Conn& c, uint32_t persistence_s) {
  if (!c.tmpl) return;
  Template* t = w.tmpls.at(c.tmpl - 1);
  if (!t || !t->in_use || t->key.client != c.caddr || t->key.vip != c.vaddr || t->key.port != c.vport) {
    c.tmpl = 0;
    return;
  }
  t->expires = w.now + uint64_t{persistence_s} * w.sh->tsc_hz;
}

}  // namespace

// worker_internal.h
void release(Worker& w, Conn& c) noexcept {
  DestCounters& dc = w.dest_counters[c.dest_slot];
  if (c.state == ConnState::kEstablished) --dc.active; else --dc.inactive;
  if (w.sh->forward == Forward::kFnat) fnat_put(w.sh->rss, w.fnat[c.laddr_idx], c.lport);
  w.proxy.release(c.proxy);
  w.syn.release(c.syn);
  w.counters.active_flows.store(w.counters.active_flows.load(std::memory_order_relaxed) - 1,
                                std::memory_order_relaxed);
}

// worker_internal.h: the per-packet helpers for worker6.cc.
void drop_pkt(Worker& w, rte_mbuf* m, DropReason r) noexcept { drop(w, m, r); }
void tx_queue(Worker& w, uint16_t pidx, rte_mbuf* m) noexcept { tx_enqueue(w, pidx, m); }
void reply_on_rx_port(Worker& w, rte_mbuf* m, size_t len) noexcept { reply_same_port(w, m, len); }
int port_of(const Shared& sh, uint16_t port_id) noexcept { return port_index(sh, port_id); }
uint64_t conn_timeout(const Shared& sh, ConnState s) noexcept { return timeout_for(sh, s); }
void local_to_kernel(Worker& w, rte_mbuf* m, DropReason off) noexcept { to_kernel(w, m, off); }
void no_conn_pkt(Worker& w, rte_mbuf* m, uint8_t tcp_flags) noexcept { no_conn(w, m, tcp_flags); }

namespace {

inline void expire_conn(Worker& w, Conn* c) {
  release(w, *c);
  w.conns.remove(c);
}

}  // namespace

// worker_internal.h
int32_t template_dest(const Worker& w, const Service& svc, const Template& t) noexcept {
  if (t.expires <= w.now || dest_gen(w, t.dest_slot) != t.dest_gen) return -1;
  for (uint32_t i = 0; i < svc.n_dests; ++i) {
    const DestRef& d = svc.dests[i];
    if (d.slot != t.dest_slot) continue;
    // A quiesced (weight 0) destination keeps its templates unless
    // expire_quiescent_template says otherwise.
    if (d.weight == 0 && w.sh->expire_quiescent_template) return -1;
    return static_cast<int32_t>(i);
  }
  return -1;
}

namespace {

// Like template_dest(), and discards a template that no longer decides.
int32_t from_template(Worker& w, const Service& svc, const TemplateKey& key, Template** out) {
  Template* t = w.tmpls.lookup(key);
  *out = t;
  if (!t) return -1;
  const int32_t idx = template_dest(w, svc, *t);
  if (idx >= 0) return idx;
  w.tmpls.remove(t);
  *out = nullptr;
  return -1;
}

// PROXY protocol, client -> backend (worker_internal.h), IPv4.
bool proxy_to_backend(Worker& w, rte_mbuf* m, const Parsed& p, const Conn& c) {
  return proxy_to_backend(w, m, p, c, p.ip_total_len, [&w, &c] {
    uint16_t pidx = 0;
    uint32_t nh;
    return route(*w.sh, c.daddr, &pidx, &nh) ? w.sh->ports[pidx].mtu : uint16_t{0};
  });
}

// A new full-NAT TCP connection of a service with the PROXY protocol: its
// state (client ISN from the SYN, header length). 0 when the pool is empty.
uint32_t proxy_open(Worker& w, const uint8_t* f, const Parsed& p, const Service& svc) {
  const uint32_t h = w.proxy.alloc();
  if (!h) return 0;
  ProxyConn& pc = w.proxy.at(h);
  uint8_t hdr[kProxyHdrMax];
  pc.client_isn = bytes::rd32(f + p.l4_off + 4);
  pc.version = svc.proxy_protocol;
  pc.hdr_len = static_cast<uint8_t>(proxy_header(svc.proxy_protocol, p.src, p.sport, p.dst, p.dport, hdr));
  return h;
}

// Re-steering (resteer.h): keeps a new connection's SYN and starts its
// timer. Inline at the end of new_flow (after the rewrite: little is live
// there, so it needs no call and no spills): it reads the SYN as it goes
// out, whose TCP header differs from the client's only in the ports and the
// checksum, which syn_build writes anew, and whose TTL is already one less.
// The pool empty: counted, and the connection goes without re-steering.
[[gnu::always_inline]] inline void syn_open(Worker& w, const rte_mbuf* m, const Parsed& p, Conn& c) {
  // Everything read before the first store (the SYN's bytes alias all).
  const uint64_t t = w.sh->t_resteer;
  const uint8_t* f = rte_pktmbuf_mtod(m, const uint8_t*);
  const size_t room = size_t{m->buf_len} - m->data_off;  // data and tailroom
  uint32_t h;
  SynMem* s = w.syn.alloc_armed(w.now, t, &h);
  if (!s) [[unlikely]] return bump(w.counters.resteer_pool_full);
  c.syn = h;
  s->conn = &c;
  syn_save(*s, f, room, p);
}

// A full-NAT local address and port for a new connection to `d`, from the
// local addresses in turn. With RSS steering (rss_steer.h; out of line, so
// that new_flow stays as without it) a port whose reply hashes to this
// worker's queue, from any address; none free, or a protocol the NIC does
// not hash on ports: any port (counted as fnat_unsteered; its replies take
// the redirect ring). False when every pool is empty.
[[gnu::noinline]] bool fnat_local_rss(Worker& w, uint8_t proto, const DestRef& d, uint32_t* laddr, uint16_t* lport,
                                      uint8_t* lidx) {
  const Shared& sh = *w.sh;
  const uint32_t n = sh.n_local_addrs;
  if (rss_steered(sh.rss, proto)) [[likely]] {
    for (uint32_t k = 0; k < n; ++k) {
      const uint32_t i = (w.fnat_cursor + k) % n;
      if (fnat_take_steered(sh.rss, w.fnat[i], w.index, d.rss, lport)) {
        *laddr = sh.local_addrs[i];
        *lidx = static_cast<uint8_t>(i);
        w.fnat_cursor = i + 1;
        return true;
      }
    }
  }
  for (uint32_t k = 0; k < n; ++k) {
    const uint32_t i = (w.fnat_cursor + k) % n;
    if (fnat_take_any(w.fnat[i], lport)) {
      *laddr = sh.local_addrs[i];
      *lidx = static_cast<uint8_t>(i);
      w.fnat_cursor = i + 1;
      bump(w.counters.fnat_unsteered);
      return true;
    }
  }
  return false;
}

inline bool fnat_local(Worker& w, uint8_t proto, const DestRef& d, uint32_t* laddr, uint16_t* lport, uint8_t* lidx) {
  const Shared& sh = *w.sh;
  const uint32_t n = sh.n_local_addrs;
  if (sh.rss.mask) {  // bucketed pools: the next address's next bucket, else the search
    const uint32_t i = w.fnat_cursor < n ? w.fnat_cursor : 0;
    if (rss_steered(sh.rss, proto) && w.fnat[i].buckets &&
        fnat_take_steered_first(sh.rss, w.fnat[i], w.index, d.rss, lport)) [[likely]] {
      *laddr = sh.local_addrs[i];
      *lidx = static_cast<uint8_t>(i);
      w.fnat_cursor = i + 1;
      return true;
    }
    // (Through locals of its own: the caller's stay in registers.)
    uint32_t la;
    uint16_t lp;
    uint8_t li;
    if (!fnat_local_rss(w, proto, d, &la, &lp, &li)) return false;
    *laddr = la;
    *lport = lp;
    *lidx = li;
    return true;
  }
  // From the cursor's address on, in turn (the cursor is at most n).
  uint32_t i = w.fnat_cursor < n ? w.fnat_cursor : 0;
  for (uint32_t k = 0; k < n; ++k) {
    FnatPool& fp = w.fnat[i];
    if (fp.top) {
      *lport = fp.ports[--fp.top];
      *laddr = sh.local_addrs[i];
      *lidx = static_cast<uint8_t>(i);
      w.fnat_cursor = i + 1;
      return true;
    }
    if (++i == n) i = 0;
  }
  return false;
}

// sig: conn_hash of the packet's flow key; fwd_absent: that key was just
// looked up and is in no connection.
void new_flow(Worker& w, rte_mbuf* m, const Parsed& p, const Service& svc, uint32_t sig, bool fwd_absent) {
  Shared& sh = *w.sh;
  // SYN+FIN (a scanner's probe) starts nothing, as in IPVS.
  const bool syn = p.proto != kProtoTcp || (p.tcp_flags & (kTcpSyn | kTcpAck | kTcpRst | kTcpFin)) == kTcpSyn;
  // A mid-flow packet without an entry (after a restart, or a flow that moved
  // from another gateway): Maglev sends it where any instance would have, so
  // the connection is picked up; other schedulers cannot know and drop it.
  // With hand-over peers (full NAT) it goes to them instead (no_conn).
  if (!syn && (svc.sched != Sched::kMh || (p.tcp_flags & (kTcpRst | kTcpSyn)) || sh.n_handover_peers))
    return no_conn(w, m, p.tcp_flags);
  // loadBalancerSourceRanges: like kube-proxy's firewall chain, checked when a
  // flow starts (the nat table sees only first packets there too).
  if (svc.n_ranges && !source_allowed(svc, p.src)) return drop(w, m, kSourceNotAllowed);
  int32_t idx = -1;
  Template* tmpl = nullptr;
  // (The persistence template's key: a temporary where it is passed, built
  // only for a service with persistence.)
  if (svc.persistence_s && svc.n_dests) idx = from_template(w, svc, TemplateKey{p.dst, p.src, p.dport, p.proto, 0}, &tmpl);
  // The scheduler's context: a temporary where it is passed, so that it is
  // built only on the ways that read it (rr inline does not).
  if (idx < 0) idx = svc.n_weighted ? sched_pick(svc, w.sched[svc.id], SchedCtx{w.dest_counters, p.src, p.dst}) : -1;
  // Outlier ejection: one load of the pick's shared slot line when it is on.
  if (idx >= 0 && sh.eject.k && sh.dest_slots[svc.dests[idx].slot].eject.ejected(w.now)) [[unlikely]]
    idx = skip_ejected(w, svc, SchedCtx{w.dest_counters, p.src, p.dst}, idx);
  if (idx < 0) {
    if (svc.drop_when_empty) return drop(w, m, kNoEndpointsDrop);
    // Only a SYN is refused: a mid-flow packet (mh picks flows up) of a
    // service without endpoints may belong to a connection that lives on once
    // they are back, e.g. after a restart that synced before they were listed.
    if (!syn) return drop(w, m, kNoConn);
    if (p.proto == kProtoTcp) return send_rst(w, m, p);
    return send_port_unreachable(w, m, p);
  }
  const DestRef& d = svc.dests[idx];
  // PROXY protocol: full NAT, TCP, from the SYN on (a connection picked up
  // mid-flow, mh, has no ISN to count from: it goes without a header). NAT
  // mode and UDP never send one.
  uint32_t proxy = 0;
  if (svc.proxy_protocol != cp::ProxyProtocol::kNone && sh.forward == Forward::kFnat && p.proto == kProtoTcp &&
      syn) {
    proxy = proxy_open(w, rte_pktmbuf_mtod(m, const uint8_t*), p, svc);
    if (!proxy) return drop(w, m, kProxyPoolFull);  // the client retries its SYN
  }
  uint32_t laddr = p.src;
  uint16_t lport = p.sport;
  uint8_t lidx = 0;
  if (sh.forward == Forward::kFnat) {
    if (!fnat_local(w, p.proto, d, &laddr, &lport, &lidx)) {
      w.proxy.release(proxy);
      return drop(w, m, kFnatPortsExhausted);
    }
  }
  // Full NAT: the reply's port index entry from the pool's address index.
  Conn* c = sh.forward == Forward::kFnat
                ? w.conns.insert_local(p.src, p.sport, p.dst, p.dport, p.proto, sig, lidx, laddr, lport, d.ip,
                                       d.port, fwd_absent)
                : w.conns.insert(make_key(p.src, p.sport, p.dst, p.dport, p.proto), sig,
                                 make_key(d.ip, d.port, laddr, lport, p.proto), fwd_absent);
  if (!c) {
    if (sh.forward == Forward::kFnat) fnat_put(sh.rss, w.fnat[lidx], lport);
    w.proxy.release(proxy);
    return drop(w, m, w.conns.last_insert_full() ? kConnTableFull : kConnKeyInUse);
  }
  c->laddr_idx = lidx;  // the addresses and ports: filled in from the keys
  c->proxy = proxy;
  c->dest_slot = d.slot;
  c->dest_gen = d.gen;
  c->state = p.proto != kProtoTcp ? ConnState::kUdp
             : syn              ? ConnState::kSynRecv
                                : tcp_next_state(ConnState::kNone, p.tcp_flags, true);
  c->expires = w.now + timeout_for(sh, c->state);
  count_new_conn(w, *c, svc, d, tmpl, TemplateKey{p.dst, p.src, p.dport, p.proto, 0}, p.ip_total_len);
  // (from_client's packet: its TTL checked above 1.)
  rewrite_l3l4_fwd(rte_pktmbuf_mtod(m, uint8_t*), p, __builtin_bswap32(laddr), __builtin_bswap32(d.ip),
                   packet_detail::raw_ports(lport, d.port));
  // Re-steering: the SYN is kept until the backend answers it.
  if (sh.resteer_attempts && syn && p.proto == kProtoTcp && svc.n_weighted > 1) [[unlikely]]
    syn_open(w, m, p, *c);
  output(w, m, d.ip);
}

// The two host-order 16-bit ports at `off` in c (lport then dport, or cport
// then vport) as one word: byte-swapped whole it is the frame's word of the
// second port then the first (a reply's vport, cport), rotated by 16 the
// first then the second (lport, dport). Little-endian hosts (the DPDK
// targets vipd builds for).
inline uint32_t port_pair(const Conn& c, size_t off) {
  static_assert(std::endian::native == std::endian::little, "the port words assume little endian");
  static_assert(offsetof(Conn, dport) == offsetof(Conn, lport) + 2 && offsetof(Conn, vport) == offsetof(Conn, cport) + 2,
                "each pair is adjacent");
  uint32_t v;
  std::memcpy(&v, reinterpret_cast<const char*>(&c) + off, 4);
  return v;
}

// The packet's connection as prepare_burst found it, or looked up again when
// an earlier packet of the burst added or removed a key with the same hash.
// A candidate (PktInfo::cand: the entry its tag named, key not compared) is
// compared here, where its line is read anyway; one that holds another key
// (tags collide) makes the packet look its key up by itself.
inline Conn* burst_conn(Worker& w, const PktInfo& pi, bool* reply) {
  const Parsed& p = pi.p;
  if (!w.conns.changed_in_burst(pi.conn_sig)) {
    if (!pi.cand) {
      *reply = pi.reply;
      return pi.conn;
    }
    // The key's words from Parsed's adjacent fields, in registers.
    static_assert(offsetof(Parsed, dst) == offsetof(Parsed, src) + 4 &&
                      offsetof(Parsed, dport) == offsetof(Parsed, sport) + 2,
                  "the words load adjacent fields");
    uint64_t k0;
    uint32_t ports;
    std::memcpy(&k0, &p.src, 8);
    std::memcpy(&ports, &p.sport, 4);
    if (ConnTable::key_words_equal(k0, ports | (uint64_t{p.proto} << 32), *pi.conn)) [[likely]] {
      *reply = false;
      return pi.conn;
    }
  }
  return w.conns.lookup(make_key(p.src, p.sport, p.dst, p.dport, p.proto), pi.conn_sig, reply);
}

// The packet's Service: what prepare_burst found, or (a connection hit in the
// client's direction, for which it did not look) looked up now.
const Service* service_of(const Worker& w, const PktInfo& pi) {
  if (pi.svc_looked) return pi.svc;
  const VipKey key{pi.p.dst, pi.p.dport, pi.p.proto, 0};
  void* data = nullptr;
  if (rte_hash_lookup_with_hash_data(w.sh->vip_table, &key, vip_hash(key), &data) < 0) return nullptr;
  return static_cast<const Service*>(data);
}

// A client -> VIP packet: a VIP table hit, or a connection hit in the client's
// direction. False (nothing done) when it needs its Service and that is gone:
// the caller treats it as a packet to no service.
bool from_client(Worker& w, rte_mbuf* m, const PktInfo& pi) {
  const Parsed& p = pi.p;
  bool reply = false;
  Conn* c = burst_conn(w, pi, &reply);
  // (Worked out only off the established path, which never needs it.)
  const auto is_syn = [&p] { return p.proto == kProtoTcp && (p.tcp_flags & (kTcpSyn | kTcpAck)) == kTcpSyn; };
  // dest_alive, with the counters' address kept for the counting below
  // (after the generation's acquire load it would be worked out again).
  DestCounters* dc = nullptr;
  bool alive = false;
  if (c && !reply) {
    dc = &w.dest_counters[c->dest_slot];
    alive = dc->gen.load(std::memory_order_acquire) == c->dest_gen;
  }
  // (An established entry is never closing: the common case tests one byte.)
  if (alive && (c->state == ConnState::kEstablished || !(tcp_state_closing(c->state) && is_syn()))) {
    // An established flow: the entry says where it goes. Its Service is read
    // only to refresh a persistence template.
    track(w, *c, m, p, true, dc);  // a client packet is never consumed
    if (c->tmpl) {
      const Service* svc = service_of(w, pi);
      if (svc && svc->persistence_s) refresh_template(w, *c, svc->persistence_s);
    }
    dc->inpkts++;
    dc->inbytes += p.ip_total_len;
    uint8_t* f = rte_pktmbuf_mtod(m, uint8_t*);
    rewrite_l3l4_fwd(f, p, __builtin_bswap32(c->laddr), __builtin_bswap32(c->daddr),
                     std::rotl(__builtin_bswap32(port_pair(*c, offsetof(Conn, lport))), 16));
    if (c->proxy) [[unlikely]] {  // the one check a connection without a header pays
      if (!proxy_to_backend(w, m, p, *c)) return true;  // (the frame's start stays: the header goes in after TCP's)
    }
    output_conn(w, m, f, c->daddr, c->route_d);
    return true;
  }
  const Service* svc = service_of(w, pi);
  if (!svc) return false;
  const bool syn = is_syn();
  if (c && !reply) {
    // expire_nodest_conn (the destination is gone), or port reuse after a
    // close (a SYN on a closing entry): the entry goes. TCP mid-flow to a
    // gone destination gets a RST so the client retries; a new SYN or UDP is
    // scheduled afresh.
    expire_conn(w, c);
    if (!alive && p.proto == kProtoTcp && !syn) {
      if (p.tcp_flags & kTcpRst) drop(w, m, kDestExpired);
      else send_rst(w, m, p);
      return true;
    }
    new_flow(w, m, p, *svc, pi.conn_sig, true);
    return true;
  }
  new_flow(w, m, p, *svc, pi.conn_sig, c == nullptr);  // a reply key in the way: insert refuses
  return true;
}

// An endpoint -> client packet. Inline where process_one finds a known
// flow's reply (no call, no register saves); from_dest is the same out of
// line for the rarer ways there.
[[gnu::always_inline]] inline void reply_to_client(Worker& w, rte_mbuf* m, const PktInfo& pi) {
  const Parsed& p = pi.p;
  bool reply = false;
  Conn* c = burst_conn(w, pi, &reply);
  // A full-NAT reply's entry came from the port index: check the whole key,
  // as two words loaded from Parsed's adjacent fields and rotated into the
  // entry's order (destination first).
  if (!c || !reply) return drop(w, m, kNoService);
  static_assert(offsetof(Parsed, dst) == offsetof(Parsed, src) + 4 && offsetof(Parsed, dport) == offsetof(Parsed, sport) + 2,
                "the words load adjacent fields");
  uint64_t src_dst;
  uint32_t sport_dport;
  std::memcpy(&src_dst, &p.src, 8);
  std::memcpy(&sport_dport, &p.sport, 4);
  if (!ConnTable::reply_words_match(*c, std::rotl(src_dst, 32), std::rotl(sport_dport, 16), p.proto))
    return drop(w, m, kNoService);
  // dest_alive, the counters' address kept (as from_client).
  DestCounters* dc = &w.dest_counters[c->dest_slot];
  if (dc->gen.load(std::memory_order_acquire) != c->dest_gen) {
    expire_conn(w, c);
    return drop(w, m, kDestExpired);
  }
  if (!track(w, *c, m, p, false, dc)) return;
  dc->outpkts++;
  dc->outbytes += p.ip_total_len;
  uint8_t* f = rte_pktmbuf_mtod(m, uint8_t*);
  rewrite_l3l4_fwd(f, p, __builtin_bswap32(c->vaddr), __builtin_bswap32(c->caddr),
                   __builtin_bswap32(port_pair(*c, offsetof(Conn, cport))));
  if (c->proxy) [[unlikely]] proxy_from_backend(f, p, w.proxy.at(c->proxy));
  output_conn(w, m, f, c->caddr, c->route_c);
}

[[gnu::noinline]] void from_dest(Worker& w, rte_mbuf* m, const PktInfo& pi) { reply_to_client(w, m, pi); }

inline bool redirect(Worker& w, rte_mbuf* m, uint32_t owner) {
  if (owner == w.index) return false;
  if (rte_ring_mp_enqueue(w.sh->rings[owner], m) != 0) {
    drop(w, m, kRedirectRingFull);
  } else {
    bump(w.counters.redirects_out);
  }
  return true;
}

}  // namespace

// worker_internal.h
bool redirect_to(Worker& w, rte_mbuf* m, uint32_t owner) noexcept { return redirect(w, m, owner); }

namespace {

// The per-packet stage: `pi` holds what prepare_burst (burst.cc) found.
// `from_ring` is process_burst's `own`: no redirect is needed (the frame came
// through the ring, or there is one worker); from_peer tells the two apart.
void process_one(Worker& w, rte_mbuf* m, const PktInfo& pi, bool from_ring) {
  Shared& sh = *w.sh;
  const Parsed& p = pi.p;  // frame checks and parse_frame: done, drop reason kept
  // kDrop also for IPv4 to a broadcast/multicast MAC (kNotForUs, burst.cc).
  if (p.kind != FrameKind::kIpv4) return process_other(w, m, p, from_ring);
  if (p.proto == kProtoTcp || p.proto == kProtoUdp) {
    if (pi.conn && pi.reply) {  // a known flow's reply, before any VIP (burst.cc)
      if (p.ttl <= 1) return drop(w, m, kTtlExceeded);
      if (!from_ring) {  // the owner only when it may be another worker
        const uint32_t owner = sh.forward == Forward::kFnat ? p.dport % sh.n_workers
                                                            : flow_owner(p.dst, p.dport, sh.n_workers);
        if (redirect(w, m, owner)) return bump(w.counters.reply_redirects);
      }
      return reply_to_client(w, m, pi);
    }
    if (pi.svc || pi.conn) {  // a VIP or a known flow's client side
      if (p.ttl <= 1) return drop(w, m, kTtlExceeded);
      if (!from_ring && redirect(w, m, flow_owner(p.src, p.sport, sh.n_workers))) return;
      if (from_client(w, m, pi)) return;
      // the connection's Service was removed: as if no connection matched
    }
    if (sh.forward == Forward::kFnat) {
      if (local_addr_index(sh, p.dst) >= 0) {
        if (p.ttl <= 1) return drop(w, m, kTtlExceeded);
        if (!from_ring && redirect(w, m, p.dport % sh.n_workers)) return bump(w.counters.reply_redirects);
        return from_dest(w, m, pi);
      }
    } else if (!is_port_ip(sh, p.dst) && !is_vip_addr(sh, p.dst)) {
      if (p.ttl <= 1) return drop(w, m, kTtlExceeded);
      if (!from_ring && redirect(w, m, flow_owner(p.dst, p.dport, sh.n_workers))) return;
      return from_dest(w, m, pi);
    }
    if (sh.exc_to_kernel && is_port_ip(sh, p.dst)) return to_kernel(w, m, kLocalUnhandled);
    if (is_vip_addr(sh, p.dst)) return drop(w, m, kVipNoPort);
    if (is_port_ip(sh, p.dst)) return drop(w, m, kLocalUnhandled);
    return drop(w, m, kNoService);
  }
  if (p.proto == kProtoIcmp) {
    // (The frame's address only here: loaded at the top, the forwarded
    // packets would pay for it.)
    uint8_t* f = rte_pktmbuf_mtod(m, uint8_t*);
    if (is_icmp_error(p)) {  // quoting a NATed flow: translated like it (icmp_error.h)
      IcmpQuote q;
      DropReason r = parse_icmp_quote(sh, f, p, &q);
      if (r == kIcmpOk && !from_ring && redirect(w, m, icmp_quote_owner(sh, q))) return;
      if (r == kIcmpOk && icmp_resteer(w, m, f, p, q)) [[unlikely]] return;
      uint32_t to = 0;
      if (r == kIcmpOk) r = translate_icmp_error(w, f, p, q, m->port, &to);
      if (r == kIcmpOk) return output(w, m, to);
      // Quoting none of vipd's flows: maybe one of the kernel's own.
      if (sh.exc_to_kernel && is_port_ip(sh, p.dst)) return to_kernel(w, m, r);
      return drop(w, m, r);
    }
    // With the exception path, the kernel answers for the port's own address.
    if (sh.exc_to_kernel && is_port_ip(sh, p.dst)) return to_kernel(w, m, kLocalUnhandled);
    if (is_port_ip(sh, p.dst) || is_vip_addr(sh, p.dst) || local_addr_index(sh, p.dst) >= 0) {
      if (make_icmp_echo_reply(f, p)) return reply_same_port(w, m, rte_pktmbuf_data_len(m));
      return drop(w, m, kLocalUnhandled);
    }
    return drop(w, m, kNoService);
  }
  drop(w, m, kUnsupportedProto);
}

}  // namespace

void process_burst(Worker& w, rte_mbuf** pkts, uint16_t n, bool from_ring) noexcept {
  // Up to kBurst packets at a time: parse, hash, bulk lookups and prefetch
  // for all of them (burst.h), then each packet's own stage, in order. The
  // next burst is prepared before this one's packets run, so that its
  // entries, destinations and counters arrive while they do. Its lookups may
  // then be stale: the change log, started once for all of them, makes a
  // packet whose key changed since look up again (burst_conn).
  w.nh_key = 0;  // a neighbour entry may have changed since the last burst
  w.est_expires = w.now + w.sh->t_est;  // track(): w.now stays for the whole call
  w.conns.begin_burst();
  // Packets that stay on this worker whoever owns them: redirected ones, and
  // all of them with one worker (worker 0 owns every flow then).
  const bool own = from_ring || w.sh->n_workers == 1;
  const auto size = [&](uint16_t off) {
    return static_cast<uint16_t>(n - off < int{kBurst} ? n - off : int{kBurst});
  };
  unsigned cur = 0;
  uint16_t off = 0, k = size(0);
  if (k) {
    prepare_burst(w, pkts, k, w.burst[cur]);
    prefetch_dests(w, w.burst[cur], k);
  }
  while (k) {
    const uint16_t next_off = static_cast<uint16_t>(off + k), next_k = size(next_off);
    if (next_k) prepare_burst(w, pkts + next_off, next_k, w.burst[cur ^ 1]);
    for (uint16_t i = 0; i < k; ++i) process_one(w, pkts[off + i], w.burst[cur][i], own);
    if (next_k) prefetch_dests(w, w.burst[cur ^ 1], next_k);
    off = next_off;
    k = next_k;
    cur ^= 1;
  }
}

void serve_peer_frames(Worker& w) noexcept {
  rte_mbuf* pkts[kPeerFramesMax];
  const uint16_t n = w.n_peer_frames;
  std::memcpy(pkts, w.peer_frames, sizeof(rte_mbuf*) * n);
  w.n_peer_frames = 0;
  w.peer_frames_now = true;
  process_burst(w, pkts, n, true);  // owned here: never redirected
  w.peer_frames_now = false;
}

// Keeps the peers' MACs known (worker 0, from the poll loop every
// arp_retry): an ARP request for each peer that has no entry yet (at start:
// the first handed-over packets find the peer resolved) or whose entry
// aged past reachable (re-ARP, as to_peer would; claim_request keeps it to
// one request per arp_retry per address across the workers).
void resolve_peers(Worker& w) noexcept {
  Shared& sh = *w.sh;
  for (uint32_t i = 0; i < sh.n_handover_peers; ++i) {
    uint16_t pidx;
    uint32_t nh;
    uint8_t mac[6];
    if (!route(sh, sh.handover_peers[i], &pidx, &nh)) continue;
    if (sh.neigh.lookup(nh, mac, w.now) != NeighState::kReachable && sh.neigh.claim_request(nh, w.now, sh.arp_retry))
      send_arp_request(w, pidx, nh);
  }
}

void flush_tx(Worker& w) noexcept {
  for (uint16_t i = 0; i < w.sh->n_ports; ++i) {
    uint16_t n = w.n_tx[i];
    if (!n) continue;
    uint16_t sent = rte_eth_tx_burst(w.sh->ports[i].port_id, static_cast<uint16_t>(w.index), w.txbuf[i], n);
    bump(w.counters.tx, sent);
    for (uint16_t k = sent; k < n; ++k) drop(w, w.txbuf[i][k], kTxFull);
    w.n_tx[i] = 0;
  }
}

void send_from_kernel(Worker& w) noexcept {
  rte_mbuf* pkts[kBurst];
  const unsigned n = rte_ring_sc_dequeue_burst(w.sh->exc_from_kernel, reinterpret_cast<void**>(pkts), kBurst, nullptr);
  for (unsigned i = 0; i < n; ++i) {
    rte_mbuf* m = pkts[i];
    if (m->port >= w.sh->n_ports) {  // set by the exception thread: cannot happen
      drop(w, m, kNoRoute);
      continue;
    }
    tx_enqueue(w, m->port, m);
  }
}

void service_pending(Worker& w) noexcept {
  Shared& sh = *w.sh;
  uint32_t keep = 0;
  for (uint32_t i = 0; i < w.n_pending; ++i) {
    PendingPkt pp = w.pending[i];
    uint8_t mac[6];
    if (sh.neigh.lookup(pp.nexthop, mac, w.now) != NeighState::kMissing) {
      uint8_t* f = rte_pktmbuf_mtod(pp.m, uint8_t*);
      std::memcpy(f, mac, 6);
      std::memcpy(f + 6, sh.ports[pp.port].mac, 6);
      tx_enqueue(w, pp.port, pp.m);
    } else if (w.now - pp.since > sh.arp_give_up) {
      drop(w, pp.m, kNeighUnresolved);
    } else {
      if (sh.neigh.claim_request(pp.nexthop, w.now, sh.arp_retry)) send_arp_request(w, pp.port, pp.nexthop);
      w.pending[keep++] = pp;
    }
  }
  w.n_pending = keep;
  if (w.v6 && w.v6->n_pending) service_pending6(w);
}

// ---- Re-steering (resteer.h) ----

// worker_internal.h
void eject_fail(Worker& w, const Service& svc, uint32_t slot) noexcept {
  const Shared& sh = *w.sh;
  EjectState& e = sh.dest_slots[slot].eject;
  if (e.ejected(w.now)) return;
  uint32_t n_ejected = 0;
  if (e.fails.load(std::memory_order_relaxed) + 1 >= sh.eject.k)  // only then: count the service's
    for (uint32_t i = 0; i < svc.n_dests; ++i)
      if (svc.dests[i].weight && sh.dest_slots[svc.dests[i].slot].eject.ejected(w.now)) ++n_ejected;
  eject_failure(e, sh.eject, w.now, eject_allowed(sh.eject, svc.n_weighted, n_ejected));
}

namespace {

// Moves a connection waiting for its SYN-ACK to the next destination
// (resteer_next, worker_internal.h).
bool resteer_conn(Worker& w, Conn& c, ResteerReason why) {
  const Shared& sh = *w.sh;
  const VipKey key{c.vaddr, c.vport, c.proto, 0};
  void* data = nullptr;
  const Service* svc = nullptr;
  if (rte_hash_lookup_with_hash_data(sh.vip_table, &key, vip_hash(key), &data) >= 0)
    svc = static_cast<const Service*>(data);
  return resteer_next(
      w, c, svc, SchedCtx{w.dest_counters, c.caddr, c.vaddr}, why,
      [&](int32_t idx) { return w.conns.move_reply(&c, svc->dests[idx].ip, svc->dests[idx].port); },
      [&](const Template& t) { return t.key.client == c.caddr && t.key.vip == c.vaddr && t.key.port == c.vport; });
}

// Sends the saved SYN to the connection's (new) destination (send_saved_syn_as).
void send_saved_syn(Worker& w, Conn& c, rte_mbuf* m) {
  send_saved_syn_as(
      w, c.dest_slot, m,
      [&](uint8_t* f) { return syn_build(f, w.syn.at(c.syn), c.laddr, c.lport, c.daddr, c.dport); },
      [&](rte_mbuf* s) { output(w, s, c.daddr); });
}

// A TCP packet of a connection waiting for its SYN-ACK (track, c.syn set;
// out of line: the established path stays as small as without it):
// syn_waiting_as. False: the packet was consumed.
bool syn_waiting(Worker& w, Conn& c, rte_mbuf* m, const Parsed& p, bool from_client) {
  return syn_waiting_as(
      w, c, m, rte_pktmbuf_mtod(m, const uint8_t*) + p.l4_off, p.tcp_flags, from_client,
      [&](ResteerReason why) { return resteer_conn(w, c, why); }, [&](rte_mbuf* s) { send_saved_syn(w, c, s); });
}

// An ICMP destination unreachable from the destination side quoting the SYN
// of a connection waiting for its SYN-ACK: re-steered, the error consumed
// (true). Anything else: false, translated as usual.
bool icmp_resteer(Worker& w, rte_mbuf* m, const uint8_t* f, const Parsed& p, const IcmpQuote& q) {
  if (!w.sh->resteer_attempts || !q.to_client || q.proto != kProtoTcp || q.l4_quoted < 8) return false;
  if ((p.dport >> 8) != 3 || (p.dport & 0xff) == 4) return false;  // not "fragmentation needed"
  bool reply = false;
  Conn* c = w.conns.lookup(make_key(q.dst, q.dport, q.src, q.sport, q.proto), &reply);
  if (!c || !reply || !c->syn || c->state != ConnState::kSynRecv) return false;
  if (c->daddr != q.dst || c->dport != q.dport || c->laddr != q.src || c->lport != q.sport) return false;
  if (bytes::rd32(f + q.l4_off + 4) != syn_isn(w.syn.at(c->syn))) return false;
  if (!resteer_conn(w, *c, kResteerIcmp)) return false;
  send_saved_syn(w, *c, m);
  return true;
}

}  // namespace

// worker_internal.h. Picks past the first looked at (sched_next:
// consistent for the hashing ones), at most kResteerMax + 1.
int32_t skip_ejected_after(Worker& w, const Service& svc, const SchedCtx& ctx, int32_t idx, const uint32_t* tried,
                           uint32_t n_tried) noexcept {
  constexpr uint32_t kSkipMax = kResteerMax + 1;  // picks looked at past the first
  uint32_t t[kResteerMax + kSkipMax];
  uint32_t n = 0;
  for (; n < n_tried && n < kResteerMax; ++n) t[n] = tried[n];
  int32_t j = idx;
  for (uint32_t k = 0; k < kSkipMax; ++k) {
    t[n++] = svc.dests[j].slot;
    j = sched_next(svc, w.sched[svc.id], ctx, t, n);
    if (j < 0) break;
    if (!w.sh->dest_slots[svc.dests[j].slot].eject.ejected(w.now)) return j;
  }
  return idx;
}

int32_t skip_ejected(Worker& w, const Service& svc, const SchedCtx& ctx, int32_t idx) noexcept {
  return skip_ejected_after(w, svc, ctx, idx, nullptr, 0);
}

void resteer_timers(Worker& w, uint32_t budget) noexcept {
  for (uint32_t n = 0; n < budget; ++n) {
    const uint32_t h = w.syn.head();
    if (!h) return;
    SynMem& s = w.syn.at(h);
    if (s.deadline > w.now) return;
    w.syn.unlink(h);
    if (s.v6) {  // an IPv6 connection's (worker6.cc)
      syn_timeout6(w, *s.conn6);
      continue;
    }
    Conn& c = *s.conn;
    if (c.state != ConnState::kSynRecv) {
      syn_closed(w, c);
      continue;
    }
    if (resteer_conn(w, c, kResteerTimeout)) send_saved_syn(w, c, nullptr);
  }
}

}  // namespace vipd::dp
