// Thread: worker. The IPv6 per-packet path (docs/architecture.md "IPv6"):
// NDP and echo for the ports' own addresses, the IPv6 neighbour cache, and
// IPv6 VIP forwarding (NAT and full NAT, TCP and UDP) over the IPv6 tables
// of v6_tables.h. worker.cc hands every IPv6 frame here (one ethertype
// test); nothing here touches the IPv4 tables. No allocation, no locks, no
// exceptions, no logging.
#include <rte_hash.h>
#include <rte_mbuf.h>

#include <cstring>

#include "dataplane/fastpath/bytes.h"
#include "dataplane/fastpath/icmp_error.h"
#include "dataplane/fastpath/ipv6.h"
#include "dataplane/fastpath/packet_inline.h"
#include "dataplane/fastpath/tcp_state.h"
#include "dataplane/fastpath/worker.h"
#include "dataplane/fastpath/worker_internal.h"
#include "dataplane/sched/sched.h"

namespace vipd::dp {
namespace {

// A persistence template of an IPv6 flow lives in the worker's one template
// table, keyed by the addresses' fold6 digests; `pad` 6 keeps the keys apart
// from IPv4 ones.
constexpr uint8_t kTemplateKey6 = 6;

int local6_index(const Shared6& v6, const uint8_t a[16]) {
  for (uint32_t i = 0; i < v6.n_local_addrs; ++i)
    if (ip6_equal(v6.local_addrs[i], a)) return static_cast<int>(i);
  return -1;
}

bool is_port_ip6(const Shared& sh, const uint8_t a[16]) {
  for (uint16_t i = 0; i < sh.n_ports; ++i)
    if (sh.ports[i].has_ip6 && ip6_equal(sh.ports[i].ip6, a)) return true;
  return false;
}

bool is_vip6(const Shared6& v6, const uint8_t a[16]) {
  Addr6Key k;
  std::memcpy(k.a, a, 16);
  return rte_hash_lookup(v6.vip_addrs, &k) >= 0;
}

bool prefix_match(const uint8_t a[16], const uint8_t b[16], unsigned len) {
  const unsigned bytes = len / 8, bits = len % 8;
  if (std::memcmp(a, b, bytes) != 0) return false;
  if (!bits) return true;
  const uint8_t mask = static_cast<uint8_t>(0xff << (8 - bits));
  return (a[bytes] & mask) == (b[bytes] & mask);
}

// Egress port and next hop of `dst`, as route() for IPv4: the port whose
// on-link prefix holds it (next hop `dst` itself), else the first port with
// an IPv6 gateway (next hop the gateway; never for a link-local `dst`, which
// no router forwards); -1 when none (docs/architecture.md "IPv6").
[[gnu::always_inline]] inline int route6(const Shared& sh, const uint8_t dst[16], const uint8_t** nexthop) {
  const Shared6& v6 = *sh.v6;
  for (uint16_t i = 0; i < sh.n_ports; ++i)
    if (sh.ports[i].has_ip6 && prefix_match(dst, sh.ports[i].ip6, v6.port_prefix[i])) {
      *nexthop = dst;
      return i;
    }
  if (dst[0] == 0xfe && (dst[1] & 0xc0) == 0x80) return -1;
  for (uint16_t i = 0; i < sh.n_ports; ++i)
    if (v6.port_has_gw[i]) {
      *nexthop = v6.port_gw[i];
      return i;
    }
  return -1;
}

int route6(const Shared& sh, const uint8_t dst[16]) {
  const uint8_t* nh;
  return route6(sh, dst, &nh);
}

void send_ns(Worker& w, uint16_t pidx, const uint8_t target[16]) {
  rte_mbuf* m = rte_pktmbuf_alloc(w.pool);
  if (!m) return;
  const PortInfo& p = w.sh->ports[pidx];
  const size_t len = make_nd_solicit(rte_pktmbuf_mtod(m, uint8_t*), p.mac, p.ip6, target);
  m->data_len = static_cast<uint16_t>(len);
  m->pkt_len = static_cast<uint32_t>(len);
  bump(w.counters.arp_requests);  // address resolution requests, either family
  tx_queue(w, pidx, m);
}

// Routes an IPv6 packet to `dst` (route6): Ethernet addresses of the next
// hop from the neighbour cache and tx, or parked with a Neighbor
// Solicitation until the next hop answers (as output_via for IPv4).
void output6(Worker& w, rte_mbuf* m, const uint8_t dst[16]) {
  Shared& sh = *w.sh;
  Shared6& v6 = *sh.v6;
  const uint8_t* nh;
  const int pidx = route6(sh, dst, &nh);
  if (pidx < 0) return drop_pkt(w, m, kNoRoute);
  uint8_t mac[6];
  const Neigh6State st = v6.neigh.lookup(nh, mac, w.now);
  if (st == Neigh6State::kMissing) {
    Worker6& x = *w.v6;
    if (x.n_pending >= Worker6::kPendingMax) return drop_pkt(w, m, kNeighQueueFull);
    PendingPkt6& pp = x.pending[x.n_pending++];
    pp.m = m;
    std::memcpy(pp.nexthop, nh, 16);
    pp.port = static_cast<uint16_t>(pidx);
    pp.since = w.now;
    if (v6.neigh.claim_request(nh, w.now, sh.arp_retry)) send_ns(w, static_cast<uint16_t>(pidx), nh);
    return;
  }
  if (st == Neigh6State::kStale && v6.neigh.claim_request(nh, w.now, sh.arp_retry))
    send_ns(w, static_cast<uint16_t>(pidx), nh);
  uint8_t* f = rte_pktmbuf_mtod(m, uint8_t*);
  std::memcpy(f, mac, 6);
  std::memcpy(f + 6, sh.ports[pidx].mac, 6);
  tx_queue(w, static_cast<uint16_t>(pidx), m);
}

// ICMPv6 to a port's IPv6 address: echo requests answered, the rest (and
// any with a bad checksum) dropped.
void ipv6_local_icmp(Worker& w, rte_mbuf* m, uint8_t* f, const Parsed6& p) {
  if (!l4_checksum6_ok(p.src, p.dst, kProtoIcmp6, f + p.l4_off, p.l4_len)) return drop_pkt(w, m, kIcmp6BadChecksum);
  size_t len = 0;
  if (!make_icmp6_echo_reply(f, p, &len)) return drop_pkt(w, m, kLocalUnhandled);
  reply_on_rx_port(w, m, len);
}

// Neighbor Discovery. A valid NS for one of our addresses (the port's; with
// forwarding also the IPv6 VIPs and full-NAT local addresses) gets our NA,
// and its source link-layer address is learned (we will talk back); a valid
// NA teaches the target's address if the cache has an entry for it (we
// asked), as does another NS's source option. The rest: ndp_ignored.
void handle_nd(Worker& w, rte_mbuf* m, uint8_t* f, const Parsed6& p, uint16_t pidx) {
  const Shared& sh = *w.sh;
  const PortInfo& port = sh.ports[pidx];
  NdInfo nd;
  const DropReason r = parse_nd(f, p, &nd);
  if (r != kNumDropReasons) return drop_pkt(w, m, r);
  // A multicast source is never valid (RFC 4291 2.7): nothing to answer to.
  if (ip6_is_multicast(p.src)) return drop_pkt(w, m, kNdpInvalid);
  Shared6* v6 = sh.v6;
  if (nd.type == kNdNeighborAdvert) {
    if (v6 && nd.has_lladdr && v6->neigh.refresh(nd.target, nd.lladdr, w.now)) {
      bump(w.counters.nd_learned);
      rte_pktmbuf_free(m);  // consumed by the learning
      return;
    }
    return drop_pkt(w, m, kNdpIgnored);
  }
  uint8_t group[16];
  ip6_solicited_node(nd.target, group);
  const bool ours = (port.has_ip6 && ip6_equal(nd.target, port.ip6)) ||
                    (v6 && (local6_index(*v6, nd.target) >= 0 || is_vip6(*v6, nd.target)));
  // To the target's solicited-node group, or unicast to the target itself.
  const bool to_target = ip6_equal(p.dst, group) || ip6_equal(p.dst, nd.target);
  if (v6 && nd.has_lladdr && !ip6_is_unspecified(p.src)) {
    if (ours && to_target) v6->neigh.update(p.src, nd.lladdr, w.now);
    else v6->neigh.refresh(p.src, nd.lladdr, w.now);
  }
  if (!ours || !to_target) return drop_pkt(w, m, kNdpIgnored);
  if (rte_pktmbuf_tailroom(m) + rte_pktmbuf_data_len(m) < kEthLen + kIp6Len + 32) return drop_pkt(w, m, kTruncated);
  const size_t len = make_nd_advert(f, p, nd, port.mac, nd.target);
  m->data_len = static_cast<uint16_t>(len);
  m->pkt_len = static_cast<uint32_t>(len);
  tx_queue(w, pidx, m);
}

// ---- IPv6 forwarding ----

inline const Service* vip6_service(const Shared6& v6, const uint8_t dst[16], uint16_t port, uint8_t proto) {
  VipKey6 k{};
  std::memcpy(k.vip, dst, 16);
  k.port = port;
  k.proto = proto;
  void* data = nullptr;
  if (rte_hash_lookup_data(v6.vip_table, &k, &data) < 0) return nullptr;
  return static_cast<const Service*>(data);
}

inline bool dest6_alive(const Worker& w, const Conn6& c) { return dest_gen(w, c.dest_slot) == c.dest_gen; }

void set_state6(Worker& w, Conn6& c, ConnState s) {
  if (c.state == s) return;
  DestCounters& dc = w.dest_counters[c.dest_slot];
  const bool was = c.state == ConnState::kEstablished, is = s == ConnState::kEstablished;
  if (was != is) {
    dc.active += is ? 1 : -1;
    dc.inactive += is ? -1 : 1;
  }
  c.state = s;
}

// ---- Re-steering (resteer.h), as worker.cc's for IPv4 ----

TemplateKey tkey6(const uint8_t client[16], const uint8_t vip[16], uint16_t port, uint8_t proto);

// Moves a connection waiting for its SYN-ACK to the next destination
// (resteer_next, worker_internal.h).
bool resteer_conn6(Worker& w, Conn6& c, ResteerReason why) {
  const Service* svc = vip6_service(*w.sh->v6, c.vaddr, c.vport, c.proto);
  const TemplateKey k = tkey6(c.caddr, c.vaddr, c.vport, c.proto);
  return resteer_next(
      w, c, svc, SchedCtx{w.dest_counters, fold6(c.caddr), fold6(c.vaddr)}, why,
      [&](int32_t idx) {
        return w.v6->conns.move_reply(&c, service6_ext(*svc).dest_ip[idx], svc->dests[idx].port);
      },
      [&](const Template& t) {
        return t.key.client == k.client && t.key.vip == k.vip && t.key.port == k.port && t.key.pad == k.pad;
      });
}

// Sends the saved SYN to the connection's (new) destination (send_saved_syn_as).
void send_saved_syn6(Worker& w, Conn6& c, rte_mbuf* m) {
  send_saved_syn_as(
      w, c.dest_slot, m,
      [&](uint8_t* f) {
        const SynMem& s = w.syn.at(c.syn);
        return syn_build6(f, s, s.ext_len ? w.syn.ext(c.syn) : nullptr, c.laddr, c.lport, c.daddr, c.dport);
      },
      [&](rte_mbuf* s) { output6(w, s, c.daddr); });
}

// A TCP packet of a connection waiting for its SYN-ACK (syn_waiting_as;
// out of line: the established path stays as without it). False: consumed.
[[gnu::noinline]] bool syn_waiting6(Worker& w, Conn6& c, rte_mbuf* m, const Parsed6& p, bool from_client) {
  return syn_waiting_as(
      w, c, m, rte_pktmbuf_mtod(m, const uint8_t*) + p.l4_off, p.tcp_flags, from_client,
      [&](ResteerReason why) { return resteer_conn6(w, c, why); }, [&](rte_mbuf* s) { send_saved_syn6(w, c, s); });
}

// Keeps a new connection's SYN (as it goes out: rewritten, hop limit one
// less, its extension headers as forwarded) and starts its timer; the pool
// empty, or extension headers longer than kSynExtMax (or no extension area):
// counted (resteer_pool_full), and the connection goes without re-steering.
// Inline at the end of new_flow6, as syn_open for IPv4 (little is live
// there).
[[gnu::always_inline]] inline void syn_open6(Worker& w, const rte_mbuf* m, const Parsed6& p, Conn6& c) {
  const size_t ext_len = size_t{p.l4_off} - p.l3_off - kIp6Len;  // parse_ipv6: whole 8-byte units
  if (ext_len && (ext_len > kSynExtMax || !w.syn.has_ext6())) [[unlikely]]
    return bump(w.counters.resteer_pool_full);
  uint32_t h;
  SynMem* s = w.syn.alloc_armed(w.now, w.sh->t_resteer, &h, 1);
  if (!s) return bump(w.counters.resteer_pool_full);
  c.syn = h;
  s->conn6 = &c;
  const uint8_t* f = rte_pktmbuf_mtod(m, const uint8_t*);
  syn_save<0>(*s, f, size_t{m->buf_len} - m->data_off, p);
  s->ext_len = static_cast<uint8_t>(ext_len);
  if (ext_len) [[unlikely]] std::memcpy(w.syn.ext(h), f + p.l3_off + kIp6Len, ext_len);
}

// Follows the connection's state with a packet of it. False when the packet
// was consumed (an answer to the SYN that re-steered the connection).
[[gnu::always_inline]] inline bool track6(Worker& w, Conn6& c, rte_mbuf* m, const Parsed6& p, bool from_client) {
  const uint8_t flags = p.tcp_flags;
  if (c.state == ConnState::kEstablished && !(flags & (kTcpFin | kTcpRst))) {
    c.expires = w.now + w.sh->t_est;
    return true;
  }
  if (c.syn && !syn_waiting6(w, c, m, p, from_client)) return false;
  if (c.proto == kProtoTcp) set_state6(w, c, tcp_next_state(c.state, flags, from_client));
  c.expires = w.now + conn_timeout(*w.sh, c.state);
  if (c.syn && c.state != ConnState::kSynRecv) {  // closed before its SYN-ACK
    w.syn.release(c.syn);
    c.syn = 0;
  }
  return true;
}

void release6(Worker& w, Conn6& c) {
  w.proxy.release(c.proxy);
  c.proxy = 0;
  w.syn.release(c.syn);
  c.syn = 0;
  DestCounters& dc = w.dest_counters[c.dest_slot];
  if (c.state == ConnState::kEstablished) --dc.active; else --dc.inactive;
  if (w.sh->forward == Forward::kFnat) {
    FnatPool6& fp = w.v6->fnat[c.laddr_idx];
    fp.ports[fp.top++] = c.lport;
  }
  w.counters.active_flows.store(w.counters.active_flows.load(std::memory_order_relaxed) - 1,
                                std::memory_order_relaxed);
}

void expire6(Worker& w, Conn6* c) {
  release6(w, *c);
  w.v6->conns.remove(c);
}

TemplateKey tkey6(const uint8_t client[16], const uint8_t vip[16], uint16_t port, uint8_t proto) {
  return TemplateKey{fold6(vip), fold6(client), port, proto, kTemplateKey6};
}

// REJECT for a VIP without endpoints: ICMPv6 destination unreachable, port
// unreachable (as ip6tables' REJECT icmp6-port-unreachable), from the VIP,
// for TCP and UDP alike.
void send_unreach6(Worker& w, rte_mbuf* m, const Parsed6& p) {
  const size_t old_l3 = rte_pktmbuf_data_len(m) - kEthLen;
  uint8_t* f = reinterpret_cast<uint8_t*>(rte_pktmbuf_prepend(m, kIcmp6ErrorRoom));
  if (!f) return drop_pkt(w, m, kTruncated);
  uint8_t from[16];
  std::memcpy(from, p.dst, 16);
  const size_t len = make_icmp6_error(f, p, old_l3, from, kIcmp6DestUnreach, 4, 0);
  bump(w.counters.icmp_unreach_sent);
  reply_on_rx_port(w, m, len);
}

// A mid-flow TCP segment whose destination was removed: the RST the
// receiver would send, from the VIP.
void send_rst6(Worker& w, rte_mbuf* m, const Parsed6& p) {
  const size_t len = make_tcp_rst6_reply(rte_pktmbuf_mtod(m, uint8_t*), p);
  bump(w.counters.rst_sent);
  reply_on_rx_port(w, m, len);
}

// PROXY protocol, client -> backend (worker_internal.h), IPv6.
bool proxy_to_backend6(Worker& w, rte_mbuf* m, const Parsed6& p, const Conn6& c) {
  return proxy_to_backend(w, m, p, c, kIp6Len + size_t{p.payload_len}, [&w, &c] {
    const int pidx = route6(*w.sh, c.daddr);
    return pidx >= 0 ? w.sh->ports[pidx].mtu : uint16_t{0};
  });
}

void new_flow6(Worker& w, rte_mbuf* m, const Parsed6& p, const Service& svc) {
  Shared& sh = *w.sh;
  Worker6& x = *w.v6;
  const Service6Ext& ext = service6_ext(svc);
  const bool syn = p.proto != kProtoTcp || (p.tcp_flags & (kTcpSyn | kTcpAck | kTcpRst | kTcpFin)) == kTcpSyn;
  // Mid-flow without an entry: mh picks it up, unless hand-over peers (full
  // NAT) may hold it (no_conn_pkt), as for IPv4.
  if (!syn && (svc.sched != Sched::kMh || (p.tcp_flags & (kTcpRst | kTcpSyn)) || sh.n_handover_peers))
    return no_conn_pkt(w, m, p.tcp_flags);
  if (ext.n_ranges && !source_allowed6(ext, p.src)) return drop_pkt(w, m, kSourceNotAllowed);
  int32_t idx = -1;
  Template* tmpl = nullptr;
  const TemplateKey tkey = tkey6(p.src, p.dst, p.dport, p.proto);
  if (svc.persistence_s && svc.n_dests) {
    tmpl = w.tmpls.lookup(tkey);
    if (tmpl) {
      idx = template_dest(w, svc, *tmpl);
      if (idx < 0) {
        w.tmpls.remove(tmpl);
        tmpl = nullptr;
      }
    }
  }
  const SchedCtx ctx{w.dest_counters, fold6(p.src), fold6(p.dst)};
  if (idx < 0) idx = svc.n_weighted ? sched_pick(svc, w.sched[svc.id], ctx) : -1;
  // Outlier ejection (eject.h): an ejected pick gives way, as for IPv4.
  if (idx >= 0 && sh.eject.k && sh.dest_slots[svc.dests[idx].slot].eject.ejected(w.now))
    idx = skip_ejected(w, svc, ctx, idx);
  if (idx < 0) {
    if (svc.drop_when_empty) return drop_pkt(w, m, kNoEndpointsDrop);
    if (!syn) return drop_pkt(w, m, kNoConn);
    return send_unreach6(w, m, p);
  }
  const DestRef& d = svc.dests[idx];
  const uint8_t* dip = ext.dest_ip[idx];
  // PROXY protocol: full NAT, TCP, from the SYN on (as new_flow for IPv4).
  uint32_t proxy = 0;
  if (svc.proxy_protocol != cp::ProxyProtocol::kNone && sh.forward == Forward::kFnat && p.proto == kProtoTcp &&
      syn) [[unlikely]] {
    proxy = w.proxy.alloc();
    if (!proxy) return drop_pkt(w, m, kProxyPoolFull);  // the client retries its SYN
    ProxyConn& pc = w.proxy.at(proxy);
    uint8_t hdr[kProxyHdrMax6];
    pc.client_isn = bytes::rd32(rte_pktmbuf_mtod(m, const uint8_t*) + p.l4_off + 4);
    pc.version = svc.proxy_protocol;
    pc.hdr_len = static_cast<uint8_t>(proxy_header(svc.proxy_protocol, p.src, p.sport, p.dst, p.dport, hdr));
  }
  const uint8_t* laddr = p.src;
  uint16_t lport = p.sport;
  uint8_t lidx = 0;
  if (sh.forward == Forward::kFnat) {
    const Shared6& v6 = *sh.v6;
    bool got = false;
    for (uint32_t k = 0; k < v6.n_local_addrs && !got; ++k) {
      const uint32_t i = (x.fnat_cursor + k) % v6.n_local_addrs;
      FnatPool6& fp = x.fnat[i];
      if (fp.top) {
        lport = fp.ports[--fp.top];
        laddr = v6.local_addrs[i];
        lidx = static_cast<uint8_t>(i);
        x.fnat_cursor = i + 1;
        got = true;
      }
    }
    if (!got) {
      w.proxy.release(proxy);
      return drop_pkt(w, m, kFnatPortsExhausted);
    }
  }
  Conn6* c = x.conns.insert(make_key6(p.src, p.sport, p.dst, p.dport, p.proto),
                            make_key6(dip, d.port, laddr, lport, p.proto));
  if (!c) {
    if (sh.forward == Forward::kFnat) x.fnat[lidx].ports[x.fnat[lidx].top++] = lport;
    w.proxy.release(proxy);
    return drop_pkt(w, m, x.conns.last_insert_full() ? kConnTableFull : kConnKeyInUse);
  }
  c->laddr_idx = lidx;
  c->proxy = proxy;
  c->dest_slot = d.slot;
  c->dest_gen = d.gen;
  c->state = p.proto != kProtoTcp ? ConnState::kUdp
             : syn              ? ConnState::kSynRecv
                                : tcp_next_state(ConnState::kNone, p.tcp_flags, true);
  c->expires = w.now + conn_timeout(sh, c->state);
  count_new_conn(w, *c, svc, d, tmpl, tkey, kIp6Len + p.payload_len);
  rewrite6_l3l4(rte_pktmbuf_mtod(m, uint8_t*), p, c->laddr, c->lport, c->daddr, c->dport);
  // Re-steering: the SYN is kept until the backend answers it.
  if (sh.resteer_attempts && syn && p.proto == kProtoTcp && svc.n_weighted > 1) syn_open6(w, m, p, *c);
  output6(w, m, c->daddr);
}

// A client -> IPv6 VIP packet of `svc`.
void from_client6(Worker& w, rte_mbuf* m, const Parsed6& p, const Service& svc) {
  Worker6& x = *w.v6;
  bool reply = false;
  Conn6* c = x.conns.lookup(make_key6(p.src, p.sport, p.dst, p.dport, p.proto), &reply);
  const bool syn = p.proto == kProtoTcp && (p.tcp_flags & (kTcpSyn | kTcpAck)) == kTcpSyn;
  if (c && reply) return drop_pkt(w, m, kConnKeyInUse);
  if (c && dest6_alive(w, *c) && !(syn && tcp_state_closing(c->state))) {
    track6(w, *c, m, p, true);  // a client packet is never consumed
    if (c->tmpl && svc.persistence_s) {
      Template* t = w.tmpls.at(c->tmpl - 1);
      const TemplateKey k = tkey6(c->caddr, c->vaddr, c->vport, c->proto);
      if (t && t->in_use && t->key.client == k.client && t->key.vip == k.vip && t->key.port == k.port &&
          t->key.pad == kTemplateKey6)
        t->expires = w.now + uint64_t{svc.persistence_s} * w.sh->tsc_hz;
    }
    DestCounters& dc = w.dest_counters[c->dest_slot];
    dc.inpkts++;
    dc.inbytes += kIp6Len + p.payload_len;
    rewrite6_l3l4(rte_pktmbuf_mtod(m, uint8_t*), p, c->laddr, c->lport, c->daddr, c->dport);
    if (c->proxy) [[unlikely]] {
      if (!proxy_to_backend6(w, m, p, *c)) return;
    }
    output6(w, m, c->daddr);
    return;
  }
  if (c) {
    // The destination is gone (or a new SYN reuses a closing entry's port):
    // the entry goes; mid-flow TCP gets a RST so the client retries at once
    // (as for IPv4; an RST itself is dropped), a SYN or UDP is scheduled
    // afresh.
    const bool alive = dest6_alive(w, *c);
    expire6(w, c);
    if (!alive && p.proto == kProtoTcp && !syn) {
      if (p.tcp_flags & kTcpRst) return drop_pkt(w, m, kDestExpired);
      return send_rst6(w, m, p);
    }
  }
  new_flow6(w, m, p, svc);
}

// A destination -> client packet (the reply direction of a connection).
void from_dest6(Worker& w, rte_mbuf* m, const Parsed6& p) {
  Worker6& x = *w.v6;
  bool reply = false;
  Conn6* c = x.conns.lookup(make_key6(p.src, p.sport, p.dst, p.dport, p.proto), &reply);
  // No connection: an IPv6 packet for no VIP and no flow of vipd's.
  if (!c || !reply) return drop_pkt(w, m, kIpv6NoService);
  if (p.hop_limit <= 1) return drop_pkt(w, m, kTtlExceeded);
  if (!dest6_alive(w, *c)) {
    expire6(w, c);
    return drop_pkt(w, m, kDestExpired);
  }
  if (!track6(w, *c, m, p, false)) return;
  DestCounters& dc = w.dest_counters[c->dest_slot];
  dc.outpkts++;
  dc.outbytes += kIp6Len + p.payload_len;
  rewrite6_l3l4(rte_pktmbuf_mtod(m, uint8_t*), p, c->vaddr, c->vport, c->caddr, c->cport);
  if (c->proxy) [[unlikely]] proxy_from_backend(rte_pktmbuf_mtod(m, uint8_t*), p, w.proxy.at(c->proxy));
  output6(w, m, c->caddr);
}

// TCP or UDP over IPv6 with forwarding on: to a VIP (client side), to a
// full-NAT local address (reply), or (NAT mode) to anywhere else but our own
// addresses (a reply routed through vipd). Each goes to the worker that owns
// the flow first, as for IPv4.
void forward6(Worker& w, rte_mbuf* m, const Parsed6& p, bool from_ring) {
  Shared& sh = *w.sh;
  const Shared6& v6 = *sh.v6;
  if (const Service* svc = vip6_service(v6, p.dst, p.dport, p.proto)) {
    if (p.hop_limit <= 1) return drop_pkt(w, m, kTtlExceeded);
    if (!from_ring && redirect_to(w, m, flow_owner(fold6(p.src), p.sport, sh.n_workers))) return;
    return from_client6(w, m, p, *svc);
  }
  if (sh.forward == Forward::kFnat) {
    if (local6_index(v6, p.dst) >= 0) {
      if (p.hop_limit <= 1) return drop_pkt(w, m, kTtlExceeded);
      if (!from_ring && redirect_to(w, m, p.dport % sh.n_workers)) return;
      return from_dest6(w, m, p);
    }
  } else if (!is_port_ip6(sh, p.dst) && !is_vip6(v6, p.dst)) {
    // A reply routed through vipd, if a connection has it (the hop limit is
    // checked there: anything else counts as ipv6_no_service).
    if (!from_ring && redirect_to(w, m, flow_owner(fold6(p.dst), p.dport, sh.n_workers))) return;
    return from_dest6(w, m, p);
  }
  if (is_vip6(v6, p.dst)) return drop_pkt(w, m, kVipNoPort);
  if (sh.exc_to_kernel && is_port_ip6(sh, p.dst)) return local_to_kernel(w, m, kLocalUnhandled);
  if (is_port_ip6(sh, p.dst)) return drop_pkt(w, m, kLocalUnhandled);
  drop_pkt(w, m, kIpv6NoService);
}

// ---- ICMPv6 errors about a NATed flow (docs/reliability.md "ICMP error
// translation") ----

inline bool is_icmp6_error_type(uint8_t type) {
  return type == kIcmp6DestUnreach || type == kIcmp6PacketTooBig || type == kIcmp6TimeExceeded ||
         type == kIcmp6ParamProblem;
}

// What an ICMPv6 error quotes: the packet vipd sent (its IPv6 header at
// ip_off, its TCP/UDP header at l4_off, l4_quoted bytes of it in the quote).
struct Quote6 {
  bool to_client;  // quotes a packet sent to a destination: goes back to the client
  uint8_t proto;
  uint16_t ip_off, l4_off, l4_quoted;
  uint16_t sport, dport;
  const uint8_t* src;
  const uint8_t* dst;
};

// Which side an error to p.dst comes from, and the quoted packet's tuple.
// local_unhandled when `p` is to a port address (handled as before, not
// about a flow); kIcmpOk when the quote parses.
DropReason parse_quote6(const Shared& sh, const uint8_t* f, const Parsed6& p, Quote6* q) {
  const Shared6& v6 = *sh.v6;
  if (is_port_ip6(sh, p.dst)) return kLocalUnhandled;
  if (is_vip6(v6, p.dst)) {
    q->to_client = false;  // quotes a reply vipd sent from the VIP
  } else if (sh.forward == Forward::kNat || local6_index(v6, p.dst) >= 0) {
    q->to_client = true;   // quotes a packet vipd sent to a destination
  } else {
    return kIpv6NoService;
  }
  // ICMPv6 header (8) + quoted IPv6 header (40) + 8 bytes of TCP/UDP.
  if (p.l4_len < 8 + kIp6Len + 8) return kBadL4Header;
  const uint8_t* ip = f + p.l4_off + 8;
  if ((ip[0] >> 4) != 6) return kBadL4Header;
  // The quoted extension chain, if the packet had one (vipd forwards a
  // client's extension headers as they came): bounded like parse_ipv6's.
  uint8_t next = ip[6];
  size_t off = kIp6Len;                      // from the quoted IPv6 header
  const size_t quoted = p.l4_len - 8u;       // bytes of the quote
  for (unsigned i = 0; next != kProtoTcp && next != kProtoUdp; ++i) {
    if (i >= kMaxExtHeaders || off + 8 > quoted) return kIcmpErrorNoConn;
    const uint8_t* h = ip + off;
    if (next == kIp6Fragment) {
      if (bytes::rd16(h + 2) & 0xfff8) return kIcmpErrorNoConn;  // a later fragment: no ports
      off += 8;
    } else if (next == kIp6HopByHop || next == kIp6Routing || next == kIp6DestOpts) {
      off += (size_t{h[1]} + 1) * 8;
    } else {
      return kIcmpErrorNoConn;  // not TCP or UDP: no flow of vipd's
    }
    next = h[0];
  }
  if (off + 8 > quoted) return kBadL4Header;
  q->proto = next;
  q->ip_off = static_cast<uint16_t>(p.l4_off + 8);
  q->l4_off = static_cast<uint16_t>(q->ip_off + off);
  q->l4_quoted = static_cast<uint16_t>(quoted - off);
  q->src = ip + 8;
  q->dst = ip + 24;
  // An error goes to the source of the packet it quotes.
  if (!ip6_equal(q->src, p.dst)) return kIcmpErrorNoConn;
  q->sport = bytes::rd16(ip + off);
  q->dport = bytes::rd16(ip + off + 2);
  return kIcmpOk;
}

// An ICMPv6 destination unreachable (any code) from the destination side
// quoting the SYN of a connection waiting for its SYN-ACK (its 5-tuple as
// vipd sent it, seq = the ISN; the ICMPv6 checksum valid): re-steered, the
// error consumed (true). Anything else: false, translated as usual.
bool icmp_resteer6(Worker& w, rte_mbuf* m, const uint8_t* f, const Parsed6& p, const Quote6& q) {
  if (!w.sh->resteer_attempts || !q.to_client || q.proto != kProtoTcp || q.l4_quoted < 8) return false;
  if ((p.dport >> 8) != kIcmp6DestUnreach) return false;
  bool reply = false;
  Conn6* c = w.v6->conns.lookup(make_key6(q.dst, q.dport, q.src, q.sport, q.proto), &reply);
  if (!c || !reply || !c->syn || c->state != ConnState::kSynRecv) return false;
  if (bytes::rd32(f + q.l4_off + 4) != syn_isn(w.syn.at(c->syn))) return false;
  if (!l4_checksum6_ok(p.src, p.dst, kProtoIcmp6, f + p.l4_off, p.l4_len)) return false;
  if (!resteer_conn6(w, *c, kResteerIcmp)) return false;
  send_saved_syn6(w, *c, m);
  return true;
}

// The worker that owns the quoted flow (the one its packets go to).
uint32_t quote6_owner(const Shared& sh, const Quote6& q) {
  if (!q.to_client) return flow_owner(fold6(q.dst), q.dport, sh.n_workers);  // the client: v -> c
  if (sh.forward == Forward::kFnat) return q.sport % sh.n_workers;          // the local port: l -> d
  return flow_owner(fold6(q.src), q.sport, sh.n_workers);                   // nat: c -> d
}

// Translates the error in place like its flow: the quoted packet back to
// what the other side sent or received (addresses, ports, its L4 checksum
// incrementally), the outer addresses, hop limit - 1, the ICMPv6 checksum
// over the new pseudo header. The length does not change (the quote stays
// as received). The MTU of a packet too big passes unchanged. kIcmpOk with
// the new destination in *to.
DropReason translate6(Worker& w, uint8_t* f, const Parsed6& p, const Quote6& q, int rx_pidx,
                      const uint8_t** to) {
  const Shared& sh = *w.sh;
  if (p.hop_limit <= 1) return kTtlExceeded;
  uint8_t* icmp = f + p.l4_off;
  if (!l4_checksum6_ok(p.src, p.dst, kProtoIcmp6, icmp, p.l4_len)) return kIcmp6BadChecksum;
  // The quote went out as q.src -> q.dst; the table knows the flow by the
  // packets coming in: the reverse of the quote.
  bool reply = false;
  const Conn6* c = w.v6->conns.lookup(make_key6(q.dst, q.dport, q.src, q.sport, q.proto), &reply);
  if (!c || reply != q.to_client) return kIcmpErrorNoConn;
  // From the side the quoted packet went to.
  if (route6(sh, q.to_client ? c->daddr : c->caddr) != rx_pidx) return kIcmpErrorNoConn;
  if (!dest6_alive(w, *c)) return kDestExpired;
  const IcmpRewrite<const uint8_t*> r = icmp_rewrite(*c, q.to_client, sh.forward == Forward::kFnat, p.src);
  uint8_t* iip = f + q.ip_off;
  uint8_t* il4 = f + q.l4_off;
  uint64_t delta = csum_delta16(iip + 8, r.isrc) + csum_delta16(iip + 24, r.idst);
  std::memcpy(iip + 8, r.isrc, 16);
  std::memcpy(iip + 24, r.idst, 16);
  const uint32_t old_ports = bytes::raw32(il4);
  bytes::wr16(il4, r.isport);
  bytes::wr16(il4 + 2, r.idport);
  delta += uint64_t{~old_ports} + bytes::raw32(il4);
  // PROXY protocol: a quoted client segment carries the seq shifted by the
  // header; the client gets its own back (as translate_icmp_error for IPv4).
  if (q.to_client && c->proxy && q.proto == kProtoTcp && q.l4_quoted >= 8) [[unlikely]] {
    const uint32_t old_seq = bytes::raw32(il4 + 4);
    bytes::wr32(il4 + 4, proxy_seq_to_client(w.proxy.at(c->proxy), bytes::rd32(il4 + 4)));
    delta += uint64_t{~old_seq} + bytes::raw32(il4 + 4);
  }
  // The quoted L4 checksum, where the quote holds it.
  const size_t coff = q.proto == kProtoTcp ? 16 : 6;
  if (q.l4_quoted >= coff + 2) {
    const uint16_t check = bytes::raw16(il4 + coff);
    if (q.proto == kProtoTcp || check != 0) {
      uint16_t c2 = packet_detail::csum_apply64(check, delta);
      if (q.proto == kProtoUdp && c2 == 0) c2 = 0xffff;
      bytes::put_raw16(il4 + coff, c2);
    }
  }
  uint8_t* ip = f + p.l3_off;
  uint8_t src[16], dst[16];  // r.osrc may be p.src (in the frame)
  std::memcpy(src, r.osrc, 16);
  std::memcpy(dst, r.odst, 16);
  std::memcpy(ip + 8, src, 16);
  std::memcpy(ip + 24, dst, 16);
  ip[7] = static_cast<uint8_t>(ip[7] - 1);
  bytes::put_raw16(icmp + 2, l4_checksum6(src, dst, kProtoIcmp6, icmp, p.l4_len, 2));
  *to = r.odst;
  return kIcmpOk;
}

// An ICMPv6 error (types 1-4) with IPv6 forwarding on. False: not about a
// flow of vipd's (to a port address): the caller goes on as before.
bool icmp6_error(Worker& w, rte_mbuf* m, uint8_t* f, const Parsed6& p, int pidx, bool from_ring) {
  const Shared& sh = *w.sh;
  Quote6 q;
  DropReason r = parse_quote6(sh, f, p, &q);
  if (r == kLocalUnhandled) return false;
  if (r == kIcmpOk && !from_ring && redirect_to(w, m, quote6_owner(sh, q))) return true;
  if (r == kIcmpOk && icmp_resteer6(w, m, f, p, q)) return true;
  const uint8_t* to = nullptr;
  if (r == kIcmpOk) r = translate6(w, f, p, q, pidx, &to);
  if (r != kIcmpOk) {
    drop_pkt(w, m, r);
    return true;
  }
  output6(w, m, to);
  return true;
}

}  // namespace

// worker_internal.h
void handle_ipv6(Worker& w, rte_mbuf* m, bool from_ring) noexcept {
  uint8_t* f = rte_pktmbuf_mtod(m, uint8_t*);
  Parsed6 p;
  if (!parse_ipv6(f, rte_pktmbuf_data_len(m), &p)) return drop_pkt(w, m, p.drop);
  const int pidx = port_of(*w.sh, m->port);
  if (pidx < 0) return drop_pkt(w, m, kNotForUs);
  const PortInfo& port = w.sh->ports[pidx];
  if (p.proto == kProtoIcmp6) {
    const uint8_t type = static_cast<uint8_t>(p.dport >> 8);
    if (type >= kNdRouterSolicit && type <= kNdRedirect) {
      if (type == kNdNeighborSolicit || type == kNdNeighborAdvert) return handle_nd(w, m, f, p, static_cast<uint16_t>(pidx));
      return drop_pkt(w, m, kNdpIgnored);  // RS, RA, redirect: vipd is no router nor host stack
    }
  }
  if (f[0] & 1) return drop_pkt(w, m, kNotForUs);  // other IPv6 to a group MAC
  if (w.sh->v6 && w.v6 && (p.proto == kProtoTcp || p.proto == kProtoUdp)) return forward6(w, m, p, from_ring);
  if (w.sh->v6 && w.v6 && p.proto == kProtoIcmp6 && is_icmp6_error_type(static_cast<uint8_t>(p.dport >> 8)) &&
      icmp6_error(w, m, f, p, pidx, from_ring))
    return;
  if (port.has_ip6 && ip6_equal(p.dst, port.ip6)) {
    if (p.proto == kProtoIcmp6) return ipv6_local_icmp(w, m, f, p);
    return drop_pkt(w, m, kLocalUnhandled);
  }
  if (w.sh->v6 && p.proto == kProtoIcmp6 && (is_vip6(*w.sh->v6, p.dst) || local6_index(*w.sh->v6, p.dst) >= 0))
    return ipv6_local_icmp(w, m, f, p);  // ping a VIP or local address, as for IPv4
  drop_pkt(w, m, kIpv6NoService);
}

// worker_internal.h: an IPv6 frame a peer gateway handed over (hand-over,
// worker.cc from_peer). Held when a connection of it lives here in the
// client's direction (it goes on through from_client6 after the burst).
void from_peer6(Worker& w, rte_mbuf* m, bool own) noexcept {
  uint8_t* f = rte_pktmbuf_mtod(m, uint8_t*);
  bytes::wr16(f + 12, kEtherTypeIpv6Frame);
  Parsed6 p;
  if (!parse_ipv6(f, rte_pktmbuf_data_len(m), &p)) return drop_pkt(w, m, p.drop);
  if (!w.sh->v6 || !w.v6 || p.proto != kProtoTcp) return drop_pkt(w, m, kHandoverNotHeld);
  if (p.hop_limit <= 1) return drop_pkt(w, m, kTtlExceeded);
  take_peer_frame(w, m, own, flow_owner(fold6(p.src), p.sport, w.sh->n_workers), [&w, &p] {
    bool reply = false;
    const Conn6* c = w.v6->conns.lookup(make_key6(p.src, p.sport, p.dst, p.dport, p.proto), &reply);
    return c && !reply && dest6_alive(w, *c);
  });
}

void service_pending6(Worker& w) noexcept {
  Shared& sh = *w.sh;
  Worker6& x = *w.v6;
  uint32_t keep = 0;
  for (uint32_t i = 0; i < x.n_pending; ++i) {
    PendingPkt6 pp = x.pending[i];
    uint8_t mac[6];
    if (sh.v6->neigh.lookup(pp.nexthop, mac, w.now) != Neigh6State::kMissing) {
      uint8_t* f = rte_pktmbuf_mtod(pp.m, uint8_t*);
      std::memcpy(f, mac, 6);
      std::memcpy(f + 6, sh.ports[pp.port].mac, 6);
      tx_queue(w, pp.port, pp.m);
    } else if (w.now - pp.since > sh.arp_give_up) {
      drop_pkt(w, pp.m, kNeighUnresolved);
    } else {
      if (sh.v6->neigh.claim_request(pp.nexthop, w.now, sh.arp_retry)) send_ns(w, pp.port, pp.nexthop);
      x.pending[keep++] = pp;
    }
  }
  x.n_pending = keep;
}

// worker_internal.h: a saved SYN's deadline passed (resteer_timers).
void syn_timeout6(Worker& w, Conn6& c) noexcept {
  if (c.state != ConnState::kSynRecv) {
    w.syn.release(c.syn);
    c.syn = 0;
    return;
  }
  if (resteer_conn6(w, c, kResteerTimeout)) send_saved_syn6(w, c, nullptr);
}

void sweep_conns6(Worker& w, uint32_t budget) noexcept {
  const uint64_t now = w.now;
  const Shared& sh = *w.sh;
  w.v6->conns.sweep(budget, [&](Conn6& c) {
    if (!dest6_alive(w, c) && c.expires > now + sh.t_dead) c.expires = now + sh.t_dead;
    if (c.expires > now) return false;
    release6(w, c);
    return true;
  });
}

// worker_internal.h: the explain mailbox for an IPv6 flow, as explain4 for
// IPv4 (worker_loop.cc); nothing found while IPv6 forwarding is off.
void explain6(Worker& w, const ExplainQuery& q, ExplainAnswer& a) noexcept {
  if (!w.sh->v6 || !w.v6) return;
  const Shared6& v6 = *w.sh->v6;
  const Service* svc = vip6_service(v6, q.dst6, q.dport, q.proto);
  a.vip_address = is_vip6(v6, q.dst6);
  bool reply = false;
  const Conn6* c = w.v6->conns.lookup(make_key6(q.src6, q.sport, q.dst6, q.dport, q.proto), &reply);
  if (c) {
    explain_conn(w, *c, reply, dest6_alive(w, *c), a);
    std::memcpy(a.conn_dest_ip6, c->daddr, 16);
    if (w.sh->forward == Forward::kFnat) std::memcpy(a.conn_local_ip6, c->laddr, 16);
  }
  if (svc) {
    explain_service(w, *svc, SchedCtx{w.dest_counters, fold6(q.src6), fold6(q.dst6)},
                    tkey6(q.src6, q.dst6, q.dport, q.proto), a);
    if (a.next_idx >= 0) std::memcpy(a.next_ip6, service6_ext(*svc).dest_ip[a.next_idx], 16);
  }
}

}  // namespace vipd::dp
