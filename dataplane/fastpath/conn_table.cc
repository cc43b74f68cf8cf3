// Thread: worker (see header).
#include "dataplane/fastpath/conn_table.h"

#include <rte_errno.h>
#include <rte_hash.h>
#include <rte_hash_crc.h>
#include <rte_malloc.h>

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
  if (hash_) rte_hash_free(hash_);
  rte_free(port_index_);
  rte_free(conns_);
  rte_free(free_);
}

bool ConnTable::init(const std::string& name, uint32_t capacity, int socket, std::string* error,
                     const uint32_t* local_addrs, uint32_t n_local) {
  if (capacity < 16) capacity = 16;
  if (n_local > kMaxLocal) {
    *error = "conn table " + name + ": " + std::to_string(n_local) + " local addresses, at most " +
             std::to_string(kMaxLocal);
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
  rte_hash_parameters p{};
  p.name = name.c_str();
  p.entries = n_local ? capacity : capacity * 2;
  p.key_len = sizeof(FlowKey);
  // CRC32 (SSE4.2 instruction where the CPU has it, a table otherwise): the
  // 16-byte key in two 8-byte steps, cheaper than jhash (docs/benchmarks.md).
  p.hash_func = rte_hash_crc;
  p.hash_func_init_val = kConnHashInit;
  p.socket_id = socket;
  p.extra_flag = RTE_HASH_EXTRA_FLAGS_EXT_TABLE;
  hash_ = rte_hash_create(&p);
  if (!hash_) {
    *error = "conn table " + name + ": rte_hash_create failed: " + rte_strerror(rte_errno);
    return false;
  }
  conns_ = static_cast<Conn*>(rte_zmalloc_socket("conns", sizeof(Conn) * capacity, 64, socket));
  free_ = static_cast<uint32_t*>(rte_zmalloc_socket("conn_free", sizeof(uint32_t) * capacity, 64, socket));
  if (n_local)
    port_index_ = static_cast<uint32_t*>(
        rte_zmalloc_socket("conn_ports", sizeof(uint32_t) * (size_t{n_local} << 16), 64, socket));
  if (!conns_ || !free_ || (n_local && !port_index_)) {
    *error = "conn table " + name + ": out of memory for " + std::to_string(capacity) + " entries";
    return false;
  }
  capacity_ = capacity;
  for (uint32_t i = 0; i < capacity; ++i) free_[i] = capacity - 1 - i;
  free_top_ = capacity;
  return true;
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
  void* data = nullptr;
  if (rte_hash_lookup_with_hash_data(hash_, &k, sig, &data) < 0) return nullptr;
  return decode(data, reply);
}

uint64_t ConnTable::lookup_bulk(const void** keys, uint32_t* sigs, uint32_t n, void** data) noexcept {
  uint64_t hits = 0;
  if (rte_hash_lookup_with_hash_bulk_data(hash_, keys, sigs, n, &hits, data) < 0) return 0;
  return hits;
}

Conn* ConnTable::insert(const FlowKey& fwd, const FlowKey& rev) noexcept {
  return insert(fwd, conn_hash(fwd), rev, false);
}

Conn* ConnTable::insert(const FlowKey& fwd, uint32_t fwd_sig, const FlowKey& rev, bool fwd_absent) noexcept {
  if (free_top_ == 0) return nullptr;
  // Each key is hashed once for the check and the add below.
  const hash_sig_t hf = fwd_sig;
  const hash_sig_t hr = conn_hash(rev);
  // With a port index, a key to a local address is only ever a reply: a
  // client's key cannot be one (no Service is served on a local address),
  // and a reply key must be one.
  uint32_t* port = port_slot(rev);
  if (n_local_ && (!port || local_index(fwd.dst) >= 0)) return nullptr;
  // rte_hash_add_key_data would silently re-point an existing key: refuse
  // keys already in use (e.g. in nat mode, one client port reaching the same
  // backend through two VIPs has the same reply key; in full NAT, a local
  // port held by another connection).
  if ((!fwd_absent && rte_hash_lookup_with_hash(hash_, &fwd, hf) >= 0) ||
      (port ? *port != 0 : rte_hash_lookup_with_hash(hash_, &rev, hr) >= 0))
    return nullptr;
  const uint32_t idx = free_[free_top_ - 1];
  if (rte_hash_add_key_with_hash_data(hash_, &fwd, hf, reinterpret_cast<void*>(uintptr_t{idx} << 1)) < 0)
    return nullptr;
  if (port) {
    *port = idx + 1;
  } else if (rte_hash_add_key_with_hash_data(hash_, &rev, hr, reinterpret_cast<void*>((uintptr_t{idx} << 1) | 1)) <
             0) {
    rte_hash_del_key_with_hash(hash_, &fwd, hf);
    return nullptr;
  }
  log_change(hf);
  log_change(hr);
  --free_top_;
  ++used_;
  Conn* c = &conns_[idx];
  *c = Conn{};
  c->in_use = 1;
  return c;
}

void ConnTable::remove(Conn* c) noexcept {
  if (!c->in_use) return;
  const FlowKey fwd = make_key(c->caddr, c->cport, c->vaddr, c->vport, c->proto);
  const FlowKey rev = make_key(c->daddr, c->dport, c->laddr, c->lport, c->proto);
  const hash_sig_t hf = conn_hash(fwd), hr = conn_hash(rev);
  rte_hash_del_key_with_hash(hash_, &fwd, hf);
  const uint32_t idx = static_cast<uint32_t>(c - conns_);
  if (uint32_t* port = port_slot(rev)) {
    if (*port == idx + 1) *port = 0;
  } else {
    rte_hash_del_key_with_hash(hash_, &rev, hr);
  }
  log_change(hf);
  log_change(hr);
  c->in_use = 0;
  free_[free_top_++] = idx;
  --used_;
}

}  // namespace vipd::dp
