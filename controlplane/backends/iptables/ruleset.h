// Thread: any (pure functions over immutable values; the iptables backend calls
// them on the control thread). Renders a ServiceTable into kube-proxy's iptables
// layout with vipd's own chain prefix (docs/contract.md C14, docs/modes.md):
//
//   nat    VIPD-SERVICES     one rule per entry with usable endpoints:
//                            -d VIP/32 -p P --dport PORT -j VIPD-SVC-<hash> (or VIPD-FW-<hash>)
//          VIPD-FW-<hash>    loadBalancerSourceRanges: -s RANGE -j VIPD-SVC-<hash>
//          VIPD-SVC-<hash>   [-j VIPD-MARK-MASQ] [affinity: -m recent --rcheck]
//                            -m statistic --probability 1/(n-i) -j VIPD-SEP-<hash>
//          VIPD-SEP-<hash>   hairpin -s EP -j VIPD-MARK-MASQ; -j DNAT --to-destination EP
//          VIPD-MARK-MASQ    -j MARK --or-mark 0x4000
//          VIPD-POSTROUTING  unmarked: RETURN; clear the mark; MASQUERADE
//   filter VIPD-SERVICES     entries without usable endpoints: REJECT (when_empty
//                            reject) or DROP (when_empty drop)
//          VIPD-FIREWALL     entries with source ranges: traffic not let through
//                            by VIPD-FW-<hash> (so not DNATed) is dropped
//
// IPv6 (ip6tables-restore) uses the same chains, names and rules with the IPv6
// spellings: -d VIP/128, DNAT --to-destination [EP]:PORT, hairpin -s EP/128, and
// REJECT --reject-with icmp6-port-unreachable (kube-proxy's IPv6 layout). Each
// family's rule set holds only that family's ServiceTable entries and source
// ranges (build_ruleset's `family`); the chain hashes are the same as for IPv4,
// the endpoint string in a SEP hash is "[EP]:PORT" (kube-proxy's JoinHostPort).
//
// Payloads are for `iptables-restore --noflush`: declaring a chain (":NAME - [0:0]")
// creates or flushes it; nothing outside vipd's VIPD- chains is ever declared,
// flushed or deleted. The builtin chains' jumps into vipd's chains are not in the
// payload (that would add duplicates): see jump_rules().
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "model/service_table.h"

namespace vipd::cp::ipt {

inline constexpr const char* kChainPrefix = "VIPD-";
inline constexpr const char* kServicesChain = "VIPD-SERVICES";        // nat and filter
inline constexpr const char* kFirewallChain = "VIPD-FIREWALL";        // filter
inline constexpr const char* kMarkMasqChain = "VIPD-MARK-MASQ";       // nat
inline constexpr const char* kPostroutingChain = "VIPD-POSTROUTING";  // nat

struct RenderOptions {
  // forward-method fnat: every new flow to a service is marked for MASQUERADE,
  // so backends see the node's address and replies return through it (like
  // vipd's full NAT). nat: only hairpin traffic (an endpoint reaching itself
  // through the VIP) is masqueraded.
  bool masquerade_all = true;
  uint32_t masq_mark = 0x4000;
};

// The family a rule set is for: AddressFamily (model/service_table.h).
const char* family_label(AddressFamily f);   // "IPv4" / "IPv6"
const char* restore_program(AddressFamily f);  // "iptables-restore" / "ip6tables-restore"
const char* iptables_program(AddressFamily f);  // "iptables" / "ip6tables"
// The family-specific spellings the renderer uses (exposed for tests):
std::string host_cidr(const std::string& addr, AddressFamily f);  // "10.0.0.1/32", "fd00::1/128"
std::string host_port(const std::string& addr, uint16_t port, AddressFamily f);  // "10.0.0.1:80", "[fd00::1]:80"
std::string reject_target(AddressFamily f);  // "-j REJECT", "-j REJECT --reject-with icmp6-port-unreachable"
// The family of a source range: IPv4 "a.b.c.d/n" (n 0..32) or IPv6 "ADDR/n"
// (n 0..128); nullopt for anything else.
std::optional<AddressFamily> cidr_family(const std::string& range);

enum class Table { kFilter, kNat };
const char* table_name(Table t);  // "filter" / "nat"

// One chain: its rules, each without the leading "-A NAME ".
struct Chain {
  std::string name;
  std::vector<std::string> rules;
  bool operator==(const Chain&) const = default;
};

struct Ruleset {
  std::vector<Chain> filter;  // declaration order
  std::vector<Chain> nat;
  size_t entries = 0;         // ServiceTable entries rendered
  AddressFamily family = AddressFamily::kIpv4;

