// Thread: worker. What worker.cc (the per-packet path) and worker_loop.cc
// (the poll loop and its housekeeping: mailbox, expiry sweep) share; not for
// other users of the fast path.
#pragma once

#include <rte_hash.h>
#include <rte_mbuf.h>

#include <cstdint>

#include "dataplane/fastpath/bytes.h"
#include "dataplane/fastpath/worker.h"

namespace vipd::dp {

// Whether an IPv4 address (host order) is a VIP of some Service.
inline bool is_vip_addr(const Shared& sh, uint32_t ip) { return rte_hash_lookup(sh.vip_addrs, &ip) >= 0; }

// Whether a connection's destination is still the one it was scheduled to
// (its slot's generation did not move: see DestSlot).
inline bool dest_alive(const Worker& w, const Conn& c) { return dest_gen(w, c.dest_slot) == c.dest_gen; }

// Releases what a connection holds (call before ConnTable::remove): its
// destination's active/inactive count, its full-NAT local port, the worker's
// active-flow count.
void release(Worker& w, Conn& c) noexcept;

// Persistence: the index in svc.dests that template t still decides for, or
// -1 when it is expired, its destination was removed, or
// (expire_quiescent_template) its destination is quiesced. Reads only.
int32_t template_dest(const Worker& w, const Service& svc, const Template& t) noexcept;

// The bookkeeping of a new connection (worker.cc's Conn, worker6.cc's
// Conn6; its state already set) of `svc` to `d`: its persistence template
// (`tmpl` when the lookup found one, else a new one keyed `tkey`;
// template_full when the table is full), the destination's connection and
// packet counters, the worker's flow counters. l3_bytes: the first packet's
// IP length.
template <class ConnT>
inline void count_new_conn(Worker& w, ConnT& c, const Service& svc, const DestRef& d, Template* tmpl,
                           const TemplateKey& tkey, uint32_t l3_bytes) {
  if (svc.persistence_s) {
    if (!tmpl) tmpl = w.tmpls.insert(tkey);  // full: no affinity for this flow, counted
    if (tmpl) {
      tmpl->dest_slot = d.slot;
      tmpl->dest_gen = d.gen;
      tmpl->expires = w.now + uint64_t{svc.persistence_s} * w.sh->tsc_hz;
      c.tmpl = w.tmpls.index(tmpl) + 1;
    } else {
      bump(w.counters.template_full);
    }
  }
  DestCounters& dc = w.dest_counters[d.slot];
  ++dc.conns;
  if (c.state == ConnState::kEstablished) ++dc.active; else ++dc.inactive;
  bump(w.counters.new_flows);
  bump(w.counters.active_flows);
  dc.inpkts++;
  dc.inbytes += l3_bytes;
}

// The per-packet helpers worker.cc shares with worker6.cc (the IPv6 path):
// a counted drop; queueing for tx on port index `pidx`; a locally built
// reply out of the port it came in on (Ethernet addresses already swapped);
// the port index of a DPDK port id (-1: none); a state's timeout; the
// exception path (off: dropped as `off`); sending the packet to the worker
// that owns its flow (true: it left, or was dropped as redirect_ring_full).
void drop_pkt(Worker& w, rte_mbuf* m, DropReason r) noexcept;
void tx_queue(Worker& w, uint16_t pidx, rte_mbuf* m) noexcept;
void reply_on_rx_port(Worker& w, rte_mbuf* m, size_t len) noexcept;
int port_of(const Shared& sh, uint16_t port_id) noexcept;
uint64_t conn_timeout(const Shared& sh, ConnState s) noexcept;
void local_to_kernel(Worker& w, rte_mbuf* m, DropReason off) noexcept;
bool redirect_to(Worker& w, rte_mbuf* m, uint32_t owner) noexcept;

// Connection hand-over between full-NAT gateways (worker.cc,
// docs/gateway.md "Hand-over"), shared by both families. no_conn_pkt: a
// packet of no connection that a new flow may not start (TCP without SYN):
// handed over to the peers when there are any (a frame from a peer being
// re-injected: handover_not_held), else dropped (no_connection).
// from_peer6 (worker6.cc): a frame a peer handed over whose payload is an
// IPv6 packet (the version nibble; from_peer checked that it comes from a
// peer): ethertype restored, parsed, then take_peer_frame.
void no_conn_pkt(Worker& w, rte_mbuf* m, uint8_t tcp_flags) noexcept;
void from_peer6(Worker& w, rte_mbuf* m, bool own) noexcept;

// The end of from_peer for either family, its frame parsed as TCP with hop
// limit left and its own ethertype back: to the worker that owns its flow
// (`owner`), marked kEtherTypeHandover again (still from a peer there),
// unless `own`; there, when held() (a connection of it lives here, in the
// client's direction, its destination alive) counted as matched and queued
// for serve_peer_frames, else dropped (handover_not_held).
template <class HeldFn>
void take_peer_frame(Worker& w, rte_mbuf* m, bool own, uint32_t owner, HeldFn held) {
  if (!own && owner != w.index) {
    bytes::wr16(rte_pktmbuf_mtod(m, uint8_t*) + 12, kEtherTypeHandover);
    redirect_to(w, m, owner);
    return;
  }
  if (!held()) return drop_pkt(w, m, kHandoverNotHeld);
  if (w.n_peer_frames >= kPeerFramesMax) return drop_pkt(w, m, kRedirectRingFull);
  bump(w.counters.handover_matched);
  w.peer_frames[w.n_peer_frames++] = m;
}

// ---- Re-steering and outlier ejection (resteer.h, eject.h), either family ----
// worker.cc's Conn and worker6.cc's Conn6 take the same steps; what differs
// (the tables, the addresses, the frame) comes in as callables.

// One failed connection to the destination in `slot` of `svc`; may eject
// it, within the service's share.
void eject_fail(Worker& w, const Service& svc, uint32_t slot) noexcept;
// The scheduler picked an ejected destination (index idx of svc): the next
// pick in the scheduler's own order that is not ejected, leaving out the
// `tried` slots; the first pick when every one is.
[[gnu::noinline]] int32_t skip_ejected_after(Worker& w, const Service& svc, const SchedCtx& ctx, int32_t idx,
                                            const uint32_t* tried, uint32_t n_tried) noexcept;
[[gnu::noinline]] int32_t skip_ejected(Worker& w, const Service& svc, const SchedCtx& ctx, int32_t idx) noexcept;
// worker6.cc: a saved IPv6 SYN's deadline passed (resteer_timers).
void syn_timeout6(Worker& w, Conn6& c) noexcept;

// Moves a connection waiting for its SYN-ACK (SYN_RECV, c.syn) to the next
// destination of `svc` (nullptr: its Service is gone) that did not get its
// SYN yet, counting the failure of the one that had it (but for a client's
// retransmission): the destinations' counts, its persistence template (when
// `owns(template)`: still the connection's), the timer. `move(idx)` moves
// the entry's reply key to svc->dests[idx] (false: it cannot). False when
// none is left or the attempts are spent: the connection then goes on as
// without re-steering (its SYN memory freed).
template <class ConnT, class MoveFn, class OwnsFn>
bool resteer_next(Worker& w, ConnT& c, const Service* svc, const SchedCtx& ctx, ResteerReason why, MoveFn move,
                  OwnsFn owns) {
  SynMem& s = w.syn.at(c.syn);
  const Shared& sh = *w.sh;
  // The backend that refused or ignored the SYN: one failure (a client's
  // retransmission alone says nothing about the backend).
  if (svc && sh.eject.k && why != kResteerRetransmit) eject_fail(w, *svc, c.dest_slot);
  int32_t idx = -1;
  if (svc && s.n_tried < sh.resteer_attempts && s.n_tried < kResteerMax) {
    s.tried[s.n_tried++] = c.dest_slot;  // the backends tried: this one last
    idx = sched_next(*svc, w.sched[svc->id], ctx, s.tried, s.n_tried);
    // Outlier ejection: as for a new connection, an ejected pick gives way
    // to the next one in the scheduler's order that is not.
    if (idx >= 0 && sh.eject.k && sh.dest_slots[svc->dests[idx].slot].eject.ejected(w.now))
      idx = skip_ejected_after(w, *svc, ctx, idx, s.tried, s.n_tried);
  }
  if (idx >= 0 && !move(idx)) idx = -1;
  if (idx < 0) {
    bump(w.counters.resteer_gave_up);
    w.syn.release(c.syn);
    c.syn = 0;
    return false;
  }
  const DestRef& d = svc->dests[idx];
  --w.dest_counters[c.dest_slot].inactive;  // SYN_RECV: counted inactive
  DestCounters& dc = w.dest_counters[d.slot];
  ++dc.conns;
  ++dc.inactive;
  c.dest_slot = d.slot;
  c.dest_gen = d.gen;
  if (c.tmpl) {  // persistence follows the backend that answers
    Template* t = w.tmpls.at(c.tmpl - 1);
    if (t && t->in_use && owns(*t)) {
      t->dest_slot = d.slot;
      t->dest_gen = d.gen;
    }
  }
  if (sh.t_resteer) w.syn.arm(c.syn, w.now + sh.t_resteer);
  bump(w.counters.resteers[why]);
  return true;
}

// Sends a connection's saved SYN to its (new) destination `dest_slot`:
// `build(frame)` writes it and returns its length, `out(m)` routes it. `m`:
// a packet to reuse (the answer that re-steered, when it is one plain
// buffer of its own), or nullptr. Without an mbuf (the pool empty: timer
// only) nothing is sent: the next timer or the client's retransmission
// sends it.
template <class BuildFn, class OutFn>
void send_saved_syn_as(Worker& w, uint32_t dest_slot, rte_mbuf* m, BuildFn build, OutFn out) {
  if (m && m->nb_segs == 1 && RTE_MBUF_DIRECT(m) && rte_mbuf_refcnt_read(m) == 1) {
    rte_pktmbuf_reset(m);
  } else {
    if (m) rte_pktmbuf_free(m);
    m = rte_pktmbuf_alloc(w.pool);
    if (!m) return;
  }
  const size_t len = build(rte_pktmbuf_mtod(m, uint8_t*));
  m->data_len = static_cast<uint16_t>(len);
  m->pkt_len = static_cast<uint32_t>(len);
  DestCounters& dc = w.dest_counters[dest_slot];
  dc.inpkts++;
  dc.inbytes += len - kEthLen;
  out(m);
}

// A TCP packet of a connection waiting for its SYN-ACK (c.syn set; `l4`
// its TCP header, `flags` as parsed). From the backend: the SYN-ACK ends
// the wait (and readmits an ejected backend); an RST answering the SYN
// re-steers the connection (`resteer(why)`) and sends the SYN on
// (`send(m)`: the RST consumed, false). From the client: a retransmitted
// SYN re-steers, and goes itself to the new destination (true).
template <class ConnT, class ResteerFn, class SendFn>
bool syn_waiting_as(Worker& w, ConnT& c, rte_mbuf* m, const uint8_t* l4, uint8_t flags, bool from_client,
                    ResteerFn resteer, SendFn send) {
  if (c.state != ConnState::kSynRecv) return true;
  SynMem& s = w.syn.at(c.syn);
  if (from_client) {
    if ((flags & (kTcpSyn | kTcpAck | kTcpRst | kTcpFin)) == kTcpSyn && bytes::rd32(l4 + 4) == syn_isn(s))
      resteer(kResteerRetransmit);
    return true;
  }
  switch (syn_answer(s, flags, bytes::rd32(l4 + 8))) {
    case SynAnswer::kSynAck:
      if (w.sh->eject.k) eject_success(w.sh->dest_slots[c.dest_slot].eject, w.now);
      w.syn.release(c.syn);  // it got through
      c.syn = 0;
      return true;
    case SynAnswer::kRst:
      if (!resteer(kResteerRst)) return true;  // passed on, as without re-steering
      send(m);
      return false;
    default:
      return true;
  }
}

// worker6.cc: an IPv6 frame (parse_frame saw only its ethertype): NDP and
// echo for the ports' own addresses, and IPv6 VIP forwarding when Shared::v6
// is set. The parked IPv6 packets (next hop being resolved): sent, retried
// or dropped after the give-up time. The IPv6 expiry sweep (up to `budget`
// entries).
void handle_ipv6(Worker& w, rte_mbuf* m, bool from_ring) noexcept;
void service_pending6(Worker& w) noexcept;
void sweep_conns6(Worker& w, uint32_t budget) noexcept;

// The explain mailbox (serve_mailbox), for either family. What a connection
// entry (Conn or Conn6) tells, but its addresses: found, direction, whether
// its destination is alive, state, ports, time left.
template <typename C>
void explain_conn(const Worker& w, const C& c, bool reply, bool alive, ExplainAnswer& a) noexcept {
  a.conn_found = 1;
  a.conn_reply = reply;
  a.conn_alive = alive;
  a.state = static_cast<uint8_t>(c.state);
  a.conn_dest_port = c.dport;
  a.conn_local_port = c.lport;
  a.conn_expires_in_tsc = c.expires > w.now ? c.expires - w.now : 0;
}
// What a new connection from the client to `svc` would get (sched_pick on a
// copy of the scheduler's state, or the live persistence template under
// `tkey`): the service fields and next_idx / next_port; the caller writes
// the destination's address.
void explain_service(Worker& w, const Service& svc, const SchedCtx& ctx, const TemplateKey& tkey,
                     ExplainAnswer& a) noexcept;
// worker6.cc: an IPv6 query (q.v6).
void explain6(Worker& w, const ExplainQuery& q, ExplainAnswer& a) noexcept;

// PROXY protocol (proxy_proto.h), client -> backend after the NAT rewrite,
// for worker.cc's Parsed/Conn and worker6.cc's Parsed6/Conn6: the header in
// front of the first segment's payload, or the seq shifted. `ip_len`: the
// IP packet's length; `backend_mtu()`: the MTU of the port that reaches the
// backend (0 without a route), asked only when the header goes in. False
// when the packet was dropped (no room for the header).
template <class ParsedT, class ConnT, class MtuFn>
bool proxy_to_backend(Worker& w, rte_mbuf* m, const ParsedT& p, const ConnT& c, size_t ip_len, MtuFn backend_mtu) {
  ProxyConn& pc = w.proxy.at(c.proxy);
  uint8_t* f = rte_pktmbuf_mtod(m, uint8_t*);
  if (p.tcp_flags & kTcpSyn) return true;  // a retransmitted SYN: its seq is the ISN, not shifted
  const uint32_t seq = bytes::rd32(f + p.l4_off + 4);
  if (proxy_client_step(pc, seq, p.tcp_flags) == ProxyStep::kShift) {
    tcp_shift_seq(f, p, pc.hdr_len);
    return true;
  }
  const size_t n = pc.hdr_len;
  const size_t len = p.l3_off + ip_len + n;
  if (m->nb_segs != 1 || ip_len + n > size_t{backend_mtu()} ||
      len > size_t{rte_pktmbuf_data_len(m)} + rte_pktmbuf_tailroom(m)) {
    drop_pkt(w, m, kProxyHeaderNoRoom);
    return false;
  }
  uint8_t hdr[kProxyHdrMax > kProxyHdrMax6 ? kProxyHdrMax : kProxyHdrMax6];
  proxy_header(pc.version, c.caddr, c.cport, c.vaddr, c.vport, hdr);
  tcp_insert_payload(f, p, hdr, n);
  m->data_len = static_cast<uint16_t>(len);
  m->pkt_len = static_cast<uint32_t>(len);
  bump(pc.sent ? w.counters.proxy_header_retransmits : w.counters.proxy_headers);
  pc.sent = 1;
  return true;
}

}  // namespace vipd::dp
