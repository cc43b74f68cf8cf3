// Thread: any (pure functions over immutable values; the nftables backend calls
// them on the control thread). Renders a ServiceTable into kube-proxy's nftables
// layout with vipd's own names (docs/modes.md): one table `ip vipd` holding
// the IPv4 entries and, while there are IPv6 entries, `ip6 vipd` with the same
// layout for them (ip6 saddr/daddr, ipv6_addr sets, `dnat to [addr]:port`),
// both in every transaction; each `ip vipd` object:
//
//   maps   service-ips, service-nodeports      VIP . proto . port : goto svc-<hash>
//          no-endpoint-services                VIP . proto . port : goto reject-chain | drop
//          firewall-ips                        VIP . proto . port : goto fw-<hash>
//   set    cluster-ips                         ClusterIP VIPs (other ports are rejected)
//   base chains (hooks) filter-prerouting, filter-input, filter-forward,
//          filter-output, filter-output-post-dnat, nat-prerouting, nat-output,
//          nat-postrouting, and the fixed chains services, service-endpoints-check,
//          firewall-check, cluster-ips-check, reject-chain, mark-for-masquerade,
//          masquerading
//   per entry with usable endpoints, compact form (forward method fnat, which
//   marks every flow, and no ClientIP affinity):
//          svc-<hash>   jump mark-for-masquerade
//                       per endpoint i of K: meta l4proto P numgen random mod K-i 0 dnat to IP:port
//                       (the last without the numgen match; no set: each anonymous set
//                       bound in a transaction costs the kernel a walk of all of it)
//   otherwise (hairpin marking per endpoint, or affinity), kube-proxy's form:
//          svc-<hash>   [jump mark-for-masquerade] [affinity: ip saddr @aff-.. goto sep-..]
//                       per endpoint chain i of K: [numgen random mod K-i 0] goto sep-<hash>
//                       (kube-proxy has `numgen random mod K vmap { 0 : goto sep-.., ... }`:
//                       the same 1/K pick, without an anonymous map)
//          sep-<hash>   hairpin mark, [update @aff-<hash>-<timeout> { ip saddr }], dnat
//          fw-<hash>    ip saddr != { loadBalancerSourceRanges } drop
//          aff-<hash>-<timeout>  set ipv4_addr, flags dynamic,timeout (ClientIP affinity)
//
// Every commit that adds a rule with a jump, goto, vmap or NAT makes the kernel
// validate the whole table it changed (each chain the base chains reach, once
// per hook), so the number of chains in that table, not the size of the
// change, sets a partial sync's floor; the compact form keeps it at one chain
// per service, and the shards bound it to shard_size services.
//
// Shards: an entry's service chains, endpoint chains, affinity sets and its
// service-ips / service-nodeports element live in one of several tables of
// at most RenderOptions::shard_size entries each: shard 0 is `ip vipd` itself
// (so a table of up to shard_size entries has the layout above and nothing
// else), shard k >= 1 is `ip vipd-k` with its own service maps, `services`,
// `mark-for-masquerade` and nat-prerouting / nat-output base chains (the
// service keys are disjoint, so a packet is DNATed by the one shard that holds
// its key and passes the others). The filter hooks, firewall-ips (fw- chains),
// no-endpoint-services, cluster-ips and masquerading stay in `ip vipd`. The
// kernel validates only the tables a commit changed, so a change costs one
// shard's validation however many entries there are. An entry keeps its shard
// while it exists; a new entry goes to the lowest shard with room; a full sync
// packs the entries again in key order.
//
// Rendering is per entry (render_entry), so a sync re-renders only entries whose
// VirtualService changed, and the transaction (render_delta) touches only their
// chains, sets and map elements. A full sync replaces the tables atomically.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include "model/service_table.h"

