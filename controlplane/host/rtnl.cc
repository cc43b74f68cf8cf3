// Thread: control.
#include "controlplane/host/rtnl.h"

#include <netlink/errno.h>
#include <netlink/netlink.h>
#include <netlink/route/link.h>

namespace vipd::cp::host {

RtnlSocket::~RtnlSocket() {
  if (sock_) nl_socket_free(sock_);
}

int RtnlSocket::connect() {
  if (sock_) return 0;
  nl_sock* s = nl_socket_alloc();
  if (!s) return -NLE_NOMEM;
  if (int r = nl_connect(s, NETLINK_ROUTE); r < 0) {
    nl_socket_free(s);
    return r;
  }
  sock_ = s;
  return 0;
}

int RtnlSocket::ifindex(const std::string& name, int* out) {
  rtnl_link* link = nullptr;
  if (int r = rtnl_link_get_kernel(sock_, 0, name.c_str(), &link); r < 0 || !link)
    return r < 0 ? r : -NLE_OBJ_NOTFOUND;
  *out = rtnl_link_get_ifindex(link);
  rtnl_link_put(link);
  return 0;
}

}  // namespace vipd::cp::host
