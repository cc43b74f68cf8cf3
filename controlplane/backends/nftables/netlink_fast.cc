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

// "ip saddr" / "ip6 saddr" of the table's family
bool saddr_word(Cur& c, bool v6) { return c.lit(v6 ? "ip6" : "ip") && c.lit("saddr"); }

bool set_ref(std::string_view w, std::string* out) {  // "@NAME"
  if (w.size() < 2 || w.front() != '@' || !ident(w.substr(1))) return false;
  out->assign(w.substr(1));
  return true;
}

bool rule(Cur& c, bool v6, FastRule* r) {
  {
    Cur save = c;
    if (saddr_word(c, v6)) {
      const auto w = c.word();
      if (!w.empty() && w.front() == '@') {
        if (!set_ref(w, &r->saddr_set)) return false;
      } else {
        const std::string a(w);
        if (inet_pton(v6 ? AF_INET6 : AF_INET, a.c_str(), r->saddr) != 1) return false;
        r->saddr_len = v6 ? 16 : 4;
      }
    } else {
      c = save;
    }
  }
  if (c.lit("meta")) {
    if (!c.lit("l4proto") || !l4proto(c.word(), &r->l4proto)) return false;
  }
  if (c.lit("numgen")) {
    if (!c.lit("random") || !c.lit("mod") || !number(c.word(), &r->numgen_mod) || r->numgen_mod < 2 || !c.lit("0"))
      return false;
  }
  if (c.lit("update")) {
    if (!set_ref(c.word(), &r->update_set) || !c.at('{') || !saddr_word(c, v6) || !c.at('}')) return false;
  }
  if (c.lit("dnat")) {
    if (!c.lit("to") || !endpoint(c.word(), v6, r)) return false;
    r->dnat = true;
  } else if (const bool jump = c.lit("jump"); jump || c.lit("goto")) {
    r->go_to = !jump;
    const auto n = c.word();
    if (!ident(n)) return false;
    r->jump.assign(n);
  } else if (r->update_set.empty()) {
    return false;  // a rule that does nothing: not one vipd writes
  }
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

// "{ type ipv4_addr; flags dynamic,timeout; timeout Ns; }" (the affinity sets)
bool set_decl(Cur& c, FastCmd* cmd) {
  uint32_t t = 0;
  if (!c.at('{') || !c.lit("type") || !c.lit(cmd->v6 ? "ipv6_addr" : "ipv4_addr") || !c.at(';') || !c.lit("flags") ||
      !c.lit("dynamic") || !c.at(',') || !c.lit("timeout") || !c.at(';') || !c.lit("timeout"))
    return false;
  const auto w = c.word();
  if (w.size() < 2 || w.back() != 's' || !number(w.substr(0, w.size() - 1), &t) || t == 0 || t > 86400 * 365)
    return false;
  cmd->timeout_s = t;
  return c.at(';') && c.at('}') && c.end();
}

bool line(std::string_view l, FastCmd* cmd) {
  Cur c{l};
  bool add = false;
  if (c.lit("flush")) cmd->kind = FastCmd::kFlushChain;
  else if (c.lit("add")) add = true, cmd->kind = FastCmd::kAddChain;
  else if (c.lit("delete")) cmd->kind = FastCmd::kDeleteElements;
  else return false;
  const bool elements = c.lit("element");
  const bool set = !elements && add && c.lit("set");
  if (elements) {
    if (add) cmd->kind = FastCmd::kAddElements;
  } else if (set) {
    cmd->kind = FastCmd::kAddSet;
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
  if (set) return set_decl(c, cmd);
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

// The expressions nft 1.0.6 generates for the same rule text (nft --debug=netlink), in order:
//   [ payload load 4b @ network header + 12 => reg 1 ] then      (ip saddr; ip6: 16b @ + 8)
//     [ cmp eq reg 1 ADDR ] or [ lookup reg 1 set S ]
//   [ meta load l4proto => reg 1 ] [ cmp eq reg 1 P ]
//   [ numgen reg 1 = random mod N ] [ cmp eq reg 1 0 ]
//   [ payload load .. => reg 1 ] [ dynset update reg_key 1 set S ]
//   [ immediate reg 1 ADDR ] [ immediate reg 2 PORT ]
//     [ nat dnat ip|ip6 addr_min reg 1 proto_min reg 2 flags 0x2 ]
//   [ immediate reg 0 jump|goto -> NAME ]
bool build_rule(nftnl_rule* r, const FastRule& fr, bool v6) {
  bool ok = true;
  auto add = [r, &ok](nftnl_expr* e) {
    if (!e) ok = false;
    else nftnl_rule_add_expr(r, e);
    return e;
  };
  auto cmp = [&](const void* data, uint32_t len) {
    if (nftnl_expr* e = add(expr("cmp"))) {
      nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_SREG, NFT_REG_1);
      nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_OP, NFT_CMP_EQ);
      nftnl_expr_set(e, NFTNL_EXPR_CMP_DATA, data, len);
    }
  };
  auto load_saddr = [&] {
    if (nftnl_expr* e = add(expr("payload"))) {
      nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_DREG, NFT_REG_1);
      nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_BASE, NFT_PAYLOAD_NETWORK_HEADER);
      nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_OFFSET, v6 ? 8 : 12);
      nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_LEN, v6 ? 16 : 4);
    }
  };
  if (fr.saddr_len || !fr.saddr_set.empty()) {
    load_saddr();
    if (fr.saddr_len) {
      cmp(fr.saddr, fr.saddr_len);
    } else if (nftnl_expr* e = add(expr("lookup"))) {
      nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SREG, NFT_REG_1);
      nftnl_expr_set_str(e, NFTNL_EXPR_LOOKUP_SET, fr.saddr_set.c_str());
    }
  }
  if (fr.l4proto) {
    if (nftnl_expr* e = add(expr("meta"))) {
      nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, NFT_META_L4PROTO);
      nftnl_expr_set_u32(e, NFTNL_EXPR_META_DREG, NFT_REG_1);
    }
    cmp(&fr.l4proto, 1);
  }
  if (fr.numgen_mod) {
    if (nftnl_expr* e = add(expr("numgen"))) {
      nftnl_expr_set_u32(e, NFTNL_EXPR_NG_DREG, NFT_REG_1);
      nftnl_expr_set_u32(e, NFTNL_EXPR_NG_MODULUS, fr.numgen_mod);
      nftnl_expr_set_u32(e, NFTNL_EXPR_NG_TYPE, NFT_NG_RANDOM);
      nftnl_expr_set_u32(e, NFTNL_EXPR_NG_OFFSET, 0);
    }
    const uint32_t zero = 0;
    cmp(&zero, sizeof zero);
  }
  if (!fr.update_set.empty()) {
    load_saddr();
    if (nftnl_expr* e = add(expr("dynset"))) {
      nftnl_expr_set_u32(e, NFTNL_EXPR_DYNSET_SREG_KEY, NFT_REG_1);
      nftnl_expr_set_u32(e, NFTNL_EXPR_DYNSET_OP, NFT_DYNSET_OP_UPDATE);
      nftnl_expr_set_str(e, NFTNL_EXPR_DYNSET_SET_NAME, fr.update_set.c_str());
    }
  }
  if (fr.dnat) {
    if (nftnl_expr* e = add(expr("immediate"))) {
      nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_1);
      nftnl_expr_set(e, NFTNL_EXPR_IMM_DATA, fr.addr, v6 ? 16 : 4);
    }
    const uint16_t port = htons(fr.port);
    if (nftnl_expr* e = add(expr("immediate"))) {
      nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_2);
      nftnl_expr_set(e, NFTNL_EXPR_IMM_DATA, &port, sizeof port);
    }
    if (nftnl_expr* e = add(expr("nat"))) {
      nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_TYPE, NFT_NAT_DNAT);
      nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_FAMILY, v6 ? NFPROTO_IPV6 : NFPROTO_IPV4);
      nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_REG_ADDR_MIN, NFT_REG_1);
      nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_REG_PROTO_MIN, NFT_REG_2);
      nftnl_expr_set_u32(e, NFTNL_EXPR_NAT_FLAGS, NF_NAT_RANGE_PROTO_SPECIFIED);
    }
  }
  if (!fr.jump.empty()) {
    if (nftnl_expr* e = add(expr("immediate"))) {
      nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
      nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, static_cast<uint32_t>(fr.go_to ? NFT_GOTO : NFT_JUMP));
      nftnl_expr_set_str(e, NFTNL_EXPR_IMM_CHAIN, fr.jump.c_str());
    }
  }
  if (!ok) return false;
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
    if (c.kind == FastCmd::kAddSet) {
      // as nft 1.0.6 sends `add set T S { type ipv4_addr; flags dynamic,timeout; timeout Ns; }`
      // (the same attributes, so re-declaring one libnftables made is no change)
      SetPtr set(nftnl_set_alloc());
      UdataPtr ud(nftnl_udata_buf_alloc(NFT_USERDATA_MAXLEN));
      if (!set || !ud) return *error = "nftables: out of memory", false;
      nftnl_set_set_str(set.get(), NFTNL_SET_TABLE, c.table.c_str());
      nftnl_set_set_str(set.get(), NFTNL_SET_NAME, c.chain.c_str());
      nftnl_set_set_u32(set.get(), NFTNL_SET_FLAGS, NFT_SET_TIMEOUT | NFT_SET_EVAL);
      nftnl_set_set_u32(set.get(), NFTNL_SET_KEY_TYPE, c.v6 ? 8 : 7);  // nft's ipv6_addr / ipv4_addr
      nftnl_set_set_u32(set.get(), NFTNL_SET_KEY_LEN, c.v6 ? 16 : 4);
      nftnl_set_set_u32(set.get(), NFTNL_SET_ID, ++set_id_);
      nftnl_set_set_u64(set.get(), NFTNL_SET_TIMEOUT, static_cast<uint64_t>(c.timeout_s) * 1000);
      if (!nftnl_udata_put_u32(ud.get(), NFTNL_UDATA_SET_KEYBYTEORDER, 2))  // BYTEORDER_BIG_ENDIAN
        return *error = "nftables: set userdata", false;
      nftnl_set_set_data(set.get(), NFTNL_SET_USERDATA, nftnl_udata_buf_data(ud.get()), nftnl_udata_buf_len(ud.get()));
      nlmsghdr* nh = nftnl_nlmsg_build_hdr(room(), NFT_MSG_NEWSET, fam, NLM_F_CREATE, ++seq_);
      nftnl_set_nlmsg_build_payload(nh, set.get());
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
