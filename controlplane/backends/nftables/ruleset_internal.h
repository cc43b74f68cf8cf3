// Thread: any. Shared by the nftables mode's rendering files (entry.cc,
// desired.cc, ruleset.cc); not part of the mode's interface (ruleset.h).
#pragma once

#include <cstdint>
#include <cstdio>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "controlplane/backends/iptables/comment.h"
#include "controlplane/backends/nftables/ruleset.h"

namespace vipd::cp::nft::detail {

// nft rule comments are at most 128 bytes; the text goes through the iptables
// mode's sanitiser, so a quote or newline from a Kubernetes name never reaches
// the transaction.
inline std::string comment(const std::string& text) { return "comment \"" + ipt::comment_text(text, 128) + "\""; }

inline std::string hex(uint32_t m) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%x", m);
  return buf;
}

inline const char* fam(bool v6) { return v6 ? "ip6" : "ip"; }
inline const char* addr_type(bool v6) { return v6 ? "ipv6_addr" : "ipv4_addr"; }

using EntryPair = std::pair<const Desired::Entry*, const Desired::Entry*>;  // (old or null, new or null)

// The transaction for the entries that differ (pairs), given the ClusterIP
// VIPs that appear and go, the shard tables to declare (family, shard) and the
// objects retired so far (ruleset.cc; render_delta and apply_diff).
Transaction emit_delta(const std::vector<EntryPair>& pairs, const std::vector<Desired::Vip>& cip_add,
                       const std::vector<Desired::Vip>& cip_del, const std::vector<std::pair<bool, uint32_t>>& new_shards,
                       const RenderOptions& opts, std::set<std::string> retired_chains,
                       std::set<std::string> retired_sets);

}  // namespace vipd::cp::nft::detail
