// Thread: control.
#include "controlplane/backends/ipvs/vip_link.h"

#include <arpa/inet.h>
#include <linux/if_addr.h>
#include <netlink/addr.h>
#include <netlink/cache.h>
#include <netlink/errno.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace vipd::cp::ipvs {

int nle_to_errno(int nle) {
  switch (std::abs(nle)) {
    case 0: return 0;
    case NLE_EXIST: return EEXIST;
    case NLE_OBJ_NOTFOUND: return ENOENT;
    case NLE_NODEV: return ENODEV;
    case NLE_PERM: return EPERM;
    case NLE_NOACCESS: return EACCES;
    case NLE_OPNOTSUPP: return EOPNOTSUPP;
    case NLE_INVAL: return EINVAL;
    case NLE_BUSY: return EBUSY;
    case NLE_NOADDR: return EADDRNOTAVAIL;
    case NLE_NOMEM: return ENOMEM;
    case NLE_AGAIN: return EAGAIN;
    case NLE_AF_NOSUPPORT: return EAFNOSUPPORT;
    default: return EIO;
  }
}

int NetlinkVipInterface::ifindex(int* out) {
  if (rtnl_.connect() < 0) return kErrSocket;
  const int r = rtnl_.ifindex(name_, out);
  if (r < 0) {
    const int e = nle_to_errno(r);
    return e == ENOENT || e == EIO ? ENODEV : e;
  }
  return *out > 0 ? 0 : ENODEV;
}

int NetlinkVipInterface::ensure() {
  int idx = 0;
  const int e = ifindex(&idx);
  if (e != ENODEV) return e;
  rtnl_link* link = rtnl_link_alloc();
  if (!link) return ENOMEM;
  rtnl_link_set_name(link, name_.c_str());
  int r = rtnl_link_set_type(link, "dummy");
  if (r >= 0) r = rtnl_link_add(rtnl_.get(), link, NLM_F_CREATE);
  rtnl_link_put(link);
  if (r < 0) return nle_to_errno(r);
  return ifindex(&idx);
}

int NetlinkVipInterface::list(std::vector<IpAddr>* out) {
  out->clear();
  int idx = 0;
  if (int e = ifindex(&idx)) return e;
  nl_cache* cache = nullptr;
  if (int r = rtnl_addr_alloc_cache(rtnl_.get(), &cache); r < 0) return nle_to_errno(r);
  for (nl_object* o = nl_cache_get_first(cache); o; o = nl_cache_get_next(o)) {
    auto* a = reinterpret_cast<rtnl_addr*>(o);
    if (rtnl_addr_get_ifindex(a) != idx) continue;
    const int fam = rtnl_addr_get_family(a);
    nl_addr* local = rtnl_addr_get_local(a);
    if (!local) continue;
    const auto* bytes = static_cast<const uint8_t*>(nl_addr_get_binary_addr(local));
    if (fam == AF_INET && nl_addr_get_len(local) == 4) {
      uint32_t be;
      std::memcpy(&be, bytes, 4);
      out->push_back(IpAddr(ntohl(be)));
    } else if (fam == AF_INET6 && nl_addr_get_len(local) == 16) {
      if (bytes[0] == 0xfe && (bytes[1] & 0xc0) == 0x80) continue;  // link-local: not a VIP
      out->push_back(IpAddr::v6(bytes));
    }
  }
  nl_cache_free(cache);
  return 0;
}

int NetlinkVipInterface::addr_op(const IpAddr& ip, bool add) {
  int idx = 0;
  if (int e = ifindex(&idx)) return e;
  const uint32_t be = htonl(ip.v4());
  const int fam = ip.is_v4() ? AF_INET : AF_INET6;
  const unsigned plen = ip.is_v4() ? 32 : 128;
  nl_addr* local = ip.is_v4() ? nl_addr_build(AF_INET, &be, 4) : nl_addr_build(AF_INET6, ip.v6_bytes().data(), 16);
  rtnl_addr* a = rtnl_addr_alloc();
  if (!local || !a) {
    if (local) nl_addr_put(local);
    if (a) rtnl_addr_put(a);
    return ENOMEM;
  }
  nl_addr_set_prefixlen(local, plen);
  rtnl_addr_set_ifindex(a, idx);
  rtnl_addr_set_family(a, fam);
  int r = rtnl_addr_set_local(a, local);
  rtnl_addr_set_prefixlen(a, plen);
  if (ip.is_v6() && add) rtnl_addr_set_flags(a, IFA_F_NODAD);
  if (r >= 0) r = add ? rtnl_addr_add(rtnl_.get(), a, 0) : rtnl_addr_delete(rtnl_.get(), a, 0);
  rtnl_addr_put(a);
  nl_addr_put(local);
  if (r < 0) {
    const int e = nle_to_errno(r);
    // Removing an address that is not there: rtnetlink says EADDRNOTAVAIL.
    return (!add && e == EADDRNOTAVAIL) ? ENOENT : e;
  }
  return 0;
}

int NetlinkVipInterface::bind(const IpAddr& a) { return addr_op(a, true); }
int NetlinkVipInterface::unbind(const IpAddr& a) { return addr_op(a, false); }

}  // namespace vipd::cp::ipvs
