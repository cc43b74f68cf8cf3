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
std::string restore_failure(const RunResult& r, const std::string& payload) {
  std::string s = describe_failure("iptables-restore", r);
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

IptablesBackend::IptablesBackend(IptablesOptions opts) : opts_(std::move(opts)) {}

IptablesStats IptablesBackend::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  return stats_;
}

bool IptablesBackend::ensure_jumps(std::string* error) {
  const std::string wait = std::to_string(opts_.lock_wait_s);
  for (const auto& j : jump_rules()) {
    std::vector<std::string> check = {opts_.iptables_cmd, "-w", wait, "-t", table_name(j.table), "-C", j.chain};
    check.insert(check.end(), j.args.begin(), j.args.end());
    RunResult c = run_command(check, "", opts_.command_timeout_ms);
    if (c.ok()) continue;
    // iptables -C: 1 = no such rule; anything else is a real failure.
    if (!c.started || c.timed_out || c.exit_code != 1) {
      *error = describe_failure(opts_.iptables_cmd + " -t " + table_name(j.table) + " -C " + j.chain, c);
      return false;
    }
    std::vector<std::string> insert = {opts_.iptables_cmd, "-w", wait, "-t", table_name(j.table), "-I", j.chain, "1"};
    insert.insert(insert.end(), j.args.begin(), j.args.end());
    RunResult i = run_command(insert, "", opts_.command_timeout_ms);
    if (!i.ok()) {
      *error = describe_failure(opts_.iptables_cmd + " -t " + table_name(j.table) + " -I " + j.chain, i);
      return false;
    }
    log_info("iptables: added the jump rule: iptables " + j.text());
    std::lock_guard<std::mutex> lk(mu_);
    ++stats_.jump_rules_added;
  }
  return true;
}

int restore_timeout_ms(const IptablesOptions& o, size_t bytes) {
  const double extra = static_cast<double>(o.restore_timeout_ms_per_mib) * static_cast<double>(bytes) / (1024.0 * 1024.0);
  return static_cast<int>(std::min<double>(o.command_timeout_ms + extra, 3600.0 * 1000));
}

bool IptablesBackend::apply(const ServiceTable& next, const TableDiff& /*diff*/, bool full, std::string* error) {
  // The TableDiff is not needed: partial syncs compare rendered chains, which also
  // catches changes that do not show in the diff (e.g. a renamed chain).
  auto fail = [&](std::string why) {
    *error = std::move(why);
    force_full_ = true;
    std::lock_guard<std::mutex> lk(mu_);
    ++stats_.failures;
    return false;
  };
  Ruleset rules;
  std::string why;
  if (!build_ruleset(next, opts_.render, &rules, &why)) return fail(why);

  const bool do_full = full || force_full_ || !have_applied_;
  Payload payload;
  if (do_full) {
    ExistingChains existing;
    RunResult s = run_command({opts_.save_cmd}, "", opts_.command_timeout_ms);
    if (s.ok()) {
      existing = parse_saved_chains(s.out);
    } else {
      // Not fatal: stale chains from an earlier run stay until a later full sync.
      log_warn("iptables: cannot list existing chains (" + describe_failure(opts_.save_cmd, s) +
               "); only chains this process created will be deleted");
    }
    if (have_applied_) {
      for (Table t : {Table::kFilter, Table::kNat})
        for (const auto& n : applied_.names(t)) existing.of(t).insert(n);
    }
    payload = render_full(rules, existing);
  } else {
    payload = render_partial(rules, applied_);
  }

  if (payload.empty()) {
    std::lock_guard<std::mutex> lk(mu_);
    ++stats_.noop_syncs;
    stats_.chains_written = stats_.chains_deleted = stats_.payload_bytes = 0;
    applied_ = std::move(rules);
    return true;
  }
  last_payload_ = payload.text;
  const auto t0 = std::chrono::steady_clock::now();
  RunResult r = run_command({opts_.restore_cmd, "--noflush", "-w", std::to_string(opts_.lock_wait_s)},
                            payload.text, restore_timeout_ms(opts_, payload.text.size()));
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!r.ok()) return fail(restore_failure(r, payload.text));
  // The chains exist now, so the jumps into them can be added.
  if (do_full && !ensure_jumps(&why)) return fail(why);

  applied_ = std::move(rules);
  have_applied_ = true;
  force_full_ = false;
  std::lock_guard<std::mutex> lk(mu_);
  ++(do_full ? stats_.full_syncs : stats_.partial_syncs);
  stats_.chains_written = payload.chains_written;
  stats_.chains_deleted = payload.chains_deleted;
  stats_.payload_bytes = payload.text.size();
  stats_.nat_chains = applied_.nat.size();
  stats_.last_restore_ms = ms;
  log_debug("iptables: " + std::string(do_full ? "full" : "partial") + " sync: " +
            std::to_string(payload.chains_written) + " chains written, " + std::to_string(payload.chains_deleted) +
            " deleted, " + std::to_string(payload.text.size()) + " bytes, " + std::to_string(ms) + " ms");
  return true;
}

}  // namespace vipd::cp::ipt
