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

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "controlplane/host/rtnl.h"

namespace vipd::cp::host {

std::set<IpAddr> announced_vips(const ServiceTable& t, bool require_endpoints, bool draining, bool with_v6) {
  std::set<IpAddr> out;
  if (draining) return out;
  for (const auto& [key, svc] : t.services) {
    if (key.vip.is_v6() && !with_v6) continue;
    bool ok = !require_endpoints;
    for (const auto& b : svc.backends) ok = ok || b.weight > 0;
    if (ok) out.insert(key.vip);
  }
  return out;
}

bool enable_ipv6_routes(const std::string& ifname, std::string* error) {
  const std::string dir = "/proc/sys/net/ipv6/conf/" + ifname + "/";
  auto put = [&](const char* name, const char* value) {
    const std::string path = dir + name;
    std::FILE* f = std::fopen(path.c_str(), "w");
    bool ok = f && std::fputs(value, f) >= 0;
    if (f && std::fclose(f) != 0) ok = false;
    if (!ok) *error = "announce: cannot write " + std::string(value) + " to " + path + ": " + std::strerror(errno);
    return ok;
  };
  return put("addr_gen_mode", "1") && put("disable_ipv6", "1") && put("disable_ipv6", "0");
}

// One sync's netlink socket and interface index, opened at its first route
// operation (a sync with nothing to change opens nothing) and kept for the
// rest of the sync: one socket and one interface lookup per sync, not per VIP.
struct RouteAnnouncer::Session {
  RtnlSocket sock;
  int idx = 0;
};

bool RouteAnnouncer::route_op(Session& s, const IpAddr& vip, bool add, std::string* error) {
  auto fail = [&](const std::string& what, int nle) {
    *error = "announce: " + vip.to_string() + "/" + std::to_string(vip.bits()) + " table " + std::to_string(table_) +
             " dev " + ifname_ + ": " + what + ": " + nl_geterror(nle);
    if (vip.is_v6() && (nle == -NLE_NOACCESS || nle == -NLE_PERM)) *error += " (IPv6 disabled on the interface?)";
    return false;
  };
  if (!s.idx) {
    if (int r = s.sock.connect(); r < 0) return fail(r == -NLE_NOMEM ? "netlink socket" : "netlink connect", r);
    if (int r = s.sock.ifindex(ifname_, &s.idx); r < 0) return fail("no such interface", r);
  }
  nl_sock* sock = s.sock.get();
  const int idx = s.idx;
  const int family = vip.is_v4() ? AF_INET : AF_INET6;
  const uint32_t be = htonl(vip.v4());
  nl_addr* dst = vip.is_v4() ? nl_addr_build(AF_INET, &be, 4) : nl_addr_build(AF_INET6, vip.v6_bytes().data(), 16);
  rtnl_route* route = rtnl_route_alloc();
  rtnl_nexthop* nh = rtnl_route_nh_alloc();
  if (!dst || !route || !nh) {
    if (dst) nl_addr_put(dst);
    if (route) rtnl_route_put(route);
    if (nh) rtnl_route_nh_free(nh);
    return fail("allocation", -NLE_NOMEM);
  }
  nl_addr_set_prefixlen(dst, static_cast<int>(vip.bits()));
  rtnl_route_set_family(route, static_cast<uint8_t>(family));
  rtnl_route_set_table(route, table_);
  rtnl_route_set_protocol(route, RTPROT_STATIC);
  // IPv6 routes have no scope (the kernel keeps universe).
  rtnl_route_set_scope(route, vip.is_v4() ? RT_SCOPE_LINK : RT_SCOPE_UNIVERSE);
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

bool RouteAnnouncer::sync(const std::set<IpAddr>& want, std::string* error, bool refresh) {
  Session s;
  std::vector<IpAddr> gone;
  for (const IpAddr& v : have_)
    if (!want.count(v)) gone.push_back(v);
  for (const IpAddr& v : gone) {
    if (!route_op(s, v, false, error)) return false;
    have_.erase(v);
  }
  for (const IpAddr& v : want) {
    if (have_.count(v) && !refresh) continue;
    if (!route_op(s, v, true, error)) return false;
    have_.insert(v);
  }
  return true;
}

}  // namespace vipd::cp::host
