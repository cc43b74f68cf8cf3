// Thread: control (the backend's Runner calls it). The partial sync's fast
// path: a transaction made only of the commands a service chain rewrite needs
// is sent as one libnftnl netlink batch instead of through libnftables.
//
// Why: libnftables 1.0.6 fetches the kernel's table list and sets up cache
// state for every table (about 90 us each) before it runs any command, so a
// one-endpoint change cost grew with the number of shard tables. The batch
// below names its table and chain directly and fetches nothing.
//
// What it takes (render_delta's partial-sync text, both service layouts):
//   flush chain ip|ip6 T C
//   add chain ip|ip6 T C
//   add chain ip|ip6 T C { RULE; ... }
//   add set ip|ip6 T S { type ipv4_addr|ipv6_addr; flags dynamic,timeout; timeout Ns; }
//   add|delete element ip|ip6 T MAP { ADDR [. tcp|udp|sctp . PORT] [: goto NAME | : drop], ... }
// RULE: the parts below, each optional, in this order, ending in a DNAT, a
// verdict or a set update:
//   [ip|ip6 saddr ADDR | ip|ip6 saddr @SET] [meta l4proto tcp|udp|sctp]
//   [numgen random mod N 0] [update @SET { ip|ip6 saddr }]
//   [dnat to ADDR:PORT | jump NAME | goto NAME] [comment "TEXT"]
// which covers the compact fnat chains (jump mark-for-masquerade; meta
// l4proto P [numgen ..] dnat to ..) and the nat / affinity form (svc-: ip
// saddr @aff-.. goto sep-..; [numgen random mod K-i 0] goto sep-..; sep-: ip
// saddr EP jump mark-for-masquerade; update @aff-.. { ip saddr }; dnat).
// Any other line (table declarations, deletes of chains or sets, source-range
// rules with anonymous sets) and the whole script goes through libnftables as
// before; so does a script over 32 KiB (the batch goes in one sendmsg, which
// the socket's send buffer bounds).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vipd::cp::nft {

struct FastRule {
  // matches
  uint8_t saddr_len = 0;     // 4 or 16: `ip|ip6 saddr ADDR` (saddr); 0: none
  uint8_t saddr[16] = {};
  std::string saddr_set;     // `ip|ip6 saddr @SET` when set
  uint8_t l4proto = 0;       // IPPROTO_*; 0: no match
  uint32_t numgen_mod = 0;   // 0: no numgen match
  // statements
  std::string update_set;    // `update @SET { ip|ip6 saddr }` when set
  bool dnat = false;         // `dnat to addr:port`
  uint8_t addr[16] = {};     // DNAT address (4 bytes used for ip)
  uint16_t port = 0;         // host order
  std::string jump;          // the verdict's chain ("" when none)
  bool go_to = false;        // goto instead of jump
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
  enum Kind { kFlushChain, kAddChain, kAddElements, kDeleteElements, kAddSet } kind = kAddChain;
  bool v6 = false;  // family ip6
  std::string table, chain;     // chain: the set or map for elements and kAddSet
  uint32_t timeout_s = 0;       // kAddSet: the set's timeout (flags dynamic,timeout)
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
  uint32_t set_id_ = 0;
  std::vector<char> buf_;
};

}  // namespace vipd::cp::nft
