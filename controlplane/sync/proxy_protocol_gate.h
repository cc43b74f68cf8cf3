// Thread: control (the sync loop's thread). A Backend in front of another for
// the modes that cannot send the PROXY protocol header (the kernel modes, dpdk
// nat): services that ask for one (vipd.io/proxy-protocol, --proxy-protocol)
// are programmed without it, and one warning line names them, logged again
// only when the set of such services changes (not on every sync).
#pragma once

#include <string>
#include <vector>

#include "model/backend.h"
#include "model/service_table.h"

namespace vipd::cp {

// The names ("ns/svc:port") of the services in `t` that ask for a PROXY
// protocol header, sorted, unique.
std::vector<std::string> proxy_protocol_services(const ServiceTable& t);

// The warning line for `names` in `mode` ("ipvs mode", "dpdk nat mode").
std::string proxy_protocol_warning(const std::vector<std::string>& names, const std::string& mode);

class ProxyProtocolGate : public Backend {
 public:
  // `mode` names the mode in the warning. `warn` receives the line (default:
  // log_warn).
  ProxyProtocolGate(Backend& inner, std::string mode);
  ProxyProtocolGate(Backend& inner, std::string mode, void (*warn)(const std::string&));

  const char* name() const override { return inner_.name(); }
  bool apply(const ServiceTable& next, const TableDiff& diff, bool full, std::string* error) override;
  uint32_t tick_interval_ms() const override { return inner_.tick_interval_ms(); }
  bool tick(std::string* error) override { return inner_.tick(error); }

 private:
  Backend& inner_;
  std::string mode_;
  void (*warn_)(const std::string&);
  std::vector<std::string> warned_;  // the set named by the last warning
  ServiceTable stripped_;            // `next` without PROXY protocol (diff points here)
};

}  // namespace vipd::cp
