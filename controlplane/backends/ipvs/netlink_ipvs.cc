// Thread: control.
#include "controlplane/backends/ipvs/netlink_ipvs.h"

#include <arpa/inet.h>
#include <linux/ip_vs.h>
#include <netinet/in.h>
#include <netlink/attr.h>
#include <netlink/genl/ctrl.h>
#include <netlink/genl/genl.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cerrno>
#include <cstring>
#include <functional>

namespace vipd::cp::ipvs {

struct NetlinkIpvs::Parser {
  std::function<bool(nlmsghdr*)> on_msg;  // false: the answer could not be parsed
};

namespace {

// State of one request while its answers are read.
struct Exchange {
  NetlinkIpvs::Parser* parser = nullptr;
  int err = 0;       // errno from the kernel's NLMSG_ERROR, or kErrBadReply
  bool done = false;
};

int on_error(sockaddr_nl*, nlmsgerr* e, void* arg) {
  auto* x = static_cast<Exchange*>(arg);
  x->err = e->error < 0 ? -e->error : (e->error > 0 ? e->error : EIO);
  x->done = true;
  return NL_STOP;
}
int on_ack(nl_msg*, void* arg) {
  static_cast<Exchange*>(arg)->done = true;
  return NL_STOP;
}
int on_finish(nl_msg*, void* arg) {
  static_cast<Exchange*>(arg)->done = true;
  return NL_STOP;
}

// ---- attribute readers: false when absent or too short ----------------------
bool get_u16(nlattr* a, uint16_t* v) {
  if (!a || nla_len(a) < 2) return false;
  std::memcpy(v, nla_data(a), 2);
  return true;
}
bool get_u32(nlattr* a, uint32_t* v) {
  if (!a || nla_len(a) < 4) return false;
  std::memcpy(v, nla_data(a), 4);
  return true;
}
bool get_u64(nlattr* a, uint64_t* v) {
  if (!a || nla_len(a) < 8) return false;
  std::memcpy(v, nla_data(a), 8);
  return true;
}
// An address of family `af` (the kernel sends union nf_inet_addr: 16 bytes,
// of which IPv4 uses the first 4).
bool get_addr(nlattr* a, int af, IpAddr* v) {
  if (af == AF_INET) {
    if (!a || nla_len(a) < 4) return false;
    uint32_t be;
    std::memcpy(&be, nla_data(a), 4);
    *v = IpAddr(ntohl(be));
    return true;
  }
  if (af != AF_INET6 || !a || nla_len(a) < 16) return false;
  *v = IpAddr::v6(static_cast<const uint8_t*>(nla_data(a)));
  return true;
}

// `a` as the 16 bytes IPVS expects (IPv4: the first 4, the rest zero).
void put_addr_bytes(const IpAddr& a, uint8_t out[16], int* len) {
  std::memset(out, 0, 16);
  if (a.is_v4()) {
    const uint32_t be = htonl(a.v4());
    std::memcpy(out, &be, 4);
    *len = 4;
  } else {
    std::memcpy(out, a.v6_bytes().data(), 16);
    *len = 16;
  }
}

uint16_t af_of(const IpAddr& a) { return a.is_v4() ? AF_INET : AF_INET6; }
std::string get_string(nlattr* a) {
  if (!a || nla_len(a) <= 0) return {};
  const char* p = static_cast<const char*>(nla_data(a));
  return std::string(p, strnlen(p, static_cast<size_t>(nla_len(a))));
}

void parse_stats(nlattr* nest, IpvsStats* s) {
  nlattr* t[IPVS_STATS_ATTR_MAX + 1] = {};
  if (!nest || nla_parse_nested(t, IPVS_STATS_ATTR_MAX, nest, nullptr) < 0) return;
  get_u64(t[IPVS_STATS_ATTR_CONNS], &s->conns);
  get_u64(t[IPVS_STATS_ATTR_INPKTS], &s->inpkts);
  get_u64(t[IPVS_STATS_ATTR_OUTPKTS], &s->outpkts);
  get_u64(t[IPVS_STATS_ATTR_INBYTES], &s->inbytes);
  get_u64(t[IPVS_STATS_ATTR_OUTBYTES], &s->outbytes);
}

// The top-level attribute `which` of a generic netlink IPVS answer.
nlattr* top_attr(nlmsghdr* nlh, int which) {
  nlattr* a[IPVS_CMD_ATTR_MAX + 1] = {};
  if (genlmsg_parse(nlh, 0, a, IPVS_CMD_ATTR_MAX, nullptr) < 0) return nullptr;
  return a[which];
}

IpvsService key_only(const ServiceKey& k) {
  IpvsService s;
  s.key = k;
  return s;
}

}  // namespace

namespace wire {

// Result: 1 parsed, 0 skipped (not expressible in the model), -1 malformed.
int parse_service(nlmsghdr* nlh, IpvsServiceState* out) {
  nlattr* nest = top_attr(nlh, IPVS_CMD_ATTR_SERVICE);
  nlattr* t[IPVS_SVC_ATTR_MAX + 1] = {};
  if (!nest || nla_parse_nested(t, IPVS_SVC_ATTR_MAX, nest, nullptr) < 0) return -1;
  uint16_t af = 0, proto = 0, port_be = 0;
  if (!get_u16(t[IPVS_SVC_ATTR_AF], &af)) return -1;
  if (t[IPVS_SVC_ATTR_FWMARK] || (af != AF_INET && af != AF_INET6)) return 0;
  if (!get_u16(t[IPVS_SVC_ATTR_PROTOCOL], &proto) || !get_u16(t[IPVS_SVC_ATTR_PORT], &port_be)) return -1;
  if (proto != IPPROTO_TCP && proto != IPPROTO_UDP) return 0;
  IpvsService& s = out->service;
  if (!get_addr(t[IPVS_SVC_ATTR_ADDR], af, &s.key.vip)) return -1;
  s.key.port = ntohs(port_be);
  s.key.protocol = proto == IPPROTO_TCP ? Protocol::kTcp : Protocol::kUdp;
  s.scheduler = get_string(t[IPVS_SVC_ATTR_SCHED_NAME]);
  nlattr* f = t[IPVS_SVC_ATTR_FLAGS];
  if (f && nla_len(f) >= static_cast<int>(sizeof(ip_vs_flags))) {
    ip_vs_flags fl;
    std::memcpy(&fl, nla_data(f), sizeof fl);
    s.flags = fl.flags & ~static_cast<uint32_t>(IP_VS_SVC_F_HASHED);  // kernel-internal bit
  }
  get_u32(t[IPVS_SVC_ATTR_TIMEOUT], &s.timeout_s);
  get_u32(t[IPVS_SVC_ATTR_NETMASK], &s.netmask);
  parse_stats(t[IPVS_SVC_ATTR_STATS64], &out->stats);
  return 1;
}

bool parse_dest(nlmsghdr* nlh, int svc_af, IpvsDest* d) {
  nlattr* nest = top_attr(nlh, IPVS_CMD_ATTR_DEST);
  nlattr* t[IPVS_DEST_ATTR_MAX + 1] = {};
  if (!nest || nla_parse_nested(t, IPVS_DEST_ATTR_MAX, nest, nullptr) < 0) return false;
  uint16_t port_be = 0, af = static_cast<uint16_t>(svc_af);
  if (t[IPVS_DEST_ATTR_ADDR_FAMILY] && !get_u16(t[IPVS_DEST_ATTR_ADDR_FAMILY], &af)) return false;
  if (!get_addr(t[IPVS_DEST_ATTR_ADDR], af, &d->ip) || !get_u16(t[IPVS_DEST_ATTR_PORT], &port_be)) return false;
  d->port = ntohs(port_be);
  if (!get_u32(t[IPVS_DEST_ATTR_WEIGHT], &d->weight)) return false;
  if (get_u32(t[IPVS_DEST_ATTR_FWD_METHOD], &d->fwd_method)) d->fwd_method &= IP_VS_CONN_F_FWD_MASK;
  get_u32(t[IPVS_DEST_ATTR_U_THRESH], &d->u_thresh);
  get_u32(t[IPVS_DEST_ATTR_L_THRESH], &d->l_thresh);
  get_u32(t[IPVS_DEST_ATTR_ACTIVE_CONNS], &d->active_conns);
  get_u32(t[IPVS_DEST_ATTR_INACT_CONNS], &d->inactive_conns);
  get_u32(t[IPVS_DEST_ATTR_PERSIST_CONNS], &d->persist_conns);
  parse_stats(t[IPVS_DEST_ATTR_STATS64], &d->stats);
  return true;
}

// Service identity (and with `full` its parameters) in a nested attribute.
bool put_service(nl_msg* m, const IpvsService& s, bool full) {
  nlattr* nest = nla_nest_start(m, IPVS_CMD_ATTR_SERVICE);
  if (!nest) return false;
  uint8_t addr[16];
  int len = 0;
  put_addr_bytes(s.key.vip, addr, &len);
  int r = nla_put_u16(m, IPVS_SVC_ATTR_AF, af_of(s.key.vip));
  r |= nla_put_u16(m, IPVS_SVC_ATTR_PROTOCOL, s.key.protocol == Protocol::kTcp ? IPPROTO_TCP : IPPROTO_UDP);
  r |= nla_put(m, IPVS_SVC_ATTR_ADDR, len, addr);
  r |= nla_put_u16(m, IPVS_SVC_ATTR_PORT, htons(s.key.port));
  if (full) {
    const ip_vs_flags fl{s.flags, ~0u};
    r |= nla_put_string(m, IPVS_SVC_ATTR_SCHED_NAME, s.scheduler.c_str());
    r |= nla_put(m, IPVS_SVC_ATTR_FLAGS, sizeof fl, &fl);
    r |= nla_put_u32(m, IPVS_SVC_ATTR_TIMEOUT, s.timeout_s);
    r |= nla_put_u32(m, IPVS_SVC_ATTR_NETMASK, s.netmask);
  }
  nla_nest_end(m, nest);
  return r == 0;
}

bool put_dest(nl_msg* m, const IpvsDest& d, bool full) {
  nlattr* nest = nla_nest_start(m, IPVS_CMD_ATTR_DEST);
  if (!nest) return false;
  uint8_t addr[16];
  int len = 0;
  put_addr_bytes(d.ip, addr, &len);
  int r = nla_put(m, IPVS_DEST_ATTR_ADDR, len, addr);
  r |= nla_put_u16(m, IPVS_DEST_ATTR_PORT, htons(d.port));
  // IPv6: the family said outright (IPv4 keeps the request it always sent;
  // without the attribute the kernel takes the service's family).
  if (d.ip.is_v6()) r |= nla_put_u16(m, IPVS_DEST_ATTR_ADDR_FAMILY, AF_INET6);
  if (full) {
    r |= nla_put_u32(m, IPVS_DEST_ATTR_FWD_METHOD, d.fwd_method);
    r |= nla_put_u32(m, IPVS_DEST_ATTR_WEIGHT, d.weight);
    r |= nla_put_u32(m, IPVS_DEST_ATTR_U_THRESH, d.u_thresh);
    r |= nla_put_u32(m, IPVS_DEST_ATTR_L_THRESH, d.l_thresh);
  }
  nla_nest_end(m, nest);
  return r == 0;
}

}  // namespace wire

using wire::parse_dest;
using wire::parse_service;
using wire::put_dest;
using wire::put_service;

NetlinkIpvs::~NetlinkIpvs() { close(); }

void NetlinkIpvs::close() {
  if (sock_) nl_socket_free(sock_);
  sock_ = nullptr;
  family_ = -1;
}

int NetlinkIpvs::open() {
  if (sock_ && family_ >= 0) return 0;
  close();
  sock_ = nl_socket_alloc();
  if (!sock_) return kErrSocket;
  if (genl_connect(sock_) < 0) {
    close();
    return kErrSocket;
  }
  // Bounded waits for answers: a kernel that never answers fails the call.
  timeval tv{timeout_ms_ / 1000, (timeout_ms_ % 1000) * 1000};
  setsockopt(nl_socket_get_fd(sock_), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  const int fam = genl_ctrl_resolve(sock_, IPVS_GENL_NAME);
  if (fam < 0) {
    close();
    return fam == -NLE_OBJ_NOTFOUND ? kErrNoFamily : (fam == -NLE_PERM ? EPERM : kErrNoFamily);
  }
  family_ = fam;
  return 0;
}

nl_msg* NetlinkIpvs::new_msg(int cmd, bool dump) {
  nl_msg* m = nlmsg_alloc();
  if (!m) return nullptr;
  if (!genlmsg_put(m, NL_AUTO_PORT, NL_AUTO_SEQ, family_, 0, dump ? NLM_F_DUMP : 0, static_cast<uint8_t>(cmd),
                   IPVS_GENL_VERSION)) {
    nlmsg_free(m);
    return nullptr;
  }
  return m;
}

int NetlinkIpvs::transact(nl_msg* msg, Parser* parser) {
  Exchange x;
  x.parser = parser;
  nl_cb* cb = nl_cb_alloc(NL_CB_DEFAULT);
  if (!cb) {
    nlmsg_free(msg);
    return ENOMEM;
  }
  nl_cb_err(cb, NL_CB_CUSTOM, on_error, &x);
  nl_cb_set(cb, NL_CB_ACK, NL_CB_CUSTOM, on_ack, &x);
  nl_cb_set(cb, NL_CB_FINISH, NL_CB_CUSTOM, on_finish, &x);
  nl_cb_set(
      cb, NL_CB_VALID, NL_CB_CUSTOM,
      [](nl_msg* m, void* arg) -> int {
        auto* ex = static_cast<Exchange*>(arg);
        if (ex->parser && ex->parser->on_msg && !ex->parser->on_msg(nlmsg_hdr(m))) ex->err = kErrBadReply;
        return NL_OK;
      },
      &x);
  int r = nl_send_auto(sock_, msg);
  nlmsg_free(msg);
  bool transport_error = r < 0;
  for (int i = 0; !transport_error && !x.done && i < 1000000; ++i) {
    r = nl_recvmsgs(sock_, cb);
    if (r < 0 && !x.done) transport_error = true;  // timeout, sequence mismatch, ...
  }
  nl_cb_put(cb);
  if (transport_error || (x.err == kErrBadReply)) {
    close();  // the stream's state is unknown: start over on the next call
    return x.err ? x.err : kErrBadReply;
  }
  return x.err;
}

int NetlinkIpvs::service_cmd(int cmd, const IpvsService& s, bool full) {
  if (int e = open()) return e;
  nl_msg* m = new_msg(cmd, false);
  if (!m) return ENOMEM;
  if (!put_service(m, s, full)) {
    nlmsg_free(m);
    return EMSGSIZE;
  }
  return transact(m, nullptr);
}

int NetlinkIpvs::dest_cmd(int cmd, const ServiceKey& k, const IpvsDest& d, bool full) {
  if (int e = open()) return e;
  nl_msg* m = new_msg(cmd, false);
  if (!m) return ENOMEM;
  if (!put_service(m, key_only(k), false) || !put_dest(m, d, full)) {
    nlmsg_free(m);
    return EMSGSIZE;
  }
  return transact(m, nullptr);
}

int NetlinkIpvs::add_service(const IpvsService& s) { return service_cmd(IPVS_CMD_NEW_SERVICE, s, true); }
int NetlinkIpvs::edit_service(const IpvsService& s) { return service_cmd(IPVS_CMD_SET_SERVICE, s, true); }
int NetlinkIpvs::del_service(const ServiceKey& k) { return service_cmd(IPVS_CMD_DEL_SERVICE, key_only(k), false); }
int NetlinkIpvs::add_dest(const ServiceKey& k, const IpvsDest& d) { return dest_cmd(IPVS_CMD_NEW_DEST, k, d, true); }
int NetlinkIpvs::edit_dest(const ServiceKey& k, const IpvsDest& d) { return dest_cmd(IPVS_CMD_SET_DEST, k, d, true); }
int NetlinkIpvs::del_dest(const ServiceKey& k, const IpAddr& ip, uint16_t port) {
  IpvsDest d;
  d.ip = ip;
  d.port = port;
  return dest_cmd(IPVS_CMD_DEL_DEST, k, d, false);
}

int NetlinkIpvs::dump_dests(const ServiceKey& k, std::vector<IpvsDest>* out) {
  out->clear();
  if (int e = open()) return e;
  nl_msg* m = new_msg(IPVS_CMD_GET_DEST, true);
  if (!m) return ENOMEM;
  if (!put_service(m, key_only(k), false)) {
    nlmsg_free(m);
    return EMSGSIZE;
  }
  const int af = k.vip.is_v4() ? AF_INET : AF_INET6;
  Parser p{[out, af](nlmsghdr* h) {
    IpvsDest d;
    if (!parse_dest(h, af, &d)) return false;
    out->push_back(d);
    return true;
  }};
  return transact(m, &p);
}

int NetlinkIpvs::dump(std::vector<IpvsServiceState>* out, size_t* foreign) {
  out->clear();
  if (foreign) *foreign = 0;
  if (int e = open()) return e;
  nl_msg* m = new_msg(IPVS_CMD_GET_SERVICE, true);
  if (!m) return ENOMEM;
  size_t skipped = 0;
  Parser p{[out, &skipped](nlmsghdr* h) {
    IpvsServiceState s;
    const int r = parse_service(h, &s);
    if (r < 0) return false;
    if (r == 0) ++skipped;
    else out->push_back(std::move(s));
    return true;
  }};
  if (int e = transact(m, &p)) return e;
  if (foreign) *foreign = skipped;
  for (auto& s : *out)
    if (int e = dump_dests(s.service.key, &s.dests)) return e;
  return 0;
}

}  // namespace vipd::cp::ipvs
