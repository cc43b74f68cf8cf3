// Thread: control (one instance per backend; not thread-safe). The real
// VipInterface: a dummy interface (default vipd-ipvs0) managed over rtnetlink
// with libnl-route-3, through the host helpers' socket (host::RtnlSocket:
// connected at first use, closed with the object). It is created when
// missing and left down, like
// kube-proxy's kube-ipvs0: an address on it still gets its local route, so the
// kernel accepts packets to the VIP and IPVS (LOCAL_IN) takes them. Addresses
// are IPv4 /32 and IPv6 /128 (flag nodad: usable at once; a dummy does no DAD
// anyway). list() leaves out link-local IPv6 addresses (fe80::/10: the
// kernel's own, should the interface be set up). The interface stays when
// vipd stops (the services need it).
#pragma once

#include <string>

#include "controlplane/backends/ipvs/ipvs_kernel.h"
#include "controlplane/host/rtnl.h"

namespace vipd::cp::ipvs {

class NetlinkVipInterface final : public VipInterface {
 public:
  explicit NetlinkVipInterface(std::string name) : name_(std::move(name)) {}
  NetlinkVipInterface(const NetlinkVipInterface&) = delete;
  NetlinkVipInterface& operator=(const NetlinkVipInterface&) = delete;

  const std::string& name() const override { return name_; }
  int ensure() override;
  int list(std::vector<IpAddr>* out) override;
  int bind(const IpAddr& a) override;
  int unbind(const IpAddr& a) override;

 private:
  int ifindex(int* out);  // connects first; ENODEV when the interface does not exist
  int addr_op(const IpAddr& a, bool add);

  std::string name_;
  host::RtnlSocket rtnl_;  // the NETLINK_ROUTE socket the host helpers share
};

// libnl's NLE_* code (positive or negative) as the closest errno.
int nle_to_errno(int nle);

}  // namespace vipd::cp::ipvs
