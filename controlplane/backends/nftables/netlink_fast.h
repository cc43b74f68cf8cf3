// Thread: control (the backend's Runner calls it). The partial sync's fast
// path: a transaction made only of the commands a service chain rewrite needs
// is sent as one libnftnl netlink batch instead of through libnftables.
//
// Why: libnftables 1.0.6 fetches the kernel's table list and sets up cache
// state for every table (about 90 us each) before it runs any command, so a
// one-endpoint change cost grew with the number of shard tables. The batch
// below names its table and chain directly and fetches nothing.
//
// What it takes (the compact form's partial sync, render_delta's text):
//   flush chain ip|ip6 T C
//   add chain ip|ip6 T C
//   add chain ip|ip6 T C { RULE; ... }   RULE: jump NAME
//                                         | meta l4proto tcp|udp|sctp
//                                           [numgen random mod N 0]
//                                           dnat to ADDR:PORT [comment "TEXT"]
//   add|delete element ip|ip6 T MAP { ADDR [. tcp|udp|sctp . PORT] [: goto NAME | : drop], ... }
// Any other line (elements, sets, tables, other rule forms) and the whole
// script goes through libnftables as before; so does a script over 32 KiB
// (the batch goes in one sendmsg, which the socket's send buffer bounds).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vipd::cp::nft {

struct FastRule {
  std::string jump;          // "jump NAME" when set (nothing else then)
  uint8_t l4proto = 0;       // IPPROTO_*
  uint32_t numgen_mod = 0;   // 0: no numgen match
  uint8_t addr[16] = {};     // DNAT address (4 bytes used for ip)
  uint16_t port = 0;         // host order
  std::string comment;       // "" when none
};

// A map or set element: "10.96.0.1 . tcp . 80 : goto svc-X" (the key as nft
// sends it: each field padded to 4 bytes) or "10.96.0.1" (cluster-ips).
struct FastElem {
  uint8_t key[24] = {};
  uint8_t key_len = 0;
  enum Value { kNone, kGoto, kDrop } value = kNone;
  std::string chain;  // kGoto
};

struct FastCmd {
  enum Kind { kFlushChain, kAddChain, kAddElements, kDeleteElements } kind = kAddChain;
  bool v6 = false;  // family ip6
  std::string table, chain;     // chain: the set or map for elements
  std::vector<FastRule> rules;  // kAddChain: appended in order
  std::vector<FastElem> elems;  // k*Elements
};

// Parses `script` into commands; false (with *why) when any line is not of
// the forms above (the caller runs the script through libnftables then).
bool parse_fast(const std::string& script, std::vector<FastCmd>* out, std::string* why = nullptr);

// One netlink batch (begin, the commands, end) on a NETLINK_NETFILTER socket;
// all or nothing like any nft transaction. False with *error on a refused
// batch or a socket error.
class NetlinkBatchSender {
 public:
  NetlinkBatchSender() = default;
  ~NetlinkBatchSender();
  NetlinkBatchSender(const NetlinkBatchSender&) = delete;
  NetlinkBatchSender& operator=(const NetlinkBatchSender&) = delete;
  bool send(const std::vector<FastCmd>& cmds, std::string* error);

 private:
  int fd_ = -1;
  uint32_t seq_ = 0;
  std::vector<char> buf_;
};

}  // namespace vipd::cp::nft
