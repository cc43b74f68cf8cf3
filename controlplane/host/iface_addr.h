// Thread: control. Addresses on kernel interfaces over rtnetlink (libnl-route-3):
// the exception interfaces of dpdk mode (docs/gateway.md) get their port's
// address this way.
#pragma once

#include <cstdint>
#include <string>

namespace vipd::cp::host {

// Adds ip/prefix_len (host order) to interface `ifname` and sets it up. An
// address already there is fine. False + *error (naming the interface).
bool add_iface_address(const std::string& ifname, uint32_t ip, uint8_t prefix_len, std::string* error);

}  // namespace vipd::cp::host
