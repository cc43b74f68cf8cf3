// Thread: control (apply); stats() from any thread.
#include "controlplane/backends/iptables/iptables_backend.h"

#include <algorithm>
#include <chrono>

#include "common/log.h"
#include "controlplane/backends/iptables/runner.h"

namespace vipd::cp::ipt {
namespace {

// "iptables-restore: exit status 1: iptables-restore: line 12 failed" plus the
// payload line it names, so the error says what was refused.
std::string restore_failure(const std::string& program, const RunResult& r, const std::string& payload) {
  std::string s = describe_failure(program, r);
  const auto at = r.err.find("line ");
  if (at != std::string::npos) {
    size_t n = 0, i = at + 5;
    while (i < r.err.size() && r.err[i] >= '0' && r.err[i] <= '9') n = n * 10 + static_cast<size_t>(r.err[i++] - '0');
    size_t line = 1, pos = 0;
    while (n > 0 && line < n && pos != std::string::npos) {
      pos = payload.find('\n', pos);
      if (pos != std::string::npos) ++pos;
      ++line;
    }
    if (n > 0 && pos != std::string::npos && pos < payload.size()) {
      std::string text = payload.substr(pos, payload.find('\n', pos) - pos);
      if (text.size() > 300) text = text.substr(0, 300) + "...";
      s += " (payload line " + std::to_string(n) + ": " + text + ")";
    }
  }
  return s;
}

}  // namespace

IptablesBackend::IptablesBackend(IptablesOptions opts) : opts_(std::move(opts)) {
  v4_.family = AddressFamily::kIpv4;
  v4_.restore_cmd = opts_.restore_cmd;
  v4_.save_cmd = opts_.save_cmd;
  v4_.iptables_cmd = opts_.iptables_cmd;
  v4_.active = true;
  v6_.family = AddressFamily::kIpv6;
  v6_.restore_cmd = opts_.restore6_cmd;
  v6_.save_cmd = opts_.save6_cmd;
  v6_.iptables_cmd = opts_.ip6tables_cmd;
}

IptablesStats IptablesBackend::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  return stats_;
}

bool IptablesBackend::ensure_jumps(const FamilyState& fs, std::string* error) {
  const std::string wait = std::to_string(opts_.lock_wait_s);
  for (const auto& j : jump_rules()) {
    std::vector<std::string> check = {fs.iptables_cmd, "-w", wait, "-t", table_name(j.table), "-C", j.chain};
    check.insert(check.end(), j.args.begin(), j.args.end());
    RunResult c = run_command(check, "", opts_.command_timeout_ms);
    if (c.ok()) continue;
    // iptables -C: 1 = no such rule; anything else is a real failure.
    if (!c.started || c.timed_out || c.exit_code != 1) {
      *error = describe_failure(fs.iptables_cmd + " -t " + table_name(j.table) + " -C " + j.chain, c);
      return false;
    }
    std::vector<std::string> insert = {fs.iptables_cmd, "-w", wait, "-t", table_name(j.table), "-I", j.chain, "1"};
    insert.insert(insert.end(), j.args.begin(), j.args.end());
    RunResult i = run_command(insert, "", opts_.command_timeout_ms);
    if (!i.ok()) {
      *error = describe_failure(fs.iptables_cmd + " -t " + table_name(j.table) + " -I " + j.chain, i);
      return false;
    }
    log_info(std::string("iptables: added the jump rule: ") + iptables_program(fs.family) + " " + j.text());
    std::lock_guard<std::mutex> lk(mu_);
    ++stats_.jump_rules_added;
  }
  return true;
}

int restore_timeout_ms(const IptablesOptions& o, size_t bytes) {
  const double extra = static_cast<double>(o.restore_timeout_ms_per_mib) * static_cast<double>(bytes) / (1024.0 * 1024.0);
  return static_cast<int>(std::min<double>(o.command_timeout_ms + extra, 3600.0 * 1000));
}

