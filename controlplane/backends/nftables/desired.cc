// Thread: any (pure functions). The desired state of the nftables tables:
// built from a whole ServiceTable (build_desired) or updated in place by a
// TableDiff with its transaction (apply_diff); entries placed in shards.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <unordered_map>

#include "controlplane/backends/iptables/chain_names.h"
#include "controlplane/backends/iptables/ruleset.h"
#include "controlplane/backends/nftables/ruleset.h"
#include "controlplane/backends/nftables/ruleset_internal.h"

namespace vipd::cp::nft {

using detail::EntryPair;
using detail::emit_delta;

namespace {

uint32_t shard_cap(const RenderOptions& o) { return o.shard_size ? o.shard_size : 1; }

// The lowest shard of `fill` with room (a new one past the end when all are full).
uint32_t pick_shard(std::vector<uint32_t>& fill, uint32_t cap) {
  uint32_t s = 0;
  while (s < fill.size() && fill[s] >= cap) ++s;
  if (s == fill.size()) fill.push_back(0);
  ++fill[s];
  return s;
}

}  // namespace

bool Desired::has_cluster_ip(const Vip& v) const {
  auto it = std::lower_bound(cluster_ips.begin(), cluster_ips.end(), std::pair<Vip, int>{v, 0},
                             [](const auto& x, const auto& y) { return x.first < y.first; });
  return it != cluster_ips.end() && it->first == v;
}

bool build_desired(const ServiceTable& table, const RenderOptions& opts, const Desired& prev, Desired* out,
                   size_t* rendered, std::string* error) {
  Desired d;
  size_t fresh = 0;
  // Pass 1: each entry's previous state when its VirtualService is unchanged
  // (a merge walk: both maps are ordered by key), else its hash input.
  struct Item {
    const ServiceKey* key;
    const VirtualService* svc;
    const std::shared_ptr<const Desired::Entry>* old;  // in prev: unchanged VirtualService
    std::string base;                                   // entry_hash_input, only when !old
    int64_t shard;                                      // in prev (-1: new key)
  };
  std::vector<Item> items;
  items.reserve(table.services.size());
  auto p = prev.entries.begin();
  for (const auto& [key, svc] : table.services) {
    while (p != prev.entries.end() && p->first < key) ++p;
    const bool had = p != prev.entries.end() && p->first == key;
    const std::shared_ptr<const Desired::Entry>* old = had && p->second->svc == svc ? &p->second : nullptr;
    items.push_back({&key, &svc, old, old ? std::string() : ipt::entry_hash_input(svc),
                     had ? static_cast<int64_t>(p->second->shard) : -1});
  }
  // Shards: an entry keeps the one it had; new entries fill the lowest shard
  // with room. The shard tables prev declared stay declared.
  const uint32_t cap = shard_cap(opts);
  for (int f = 0; f < 2; ++f) d.shard_fill[f].assign(prev.shard_fill[f].size(), 0);
  for (const auto& it : items)
    if (it.shard >= 0) {
      auto& fill = d.shard_fill[it.key->vip.is_v6()];
      if (fill.size() <= static_cast<size_t>(it.shard)) fill.resize(it.shard + 1, 0);
      ++fill[it.shard];
    }
  for (auto& it : items)
    if (it.shard < 0) it.shard = pick_shard(d.shard_fill[it.key->vip.is_v6()], cap);
  // Chain names collide when two entries have the same hash input: both then
  // use the extended one. Counted by the inputs' 64-bit hashes, sorted (one
  // array; two inputs that only share a hash get the extended names too,
  // which is harmless).
  const auto base_of = [](const Item& it) -> const std::string& { return it.old ? (*it.old)->base_input : it.base; };
  std::vector<size_t> hashes;
  hashes.reserve(items.size());
  for (const auto& it : items) hashes.push_back(std::hash<std::string>{}(base_of(it)));
  std::vector<size_t> sorted = hashes;
  std::sort(sorted.begin(), sorted.end());
  d.entries.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    const Item& it = items[i];
    const VirtualService& svc = *it.svc;
    const Desired::Entry* old = it.old ? it.old->get() : nullptr;
    const std::string& base = base_of(it);
    const auto range = std::equal_range(sorted.begin(), sorted.end(), hashes[i]);
    const bool collides = range.second - range.first > 1;
    if (svc.kind == ServiceKind::kClusterIp) {
      // keys are ordered by VIP first: equal VIPs are adjacent
      if (!d.cluster_ips.empty() && d.cluster_ips.back().first == it.key->vip)
        ++d.cluster_ips.back().second;
      else
        d.cluster_ips.emplace_back(it.key->vip, 1);
    }
    if (old && (old->hash_input != old->base_input) == collides) {
      d.chain_count += old->render.chains.size();
      d.entries.emplace_back(*it.key, *it.old);
      continue;
    }
    auto e = std::make_shared<Desired::Entry>(Desired::Entry{
        svc, collides ? ipt::entry_hash_input_extended(svc) : base, {}, base, static_cast<uint32_t>(it.shard)});
    if (!render_entry(svc, e->hash_input, opts, &e->render, error)) return false;
    ++fresh;
    d.chain_count += e->render.chains.size();
    d.entries.emplace_back(*it.key, std::move(e));
  }
  d.base_hashes = std::move(sorted);
  d.masq_mark = opts.masq_mark;
  if (rendered) *rendered = fresh;
  *out = std::move(d);
  return true;
}

