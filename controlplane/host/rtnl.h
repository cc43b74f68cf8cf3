// Thread: control.
// A connected NETLINK_ROUTE socket (libnl-3) for the host helpers
// (iface_addr, route_announcer): opened once, closed with the object, and
// the interface-name lookup both need.
#pragma once

#include <string>

struct nl_sock;

namespace vipd::cp::host {

class RtnlSocket {
 public:
  RtnlSocket() = default;
  ~RtnlSocket();
  RtnlSocket(const RtnlSocket&) = delete;
  RtnlSocket& operator=(const RtnlSocket&) = delete;

  // 0, or a negative libnl error: -NLE_NOMEM when no socket could be
  // allocated, else nl_connect's. Connected already: 0.
  int connect();
  // The index of interface `name` (> 0) in *out: 0, or a negative libnl error
  // (-NLE_OBJ_NOTFOUND when there is no such interface).
  int ifindex(const std::string& name, int* out);
  nl_sock* get() const { return sock_; }

 private:
  nl_sock* sock_ = nullptr;
};

}  // namespace vipd::cp::host
