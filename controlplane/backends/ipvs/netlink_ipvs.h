// Thread: control (one instance per backend; not thread-safe). The real
// IpvsKernel: generic netlink family "IPVS" (version 1) over libnl-genl-3
// (docs/contract.md C15). One netlink socket, opened and the family resolved
// on first use; after a transport problem (timeout, sequence mismatch, bad
// answer) the socket is closed and the next call opens a new one. Every request
// waits for the kernel's ack (or its error, kept as the errno it sent), at most
// `timeout_ms`. Answers are parsed defensively: an attribute too short for its
// type makes the call fail with kErrBadReply instead of being read.
// IPv4 and IPv6: IPVS_SVC_ATTR_AF / IPVS_DEST_ATTR_ADDR_FAMILY are the VIP's
// family (AF_INET / AF_INET6), addresses are 4 or 16 bytes in network order.
#pragma once

#include "controlplane/backends/ipvs/ipvs_kernel.h"

struct nl_sock;
struct nl_msg;
struct nlmsghdr;

namespace vipd::cp::ipvs {

class NetlinkIpvs final : public IpvsKernel {
 public:
  explicit NetlinkIpvs(int timeout_ms = 5000) : timeout_ms_(timeout_ms) {}
  ~NetlinkIpvs() override;
  NetlinkIpvs(const NetlinkIpvs&) = delete;
  NetlinkIpvs& operator=(const NetlinkIpvs&) = delete;

  int open() override;
  int add_service(const IpvsService& s) override;
  int edit_service(const IpvsService& s) override;
  int del_service(const ServiceKey& k) override;
  int add_dest(const ServiceKey& k, const IpvsDest& d) override;
  int edit_dest(const ServiceKey& k, const IpvsDest& d) override;
  int del_dest(const ServiceKey& k, const IpAddr& ip, uint16_t port) override;
  int dump(std::vector<IpvsServiceState>* out, size_t* foreign) override;
  int dump_dests(const ServiceKey& k, std::vector<IpvsDest>* out) override;

  int family() const { return family_; }
  struct Parser;  // handles the data messages of one answer (netlink_ipvs.cc)

 private:
  void close();
  nl_msg* new_msg(int cmd, bool dump);
  // Sends `msg` (consumed) and reads the answers until the ack / NLMSG_DONE;
  // `parser` (may be null) gets each data message. Returns 0 or an error code.
  int transact(nl_msg* msg, Parser* parser);
  int service_cmd(int cmd, const IpvsService& s, bool full);
  int dest_cmd(int cmd, const ServiceKey& k, const IpvsDest& d, bool full);

  int timeout_ms_;
  nl_sock* sock_ = nullptr;
  int family_ = -1;
};

// The message building and parsing of NetlinkIpvs (exposed for the unit tests,
// which need no kernel: a request built by put_* reads back through parse_*,
// the nested attributes of requests and answers have the same layout).
namespace wire {
// The service's identity (AF, protocol, address, port) and, with `full`, its
// parameters (scheduler, flags, timeout, netmask) as IPVS_CMD_ATTR_SERVICE.
bool put_service(nl_msg* m, const IpvsService& s, bool full);
// The real server's address, port and (IPv6: family) and, with `full`, its
// forwarding method, weight and thresholds as IPVS_CMD_ATTR_DEST.
bool put_dest(nl_msg* m, const IpvsDest& d, bool full);
// 1 parsed, 0 skipped (not expressible in the model: fwmark, another family or
// protocol), -1 malformed (an attribute missing or too short).
int parse_service(nlmsghdr* nlh, IpvsServiceState* out);
// `svc_af`: the service's family, for an answer without IPVS_DEST_ATTR_ADDR_FAMILY.
bool parse_dest(nlmsghdr* nlh, int svc_af, IpvsDest* d);
}  // namespace wire

}  // namespace vipd::cp::ipvs