DiffResult apply_diff(Desired* st, const TableDiff& diff, const RenderOptions& opts, Transaction* tx,
                      size_t* rendered, std::string* error) {
  using Entries = decltype(st->entries);
  auto find = [st](const ServiceKey& k) -> Entries::iterator {
    auto it = std::lower_bound(st->entries.begin(), st->entries.end(), k,
                               [](const auto& e, const ServiceKey& key) { return e.first < key; });
    return it != st->entries.end() && it->first == k ? it : st->entries.end();
  };
  struct Touch {
    ServiceKey key;
    const VirtualService* svc;               // null: removed
    std::shared_ptr<const Desired::Entry> old;  // null: added
    std::shared_ptr<Desired::Entry> fresh;
  };
  std::vector<Touch> touches;
  touches.reserve(diff.added.size() + diff.changed.size() + diff.removed.size());
  for (const VirtualService* v : diff.added) {
    if (find(v->key) != st->entries.end()) return DiffResult::kFallback;
    touches.push_back({v->key, v, nullptr, nullptr});
  }
  for (const VirtualService* v : diff.changed) {
    auto it = find(v->key);
    if (it == st->entries.end()) return DiffResult::kFallback;
    touches.push_back({v->key, v, it->second, nullptr});
  }
  for (const ServiceKey& k : diff.removed) {
    auto it = find(k);
    if (it == st->entries.end()) return DiffResult::kFallback;
    touches.push_back({k, nullptr, it->second, nullptr});
  }
  std::sort(touches.begin(), touches.end(), [](const Touch& a, const Touch& b) { return a.key < b.key; });
  for (size_t i = 1; i < touches.size(); ++i)
    if (touches[i - 1].key == touches[i].key) return DiffResult::kFallback;

  // Chain names: an entry whose hash input is unchanged keeps its names; any
  // other hash input must be unique in the table (else build_desired decides
  // which entries take the extended names).
  const auto hash_count = [st](size_t h) {
    const auto r = std::equal_range(st->base_hashes.begin(), st->base_hashes.end(), h);
    return static_cast<size_t>(r.second - r.first);
  };
  std::vector<size_t> hashes_gone, hashes_new;
  std::vector<std::string> bases(touches.size());
  for (size_t i = 0; i < touches.size(); ++i) {
    const Touch& t = touches[i];
    if (t.old && t.old->hash_input != t.old->base_input) return DiffResult::kFallback;
    if (!t.svc) {
      hashes_gone.push_back(std::hash<std::string>{}(t.old->base_input));
      continue;
    }
    bases[i] = ipt::entry_hash_input(*t.svc);
    if (t.old && bases[i] == t.old->base_input) continue;
    if (t.old) hashes_gone.push_back(std::hash<std::string>{}(t.old->base_input));
    hashes_new.push_back(std::hash<std::string>{}(bases[i]));
  }
  std::sort(hashes_gone.begin(), hashes_gone.end());
  std::sort(hashes_new.begin(), hashes_new.end());
  for (size_t i = 0; i < hashes_new.size(); ++i) {
    const size_t h = hashes_new[i];
    const auto g = std::equal_range(hashes_gone.begin(), hashes_gone.end(), h);
    if ((i && hashes_new[i - 1] == h) || hash_count(h) > static_cast<size_t>(g.second - g.first))
      return DiffResult::kFallback;
  }

  // Shards: a changed entry keeps its own, a new one takes the lowest with room.
  std::vector<uint32_t> fill[2] = {st->shard_fill[0], st->shard_fill[1]};
  for (const Touch& t : touches)
    if (t.old && !t.svc) --fill[t.key.vip.is_v6()][t.old->shard];
  const uint32_t cap = shard_cap(opts);
  size_t fresh = 0;
  for (size_t i = 0; i < touches.size(); ++i) {
    Touch& t = touches[i];
    if (!t.svc) continue;
    const std::string hash_input = t.old && bases[i] == t.old->base_input ? t.old->hash_input : bases[i];
    auto e = std::make_shared<Desired::Entry>(Desired::Entry{*t.svc, hash_input, {}, bases[i], 0});
    if (!render_entry(*t.svc, e->hash_input, opts, &e->render, error)) return DiffResult::kBadInput;
    ++fresh;
    t.fresh = std::move(e);
  }
  for (Touch& t : touches)
    if (t.fresh) t.fresh->shard = t.old ? t.old->shard : pick_shard(fill[t.key.vip.is_v6()], cap);

  // ClusterIP VIPs whose entry count goes from 0 or to 0
  std::map<Desired::Vip, int> cip_delta;
  for (const Touch& t : touches) {
    if (t.old && t.old->svc.kind == ServiceKind::kClusterIp) --cip_delta[t.key.vip];
    if (t.svc && t.svc->kind == ServiceKind::kClusterIp) ++cip_delta[t.key.vip];
  }
  auto cip_find = [st](const Desired::Vip& v) {
    return std::lower_bound(st->cluster_ips.begin(), st->cluster_ips.end(), std::pair<Desired::Vip, int>{v, 0},
                            [](const auto& x, const auto& y) { return x.first < y.first; });
  };
  std::vector<Desired::Vip> cip_add, cip_del;
  for (const auto& [v, d] : cip_delta) {
    if (!d) continue;
    auto it = cip_find(v);
    const int had = it != st->cluster_ips.end() && it->first == v ? it->second : 0;
    if (had == 0 && had + d > 0) cip_add.push_back(v);
    if (had > 0 && had + d <= 0) cip_del.push_back(v);
  }

  std::vector<EntryPair> pairs;
  for (const Touch& t : touches) pairs.emplace_back(t.old.get(), t.fresh.get());
  std::vector<std::pair<bool, uint32_t>> new_shards;
  for (int f = 0; f < 2; ++f)
    for (size_t k = std::max<size_t>(1, st->shard_fill[f].size()); k < fill[f].size(); ++k)
      new_shards.emplace_back(f == 1, static_cast<uint32_t>(k));
  *tx = emit_delta(pairs, cip_add, cip_del, new_shards, opts, st->retired_chains, st->retired_sets);

  // The state after the transaction.
  for (Touch& t : touches) {
    auto it = std::lower_bound(st->entries.begin(), st->entries.end(), t.key,
                               [](const auto& e, const ServiceKey& key) { return e.first < key; });
    if (t.old) st->chain_count -= t.old->render.chains.size();
    if (t.fresh) st->chain_count += t.fresh->render.chains.size();
    if (t.old && t.fresh)
      it->second = std::move(t.fresh);
    else if (t.old)
      st->entries.erase(it);
    else
      st->entries.emplace(it, t.key, std::move(t.fresh));
  }
  for (const auto& [v, d] : cip_delta) {
    if (!d) continue;
    auto it = cip_find(v);
    if (it != st->cluster_ips.end() && it->first == v) {
      it->second += d;
      if (it->second <= 0) st->cluster_ips.erase(it);
    } else if (d > 0) {
      st->cluster_ips.emplace(it, v, d);
    }
  }
  for (size_t h : hashes_gone) {
    auto it = std::lower_bound(st->base_hashes.begin(), st->base_hashes.end(), h);
    if (it != st->base_hashes.end() && *it == h) st->base_hashes.erase(it);
  }
  for (size_t h : hashes_new) st->base_hashes.insert(std::upper_bound(st->base_hashes.begin(), st->base_hashes.end(), h), h);
  st->shard_fill[0] = std::move(fill[0]);
  st->shard_fill[1] = std::move(fill[1]);
  st->retired_chains = tx->retired_chains;
  st->retired_sets = tx->retired_sets;
  if (rendered) *rendered = fresh;
  return DiffResult::kApplied;
}

}  // namespace vipd::cp::nft
