// Thread: worker. No allocation, no locks, no exceptions.
#include "dataplane/fastpath/burst.h"

#include <rte_hash.h>
#include <rte_mbuf.h>
#include <rte_prefetch.h>

#include <bit>
#include <cstddef>
#include <cstring>

#include "dataplane/fastpath/flow_hash.h"
#include "dataplane/fastpath/worker.h"

namespace vipd::dp {
namespace {

// Whether the frame's destination MAC (the frame has >= 14 bytes) is port
// p's: one 8-byte word of each, the two bytes after the MACs shifted out.
inline bool to_port_mac(const uint8_t* f, const PortInfo& p) {
  static_assert(std::endian::native == std::endian::little, "the MAC is the low 6 bytes of the word");
  static_assert(offsetof(PortInfo, mac) + 8 <= sizeof(PortInfo), "8 bytes from the MAC stay in the PortInfo");
  uint64_t a, b;
  std::memcpy(&a, f, 8);
  std::memcpy(&b, reinterpret_cast<const char*>(&p) + offsetof(PortInfo, mac), 8);
  return ((a ^ b) << 16) == 0;
}

// The port's id and MAC as one word: PortInfo's first 8 bytes.
inline uint64_t port_word(const PortInfo& p) {
  static_assert(offsetof(PortInfo, port_id) == 0 && sizeof(PortInfo::port_id) == 2 && offsetof(PortInfo, mac) == 2,
                "the id, then the MAC");
  uint64_t w;
  std::memcpy(&w, &p, 8);
  return w;
}

// The same word for a frame (>= 8 bytes) received on `port`: its
// destination MAC (the two bytes after it shifted out) above the port id,
// which equals port_word(p) when the frame came in on p and is to p's MAC.
inline uint64_t frame_word(const uint8_t* f, uint16_t port) {
  uint64_t a;
  std::memcpy(&a, f, 8);
  return (a << 16) | port;
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
  if (pidx < 0 || (!(f[0] & 1) && !to_port_mac(f, sh.ports[pidx]))) {
    p.drop = kNotForUs;
    return p;
  }
  p = parse_frame(f, len);
  // IPv4 to a broadcast or multicast MAC: dropped as not for us (ARP and
  // IPv6 to group addresses go on: requests, neighbour discovery).
  if (p.kind == FrameKind::kIpv4 && (f[0] & 1)) [[unlikely]] {
    p.kind = FrameKind::kDrop;
    p.drop = kNotForUs;
  }
  return p;
}

// For an IPv4 TCP/UDP packet: its flow key's address and port words, as
// parse_tcp_udp4 gives them; false for any other frame (not looked up).
inline bool key_words(const Parsed& p, uint64_t* addrs, uint32_t* ports) {
  if (p.kind != FrameKind::kIpv4 || (p.proto != kProtoTcp && p.proto != kProtoUdp)) return false;
  *addrs = flow_word0(p.src, p.dst);
  *ports = uint32_t{p.sport} | (uint32_t{p.dport} << 16);
  return true;
}

// Stages 3 and 4 of prepare_burst, for the nl keys hashed in fsig (of packets
// which[0..nl)) that are not full-NAT replies.
void lookup_conns(Worker& w, PktInfo* info, const uint32_t* fsig, const void* const* ba, const void* const* bb,
                  const uint16_t* tags, bool conns_on, const uint8_t* which, uint32_t nl) noexcept {
  const Shared& sh = *w.sh;
  // Stage 3: each key's buckets (asked for in stage 2) read, their tags
  // compared (ConnTable::candidate_of, inline: it prefetches the entry the
  // first matching tag names). A client-direction candidate
  // is taken as the packet's connection, its key compared by the per-packet
  // stage (burst_conn), which reads that line anyway; a reply-direction one
  // (NAT mode) is compared here. Only packets without a connection look the
  // VIP table up, again in bulk.
  VipKey vkeys[kBurst];
  const void* vptr[kBurst];
  uint32_t vsig[kBurst];
  uint8_t vwhich[kBurst];  // lookup j of the VIP table is for packet vwhich[j]
  uint32_t nv = 0;
  for (uint32_t j = 0; j < nl; ++j) {
    PktInfo& pi = info[which[j]];  // svc, conn, reply, svc_looked, cand: cleared in stage 1
    const uint32_t p1 = conns_on ? w.conns.candidate_of(ba[j], bb[j], tags[j]) : 0;
    if (p1) {
      const int32_t pos = static_cast<int32_t>(p1 - 1);
      if (!(pos & 1)) [[likely]] {
        pi.conn = w.conns.at(static_cast<uint32_t>(pos) >> 1);
        pi.cand = true;
        continue;
      }
      const Parsed& p = pi.p;
      const FlowKey k = make_key(p.src, p.sport, p.dst, p.dport, p.proto);
      const int32_t q = w.conns.holds(pos, k) ? pos : w.conns.find_pos(k, fsig[j]);
      if (q >= 0) {
        bool reply;
        pi.conn = w.conns.decode(q, &reply);
        pi.reply = reply;
        continue;
      }
    }
    pi.svc_looked = true;
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

}  // namespace

void prepare_burst(Worker& w, rte_mbuf* const* pkts, uint16_t n, PktInfo* info) noexcept {
  const Shared& sh = *w.sh;
  // Stage 1: headers. The frames were just received (in cache, or on their
  // way there): ask for all of them before parsing the first.
  for (uint16_t i = 0; i < n; ++i) rte_prefetch0(rte_pktmbuf_mtod(pkts[i], const void*));
  uint32_t fsig[kBurst];
  const void* ba[kBurst];  // the connection hash's buckets of lookup j
  const void* bb[kBurst];
  uint16_t tags[kBurst];
  const bool conns_on = w.conns.buckets() != 0;
  uint8_t which[kBurst];  // packet index of lookup j
  uint32_t nl = 0;
  const uint32_t* pentry[kBurst];  // port index entry of full-NAT reply r
  uint8_t pwhich[kBurst];          // ... which is packet pwhich[r]
  uint32_t np = 0;
  // The frames of a burst come from one rx call, so mostly from one port:
  // the first frame's, if ours and its MAC a unicast one, as one word
  // (port_word). A frame of one segment received there, to that MAC, has
  // passed check_and_parse's checks before parse_frame; if it is of
  // parse_tcp_udp4's usual kind, it is parsed straight into its PktInfo, its
  // key's words kept in registers, else by parse_frame. Any other frame
  // takes check_and_parse, from the start.
  uint64_t pword = 0;
  bool fast = false;
  if (n) {
    const uint16_t port0 = pkts[0]->port;
    for (uint16_t i = 0; i < sh.n_ports; ++i) {
      if (sh.ports[i].port_id != port0) continue;
      fast = !(sh.ports[i].mac[0] & 1);
      pword = port_word(sh.ports[i]);
      break;
    }
  }
  for (uint16_t i = 0; i < n; ++i) {
    PktInfo& pi = info[i];
    pi.svc_looked = false;
    pi.svc = nullptr;
    pi.conn = nullptr;
    pi.reply = false;
    pi.cand = false;
    const rte_mbuf* m = pkts[i];
    const uint8_t* f = rte_pktmbuf_mtod(m, const uint8_t*);
    const size_t len = rte_pktmbuf_data_len(m);
    uint64_t k0;
    uint32_t ports;
    if (fast && m->nb_segs == 1 && len >= kEthLen && frame_word(f, m->port) == pword) [[likely]] {
      // check_and_parse's checks before parse_frame have passed.
      if (!parse_tcp_udp4(f, len, pi.p, &k0, &ports)) [[unlikely]] {
        pi.p = parse_frame(f, len);
        if (!key_words(pi.p, &k0, &ports)) continue;
      }
    } else {
      pi.p = check_and_parse(sh, m);
      if (!key_words(pi.p, &k0, &ports)) continue;  // (IPv4 to a group MAC is kDrop already)
    }
    const Parsed& p = pi.p;
    // Stage 2: the flow key, hashed once (the same signature the table
    // computes: flow_hash.h), from its two words in registers.
    const int li = w.conns.local_index(static_cast<uint32_t>(k0 >> 32));
    if (li >= 0) {
      // Full NAT, to a local address: only ever a reply, found by its port
      // in the port index (conn_table.h), read after the bulk lookup below;
      // the change log names it by that entry (no hash of its key).
      pi.svc_looked = true;  // no Service on a local address
      pentry[np] = w.conns.port_entry(li, static_cast<uint16_t>(ports >> 16));
      pi.conn_sig = w.conns.port_sig(pentry[np]);
      rte_prefetch0(pentry[np]);
      pwhich[np++] = static_cast<uint8_t>(i);
      continue;
    }
    const uint32_t sig = conn_hash_words(k0, ports | (uint64_t{p.proto} << 32));
    fsig[nl] = sig;
    pi.conn_sig = sig;
    // Its buckets asked for at once (ConnTable::buckets_of).
    w.conns.buckets_of(sig, &ba[nl], &bb[nl], &tags[nl]);
    which[nl] = static_cast<uint8_t>(i);
    ++nl;
  }
  if (nl) lookup_conns(w, info, fsig, ba, bb, tags, conns_on, which, nl);
  // The replies' entries are candidates: the per-packet stage checks the
  // rest of the key against the entry (from_dest).
  for (uint32_t r = 0; r < np; ++r) {
    PktInfo& pi = info[pwhich[r]];
    pi.conn = w.conns.candidate_at(pentry[r]);
    if (!pi.conn) continue;
    pi.reply = true;
    rte_prefetch0(pi.conn);  // one line: a Conn is one 64-byte line
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
