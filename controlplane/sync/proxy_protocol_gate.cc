// Thread: control.
#include "controlplane/sync/proxy_protocol_gate.h"

#include <algorithm>

#include "common/log.h"

namespace vipd::cp {

std::vector<std::string> proxy_protocol_services(const ServiceTable& t) {
  std::vector<std::string> names;
  for (const auto& [key, svc] : t.services)
    if (svc.proxy_protocol != ProxyProtocol::kNone) names.push_back(svc.name.empty() ? to_string(key) : svc.name);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

std::string proxy_protocol_warning(const std::vector<std::string>& names, const std::string& mode) {
  constexpr size_t kShown = 5;
  std::string list;
  for (size_t i = 0; i < names.size() && i < kShown; ++i) list += (i ? ", " : "") + names[i];
  if (names.size() > kShown) list += ", ... (" + std::to_string(names.size() - kShown) + " more)";
  return "vipd: PROXY protocol ignored for " + std::to_string(names.size()) + " service(s) (" + list + "): " +
         mode + " cannot insert the header; only dpdk mode with --forward-method fnat can (docs/scheduling.md)";
}

ProxyProtocolGate::ProxyProtocolGate(Backend& inner, std::string mode)
    : ProxyProtocolGate(inner, std::move(mode), &log_warn) {}

ProxyProtocolGate::ProxyProtocolGate(Backend& inner, std::string mode, void (*warn)(const std::string&))
    : inner_(inner), mode_(std::move(mode)), warn_(warn) {}

bool ProxyProtocolGate::apply(const ServiceTable& next, const TableDiff& diff, bool full, std::string* error) {
  std::vector<std::string> wanted = proxy_protocol_services(next);
  if (wanted != warned_ && !wanted.empty()) warn_(proxy_protocol_warning(wanted, mode_));
  warned_ = std::move(wanted);
  if (warned_.empty()) return inner_.apply(next, diff, full, error);
  // The same table and diff, pointing into a copy without the header.
  stripped_ = next;
  for (auto& [key, svc] : stripped_.services) svc.proxy_protocol = ProxyProtocol::kNone;
  TableDiff d;
  d.removed = diff.removed;
  for (const VirtualService* v : diff.added) d.added.push_back(&stripped_.services.at(v->key));
  for (const VirtualService* v : diff.changed) d.changed.push_back(&stripped_.services.at(v->key));
  return inner_.apply(stripped_, d, full, error);
}

}  // namespace vipd::cp
