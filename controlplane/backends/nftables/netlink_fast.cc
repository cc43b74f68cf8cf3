// Thread: control.
#include "controlplane/backends/nftables/netlink_fast.h"

#include <arpa/inet.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/udata.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_nat.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <memory>
#include <string_view>

namespace vipd::cp::nft {
namespace {

// A cursor over one line of render_delta's text.
struct Cur {
  std::string_view s;
  void ws() {
    while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  }
  bool lit(std::string_view w) {  // a word followed by a space, ';' or the end
    ws();
    if (s.substr(0, w.size()) != w) return false;
    if (s.size() > w.size() && s[w.size()] != ' ' && s[w.size()] != ';' && s[w.size()] != ',') return false;
    s.remove_prefix(w.size());
    return true;
  }
  std::string_view word() {  // up to a space, ';' or ','
    ws();
    size_t n = 0;
    while (n < s.size() && s[n] != ' ' && s[n] != ';' && s[n] != ',') ++n;
    auto w = s.substr(0, n);
    s.remove_prefix(n);
    return w;
  }
  bool at(char c) {
    ws();
    if (s.empty() || s.front() != c) return false;
    s.remove_prefix(1);
    return true;
  }
  bool end() {
    ws();
    return s.empty();
  }
};

// An nft identifier as vipd names its tables and chains.
bool ident(std::string_view w) {
  if (w.empty() || w.size() >= 256) return false;
  for (char c : w)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
      return false;
  return true;
}

bool number(std::string_view w, uint32_t* v) {
  auto r = std::from_chars(w.data(), w.data() + w.size(), *v);
  return r.ec == std::errc() && r.ptr == w.data() + w.size();
}

// "10.0.0.1:80" (ip) / "[fd00::1]:80" (ip6)
bool endpoint(std::string_view w, bool v6, FastRule* r) {
  std::string host;
  std::string_view port;
  if (v6) {
    if (w.empty() || w.front() != '[') return false;
    const size_t close = w.find("]:");
    if (close == std::string_view::npos) return false;
    host.assign(w.substr(1, close - 1));
    port = w.substr(close + 2);
  } else {
    const size_t colon = w.rfind(':');
    if (colon == std::string_view::npos) return false;
    host.assign(w.substr(0, colon));
    port = w.substr(colon + 1);
  }
  uint32_t p = 0;
  if (!number(port, &p) || p == 0 || p > 65535) return false;
  r->port = static_cast<uint16_t>(p);
  return inet_pton(v6 ? AF_INET6 : AF_INET, host.c_str(), r->addr) == 1;
}

bool l4proto(std::string_view p, uint8_t* out) {
  if (p == "tcp") *out = IPPROTO_TCP;
  else if (p == "udp") *out = IPPROTO_UDP;
  else if (p == "sctp") *out = IPPROTO_SCTP;
  else return false;
  return true;
}

// "ADDR [. PROTO . PORT] [: goto NAME | : drop]"
bool element(Cur& c, bool v6, bool with_value, FastElem* e) {
  const std::string addr(c.word());
  if (inet_pton(v6 ? AF_INET6 : AF_INET, addr.c_str(), e->key) != 1) return false;
  e->key_len = v6 ? 16 : 4;
  if (c.lit(".")) {
    uint32_t port = 0;
    if (!l4proto(c.word(), &e->key[e->key_len]) || !c.lit(".") || !number(c.word(), &port) || port > 65535)
      return false;
    const uint16_t be = htons(static_cast<uint16_t>(port));
    std::memcpy(&e->key[e->key_len + 4], &be, sizeof be);
    e->key_len += 8;
  }
  if (!with_value) return true;
  if (!c.lit(":")) return true;
  if (c.lit("drop")) {
    e->value = FastElem::kDrop;
    return true;
  }
  if (!c.lit("goto")) return false;
  const auto n = c.word();
  if (!ident(n)) return false;
  e->value = FastElem::kGoto;
  e->chain.assign(n);
  return true;
}

bool rule(Cur& c, bool v6, FastRule* r) {
  if (c.lit("jump")) {
    const auto n = c.word();
    if (!ident(n)) return false;
    r->jump.assign(n);
    return true;
  }
  if (!c.lit("meta") || !c.lit("l4proto")) return false;
  if (!l4proto(c.word(), &r->l4proto)) return false;
  if (c.lit("numgen")) {
    if (!c.lit("random") || !c.lit("mod") || !number(c.word(), &r->numgen_mod) || r->numgen_mod < 2 || !c.lit("0"))
      return false;
  }
  if (!c.lit("dnat") || !c.lit("to") || !endpoint(c.word(), v6, r)) return false;
  if (c.lit("comment")) {
    c.ws();
    if (!c.at('"')) return false;
    const size_t close = c.s.find('"');
    if (close == std::string_view::npos || close > 128) return false;
    const auto text = c.s.substr(0, close);
    if (text.find('\\') != std::string_view::npos) return false;  // nft escapes: left to libnftables
    r->comment.assign(text);
    c.s.remove_prefix(close + 1);
  }
  return true;
}

bool line(std::string_view l, FastCmd* cmd) {
  Cur c{l};
  bool add = false;
  if (c.lit("flush")) cmd->kind = FastCmd::kFlushChain;
  else if (c.lit("add")) add = true, cmd->kind = FastCmd::kAddChain;
  else if (c.lit("delete")) cmd->kind = FastCmd::kDeleteElements;
  else return false;
  const bool elements = c.lit("element");
  if (elements) {
    if (add) cmd->kind = FastCmd::kAddElements;
  } else if (cmd->kind == FastCmd::kDeleteElements || !c.lit("chain")) {
    return false;
  }
  if (c.lit("ip")) cmd->v6 = false;
  else if (c.lit("ip6")) cmd->v6 = true;
  else return false;
  const auto t = c.word(), n = c.word();
  if (!ident(t) || !ident(n)) return false;
  cmd->table.assign(t);
  cmd->chain.assign(n);
  if (elements) {
    if (!c.at('{')) return false;
    for (;;) {
      FastElem e;
      if (!element(c, cmd->v6, cmd->kind == FastCmd::kAddElements, &e)) return false;
      cmd->elems.push_back(std::move(e));
      if (c.at(',')) continue;
      return c.at('}') && c.end();
    }
  }
  if (c.end()) return true;
  if (cmd->kind != FastCmd::kAddChain || !c.at('{')) return false;
  for (;;) {
    if (c.at('}')) return c.end();
    FastRule r;
    if (!rule(c, cmd->v6, &r) || !c.at(';')) return false;
    cmd->rules.push_back(std::move(r));
  }
}

}  // namespace

bool parse_fast(const std::string& script, std::vector<FastCmd>* out, std::string* why) {
  out->clear();
  std::string_view s = script;
  while (!s.empty()) {
    const size_t nl = s.find('\n');
    const std::string_view l = s.substr(0, nl);
    s.remove_prefix(nl == std::string_view::npos ? s.size() : nl + 1);
    if (l.empty()) continue;
    FastCmd cmd;
    if (!line(l, &cmd)) {
      if (why) *why = std::string(l.substr(0, 80));
      out->clear();
      return false;
    }
    out->push_back(std::move(cmd));
  }
  return !out->empty();
}

namespace {

struct Free {
  void operator()(nftnl_rule* p) const { nftnl_rule_free(p); }
  void operator()(nftnl_chain* p) const { nftnl_chain_free(p); }
  void operator()(nftnl_udata_buf* p) const { nftnl_udata_buf_free(p); }
  void operator()(nftnl_set* p) const { nftnl_set_free(p); }
};
using SetPtr = std::unique_ptr<nftnl_set, Free>;
using RulePtr = std::unique_ptr<nftnl_rule, Free>;
using ChainPtr = std::unique_ptr<nftnl_chain, Free>;
using UdataPtr = std::unique_ptr<nftnl_udata_buf, Free>;

nftnl_expr* expr(const char* name) { return nftnl_expr_alloc(name); }

// The expressions nft 1.0.6 generates for the same rule text (nft --debug=netlink):
//   [ immediate reg 0 jump -> NAME ]
// or
//   [ meta load l4proto => reg 1 ] [ cmp eq reg 1 P ]
//   [ numgen reg 1 = random mod N ] [ cmp eq reg 1 0 ]          (when numgen)
//   [ immediate reg 1 ADDR ] [ immediate reg 2 PORT ]
//   [ nat dnat ip|ip6 addr_min reg 1 proto_min reg 2 flags 0x2 ]
bool build_rule(nftnl_rule* r, const FastRule& fr, bool v6) {
  auto add = [r](nftnl_expr* e) {
    if (!e) return false;
    nftnl_rule_add_expr(r, e);
    return true;
  };
  if (!fr.jump.empty()) {
    nftnl_expr* e = expr("immediate");
    if (!e) return false;
    nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
    nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, static_cast<uint32_t>(NFT_JUMP));
    nftnl_expr_set_str(e, NFTNL_EXPR_IMM_CHAIN, fr.jump.c_str());
    return add(e);
  }
  nftnl_expr* e = expr("meta");
  if (!e) return false;
  nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, NFT_META_L4PROTO);
  nftnl_expr_set_u32(e, NFTNL_EXPR_META_DREG, NFT_REG_1);
  add(e);
  e = expr("cmp");
  if (!e) return false;
  nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_SREG, NFT_REG_1);
  nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_OP, NFT_CMP_EQ);
  nftnl_expr_set(e, NFTNL_EXPR_CMP_DATA, &fr.l4proto, 1);
  add(e);
  if (fr.numgen_mod) {
    e = expr("numgen");
    if (!e) return false;
    nftnl_expr_set_u32(e, NFTNL_EXPR_NG_DREG, NFT_REG_1);
    nftnl_expr_set_u32(e, NFTNL_EXPR_NG_MODULUS, fr.numgen_mod);
    nftnl_expr_set_u32(e, NFTNL_EXPR_NG_TYPE, NFT_NG_RANDOM);
    nftnl_expr_set_u32(e, NFTNL_EXPR_NG_OFFSET, 0);
    add(e);
    e = expr("cmp");
    if (!e) return false;
    const uint32_t zero = 0;
    nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_SREG, NFT_REG_1);
    nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_OP, NFT_CMP_EQ);
    nftnl_expr_set(e, NFTNL_EXPR_CMP_DATA, &zero, sizeof zero);
    add(e);
  }
  e = expr("immediate");
  if (!e) return false;
  nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_1);
  nftnl_expr_set(e, NFTNL_EXPR_IMM_DATA, fr.addr, v6 ? 16 : 4);
  add(e);
  e = expr("immediate");
  if (!e) return false;
  const uint16_t port = htons(fr.port);
  nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_2);
  nftnl_expr_set(e, NFTNL_EXPR_IMM_DATA, &port, sizeof port);
  add(e);
  e = expr("nat");
  if (!e) return false;
  nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_TYPE, NFT_NAT_DNAT);
  nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_FAMILY, v6 ? NFPROTO_IPV6 : NFPROTO_IPV4);
  nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_REG_ADDR_MIN, NFT_REG_1);
  nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_REG_PROTO_MIN, NFT_REG_2);
  nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_FLAGS, NF_NAT_RANGE_PROTO_SPECIFIED);
  add(e);
  if (!fr.comment.empty()) {
    UdataPtr ud(nftnl_udata_buf_alloc(NFT_USERDATA_MAXLEN));
    if (!ud || !nftnl_udata_put_strz(ud.get(), NFTNL_UDATA_RULE_COMMENT, fr.comment.c_str())) return false;
    nftnl_rule_set_data(r, NFTNL_RULE_USERDATA, nftnl_udata_buf_data(ud.get()), nftnl_udata_buf_len(ud.get()));
  }
  return true;
}

}  // namespace

