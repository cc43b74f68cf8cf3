// Thread: control. A Backend programs a ServiceTable into one dataplane
// (dpdk, iptables, ipvs). Implementations keep no Kubernetes vocabulary.
#pragma once

#include <string>

#include "controlplane/model/service_table.h"

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
};

}  // namespace vipd::cp