bool IptablesBackend::sync_family(FamilyState& fs, const ServiceTable& next, bool full, FamilyResult* res,
                                  std::string* error) {
  auto fail = [&](std::string why) {
    *error = std::move(why);
    fs.force_full = true;
    return false;
  };
  const bool v6 = fs.family == AddressFamily::kIpv6;
  Ruleset rules;
  std::string why;
  if (!build_ruleset(next, opts_.render, fs.family, &rules, &why)) return fail(why);

  // IPv6 not engaged yet: looked at on full syncs (stale chains of an earlier
  // run) and once the table has IPv6 entries; a partial sync skips it.
  if (v6 && !fs.active && !full && rules.entries == 0) return true;
  const bool do_full = full || fs.force_full || !fs.have_applied || (v6 && !fs.active);
  Payload payload;
  if (do_full) {
    ExistingChains existing;
    RunResult s = run_command({fs.save_cmd}, "", opts_.command_timeout_ms);
    if (s.ok()) {
      existing = parse_saved_chains(s.out);
    } else if (!v6 || fs.active || rules.entries > 0) {
      // Not fatal: stale chains from an earlier run stay until a later full sync.
      log_warn("iptables: cannot list existing chains (" + describe_failure(fs.save_cmd, s) +
               "); only chains this process created will be deleted");
    }
    // IPv6 is engaged by IPv6 entries or by VIPD- chains an earlier run left.
    if (v6 && !fs.active) {
      if (rules.entries == 0 && existing.filter.empty() && existing.nat.empty()) return true;
      log_info(std::string("iptables: IPv6 rules engaged (") + std::to_string(rules.entries) +
               " IPv6 entries; " + std::to_string(existing.filter.size() + existing.nat.size()) +
               " VIPD- chains found in ip6tables)");
      fs.active = true;
    }
    if (fs.have_applied) {
      for (Table t : {Table::kFilter, Table::kNat})
        for (const auto& n : fs.applied.names(t)) existing.of(t).insert(n);
    }
    payload = render_full(rules, existing);
  } else {
    payload = render_partial(rules, fs.applied);
  }

  res->full = do_full;
  if (payload.empty()) {
    fs.applied = std::move(rules);
    return true;
  }
  fs.last_payload = payload.text;
  const auto t0 = std::chrono::steady_clock::now();
  RunResult r = run_command({fs.restore_cmd, "--noflush", "-w", std::to_string(opts_.lock_wait_s)}, payload.text,
                            restore_timeout_ms(opts_, payload.text.size()));
  res->ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!r.ok()) return fail(restore_failure(restore_program(fs.family), r, payload.text));
  // The chains exist now, so the jumps into them can be added.
  if (do_full && !ensure_jumps(fs, &why)) return fail(why);

  fs.applied = std::move(rules);
  fs.have_applied = true;
  fs.force_full = false;
  res->ran = true;
  res->payload = std::move(payload);
  return true;
}

bool IptablesBackend::apply(const ServiceTable& next, const TableDiff& /*diff*/, bool full, std::string* error) {
  // The TableDiff is not needed: partial syncs compare rendered chains, which also
  // catches changes that do not show in the diff (e.g. a renamed chain).
  FamilyResult r4, r6;
  // IPv6 follows IPv4's full syncs (also those after an IPv4 failure).
  const bool ok = sync_family(v4_, next, full, &r4, error) && sync_family(v6_, next, full || r4.full, &r6, error);
  std::lock_guard<std::mutex> lk(mu_);
  stats_.ipv6_active = v6_.active;
  if (!ok) {
    ++stats_.failures;
    return false;
  }
  if (!r4.ran && !r6.ran) {
    ++stats_.noop_syncs;
    stats_.chains_written = stats_.chains_deleted = stats_.payload_bytes = stats_.ipv6_payload_bytes = 0;
    return true;
  }
  ++(r4.full ? stats_.full_syncs : stats_.partial_syncs);
  stats_.chains_written = r4.payload.chains_written + r6.payload.chains_written;
  stats_.chains_deleted = r4.payload.chains_deleted + r6.payload.chains_deleted;
  stats_.payload_bytes = r4.payload.text.size();
  stats_.ipv6_payload_bytes = r6.payload.text.size();
  stats_.ipv6_restores += r6.ran ? 1 : 0;
  stats_.nat_chains = v4_.applied.nat.size();
  stats_.ipv6_nat_chains = v6_.active ? v6_.applied.nat.size() : 0;
  stats_.last_restore_ms = r4.ms + r6.ms;
  log_debug("iptables: " + std::string(r4.full ? "full" : "partial") + " sync: " +
            std::to_string(stats_.chains_written) + " chains written, " + std::to_string(stats_.chains_deleted) +
            " deleted, " + std::to_string(r4.payload.text.size()) + " + " + std::to_string(r6.payload.text.size()) +
            " (IPv6) bytes, " + std::to_string(stats_.last_restore_ms) + " ms");
  return true;
}

}  // namespace vipd::cp::ipt
