// Thread: any.
#include "controlplane/backends/ipvs/ipvs_kernel.h"

#include <cerrno>
#include <cstring>

namespace vipd::cp::ipvs {

std::string kernel_error_text(int err) {
  switch (err) {
    case 0: return "ok";
    case kErrNoFamily:
      return "IPVS is not available: the kernel has no generic netlink family \"IPVS\" "
             "(load the module: modprobe ip_vs)";
    case kErrBadReply: return "the kernel's IPVS answer could not be parsed";
    case kErrSocket: return "cannot open a netlink socket";
    case EEXIST: return "already exists in the kernel (EEXIST)";
    case ESRCH: return "no such virtual service in the kernel (ESRCH)";
    case ENOENT: return "not found in the kernel (ENOENT)";
    case EPERM:
    case EACCES: return "permission denied (" + std::string(err == EPERM ? "EPERM" : "EACCES") +
                        "): vipd needs CAP_NET_ADMIN (normally root)";
    case EINVAL: return "the kernel refused the request as invalid (EINVAL)";
    case EBUSY: return "busy (EBUSY)";
    case ENODEV: return "no such device (ENODEV)";
    case EOPNOTSUPP: return "not supported by this kernel (EOPNOTSUPP)";
    case EADDRNOTAVAIL: return "address not available (EADDRNOTAVAIL)";
    case EAFNOSUPPORT: return "address family not supported (EAFNOSUPPORT): a kernel without IPv6 in IPVS (CONFIG_IP_VS_IPV6)?";
    default: break;
  }
  if (err > 0 && err < 4096) return std::string(std::strerror(err)) + " (errno " + std::to_string(err) + ")";
  return "error " + std::to_string(err);
}

std::string describe_op(const std::string& op, const std::string& what, int err) {
  std::string s = op + " " + what + ": " + kernel_error_text(err);
  // A scheduler that is not loaded makes NEW/SET_SERVICE answer ENOENT.
  if (err == ENOENT && op.find("service") != std::string::npos && op.find("delete") == std::string::npos)
    s += "; is the scheduler's module loaded (modprobe ip_vs_<scheduler>)?";
  return s;
}

std::string dest_to_string(const IpAddr& ip, uint16_t port) {
  return host_port(ip, port);
}

std::string host_prefix(const IpAddr& a) { return a.to_string() + (a.is_v4() ? "/32" : "/128"); }

}  // namespace vipd::cp::ipvs
