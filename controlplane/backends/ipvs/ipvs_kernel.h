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
// GET_SERVICE returns), IPv4, address+port+protocol form (no fwmark).
struct IpvsService {
  ServiceKey key;
  std::string scheduler = name(Scheduler::kRr);  // the kernel's name: any scheduler it has
  uint32_t flags = 0;     // kFlagPersistent or 0 (other bits are the kernel's own)
  uint32_t timeout_s = 0; // persistence timeout, when flags has kFlagPersistent
  uint32_t netmask = 0xffffffffu;
  bool operator==(const IpvsService&) const = default;
};

// Traffic counters of a service or destination (IPVS_*_ATTR_STATS64).
struct IpvsStats {
  uint64_t conns = 0, inpkts = 0, outpkts = 0, inbytes = 0, outbytes = 0;
};

// A real server (destination) of a virtual service.
struct IpvsDest {
  Ipv4 ip = 0;
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
  virtual int del_dest(const ServiceKey& k, Ipv4 ip, uint16_t port) = 0;  // DEL_DEST
  // GET_SERVICE dump, then GET_DEST per service. Services the model cannot
  // express (fwmark services, IPv6, protocols other than TCP/UDP) are skipped
  // and counted in *foreign (may be null).
  virtual int dump(std::vector<IpvsServiceState>* out, size_t* foreign) = 0;
  // GET_DEST dump of one service.
  virtual int dump_dests(const ServiceKey& k, std::vector<IpvsDest>* out) = 0;
};

// The dummy interface that VIPs are bound to (/32), so the kernel delivers
// their packets locally, where IPVS picks them up.
class VipInterface {
 public:
  virtual ~VipInterface() = default;
  virtual const std::string& name() const = 0;
  // Creates the interface when it does not exist. Returns 0 or an error code.
  virtual int ensure() = 0;
  virtual int list(std::vector<Ipv4>* out) = 0;  // IPv4 addresses bound to it
  virtual int bind(Ipv4 a) = 0;                  // adds a/32 (EEXIST when bound)
  virtual int unbind(Ipv4 a) = 0;                // removes a/32
};

// "File exists (EEXIST): the kernel already has it", "IPVS is not available
// ...": one line, no trailing period.
std::string kernel_error_text(int err);

// "add service TCP 10.96.0.100:8080: <kernel_error_text>".
std::string describe_op(const std::string& op, const std::string& what, int err);

// "TCP 10.96.0.100:8080" / "10.244.1.15:8080".
std::string dest_to_string(Ipv4 ip, uint16_t port);

}  // namespace vipd::cp::ipvs
