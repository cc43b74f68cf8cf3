// Thread: control (the sync loop's thread). A Backend in front of another for
// the modes that do not program IPv6 yet: IPv6 entries (and IPv6 real servers,
// should an IPv4 entry hold any) stay in the ServiceTable, the dry-run JSON and
// vipctl, but are dropped before the inner backend sees them. One warning line
// names the counts, logged again only when they change (not on every sync).
#pragma once

#include <cstddef>
#include <string>

#include "model/backend.h"
#include "model/service_table.h"

namespace vipd::cp {

struct FamilySkip {
  size_t services = 0;  // IPv6 entries dropped
  size_t backends = 0;  // IPv6 real servers dropped from IPv4 entries
  bool operator==(const FamilySkip&) const = default;
};

// `t` without its IPv6 entries and IPv6 real servers (into *out); the counts.
FamilySkip drop_ipv6(const ServiceTable& t, ServiceTable* out);

// The warning line for `skip` in `mode` ("iptables mode", "dpdk fnat mode").
std::string ipv6_skip_warning(const FamilySkip& skip, const std::string& mode);

class FamilyGate : public Backend {
 public:
  // `mode` names the mode in the warning. `warn` receives the line (default: log_warn).
  FamilyGate(Backend& inner, std::string mode);
  FamilyGate(Backend& inner, std::string mode, void (*warn)(const std::string&));

  const char* name() const override { return inner_.name(); }
  bool apply(const ServiceTable& next, const TableDiff& diff, bool full, std::string* error) override;
  uint32_t tick_interval_ms() const override { return inner_.tick_interval_ms(); }
  bool tick(std::string* error) override { return inner_.tick(error); }

  const FamilySkip& skipped() const { return warned_; }

 private:
  Backend& inner_;
  std::string mode_;
  void (*warn_)(const std::string&);
  FamilySkip warned_;     // the counts named by the last warning
  ServiceTable ipv4_;     // `next` without IPv6 (the diff given on points here)
};

}  // namespace vipd::cp
