// Thread: worker. The first stages of process_burst (worker.cc): every frame
// of a burst is checked and parsed, and the connection key of each TCP/UDP
// packet hashed once (flow_hash.h) and its two buckets prefetched at once
// (ConnTable::buckets_of); then the tags are compared for the whole burst
// (ConnTable::candidate_of): the entry the first matching tag names is the
// packet's candidate, its key compared by the per-packet stage (burst_conn,
// worker.cc), which reads that line anyway. A full-NAT reply is found in the
// port index instead (conn_table.h), by its local address and port. The VIP
// table is looked up, in bulk, only for the packets whose buckets name no
// connection. What the per-packet stage will touch next (connection entries,
// their destination counters, the Service of a new flow) is prefetched.
// These stages only read: every effect (drops, replies, new connections,
// counters) stays in the per-packet stage, in packet order, so that a burst
// behaves exactly like its packets one by one. A connection lookup made here
// can be overtaken by an earlier packet of the same burst, or of the burst
// before (process_burst prepares one burst ahead), that adds or removes a
// connection: ConnTable's change log (by the key's hash, or for a full-NAT
// reply by its port index entry: ConnTable::port_sig) says when to repeat it.
#pragma once

#include <cstdint>

#include "dataplane/fastpath/packet.h"

struct rte_mbuf;

namespace vipd::dp {

struct Worker;
struct Service;
struct Conn;

// What the first stages learned about one packet.
struct PktInfo {
  Parsed p;                // kind kDrop (with the reason) when a check failed
  const Service* svc;      // VIP:port:proto hit, else nullptr (valid if svc_looked)
  // conn, conn_sig: valid for an IPv4 TCP/UDP packet to our MAC (looked
  // up); the later stages read them only for those.
  Conn* conn;              // connection hit, else nullptr
  uint32_t conn_sig;       // conn_hash of the packet's flow key; for a full-NAT
                           // reply, ConnTable::port_sig of its port index entry
  bool reply;              // conn was found under its reply key
  bool svc_looked;         // the VIP table was looked up too: not done for a
                           // connection hit in the client's direction
  bool cand;               // conn (client direction) is the entry its tag
                           // names, its key not compared yet (burst_conn)
};

// Fills info[0..n) for pkts[0..n), n <= kBurst (worker.h): frame checks and
// parse, the lookups, and prefetches of the connection entries found (and of
// the Service of a new flow). A client-direction connection (cand) and a
// full-NAT reply's entry (found by local address and port only) are
// candidates: the per-packet stage checks the whole key. The caller starts
// the connection table's change log (ConnTable::begin_burst) before the
// first of the bursts it prepares ahead of processing them.
void prepare_burst(Worker& w, rte_mbuf* const* pkts, uint16_t n, PktInfo* info) noexcept;

// Reads the connection entries of info[0..n) (prefetched by prepare_burst)
// and prefetches their destination counters: the last stage before
// the per-packet one, run when the entries had time to arrive.
void prefetch_dests(Worker& w, const PktInfo* info, uint16_t n) noexcept;

}  // namespace vipd::dp
