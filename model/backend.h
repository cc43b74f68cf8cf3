// Thread: control. A Backend programs a ServiceTable into one dataplane
// (dpdk, iptables, ipvs). Implementations keep no Kubernetes vocabulary.
#pragma once

#include <cstdint>
#include <string>

#include "model/service_table.h"

namespace vipd::cp {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  // Programs `next`. `diff` is relative to the table of the last successful
  // apply (all services "added" on the first call or after a failure, when
  // `full` is true). Returns false and sets *error (one line) on failure; the
  // caller then retries with a full sync.
  virtual bool apply(const ServiceTable& next, const TableDiff& diff, bool full,
                     std::string* error) = 0;
  // Periodic work between syncs that no source change triggers (ipvs mode:
  // deleting real servers whose connections have drained). The SyncLoop calls
  // tick() on its thread about every tick_interval_ms() (0, the default: never),
  // only after a successful apply and while no retry is pending. Returning false
  // (with *error, one line) makes the loop log it and schedule a full sync.
  virtual uint32_t tick_interval_ms() const { return 0; }
  virtual bool tick(std::string* /*error*/) { return true; }
};

}  // namespace vipd::cp