namespace vipd::cp::nft {

inline constexpr const char* kTable = "vipd";  // family ip

struct RenderOptions {
  bool masquerade_all = true;  // forward-method fnat: every new service flow is masqueraded
  uint32_t masq_mark = 0x4000;
  // Entries per shard table (see above); 0 is taken as 1.
  uint32_t shard_size = 1000;
};

// "ip vipd" (shard 0), "ip vipd-3"; "ip6 ..." for IPv6.
std::string shard_table(bool v6, uint32_t shard);

struct Chain {
  std::string name;
  std::vector<std::string> rules;  // each as after "add rule ip vipd NAME "
  bool operator==(const Chain&) const = default;
};

// A map or set element: `map` names the map/set; `value` is "" for a set.
struct Element {
  std::string map;
  std::string key;    // "10.96.0.100 . tcp . 8080"
  std::string value;  // "goto svc-ABC"
  bool operator==(const Element&) const = default;
};

// Everything one ServiceTable entry owns in the table.
struct EntryRender {
  std::vector<Chain> chains;
  std::map<std::string, std::string> sets;  // name -> declaration body (inside { })
  std::vector<Element> elements;            // in the shared maps (not cluster-ips)
  bool v6 = false;                          // an IPv6 entry: all of it is in table ip6 vipd
  bool operator==(const EntryRender&) const = default;
};

// "Validates" and renders one entry. `hash_input` names its chains
// (ipt::entry_hash_input, or the extended form on a collision). Returns false
// with *error for input it cannot express (a malformed source range).
bool render_entry(const VirtualService& svc, const std::string& hash_input, const RenderOptions& opts,
                  EntryRender* out, std::string* error);

// The desired state of the whole table, per entry, with the inputs it was
// rendered from (so an unchanged entry is not rendered again).
struct Desired {
  struct Entry {
    VirtualService svc;
    std::string hash_input;
    EntryRender render;
    std::string base_input;  // ipt::entry_hash_input(svc) (hash_input unless it collided)
    uint32_t shard = 0;      // the table of its service objects (shard_table)
  };
  // Shared with earlier states: an unchanged entry is the same object (a
  // pointer copy, no rendering or string copies per sync). Sorted by key
  // (vectors: a sync allocates two arrays, not a tree node per service).
  std::vector<std::pair<ServiceKey, std::shared_ptr<const Entry>>> entries;
  using Vip = decltype(ServiceKey::vip);
  std::vector<std::pair<Vip, int>> cluster_ips;  // ClusterIP VIP -> entries using it, sorted
  bool has_cluster_ip(const Vip& v) const;
  // Chains and sets the kernel still holds although no entry uses them: a
  // partial sync flushes a chain it no longer needs and leaves it (empty,
  // unreferenced) here instead of deleting it, because with libnftables 1.0.x
  // `delete chain` fetches every chain of the table first (seconds at 50k
  // chains), while `flush chain` and `add chain NAME { rules }` do not. They
  // are deleted in bulk once there are kRetiredLimit of them, and by every
  // full sync (which replaces the table). Set by the backend after a
  // successful transaction (Transaction::retired_*). Names of table ip6
  // vipd's objects end in "/6" here.
  std::set<std::string> retired_chains, retired_sets;
  size_t chain_count = 0;  // per-entry chains (build_desired counts them)
  size_t chains() const { return chain_count; }
  // Per family (0 IPv4, 1 IPv6): entries per shard; its size is the number of
  // shard tables declared (a shard emptied by partial syncs stays declared
  // until the next full sync).
  std::vector<uint32_t> shard_fill[2];
  // std::hash of every entry's base_input, sorted (collision checks).
  std::vector<size_t> base_hashes;
  uint32_t masq_mark = 0x4000;  // RenderOptions::masq_mark (shard tables declared by render_delta)
  // Any IPv6 entry (then table ip6 vipd exists). Keys order IPv4 VIPs first.
  bool has_v6() const { return !entries.empty() && entries.back().first.vip.is_v6(); }
};

// Builds the desired state of `table`, reusing the renders of `prev` for
// entries whose VirtualService and hash input are unchanged (prev may be empty).
// An unchanged entry costs a comparison and a pointer copy: its hash input
// comes from prev, no string is built for it.
// `rendered` (optional) counts the entries rendered anew.
bool build_desired(const ServiceTable& table, const RenderOptions& opts, const Desired& prev, Desired* out,
                   size_t* rendered, std::string* error);

struct Transaction {
  std::string text;  // "" when nothing differs
  size_t chains_written = 0;
  size_t chains_deleted = 0;
  size_t elements_added = 0;
  size_t elements_deleted = 0;
  size_t chains_retired = 0;  // flushed and left for a later bulk delete
  // The retired objects after this transaction (render_delta; empty after a full sync).
  std::set<std::string> retired_chains, retired_sets;
  bool empty() const { return text.empty(); }
};

// The fixed part: the table with its maps, sets, base and fixed chains (a
// `table ip vipd { ... }` block, or `table ip6 vipd` for v6).
std::string render_base(const RenderOptions& opts, bool v6 = false);

// Full sync: `add table; delete table;` then the whole table, so objects of an
// earlier run (or another version) never survive, in one atomic transaction.
// `existing`: tables the kernel holds ("ip vipd-7", as `list tables` names
// them): stale shard tables among them are deleted.
Transaction render_full(const Desired& next, const RenderOptions& opts,
                        const std::vector<std::string>& existing = {});

// The fixed part of shard table k >= 1 (a `table ip vipd-k { ... }` block).
std::string render_shard_base(const RenderOptions& opts, bool v6, uint32_t shard);

inline constexpr size_t kRetiredLimit = 1000;

// Partial sync: only what differs between `prev` (what the kernel holds) and
// `next`, ordered so that every reference is valid inside the transaction:
// sets and (empty) new chains declared, deleted/replaced elements, flushed
// chains, chains filled (`add chain NAME { rules }`), added elements; chains
// and sets no longer used are retired (see Desired::retired_chains), and
// deleted, with every retired one, once kRetiredLimit are retired.
// Commands that make libnftables 1.0.x fetch the table's chains (add rule,
// delete chain, add table) are avoided unless elements change or retired
// objects are deleted; a one-endpoint change needs none of them.
Transaction render_delta(const Desired& prev, const Desired& next);

// The same transaction from the changed entries alone, with `state` (what the
// kernel holds) updated in place to the state after it: O(changes), not
// O(entries) (the backend's partial sync when it has a TableDiff).
//   kApplied    *tx is the transaction (maybe empty), *state the state after it
//   kFallback   *state untouched: a key of `diff` that does not match *state,
//               or a chain-name collision involved (build_desired and
//               render_delta handle those)
//   kBadInput   *state untouched, *error set: an entry it cannot render
enum class DiffResult { kApplied, kFallback, kBadInput };
DiffResult apply_diff(Desired* state, const TableDiff& diff, const RenderOptions& opts, Transaction* tx,
                      size_t* rendered, std::string* error);

// `vipd --dry-run --mode nftables`: a comment header and render_full's text
// (`nft -c -f FILE` accepts it).
std::string dry_run_text(const Desired& d, const RenderOptions& opts);

}  // namespace vipd::cp::nft
