// Thread: worker (see header).
#include "dataplane/fastpath/conn_table.h"

#include <rte_malloc.h>
#include <rte_prefetch.h>

#include <bit>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "dataplane/fastpath/flow_hash.h"

namespace vipd::dp {
namespace {

// Whether addrs[0..n) holds addr.
bool listed(const uint32_t* addrs, uint32_t n, uint32_t addr) {
  for (uint32_t i = 0; i < n; ++i)
    if (addrs[i] == addr) return true;
  return false;
}

}  // namespace

uint32_t ConnTable::buckets_for(uint64_t keys) noexcept {
  const uint64_t need = (keys * 10 + kBucketSlots * 8 - 1) / (kBucketSlots * 8);  // keys / (0.8 x 8)
  uint64_t n = 2;
  while (n < need) n <<= 1;
  return static_cast<uint32_t>(n);
}

const char* conn_state_name(ConnState s) {
  switch (s) {
    case ConnState::kNone: return "NONE";
    case ConnState::kSynRecv: return "SYN_RECV";
    case ConnState::kEstablished: return "ESTABLISHED";
    case ConnState::kFinWait: return "FIN_WAIT";
    case ConnState::kClose: return "CLOSE";
    case ConnState::kUdp: return "UDP";
    case ConnState::kTimeWait: return "TIME_WAIT";
    case ConnState::kCloseWait: return "CLOSE_WAIT";
    case ConnState::kLastAck: return "LAST_ACK";
  }
  return "?";
}

ConnTable::~ConnTable() {
  rte_free(buckets_);
  rte_free(entries_);
  rte_free(free_);
  rte_free(port_index_);
}

bool ConnTable::init(const std::string& name, uint32_t capacity, int socket, std::string* error,
                     const uint32_t* local_addrs, uint32_t n_local) {
  if (capacity < 16) capacity = 16;
  if (n_local > kMaxLocal) {
    *error = "conn table " + name + ": " + std::to_string(n_local) + " local addresses, at most " +
             std::to_string(kMaxLocal);
    return false;
  }
  if (capacity > (uint32_t{1} << 30)) {
    *error = "conn table " + name + ": " + std::to_string(capacity) + " entries, at most 2^30";
    return false;
  }
  for (int8_t& s : local_map_) s = -1;
  for (uint32_t i = 0; i < n_local; ++i) {
    if (listed(local_addrs, i, local_addrs[i])) continue;  // listed twice: the first one
    uint32_t h = local_slot(local_addrs[i]);
    while (local_map_[h] >= 0) h = (h + 1) & (kLocalMap - 1);
    local_map_[h] = static_cast<int8_t>(i);
    local_addrs_[i] = local_addrs[i];
  }
  n_local_ = n_local;
  for (uint32_t i = 0; i < n_local; ++i) local_first_[i] = static_cast<uint8_t>(local_index(local_addrs[i]));
  const uint32_t nb = buckets_for(n_local ? capacity : uint64_t{capacity} * 2);
  buckets_ = static_cast<Bucket*>(rte_zmalloc_socket(("conn_buckets_" + name).c_str(), sizeof(Bucket) * size_t{nb},
                                                     alignof(Bucket), socket));
  entries_ = static_cast<Conn*>(
      rte_zmalloc_socket(("conn_entries_" + name).c_str(), sizeof(Conn) * size_t{capacity}, alignof(Conn), socket));
  free_ = static_cast<uint32_t*>(
      rte_zmalloc_socket(("conn_free_" + name).c_str(), sizeof(uint32_t) * size_t{capacity}, 64, socket));
  if (n_local)
    port_index_ = static_cast<uint32_t*>(
        rte_zmalloc_socket("conn_ports", sizeof(uint32_t) * (size_t{n_local} << 16), 64, socket));
  if (!buckets_ || !entries_ || !free_ || (n_local && !port_index_)) {
    *error = "conn table " + name + ": out of memory for " + std::to_string(capacity) + " entries" +
             (n_local ? " and the port index of " + std::to_string(n_local) + " local addresses" : "");
    return false;
  }
  mask_ = nb - 1;
  // Popped from the top: entry 0 first.
  for (uint32_t i = 0; i < capacity; ++i) free_[i] = capacity - 1 - i;
  n_free_ = capacity;
  slots_ = capacity;
  capacity_ = capacity;
  return true;
}

// The first of the slots `hits` (tag_hits of a, b) whose key is k, or -1.
int32_t ConnTable::match_in(const Bucket& a, const Bucket& b, uint32_t hits, const FlowKey& k) const noexcept {
  for (; hits; hits &= hits - 1) {
    const uint32_t s = static_cast<uint32_t>(std::countr_zero(hits));
    const uint32_t p1 = (s < kBucketSlots ? a : b).pos1[s & (kBucketSlots - 1)];
    if (holds(static_cast<int32_t>(p1 - 1), k)) return static_cast<int32_t>(p1 - 1);
  }
  return -1;
}

int32_t ConnTable::find(const FlowKey& k, uint32_t sig) const noexcept {
  if (!mask_) return -1;
  const uint16_t tag = tag_of(sig);
  const uint32_t b1 = first_bucket(sig);
  const Bucket& a = buckets_[b1];
  const Bucket& b = buckets_[other_bucket(b1, tag)];
  return match_in(a, b, tag_hits(a, b, tag), k);
}

Conn* ConnTable::lookup(const FlowKey& k, bool* reply) noexcept {
  return lookup(k, conn_hash(k), reply);
}

Conn* ConnTable::lookup(const FlowKey& k, uint32_t sig, bool* reply) noexcept {
  const int li = local_index(k.dst);
  if (li >= 0) {
    Conn* c = local_candidate(li, k.dport);
    if (!c || !reply_matches(*c, k)) return nullptr;
    *reply = true;
    return c;
  }
  const int32_t pos = find(k, sig);
  if (pos < 0) return nullptr;
  return decode(pos, reply);
}

void ConnTable::lookup_candidates(const uint32_t* sigs, uint32_t n, uint32_t* cand) noexcept {
  if (!mask_) {
    for (uint32_t i = 0; i < n; ++i) cand[i] = 0;
    return;
  }
  const void* ba[64];
  const void* bb[64];
  uint16_t tags[64];
  for (uint32_t i = 0; i < n; ++i) buckets_of(sigs[i], &ba[i], &bb[i], &tags[i]);
  for (uint32_t i = 0; i < n; ++i) cand[i] = candidate_of(ba[i], bb[i], tags[i]);
}

// Breadth-first from the key's two buckets (all their slots taken): each
// visited bucket's keys could move to their other bucket; the first such
// bucket with a free slot ends the search, and the keys on the path to it
// move one step each, from its end, so that every key is in one of its two
// buckets at every moment. A bucket already on a path is not visited again
// along it, so a path moves each (bucket, slot) once.
bool ConnTable::make_room(uint32_t b1, uint32_t b2, uint32_t* bucket, uint32_t* slot) noexcept {
  struct Node {
    uint32_t bucket;
    int16_t parent;  // index in q of the bucket whose key moves here, -1 for b1 or b2
    uint8_t from;    // ... its slot there
  };
  Node q[kMaxVisit];
  uint32_t tail = 0;
  q[tail++] = Node{b1, -1, 0};
  if (b2 != b1) q[tail++] = Node{b2, -1, 0};
  for (uint32_t head = 0; head < tail; ++head) {
    const Bucket& bk = buckets_[q[head].bucket];
    for (uint32_t s = 0; s < kBucketSlots; ++s) {
      const uint32_t alt = other_bucket(q[head].bucket, bk.tag[s]);
      bool on_path = false;
      for (int32_t a = static_cast<int32_t>(head); a >= 0 && !on_path; a = q[a].parent) on_path = q[a].bucket == alt;
      if (on_path) continue;
      Bucket& to = buckets_[alt];
      uint32_t e = 0;
      while (e < kBucketSlots && to.pos1[e]) ++e;
      if (e == kBucketSlots) {
        if (tail < kMaxVisit) q[tail++] = Node{alt, static_cast<int16_t>(head), static_cast<uint8_t>(s)};
        continue;
      }
      // Found: slot (alt, e) is free. Move along the path, from its end.
      uint32_t fb = alt, fs = e;  // the free slot
      int32_t n = static_cast<int32_t>(head);
      uint32_t ms = s;  // the slot of bucket q[n] whose key moves to the free slot
      for (;;) {
        Bucket& from = buckets_[q[n].bucket];
        buckets_[fb].tag[fs] = from.tag[ms];
        buckets_[fb].pos1[fs] = from.pos1[ms];
        from.pos1[ms] = 0;
        from.tag[ms] = 0;
        fb = q[n].bucket;
        fs = ms;
        if (q[n].parent < 0) break;
        ms = q[n].from;
        n = q[n].parent;
      }
      *bucket = fb;
      *slot = fs;
      return true;
    }
  }
  return false;
}


void ConnTable::del_key(uint32_t sig, uint32_t pos) noexcept {
  const uint32_t b1 = first_bucket(sig);
  uint32_t b = b1;
  for (int i = 0; i < 2; ++i, b = other_bucket(b1, tag_of(sig))) {
    Bucket& bk = buckets_[b];
    for (uint32_t s = 0; s < kBucketSlots; ++s) {
      if (bk.pos1[s] == pos + 1) {
        bk.pos1[s] = 0;
        bk.tag[s] = 0;
        return;
      }
    }
  }
}


Conn* ConnTable::insert(const FlowKey& fwd, const FlowKey& rev) noexcept {
  return insert(fwd, conn_hash(fwd), rev, false);
}

Conn* ConnTable::insert(const FlowKey& fwd, uint32_t fwd_sig, const FlowKey& rev, bool fwd_absent) noexcept {
  last_full_ = true;
  if (n_free_ == 0) return nullptr;
  last_full_ = false;
  const uint32_t hf = fwd_sig;
  const uint32_t hr = conn_hash(rev);
  // With a port index, a key to a local address is only ever a reply: a
  // client's key cannot be one (no Service is served on a local address),
  // and a reply key must be one.
  uint32_t* port = port_slot(rev);
  if (n_local_ && (!port || local_index(fwd.dst) >= 0)) return nullptr;
  // Refuse keys already in use (e.g. in nat mode, one client port reaching
  // the same backend through two VIPs has the same reply key; in full NAT, a
  // local port held by another connection).
  if ((!fwd_absent && find(fwd, hf) >= 0) || (port ? *port != 0 : find(rev, hr) >= 0)) return nullptr;
  Conn* c = fill_free(fwd, rev.dst, rev.dport, rev.src, rev.sport);
  const uint32_t idx = free_[n_free_ - 1];
  if (!add_key(hf, idx << 1)) {
    last_full_ = true;
    return nullptr;
  }
  if (port) {
    *port = idx + 1;
  } else if (!add_key(hr, (idx << 1) | 1)) {
    del_key(hf, idx << 1);
    last_full_ = true;
    return nullptr;
  }
  return take_slot(c, hf, port ? port_sig(port) : hr);
}


bool ConnTable::has_client_key(uint32_t caddr, uint16_t cport, uint32_t vaddr, uint16_t vport, uint8_t proto,
                               uint32_t sig) const noexcept {
  return find(make_key(caddr, cport, vaddr, vport, proto), sig) >= 0;
}

Conn* ConnTable::insert_keys(uint32_t caddr, uint16_t cport, uint32_t vaddr, uint16_t vport, uint8_t proto,
                             uint32_t fwd_sig, uint32_t laddr, uint16_t lport, uint32_t daddr, uint16_t dport,
                             bool fwd_absent) noexcept {
  return insert(make_key(caddr, cport, vaddr, vport, proto), fwd_sig, make_key(daddr, dport, laddr, lport, proto),
                fwd_absent);
}

void ConnTable::remove(Conn* c) noexcept {
  if (c->in_use != kSlotConn) return;
  const FlowKey fwd = make_key(c->caddr, c->cport, c->vaddr, c->vport, c->proto);
  const FlowKey rev = make_key(c->daddr, c->dport, c->laddr, c->lport, c->proto);
  const uint32_t hf = conn_hash(fwd), hr = conn_hash(rev);
  const uint32_t idx = static_cast<uint32_t>(c - entries_);
  c->in_use = kSlotFree;
  del_key(hf, idx << 1);
  uint32_t hl = hr;  // what the change log names the reply by
  if (uint32_t* port = port_slot(rev)) {
    if (*port == idx + 1) *port = 0;
    hl = port_sig(port);
  } else {
    del_key(hr, (idx << 1) | 1);
  }
  free_[n_free_++] = idx;
  log_change(hf);
  log_change(hl);
  --used_;
}

bool ConnTable::move_reply(Conn* c, uint32_t daddr, uint16_t dport) noexcept {
  if (c->in_use != kSlotConn) return false;
  const FlowKey old_rev = make_key(c->daddr, c->dport, c->laddr, c->lport, c->proto);
  const FlowKey new_rev = make_key(daddr, dport, c->laddr, c->lport, c->proto);
  if (port_slot(old_rev)) {  // full NAT: the port index finds it, reply_matches checks the rest
    c->daddr = daddr;
    c->dport = dport;
    c->route_d = 0;  // a new destination: its route is worked out again
    return true;
  }
  const uint32_t ho = conn_hash(old_rev), hn = conn_hash(new_rev);
  if (find(new_rev, hn) >= 0) return false;  // another connection's reply key
  const uint32_t idx = static_cast<uint32_t>(c - entries_);
  if (!add_key(hn, (idx << 1) | 1)) return false;
  del_key(ho, (idx << 1) | 1);
  c->daddr = daddr;
  c->dport = dport;
  c->route_d = 0;
  log_change(ho);
  log_change(hn);
  return true;
}

}  // namespace vipd::dp
