// Thread: worker (see header).
#include "dataplane/fastpath/conn_table.h"

#include <rte_errno.h>
#include <rte_hash.h>
#include <rte_hash_crc.h>
#include <rte_malloc.h>

#include <bit>
#include <cstring>

#include "dataplane/fastpath/flow_hash.h"

namespace vipd::dp {
namespace {

// Whether addrs[0..n) holds addr.
bool listed(const uint32_t* addrs, uint32_t n, uint32_t addr) {
  for (uint32_t i = 0; i < n; ++i)
    if (addrs[i] == addr) return true;
  return false;
}

// Bytes 8..12 of a key (ports and protocol) in its second 8-byte word.
static_assert(std::endian::native == std::endian::little, "key_cmp masks the key's second word as little-endian");
constexpr uint64_t kLow5Bytes = 0xffffffffffull;

// The Conn image that rte_hash copies into the key slot: key k, the rest zero
// (in_use too: a slot that a failed insert took and gave back must not look
// used; insert marks it after the add succeeded).
Conn key_image(const FlowKey& k) {
  Conn c{};
  std::memcpy(&c, &k, 13);
  return c;
}

}  // namespace

// The hash's key is a whole Conn; its flow key is the first 13 bytes (Conn's
// static_asserts). Lookups pass a FlowKey (16 bytes), inserts a Conn: both
// functions read the first 16 bytes and ignore the last 3 of them (a Conn's
// state there, a FlowKey's zero padding).
int ConnTable::key_cmp(const void* a, const void* b, size_t) noexcept {
  uint64_t a0, a1, b0, b1;
  std::memcpy(&a0, a, 8);
  std::memcpy(&b0, b, 8);
  std::memcpy(&a1, static_cast<const char*>(a) + 8, 8);
  std::memcpy(&b1, static_cast<const char*>(b) + 8, 8);
  return ((a0 ^ b0) | ((a1 ^ b1) & kLow5Bytes)) != 0;
}

uint32_t ConnTable::key_hash(const void* key, uint32_t, uint32_t) noexcept {
  FlowKey k{};
  std::memcpy(&k, key, 13);
  return conn_hash(k);
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
  if (hash_) rte_hash_free(hash_);
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
  p.key_len = sizeof(Conn);
  // CRC32 of the flow key (SSE4.2 instruction where the CPU has it, a table
  // otherwise): two 8-byte steps, cheaper than jhash (docs/benchmarks.md).
  p.hash_func = key_hash;
  p.hash_func_init_val = kConnHashInit;
  p.socket_id = socket;
  p.extra_flag = RTE_HASH_EXTRA_FLAGS_EXT_TABLE;
  hash_ = rte_hash_create(&p);
  if (!hash_) {
    *error = "conn table " + name + ": rte_hash_create failed: " + rte_strerror(rte_errno);
    return false;
  }
  rte_hash_set_cmp_func(hash_, key_cmp);
  if (n_local)
    port_index_ = static_cast<uint32_t*>(
        rte_zmalloc_socket("conn_ports", sizeof(uint32_t) * (size_t{n_local} << 16), 64, socket));
  if (n_local && !port_index_) {
    *error = "conn table " + name + ": out of memory for the port index of " + std::to_string(n_local) +
             " local addresses";
    return false;
  }
  slots_ = p.entries;
  if (!find_layout(error)) {
    *error = "conn table " + name + ": " + *error;
    return false;
  }
  capacity_ = capacity;
  return true;
}

// Finds where position 0's entry is, from two probe keys, and checks that
// every position's key slot is kSlotBytes further, starting 8 bytes into a
// cache line (DPDK 22.11's layout: the key store is one array of slots, each
// the data pointer then the key, 16-byte aligned, slot 0 a dummy). Any other
// layout: an error, not a guess.
bool ConnTable::find_layout(std::string* error) noexcept {
  FlowKey probe[2] = {make_key(0, 1, 0, 0, 0xff), make_key(0, 2, 0, 0, 0xff)};
  int32_t pos[2];
  char* key[2];
  for (int i = 0; i < 2; ++i) {
    const Conn img = key_image(probe[i]);
    pos[i] = rte_hash_add_key_with_hash(hash_, &img, conn_hash(probe[i]));
    void* k = nullptr;
    if (pos[i] < 0 || rte_hash_get_key_with_position(hash_, pos[i], &k) != 0) {
      *error = "rte_hash refused a probe key (position " + std::to_string(pos[i]) + ")";
      return false;
    }
    key[i] = static_cast<char*>(k);
  }
  for (const FlowKey& k : probe) rte_hash_del_key_with_hash(hash_, &k, conn_hash(k));
  base_ = key[0] - static_cast<ptrdiff_t>(pos[0]) * static_cast<ptrdiff_t>(kSlotBytes);
  const bool ok = pos[0] != pos[1] && at(static_cast<uint32_t>(pos[1])) == reinterpret_cast<Conn*>(key[1]) &&
                  reinterpret_cast<uintptr_t>(base_) % 64 == 8;
  if (!ok) {
    base_ = nullptr;
    *error = "rte_hash's key slots are not laid out as this build expects (64-byte slots, the key 8 bytes in); "
             "built for DPDK 22.11";
    return false;
  }
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
  const int32_t pos = rte_hash_lookup_with_hash(hash_, &k, sig);
  if (pos < 0) return nullptr;
  return decode(pos, reply);
}

uint64_t ConnTable::lookup_bulk(const void** keys, uint32_t* sigs, uint32_t n, int32_t* pos) noexcept {
  if (rte_hash_lookup_with_hash_bulk(hash_, keys, sigs, n, pos) < 0) return 0;
  uint64_t hits = 0;
  for (uint32_t i = 0; i < n; ++i) hits |= uint64_t{pos[i] >= 0} << i;
  return hits;
}

Conn* ConnTable::insert(const FlowKey& fwd, const FlowKey& rev) noexcept {
  return insert(fwd, conn_hash(fwd), rev, false);
}

Conn* ConnTable::insert(const FlowKey& fwd, uint32_t fwd_sig, const FlowKey& rev, bool fwd_absent) noexcept {
  if (used_ >= capacity_) return nullptr;
  // Each key is hashed once for the check and the add below.
  const hash_sig_t hf = fwd_sig;
  const hash_sig_t hr = conn_hash(rev);
  // With a port index, a key to a local address is only ever a reply: a
  // client's key cannot be one (no Service is served on a local address),
  // and a reply key must be one.
  uint32_t* port = port_slot(rev);
  if (n_local_ && (!port || local_index(fwd.dst) >= 0)) return nullptr;
  // rte_hash_add_key would silently keep an existing key: refuse keys already
  // in use (e.g. in nat mode, one client port reaching the same backend
  // through two VIPs has the same reply key; in full NAT, a local port held
  // by another connection).
  if ((!fwd_absent && rte_hash_lookup_with_hash(hash_, &fwd, hf) >= 0) ||
      (port ? *port != 0 : rte_hash_lookup_with_hash(hash_, &rev, hr) >= 0))
    return nullptr;
  Conn img = key_image(fwd);
  img.laddr = rev.dst;
  img.lport = rev.dport;
  img.daddr = rev.src;
  img.dport = rev.sport;
  const int32_t pos = rte_hash_add_key_with_hash(hash_, &img, hf);
  if (pos < 0) return nullptr;
  Conn* c = at(static_cast<uint32_t>(pos));
  if (port) {
    *port = static_cast<uint32_t>(pos) + 1;
  } else {
    const Conn alias = key_image(rev);
    const int32_t rpos = rte_hash_add_key_with_hash(hash_, &alias, hr);
    if (rpos < 0) {
      rte_hash_del_key_with_hash(hash_, &fwd, hf);
      return nullptr;
    }
    Conn* a = at(static_cast<uint32_t>(rpos));
    a->dest_slot = static_cast<uint32_t>(pos);
    a->in_use = kSlotAlias;
  }
  log_change(hf);
  log_change(hr);
  ++used_;
  c->in_use = kSlotConn;
  return c;
}

void ConnTable::remove(Conn* c) noexcept {
  if (c->in_use != kSlotConn) return;
  const FlowKey fwd = make_key(c->caddr, c->cport, c->vaddr, c->vport, c->proto);
  const FlowKey rev = make_key(c->daddr, c->dport, c->laddr, c->lport, c->proto);
  const hash_sig_t hf = conn_hash(fwd), hr = conn_hash(rev);
  const uint32_t pos = static_cast<uint32_t>((reinterpret_cast<char*>(c) - base_) / kSlotBytes);
  // The slots go back to the hash's free list: mark them free first (the
  // sweep reads every slot; the hash never writes past the key it copied).
  c->in_use = kSlotFree;
  rte_hash_del_key_with_hash(hash_, &fwd, hf);
  if (uint32_t* port = port_slot(rev)) {
    if (*port == pos + 1) *port = 0;
  } else {
    // The reply key is this connection's alone (insert refuses taken ones).
    const int32_t rpos = rte_hash_del_key_with_hash(hash_, &rev, hr);
    if (rpos >= 0) at(static_cast<uint32_t>(rpos))->in_use = kSlotFree;
  }
  log_change(hf);
  log_change(hr);
  --used_;
}

}  // namespace vipd::dp
