// Thread: worker (see header).
#include "dataplane/fastpath/conn_table.h"

#include <rte_errno.h>
#include <rte_hash.h>
#include <rte_hash_crc.h>
#include <rte_malloc.h>

namespace vipd::dp {

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
  rte_free(conns_);
  rte_free(free_);
}

bool ConnTable::init(const std::string& name, uint32_t capacity, int socket, std::string* error) {
  if (capacity < 16) capacity = 16;
  rte_hash_parameters p{};
  p.name = name.c_str();
  p.entries = capacity * 2;
  p.key_len = sizeof(FlowKey);
  // CRC32 (SSE4.2 instruction where the CPU has it, a table otherwise): the
  // 16-byte key in two 8-byte steps, cheaper than jhash (docs/benchmarks.md).
  p.hash_func = rte_hash_crc;
  p.hash_func_init_val = 0x9e3779b9;
  p.socket_id = socket;
  p.extra_flag = RTE_HASH_EXTRA_FLAGS_EXT_TABLE;
  hash_ = rte_hash_create(&p);
  if (!hash_) {
    *error = "conn table " + name + ": rte_hash_create failed: " + rte_strerror(rte_errno);
    return false;
  }
  conns_ = static_cast<Conn*>(rte_zmalloc_socket("conns", sizeof(Conn) * capacity, 64, socket));
  free_ = static_cast<uint32_t*>(rte_zmalloc_socket("conn_free", sizeof(uint32_t) * capacity, 64, socket));
  if (!conns_ || !free_) {
    *error = "conn table " + name + ": out of memory for " + std::to_string(capacity) + " entries";
    return false;
  }
  capacity_ = capacity;
  for (uint32_t i = 0; i < capacity; ++i) free_[i] = capacity - 1 - i;
  free_top_ = capacity;
  return true;
}

Conn* ConnTable::lookup(const FlowKey& k, bool* reply) noexcept {
  void* data = nullptr;
  if (rte_hash_lookup_data(hash_, &k, &data) < 0) return nullptr;
  const auto v = reinterpret_cast<uintptr_t>(data);
  *reply = (v & 1) != 0;
  return &conns_[v >> 1];
}

Conn* ConnTable::insert(const FlowKey& fwd, const FlowKey& rev) noexcept {
  if (free_top_ == 0) return nullptr;
  // Each key is hashed once for the check and the add below.
  const hash_sig_t hf = rte_hash_hash(hash_, &fwd);
  const hash_sig_t hr = rte_hash_hash(hash_, &rev);
  // rte_hash_add_key_data would silently re-point an existing key: refuse
  // keys already in use (e.g. in nat mode, one client port reaching the same
  // backend through two VIPs has the same reply key).
  if (rte_hash_lookup_with_hash(hash_, &fwd, hf) >= 0 || rte_hash_lookup_with_hash(hash_, &rev, hr) >= 0)
    return nullptr;
  const uint32_t idx = free_[free_top_ - 1];
  if (rte_hash_add_key_with_hash_data(hash_, &fwd, hf, reinterpret_cast<void*>(uintptr_t{idx} << 1)) < 0)
    return nullptr;
  if (rte_hash_add_key_with_hash_data(hash_, &rev, hr, reinterpret_cast<void*>((uintptr_t{idx} << 1) | 1)) < 0) {
    rte_hash_del_key_with_hash(hash_, &fwd, hf);
    return nullptr;
  }
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
  rte_hash_del_key(hash_, &fwd);
  rte_hash_del_key(hash_, &rev);
  c->in_use = 0;
  free_[free_top_++] = static_cast<uint32_t>(c - conns_);
  --used_;
}

}  // namespace vipd::dp
