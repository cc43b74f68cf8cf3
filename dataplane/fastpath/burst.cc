// Thread: worker. No allocation, no locks, no exceptions.
#include "dataplane/fastpath/burst.h"

#include <rte_hash.h>
#include <rte_mbuf.h>
#include <rte_prefetch.h>

#include <cstring>

#include "dataplane/fastpath/flow_hash.h"
#include "dataplane/fastpath/worker.h"

namespace vipd::dp {
namespace {

inline bool same_mac(const uint8_t* a, const uint8_t* b) {
  uint32_t a4, b4;
  uint16_t a2, b2;
  std::memcpy(&a4, a, 4);
  std::memcpy(&b4, b, 4);
  std::memcpy(&a2, a + 4, 2);
  std::memcpy(&b2, b + 4, 2);
  return a4 == b4 && a2 == b2;
}

// The frame checks of the per-packet path, in its order: one segment, an
// Ethernet header, a port of ours, our MAC (or a group address), then
// parse_frame's own.
inline Parsed check_and_parse(const Shared& sh, const rte_mbuf* m) {
  Parsed p;
  const uint8_t* f = rte_pktmbuf_mtod(m, const uint8_t*);
  const size_t len = rte_pktmbuf_data_len(m);
  if (m->nb_segs != 1 || len < kEthLen) return p;  // kDrop, kTruncated
  int pidx = -1;
  for (uint16_t i = 0; i < sh.n_ports; ++i) {
    if (sh.ports[i].port_id == m->port) {
      pidx = i;
      break;
    }
  }
  if (pidx < 0 || (!(f[0] & 1) && !same_mac(f, sh.ports[pidx].mac))) {
    p.drop = kNotForUs;
    return p;
  }
  return parse_frame(f, len);
}

}  // namespace

void prepare_burst(Worker& w, rte_mbuf* const* pkts, uint16_t n, PktInfo* info) noexcept {
  const Shared& sh = *w.sh;
  // Stage 1: headers. The frames were just received (in cache, or on their
  // way there): ask for all of them before parsing the first.
  for (uint16_t i = 0; i < n; ++i) rte_prefetch0(rte_pktmbuf_mtod(pkts[i], const void*));
  FlowKey fkeys[kBurst];
  const void* fptr[kBurst];
  uint32_t fsig[kBurst];
  uint8_t which[kBurst];  // packet index of lookup j
  uint32_t nl = 0;
  for (uint16_t i = 0; i < n; ++i) {
    PktInfo& pi = info[i];
    pi.p = check_and_parse(sh, pkts[i]);
    pi.looked = false;
    pi.svc_looked = false;
    pi.svc = nullptr;
    pi.conn = nullptr;
    pi.reply = false;
    const Parsed& p = pi.p;
    if (p.kind != FrameKind::kIpv4 || (p.proto != kProtoTcp && p.proto != kProtoUdp)) continue;
    if (rte_pktmbuf_mtod(pkts[i], const uint8_t*)[0] & 1) continue;  // dropped: group MAC
    // Stage 2: the flow key, hashed once (the same signature the table
    // computes: flow_hash.h).
    fkeys[nl] = make_key(p.src, p.sport, p.dst, p.dport, p.proto);
    fsig[nl] = conn_hash(fkeys[nl]);
    fptr[nl] = &fkeys[nl];
    which[nl] = static_cast<uint8_t>(i);
    pi.looked = true;
    pi.conn_sig = fsig[nl];
    ++nl;
  }
  if (nl == 0) return;
  // Stage 3: the connection table in bulk (DPDK prefetches the buckets and
  // keys of all of them before comparing any). A packet of a known flow needs
  // nothing else: in the client's direction its entry says where it goes, and
  // a reply (to a full-NAT local address and port, or in NAT mode to the
  // client) is a reply whatever the VIP table says. The VIP table is looked
  // up, again in bulk, only for the others (new flows), so an established
  // flow's cost does not grow with the number of services. The per-packet
  // stage looks the Service of a connection hit up by itself in the rare
  // cases that need it.
  void* fdata[kBurst];
  const uint64_t fhits = w.conns.lookup_bulk(fptr, fsig, nl, fdata);
  VipKey vkeys[kBurst];
  const void* vptr[kBurst];
  uint32_t vsig[kBurst];
  uint8_t vwhich[kBurst];  // lookup j of the VIP table is for packet vwhich[j]
  uint32_t nv = 0;
  for (uint32_t j = 0; j < nl; ++j) {
    PktInfo& pi = info[which[j]];  // svc, conn, reply: cleared in stage 1
    if ((fhits >> j) & 1) {
      pi.conn = w.conns.decode(fdata[j], &pi.reply);
      rte_prefetch0(pi.conn);
      rte_prefetch0(reinterpret_cast<const char*>(pi.conn) + sizeof(Conn) - 1);
    }
    // A reply-direction key ends at one of our local addresses and ports
    // (full NAT) or at a client's address and port (NAT): no VIP of ours.
    pi.svc_looked = pi.conn == nullptr;
    if (!pi.svc_looked) continue;
    vkeys[nv] = VipKey{pi.p.dst, pi.p.dport, pi.p.proto, 0};
    vptr[nv] = &vkeys[nv];
    vsig[nv] = vip_hash(vkeys[nv]);
    vwhich[nv++] = which[j];
  }
  // Stage 4: the VIP table for those, and the Service of a new flow.
  if (nv) {
    void* vdata[kBurst];
    uint64_t vhits = 0;
    if (rte_hash_lookup_with_hash_bulk_data(sh.vip_table, vptr, vsig, nv, &vhits, vdata) < 0) vhits = 0;
    for (uint32_t j = 0; j < nv; ++j) {
      if (!((vhits >> j) & 1)) continue;
      PktInfo& pi = info[vwhich[j]];
      pi.svc = static_cast<const Service*>(vdata[j]);
      if (!pi.conn) rte_prefetch0(pi.svc);
    }
  }
}

void prefetch_dests(Worker& w, const PktInfo* info, uint16_t n) noexcept {
  for (uint16_t i = 0; i < n; ++i) {
    const Conn* c = info[i].conn;
    if (!c) continue;
    rte_prefetch0(&w.dest_counters[c->dest_slot]);
  }
}

}  // namespace vipd::dp
