// Thread: control (one IpvsKernel / VipInterface per backend, used only by the
// thread that runs the backend). The kernel access of the ipvs mode, behind two
// small interfaces so that the backend's logic is unit-tested with fakes
// (tests/unit/ipvs) and the netlink implementations (netlink_ipvs.h,
// vip_link.h) are tested against a real kernel (tests/integration/ipvs_test.sh).
//
// Errors are errno values (EEXIST, ESRCH, ENOENT, EPERM, ...) as the kernel
// answered them, or one of the kErr* codes below; 0 is success.
// kernel_error_text() turns them into one line for logs and /v1/status.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/service_table.h"

namespace vipd::cp::ipvs {

// Not errno values: the generic netlink family "IPVS" is unknown to the kernel
// (ip_vs not loaded, or no IPVS in this kernel) / the kernel's answer could not
// be parsed / a netlink socket could not be opened.
inline constexpr int kErrNoFamily = 10001;
inline constexpr int kErrBadReply = 10002;
inline constexpr int kErrSocket = 10003;

// IPVS_SVC_F_PERSISTENT and the forwarding method "masquerade" (IP_VS_CONN_F_MASQ).
inline constexpr uint32_t kFlagPersistent = 0x1;
inline constexpr uint32_t kFwdMasq = 0;

// A virtual service as the kernel holds it (what NEW/SET_SERVICE send and
// GET_SERVICE returns), address+port+protocol form (no fwmark). The family is
// the VIP's (AF_INET / AF_INET6); netmask is the persistence mask: an IPv4
// mask (0xffffffff = /32) or, for IPv6, a prefix length (128).
struct IpvsService {
  ServiceKey key;
  std::string scheduler = name(Scheduler::kRr);  // the kernel's name: any scheduler it has
  uint32_t flags = 0;     // kFlagPersistent or 0 (other bits are the kernel's own)
  uint32_t timeout_s = 0; // persistence timeout, when flags has kFlagPersistent
  uint32_t netmask = 0xffffffffu;
  bool operator==(const IpvsService&) const = default;
};
inline constexpr uint32_t kNetmaskHost4 = 0xffffffffu;  // IPv4: /32
inline constexpr uint32_t kNetmaskHost6 = 128;          // IPv6: prefix length
inline uint32_t host_netmask(const IpAddr& vip) { return vip.is_v4() ? kNetmaskHost4 : kNetmaskHost6; }

// Traffic counters of a service or destination (IPVS_*_ATTR_STATS64).
struct IpvsStats {
  uint64_t conns = 0, inpkts = 0, outpkts = 0, inbytes = 0, outbytes = 0;
};

// A real server (destination) of a virtual service: of the service's family
// (IPVS masquerade does not cross families).
struct IpvsDest {
  IpAddr ip;
  uint16_t port = 0;
  uint32_t weight = 1;
  uint32_t fwd_method = kFwdMasq;
  uint32_t u_thresh = 0, l_thresh = 0;
  // Read back only (GET_DEST): connections by state.
  uint32_t active_conns = 0, inactive_conns = 0, persist_conns = 0;
  IpvsStats stats;
};

struct IpvsServiceState {
  IpvsService service;
  IpvsStats stats;
  std::vector<IpvsDest> dests;
};

class IpvsKernel {
 public:
  virtual ~IpvsKernel() = default;
  // Opens the connection and resolves the family; later calls re-open on
  // demand. Returns 0 or an error code.
  virtual int open() = 0;
  virtual int add_service(const IpvsService& s) = 0;   // NEW_SERVICE
  virtual int edit_service(const IpvsService& s) = 0;  // SET_SERVICE
  virtual int del_service(const ServiceKey& k) = 0;    // DEL_SERVICE
  virtual int add_dest(const ServiceKey& k, const IpvsDest& d) = 0;   // NEW_DEST
  virtual int edit_dest(const ServiceKey& k, const IpvsDest& d) = 0;  // SET_DEST
  virtual int del_dest(const ServiceKey& k, const IpAddr& ip, uint16_t port) = 0;  // DEL_DEST
  // GET_SERVICE dump, then GET_DEST per service. Services the model cannot
  // express (fwmark services, families other than IPv4/IPv6, protocols other
  // than TCP/UDP) are skipped
  // and counted in *foreign (may be null).
  virtual int dump(std::vector<IpvsServiceState>* out, size_t* foreign) = 0;
  // GET_DEST dump of one service.
  virtual int dump_dests(const ServiceKey& k, std::vector<IpvsDest>* out) = 0;
};

// The dummy interface that VIPs are bound to (IPv4 /32, IPv6 /128 without DAD),
// so the kernel delivers their packets locally, where IPVS picks them up.
class VipInterface {
 public:
  virtual ~VipInterface() = default;
  virtual const std::string& name() const = 0;
  // Creates the interface when it does not exist. Returns 0 or an error code.
  virtual int ensure() = 0;
  // The IPv4 and (global, not link-local) IPv6 addresses bound to it.
  virtual int list(std::vector<IpAddr>* out) = 0;
  virtual int bind(const IpAddr& a) = 0;    // adds a/32 or a/128 (EEXIST when bound)
  virtual int unbind(const IpAddr& a) = 0;  // removes it
};

// "File exists (EEXIST): the kernel already has it", "IPVS is not available
// ...": one line, no trailing period.
std::string kernel_error_text(int err);

// "add service TCP 10.96.0.100:8080: <kernel_error_text>".
std::string describe_op(const std::string& op, const std::string& what, int err);

// "10.244.1.15:8080" / "[fd00:244::1:15]:8080" (brackets for IPv6, as ipvsadm).
std::string dest_to_string(const IpAddr& ip, uint16_t port);
// "10.96.0.100/32" / "fd00:96::100/128": a VIP as bound on the dummy interface.
std::string host_prefix(const IpAddr& a);

}  // namespace vipd::cp::ipvs
