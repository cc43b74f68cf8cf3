// Thread: control. Backend adapter that hands tables to the DPDK dataplane's
// publisher (through the DPDK-free dataplane facade).
#pragma once

#include "model/backend.h"
#include "dataplane/runtime/dataplane.h"

namespace vipd::cp {

class DpdkBackend final : public Backend {
 public:
  explicit DpdkBackend(dp::Dataplane& dp) : dp_(dp) {}
  const char* name() const override { return "dpdk"; }
  bool apply(const ServiceTable& next, const TableDiff& diff, bool full, std::string* error) override {
    return dp_.apply(next, diff, full, error);
  }

 private:
  dp::Dataplane& dp_;
};

}  // namespace vipd::cp