NetlinkBatchSender::~NetlinkBatchSender() {
  if (fd_ >= 0) close(fd_);
}

bool NetlinkBatchSender::send(const std::vector<FastCmd>& cmds, std::string* error) {
  if (fd_ < 0) {
    fd_ = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
    if (fd_ < 0) {
      *error = std::string("nftables: netlink socket: ") + std::strerror(errno);
      return false;
    }
    const int one = 1;
    setsockopt(fd_, SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof one);  // errors without the message body
    setsockopt(fd_, SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof one);
  }
  // Drain anything an earlier send left unread.
  char rbuf[8192];
  while (recv(fd_, rbuf, sizeof rbuf, MSG_DONTWAIT) > 0) {
  }
  // Room for the largest message a script parse_fast's caller passes (32 KiB
  // of text) can make; kept between sends.
  std::vector<char>& buf = buf_;
  size_t off = 0;
  auto room = [&] {
    if (buf.size() < off + 131072) buf.resize(off + 131072);
    return buf.data() + off;
  };
  auto put = [&](nlmsghdr* nh) { off += NLMSG_ALIGN(nh->nlmsg_len); };
  const uint32_t first = ++seq_;
  put(nftnl_batch_begin(room(), seq_));
  size_t msgs = 0;
  for (const auto& c : cmds) {
    const uint16_t fam = c.v6 ? NFPROTO_IPV6 : NFPROTO_IPV4;
    if (c.kind == FastCmd::kAddElements || c.kind == FastCmd::kDeleteElements) {
      SetPtr set(nftnl_set_alloc());
      if (!set) return *error = "nftables: out of memory", false;
      nftnl_set_set_str(set.get(), NFTNL_SET_TABLE, c.table.c_str());
      nftnl_set_set_str(set.get(), NFTNL_SET_NAME, c.chain.c_str());
      for (const auto& fe : c.elems) {
        nftnl_set_elem* e = nftnl_set_elem_alloc();
        if (!e) return *error = "nftables: out of memory", false;
        nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, fe.key, fe.key_len);
        if (fe.value == FastElem::kDrop) {
          nftnl_set_elem_set_u32(e, NFTNL_SET_ELEM_VERDICT, NF_DROP);
        } else if (fe.value == FastElem::kGoto) {
          nftnl_set_elem_set_u32(e, NFTNL_SET_ELEM_VERDICT, static_cast<uint32_t>(NFT_GOTO));
          nftnl_set_elem_set_str(e, NFTNL_SET_ELEM_CHAIN, fe.chain.c_str());
        }
        nftnl_set_elem_add(set.get(), e);  // the set owns it now
      }
      const bool add = c.kind == FastCmd::kAddElements;
      nlmsghdr* nh = nftnl_nlmsg_build_hdr(room(), add ? NFT_MSG_NEWSETELEM : NFT_MSG_DELSETELEM, fam,
                                           add ? NLM_F_CREATE : 0, ++seq_);
      nftnl_set_elems_nlmsg_build_payload(nh, set.get());
      put(nh);
      ++msgs;
      continue;
    }
    if (c.kind == FastCmd::kFlushChain) {
      RulePtr r(nftnl_rule_alloc());
      if (!r) return *error = "nftables: out of memory", false;
      nftnl_rule_set_str(r.get(), NFTNL_RULE_TABLE, c.table.c_str());
      nftnl_rule_set_str(r.get(), NFTNL_RULE_CHAIN, c.chain.c_str());
      nlmsghdr* nh = nftnl_rule_nlmsg_build_hdr(room(), NFT_MSG_DELRULE, fam, 0, ++seq_);
      nftnl_rule_nlmsg_build_payload(nh, r.get());
      put(nh);
      ++msgs;
      continue;
    }
    ChainPtr ch(nftnl_chain_alloc());
    if (!ch) return *error = "nftables: out of memory", false;
    nftnl_chain_set_str(ch.get(), NFTNL_CHAIN_TABLE, c.table.c_str());
    nftnl_chain_set_str(ch.get(), NFTNL_CHAIN_NAME, c.chain.c_str());
    nlmsghdr* nh = nftnl_chain_nlmsg_build_hdr(room(), NFT_MSG_NEWCHAIN, fam, NLM_F_CREATE, ++seq_);
    nftnl_chain_nlmsg_build_payload(nh, ch.get());
    put(nh);
    ++msgs;
    for (const auto& fr : c.rules) {
      RulePtr r(nftnl_rule_alloc());
      if (!r) return *error = "nftables: out of memory", false;
      nftnl_rule_set_str(r.get(), NFTNL_RULE_TABLE, c.table.c_str());
      nftnl_rule_set_str(r.get(), NFTNL_RULE_CHAIN, c.chain.c_str());
      if (!build_rule(r.get(), fr, c.v6)) return *error = "nftables: building a netlink rule failed", false;
      nh = nftnl_rule_nlmsg_build_hdr(room(), NFT_MSG_NEWRULE, fam, NLM_F_CREATE | NLM_F_APPEND, ++seq_);
      nftnl_rule_nlmsg_build_payload(nh, r.get());
      put(nh);
      ++msgs;
    }
  }
  put(nftnl_batch_end(room(), ++seq_));
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (sendto(fd_, buf.data(), off, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0) {
    *error = std::string("nftables: netlink batch send: ") + std::strerror(errno);
    return false;
  }
  // The kernel runs the batch inside sendto (nfnetlink_rcv_batch): by now
  // every error it reports is queued; without NLM_F_ACK success sends nothing.
  for (;;) {
    const ssize_t n = recv(fd_, rbuf, sizeof rbuf, MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      *error = std::string("nftables: netlink receive: ") + std::strerror(errno);
      return false;
    }
    size_t left = static_cast<size_t>(n);
    for (auto* nh = reinterpret_cast<nlmsghdr*>(rbuf); NLMSG_OK(nh, left); nh = NLMSG_NEXT(nh, left)) {
      if (nh->nlmsg_type != NLMSG_ERROR || nh->nlmsg_seq < first) continue;
      const auto* e = static_cast<const nlmsgerr*>(NLMSG_DATA(nh));
      if (e->error == 0) continue;
      *error = "nftables: netlink batch refused (" + std::to_string(msgs) + " messages): message " +
               std::to_string(nh->nlmsg_seq - first) + ": " + std::strerror(-e->error);
      return false;
    }
  }
}

}  // namespace vipd::cp::nft