  const std::vector<Chain>& chains(Table t) const { return t == Table::kFilter ? filter : nat; }
  const Chain* find(Table t, const std::string& name) const;
  std::set<std::string> names(Table t) const;
};

// Builds the complete desired rule set of one family: the entries whose VIP is
// of that family, with the source ranges of that family (an entry whose ranges
// are all of the other family gets a firewall that lets nothing through: a
// restriction is never dropped). Returns false and sets *error (one line) for
// input it cannot express safely (a malformed source range); nothing is
// half-rendered then.
bool build_ruleset(const ServiceTable& table, const RenderOptions& opts, AddressFamily family, Ruleset* out,
                   std::string* error);
// IPv4.
bool build_ruleset(const ServiceTable& table, const RenderOptions& opts, Ruleset* out, std::string* error);
// The number of entries of each family in `table`.
size_t count_entries(const ServiceTable& table, AddressFamily family);

// vipd's chains (prefix VIPD-) present in the kernel, per table.
struct ExistingChains {
  std::set<std::string> filter;
  std::set<std::string> nat;
  std::set<std::string>& of(Table t) { return t == Table::kFilter ? filter : nat; }
  const std::set<std::string>& of(Table t) const { return t == Table::kFilter ? filter : nat; }
};

// Reads `iptables-save` output (all tables or -t filter / -t nat) and returns
// the VIPD- chains of the filter and nat tables.
ExistingChains parse_saved_chains(const std::string& save_output);

struct Payload {
  std::string text;           // "" when there is nothing to do
  size_t chains_written = 0;  // declared (flushed) and rewritten
  size_t chains_deleted = 0;  // flushed and deleted (-X)
  bool empty() const { return text.empty(); }
};

// Full sync: declares and writes every chain of `next`; VIPD- chains listed in
// `existing` but absent from `next` are flushed and deleted.
Payload render_full(const Ruleset& next, const ExistingChains& existing);

// Partial sync: declares and writes only the chains of `next` that are new or
// whose rules differ from `prev` (the last applied rule set); chains of `prev`
// (or `existing`) absent from `next` are flushed and deleted. Unchanged
// services' chains are not touched. Empty text when nothing differs.
Payload render_partial(const Ruleset& next, const Ruleset& prev, const ExistingChains& existing = {});

// A rule vipd keeps in a builtin chain (checked with `iptables -C`, inserted at
// the top with `iptables -I CHAIN 1` when missing). `args` excludes -t/-C/-I.
// The same jumps for both families (ip6tables for IPv6).
struct JumpRule {
  Table table;
  std::string chain;              // builtin chain: PREROUTING, OUTPUT, ...
  std::vector<std::string> args;  // e.g. {"-m", "comment", "--comment", "vipd service portals", "-j", "VIPD-SERVICES"}
  std::string text() const;       // "-t nat -I PREROUTING 1 -m comment --comment \"...\" -j VIPD-SERVICES"
};
std::vector<JumpRule> jump_rules();

// `vipd --dry-run --mode iptables`: a comment header (including the jump rules)
// and the full payload as applied to a kernel without vipd chains, for the
// family of `rules` (the header names iptables-restore or ip6tables-restore).
std::string dry_run_text(const Ruleset& rules, const RenderOptions& opts);
// Both families: the IPv4 text, then the IPv6 one when `v6` has entries.
std::string dry_run_text(const Ruleset& v4, const Ruleset& v6, const RenderOptions& opts);

}  // namespace vipd::cp::ipt
