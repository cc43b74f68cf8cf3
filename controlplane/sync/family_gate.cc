// Thread: control.
#include "controlplane/sync/family_gate.h"

#include <algorithm>

#include "common/log.h"

namespace vipd::cp {

FamilySkip drop_ipv6(const ServiceTable& t, ServiceTable* out) {
  FamilySkip skip;
  out->generation = t.generation;
  out->services.clear();
  for (const auto& [key, svc] : t.services) {
    if (!key.vip.is_v4()) {
      ++skip.services;
      continue;
    }
    VirtualService& v = out->services.emplace_hint(out->services.end(), key, svc)->second;
    const size_t before = v.backends.size();
    std::erase_if(v.backends, [](const RealServer& b) { return !b.ip.is_v4(); });
    skip.backends += before - v.backends.size();
  }
  return skip;
}

std::string ipv6_skip_warning(const FamilySkip& skip, const std::string& mode) {
  return "vipd: IPv6 not programmed by " + mode + " yet: " + std::to_string(skip.services) +
         " IPv6 service entr" + (skip.services == 1 ? "y" : "ies") + " and " + std::to_string(skip.backends) +
         " IPv6 backend(s) of IPv4 entries skipped (they stay in the table, the dry-run JSON and vipctl; "
         "docs/modes.md)";
}

FamilyGate::FamilyGate(Backend& inner, std::string mode) : FamilyGate(inner, std::move(mode), &log_warn) {}

FamilyGate::FamilyGate(Backend& inner, std::string mode, void (*warn)(const std::string&))
    : inner_(inner), mode_(std::move(mode)), warn_(warn) {}

bool FamilyGate::apply(const ServiceTable& next, const TableDiff& diff, bool full, std::string* error) {
  const FamilySkip skip = drop_ipv6(next, &ipv4_);
  if (!(skip == warned_) && (skip.services || skip.backends)) warn_(ipv6_skip_warning(skip, mode_));
  warned_ = skip;
  // Removed IPv6 entries were never given to the inner backend.
  const bool v6_removed =
      std::any_of(diff.removed.begin(), diff.removed.end(), [](const ServiceKey& k) { return !k.vip.is_v4(); });
  if (!skip.services && !skip.backends && !v6_removed) return inner_.apply(next, diff, full, error);
  // The same diff without IPv6 entries, pointing into the IPv4 copy.
  TableDiff d;
  for (const ServiceKey& k : diff.removed)
    if (k.vip.is_v4()) d.removed.push_back(k);
  for (const VirtualService* v : diff.added)
    if (v->key.vip.is_v4()) d.added.push_back(&ipv4_.services.at(v->key));
  for (const VirtualService* v : diff.changed)
    if (v->key.vip.is_v4()) d.changed.push_back(&ipv4_.services.at(v->key));
  return inner_.apply(ipv4_, d, full, error);
}

}  // namespace vipd::cp
