// Thread: control (parsed once at start-up). The port specifications of the
// option table: `--port DEVICE IP/PREFIX [via GATEWAY]` and the items of
// `--port-ipv6` (ADDR[/PREFIX] [via GATEWAY] or '-'). Internal to
// controlplane/config; errors as option_values.h.
#pragma once

#include <cstdint>
#include <string>

#include "controlplane/config/options.h"

namespace vipd::config::values {

// One `--port` value.
PortConfig parse_port(const std::string& value);

// One entry of --port-ipv6: "-", or "ADDR[/PREFIX] [via GATEWAY]".
struct PortIpv6 {
  std::string addr = "-";
  uint8_t prefix_len = 64;
  std::string gateway;  // "" = none
};
// One item of the --port-ipv6 list `whole`.
PortIpv6 parse_port_ipv6(const std::string& whole, const std::string& item);
// Stores the whole --port-ipv6 list in the dataplane settings / reads it back.
void set_port_ipv6(DataplaneSettings& d, const std::string& value);
std::string port_ipv6_text(const DataplaneSettings& d);

}  // namespace vipd::config::values
