// Thread: control.
#include "controlplane/host/route_announcer.h"

#include <arpa/inet.h>
#include <linux/rtnetlink.h>
#include <netlink/addr.h>
#include <netlink/errno.h>
#include <netlink/netlink.h>
#include <netlink/route/nexthop.h>
#include <netlink/route/route.h>
#include <sys/socket.h>

#include <vector>

#include "controlplane/host/rtnl.h"

namespace vipd::cp::host {

std::set<Ipv4> announced_vips(const ServiceTable& t, bool require_endpoints, bool draining) {
  std::set<Ipv4> out;
  if (draining) return out;
  for (const auto& [key, svc] : t.services) {
    if (!key.vip.is_v4()) continue;  // IPv6 VIPs are not served by the dataplane yet
    bool ok = !require_endpoints;
    for (const auto& b : svc.backends) ok = ok || b.weight > 0;
    if (ok) out.insert(key.vip.v4());
  }
  return out;
}

// One sync's netlink socket and interface index, opened at its first route
// operation (a sync with nothing to change opens nothing) and kept for the
// rest of the sync: one socket and one interface lookup per sync, not per VIP.
struct RouteAnnouncer::Session {
  RtnlSocket sock;
  int idx = 0;
};

bool RouteAnnouncer::route_op(Session& s, Ipv4 vip, bool add, std::string* error) {
  auto fail = [&](const std::string& what, int nle) {
    *error = "announce: " + ipv4_to_string(vip) + "/32 table " + std::to_string(table_) + " dev " + ifname_ +
             ": " + what + ": " + nl_geterror(nle);
    return false;
  };
  if (!s.idx) {
    if (int r = s.sock.connect(); r < 0) return fail(r == -NLE_NOMEM ? "netlink socket" : "netlink connect", r);
    if (int r = s.sock.ifindex(ifname_, &s.idx); r < 0) return fail("no such interface", r);
  }
  nl_sock* sock = s.sock.get();
  const int idx = s.idx;
  const uint32_t be = htonl(vip);
  nl_addr* dst = nl_addr_build(AF_INET, &be, 4);
  rtnl_route* route = rtnl_route_alloc();
  rtnl_nexthop* nh = rtnl_route_nh_alloc();
  if (!dst || !route || !nh) {
    if (dst) nl_addr_put(dst);
    if (route) rtnl_route_put(route);
    if (nh) rtnl_route_nh_free(nh);
    return fail("allocation", -NLE_NOMEM);
  }
  nl_addr_set_prefixlen(dst, 32);
  rtnl_route_set_family(route, AF_INET);
  rtnl_route_set_table(route, table_);
  rtnl_route_set_protocol(route, RTPROT_STATIC);
  rtnl_route_set_scope(route, RT_SCOPE_LINK);
  rtnl_route_set_type(route, RTN_UNICAST);
  int r = rtnl_route_set_dst(route, dst);
  rtnl_route_nh_set_ifindex(nh, idx);
  rtnl_route_add_nexthop(route, nh);  // owned by the route now
  if (r >= 0) r = add ? rtnl_route_add(sock, route, NLM_F_CREATE | NLM_F_REPLACE) : rtnl_route_delete(sock, route, 0);
  rtnl_route_put(route);
  nl_addr_put(dst);
  if (r < 0 && !(!add && (r == -NLE_OBJ_NOTFOUND || r == -NLE_NOADDR)))
    return fail(add ? "add" : "delete", r);
  return true;
}

bool RouteAnnouncer::sync(const std::set<Ipv4>& want, std::string* error, bool refresh) {
  Session s;
  std::vector<Ipv4> gone;
  for (Ipv4 v : have_)
    if (!want.count(v)) gone.push_back(v);
  for (Ipv4 v : gone) {
    if (!route_op(s, v, false, error)) return false;
    have_.erase(v);
  }
  for (Ipv4 v : want) {
    if (have_.count(v) && !refresh) continue;
    if (!route_op(s, v, true, error)) return false;
    have_.insert(v);
  }
  return true;
}

}  // namespace vipd::cp::host
