// Thread: control.
#include "dataplane/publish/publisher.h"

#include <rte_errno.h>
#include <rte_hash.h>
#include <rte_malloc.h>
#include <rte_rcu_qsbr.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <tuple>

#include "dataplane/publish/tables_build.h"
#include "dataplane/sched/sched.h"

namespace vipd::dp {

Publisher::Publisher(Shared& sh) : sh_(sh) {
  for (uint32_t i = sh.max_services; i > 0; --i) free_ids_.push_back(i - 1);
  for (uint32_t i = 0; i < sh.max_dests; ++i) free_slots_.push_back(i);
}

Publisher::~Publisher() {
  for (auto& [k, r] : recs_) rte_free(r.obj);
}

int64_t Publisher::dest_slot(const cp::ServiceKey& k, const cp::IpAddr& ip, uint16_t port) const {
  auto it = recs_.find(k);
  if (it == recs_.end()) return -1;
  const DestSlot* s = find_slot(it->second.slots, ip, port);
  return s ? static_cast<int64_t>(s->slot) : -1;
}

Publisher::DestSlot* Publisher::find_slot(SlotList& l, const cp::IpAddr& ip, uint16_t port) {
  auto e = std::lower_bound(l.begin(), l.end(), ip,
                            [port](const DestSlot& x, const cp::IpAddr& a) { return dest_before(x, a, port); });
  return e != l.end() && e->ip == ip && e->port == port ? &*e : nullptr;
}

std::string Publisher::slot_owner(uint32_t slot) const {
  for (const auto& [key, r] : recs_)
    for (const DestSlot& e : r.slots)
      if (e.slot == slot) return r.spec.name + " (" + cp::to_string(key) + ") -> " + cp::host_port(e.ip, e.port);
  return "";
}

void Publisher::vip_ref(const cp::IpAddr& vip, int delta, Deferred& d) {
  uint32_t& n = vip_refs_[vip];
  const uint32_t v4 = vip.is_v4() ? vip.v4() : 0;
  Addr6Key a6{};
  if (vip.is_v6()) std::memcpy(a6.a, vip.v6_bytes().data(), 16);
  rte_hash* h = vip.is_v4() ? sh_.vip_addrs : sh_.v6->vip_addrs;
  const void* key = vip.is_v4() ? static_cast<const void*>(&v4) : static_cast<const void*>(&a6);
  if (delta > 0) {
    // The address table has as many entries as the VIP table, so this cannot
    // fail while the VIP key itself fits; without it the VIP would only lose
    // ARP answers and its "port not served" classification.
    if (n++ == 0) (void)rte_hash_add_key_data(h, key, nullptr);
    return;
  }
  if (--n == 0) {
    int32_t pos = rte_hash_del_key(h, key);
    if (pos >= 0) (vip.is_v4() ? d.addr_positions : d.addr6_positions).push_back(pos);
    vip_refs_.erase(vip);
  }
}

bool Publisher::vip_put(const cp::ServiceKey& k, Service* obj) {
  if (k.vip.is_v4()) {
    const VipKey key{k.vip.v4(), k.port, static_cast<uint8_t>(k.protocol), 0};
    return rte_hash_add_key_data(sh_.vip_table, &key, obj) >= 0;
  }
  VipKey6 key{};
  std::memcpy(key.vip, k.vip.v6_bytes().data(), 16);
  key.port = k.port;
  key.proto = static_cast<uint8_t>(k.protocol);
  return rte_hash_add_key_data(sh_.v6->vip_table, &key, obj) >= 0;
}

void Publisher::vip_del(const cp::ServiceKey& k, Deferred& d) {
  if (k.vip.is_v4()) {
    const VipKey key{k.vip.v4(), k.port, static_cast<uint8_t>(k.protocol), 0};
    const int32_t pos = rte_hash_del_key(sh_.vip_table, &key);
    if (pos >= 0) d.vip_positions.push_back(pos);
    return;
  }
  VipKey6 key{};
  std::memcpy(key.vip, k.vip.v6_bytes().data(), 16);
  key.port = k.port;
  key.proto = static_cast<uint8_t>(k.protocol);
  const int32_t pos = rte_hash_del_key(sh_.v6->vip_table, &key);
  if (pos >= 0) d.vip6_positions.push_back(pos);
}

bool Publisher::upsert(const cp::VirtualService& vs_in, Deferred& d, std::string* error) {
  const bool is6 = vs_in.key.vip.is_v6();
  // IPv6 is forwarded with the IPv6 tables (Shared::v6); without them the
  // daemon's FamilyGate drops IPv6 before here.
  if (is6 && !sh_.v6) {
    *error = cp::to_string(vs_in.key) + ": IPv6 forwarding is not set up in this dataplane";
    return false;
  }
  // A real server of the other family (the sources never give one) is left
  // out, as the FamilyGate would.
  const cp::VirtualService* vsp = &vs_in;
  cp::VirtualService same_family;
  if (std::any_of(vs_in.backends.begin(), vs_in.backends.end(),
                  [&](const cp::RealServer& b) { return b.ip.is_v6() != is6; })) {
    same_family = vs_in;
    std::erase_if(same_family.backends, [&](const cp::RealServer& b) { return b.ip.is_v6() != is6; });
    vsp = &same_family;
  }
  const cp::VirtualService& vs = *vsp;
  // lower_bound rather than find: a new record goes in at this position
  // without a second search of recs_.
  auto it = recs_.lower_bound(vs.key);
  const bool fresh = it == recs_.end() || recs_.key_comp()(vs.key, it->first);
  if (!fresh && it->second.spec == vs_in) return true;
  // New destinations need free slots now: the slots of destinations leaving
  // this service are only released after the quiescent period.
  size_t needed = 0;
  for (const auto& b : vs.backends)
    if (fresh || !find_slot(it->second.slots, b.ip, b.port)) ++needed;
  if (needed > free_slots_.size()) {
    *error = "destination capacity exhausted (max-dests " + std::to_string(sh_.max_dests) + ") at " +
             cp::to_string(vs.key);
    return false;
  }
  if (fresh && free_ids_.empty()) {
    *error = "service capacity exhausted (max-services " + std::to_string(sh_.max_services) + ")";
    return false;
  }
  const size_t n = vs.backends.size();
  const Sched sched = vs.scheduler;
  const uint32_t tsize = sched == Sched::kMh ? sh_.mh_table_size
                         : (sched == Sched::kSh || sched == Sched::kDh) ? kShTableSize : 0;
  if (sched == Sched::kMh && n >= tsize) {
    *error = cp::to_string(vs.key) + ": mh needs a Maglev table larger than its " + std::to_string(n) +
             " destinations (--mh-table-size)";
    return false;
  }
  // loadBalancerSourceRanges ("a.b.c.d/n", validated and normalized by the
  // sources); an entry that does not parse is refused rather than dropped,
  // which would open the service to everyone.
  std::vector<SourceRange> ranges;
  std::vector<SourceRange6> ranges6;
  for (const std::string& r : vs.source_ranges) {
    if (is6) {
      const auto pre = cp::IpPrefix::parse(r);
      if (!pre || !pre->addr.is_v6()) {
        *error = cp::to_string(vs.key) + ": source range '" + r + "' is not an IPv6 CIDR";
        return false;
      }
      SourceRange6 s6{};
      for (unsigned b = 0; b < 16; ++b) {
        const unsigned bits = pre->len > b * 8 ? std::min(8u, pre->len - b * 8) : 0;
        s6.mask[b] = static_cast<uint8_t>(bits ? 0xff << (8 - bits) : 0);
        s6.net[b] = pre->addr.v6_bytes()[b] & s6.mask[b];
      }
      ranges6.push_back(s6);
      continue;
    }
    const auto slash = r.find('/');
    const auto net = cp::parse_ipv4(r.substr(0, slash));
    int len = -1;
    if (slash != std::string::npos && slash + 1 < r.size() && r.size() - slash <= 3 &&
        r.find_first_not_of("0123456789", slash + 1) == std::string::npos)
      len = std::stoi(r.substr(slash + 1));
    if (!net || len < 0 || len > 32) {
      *error = cp::to_string(vs.key) + ": source range '" + r + "' is not an IPv4 CIDR";
      return false;
    }
    const uint32_t mask = len == 0 ? 0 : ~0u << (32 - len);
    ranges.push_back({*net & mask, mask});
  }
  // IPv6: the Service6Ext, the destinations' addresses and the IPv6 source
  // ranges follow the destinations (v6_tables.h).
  const size_t ext_bytes = is6 ? sizeof(Service6Ext) + n * 16 + ranges6.size() * sizeof(SourceRange6) : 0;
  const size_t dest_bytes = (is6 ? service6_ext_offset(static_cast<uint32_t>(n)) : sizeof(Service) + n * sizeof(DestRef)) +
                            ext_bytes;
  const size_t range_bytes = ranges.size() * sizeof(SourceRange);
  auto* obj = static_cast<Service*>(
      rte_zmalloc("vipd_service", dest_bytes + range_bytes + tsize * sizeof(uint16_t), 64));
  if (!obj) {
    *error = "out of DPDK memory for service " + cp::to_string(vs.key);
    return false;
  }
  Rec& r = fresh ? recs_.emplace_hint(it, std::piecewise_construct, std::forward_as_tuple(vs.key), std::tuple<>())->second
                 : it->second;
  if (fresh) {
    r.id = free_ids_.back();
    free_ids_.pop_back();
    vip_ref(vs.key.vip, +1, d);
  }
  SlotList slots;
  slots.reserve(n);
  bool slots_sorted = true;  // backends come sorted and unique (ServiceTable::normalize)
  Service6Ext* ext = nullptr;
  uint8_t(*dest_ip)[16] = nullptr;
  if (is6) {
    auto* base = reinterpret_cast<uint8_t*>(obj) + service6_ext_offset(static_cast<uint32_t>(n));
    ext = reinterpret_cast<Service6Ext*>(base);
    dest_ip = reinterpret_cast<uint8_t(*)[16]>(base + sizeof(Service6Ext));
    auto* r6 = reinterpret_cast<SourceRange6*>(base + sizeof(Service6Ext) + n * 16);
    std::copy(ranges6.begin(), ranges6.end(), r6);
    std::memcpy(ext->vip, vs.key.vip.v6_bytes().data(), 16);
    ext->n_ranges = static_cast<uint32_t>(ranges6.size());
    ext->ranges = ranges6.empty() ? nullptr : r6;
    ext->dest_ip = dest_ip;
  }
  obj->id = r.id;
  obj->vip = is6 ? fold6(vs.key.vip.v6_bytes().data()) : vs.key.vip.v4();
  obj->port = vs.key.port;
  obj->proto = static_cast<uint8_t>(vs.key.protocol);
  obj->sched = sched;
  obj->drop_when_empty = vs.when_empty == cp::WhenEmpty::kDrop ? 1 : 0;
  obj->proxy_protocol = vs.proxy_protocol;
  obj->persistence_s = vs.persistence_timeout_s;
  obj->n_dests = static_cast<uint32_t>(n);
  int32_t maxw = 0, g = 0;
  uint32_t weighted = 0;
  for (size_t i = 0; i < n; ++i) {
    const cp::RealServer& b = vs.backends[i];
    uint32_t slot;
    DestSlot* old = r.slots.empty() ? nullptr : find_slot(r.slots, b.ip, b.port);
    if (old && old->slot != kSlotTaken) {
      slot = old->slot;
      old->slot = kSlotTaken;
    } else {
      slot = free_slots_.front();
      free_slots_.pop_front();
      if (slot >= slot_high_water_) slot_high_water_ = slot + 1;
    }
    if (!slots.empty() && !dest_before(slots.back(), b.ip, b.port)) slots_sorted = false;
    slots.push_back({b.ip, b.port, slot});
    DestRef& dr = obj->dests[i];
    if (is6) std::memcpy(dest_ip[i], b.ip.v6_bytes().data(), 16);
    dr.ip = is6 ? fold6(b.ip.v6_bytes().data()) : b.ip.v4();
    dr.port = b.port;
    // Steering off (mask 0): the bits would be 0 whatever the hash; skip its 12 lookups.
    dr.rss = sh_.rss.mask ? rss_dest_bits(sh_.rss, dr.ip, dr.port) : 0;
    dr.weight = b.weight;
    dr.slot = slot;
    dr.gen = sh_.dest_slots[slot].gen.load(std::memory_order_relaxed);
    if (b.weight > 0) {
      ++weighted;
      maxw = std::max<int32_t>(maxw, static_cast<int32_t>(b.weight));
      g = std::gcd(g, static_cast<int32_t>(b.weight));
    }
  }
  if (!ranges.empty()) {
    auto* rs = reinterpret_cast<SourceRange*>(reinterpret_cast<uint8_t*>(obj) + dest_bytes);
    std::copy(ranges.begin(), ranges.end(), rs);
    obj->ranges = rs;
    obj->n_ranges = static_cast<uint32_t>(ranges.size());
  }
  obj->n_weighted = weighted;
  obj->max_weight = maxw;
  obj->gcd_weight = g > 0 ? g : 1;
  if (tsize) {
    // Lookup tables are built here, off the fast path, and published with the
    // object they belong to.
    const std::vector<uint16_t> t = sched == Sched::kMh
                                        ? build_maglev_table(obj->dests, obj->n_dests, tsize)
                                        : build_sh_table(obj->dests, obj->n_dests);
    auto* tab = reinterpret_cast<uint16_t*>(reinterpret_cast<uint8_t*>(obj) + dest_bytes + range_bytes);
    std::copy(t.begin(), t.end(), tab);
    obj->table = tab;
    obj->table_size = tsize;
  }
  // Destinations that disappeared: expire their connections after quiescence.
  if (!slots_sorted) {
    // Not reached with a normalized table. As a map assigned in backend order
    // would: sorted, and of equal (ip, port) the last assignment kept.
    std::stable_sort(slots.begin(), slots.end(),
                     [](const DestSlot& a, const DestSlot& b) { return dest_before(a, b.ip, b.port); });
    SlotList uniq;
    for (size_t i = 0; i < slots.size(); ++i)
      if (i + 1 == slots.size() || dest_before(slots[i], slots[i + 1].ip, slots[i + 1].port))
        uniq.push_back(slots[i]);
    slots = std::move(uniq);
  }
  for (const DestSlot& e : r.slots)
    if (e.slot != kSlotTaken) d.dead_slots.push_back(e.slot);
  r.slots = std::move(slots);
  if (!vip_put(vs.key, obj)) {
    // Only a new key can fail (an existing key is updated in place): undo the
    // record. Its slots and id were never published, so they are free at once.
    *error = "VIP table full adding " + cp::to_string(vs.key);
    rte_free(obj);
    if (fresh) {
      for (const DestSlot& e : r.slots) free_slots_.push_front(e.slot);
      free_ids_.push_back(r.id);
      vip_ref(vs.key.vip, -1, d);
      recs_.erase(vs.key);
    }
    return false;
  }
  if (r.obj) d.objs.push_back(r.obj);
  r.obj = obj;
  r.spec = vs_in;
  return true;
}

void Publisher::remove(const cp::ServiceKey& k, Deferred& d) {
  auto it = recs_.find(k);
  if (it == recs_.end()) return;
  Rec& r = it->second;
  vip_del(k, d);
  d.objs.push_back(r.obj);
  for (const DestSlot& e : r.slots) d.dead_slots.push_back(e.slot);
  d.ids.push_back(r.id);
  vip_ref(k.vip, -1, d);
  recs_.erase(it);
}

void Publisher::reclaim(Deferred& d) {
  if (d.empty()) return;
  // Wait until no worker can still hold a pointer read before the changes.
  rte_rcu_qsbr_synchronize(sh_.qsbr, RTE_QSBR_THRID_INVALID);
  for (void* o : d.objs) rte_free(o);
  for (int32_t p : d.vip_positions) rte_hash_free_key_with_position(sh_.vip_table, p);
  for (int32_t p : d.addr_positions) rte_hash_free_key_with_position(sh_.vip_addrs, p);
  for (int32_t p : d.vip6_positions) rte_hash_free_key_with_position(sh_.v6->vip_table, p);
  for (int32_t p : d.addr6_positions) rte_hash_free_key_with_position(sh_.v6->vip_addrs, p);
  for (uint32_t s : d.dead_slots) {
    // No published object refers to the slot any more: bumping the generation
    // expires every connection still pinned to it (expire_nodest_conn).
    bump_dest_gen(sh_, s);
    if (slot_released_) slot_released_(s);
    free_slots_.push_back(s);
  }
  for (uint32_t id : d.ids) free_ids_.push_back(id);
  d = Deferred{};
}

bool Publisher::apply(const cp::ServiceTable& next, const cp::TableDiff& diff, bool full,
                      std::string* error) {
  Deferred d;
  bool ok = true;
  if (full) {
    std::vector<cp::ServiceKey> gone;
    for (auto& [k, r] : recs_)
      if (!next.services.count(k)) gone.push_back(k);
    for (auto& k : gone) remove(k, d);
    for (auto& [k, vs] : next.services)
      if (!upsert(vs, d, error)) { ok = false; break; }
  } else {
    for (auto& k : diff.removed) remove(k, d);
    for (const auto* vs : diff.added)
      if (ok && !upsert(*vs, d, error)) ok = false;
    for (const auto* vs : diff.changed)
      if (ok && !upsert(*vs, d, error)) ok = false;
  }
  reclaim(d);
  return ok;
}

}  // namespace vipd::dp
