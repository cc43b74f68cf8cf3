// Thread: control.
#include "controlplane/host/iface_addr.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <netlink/addr.h>
#include <netlink/errno.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <sys/socket.h>

#include "controlplane/host/rtnl.h"

namespace vipd::cp::host {

bool add_iface_address(const std::string& ifname, uint32_t ip, uint8_t prefix_len, std::string* error) {
  auto fail = [&](const std::string& what, int nle) {
    *error = "exception path: interface '" + ifname + "': " + what + ": " + nl_geterror(nle);
    return false;
  };
  RtnlSocket rtnl;
  if (int r = rtnl.connect(); r == -NLE_NOMEM) {
    *error = "exception path: cannot allocate a netlink socket";
    return false;
  } else if (r < 0) {
    return fail("netlink connect", r);
  }
  nl_sock* sock = rtnl.get();
  rtnl_link* link = nullptr;
  if (int r = rtnl_link_get_kernel(sock, 0, ifname.c_str(), &link); r < 0 || !link)
    return fail("no such interface", r < 0 ? r : -NLE_OBJ_NOTFOUND);
  const int idx = rtnl_link_get_ifindex(link);
  // Up (net_tap brings it up when the port starts; make sure).
  rtnl_link* change = rtnl_link_alloc();
  int r = change ? 0 : -NLE_NOMEM;
  if (change) {
    rtnl_link_set_flags(change, IFF_UP);
    r = rtnl_link_change(sock, link, change, 0);
    rtnl_link_put(change);
  }
  rtnl_link_put(link);
  if (r < 0) return fail("set up", r);
  const uint32_t be = htonl(ip);
  nl_addr* local = nl_addr_build(AF_INET, &be, 4);
  rtnl_addr* a = rtnl_addr_alloc();
  if (!local || !a) {
    if (local) nl_addr_put(local);
    if (a) rtnl_addr_put(a);
    return fail("address", -NLE_NOMEM);
  }
  nl_addr_set_prefixlen(local, prefix_len);
  rtnl_addr_set_ifindex(a, idx);
  rtnl_addr_set_family(a, AF_INET);
  r = rtnl_addr_set_local(a, local);
  rtnl_addr_set_prefixlen(a, prefix_len);
  if (r >= 0) r = rtnl_addr_add(sock, a, 0);
  rtnl_addr_put(a);
  nl_addr_put(local);
  if (r < 0 && r != -NLE_EXIST) return fail("add address", r);
  return true;
}

}  // namespace vipd::cp::host
