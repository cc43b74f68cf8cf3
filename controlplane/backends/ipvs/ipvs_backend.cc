// Thread: control (apply, tick); stats() and draining() from any thread.
#include "controlplane/backends/ipvs/ipvs_backend.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <sstream>
#include <tuple>

#include "common/log.h"
#include "controlplane/backends/iptables/ruleset.h"

namespace vipd::cp::ipvs {
namespace {

std::string svc_text(const ServiceKey& k) { return to_string(k); }

std::string dest_text(const ServiceKey& k, const IpAddr& ip, uint16_t port) {
  return dest_to_string(ip, port) + " of " + to_string(k);
}

bool same_params(const IpvsService& a, const IpvsService& b) {
  return a.scheduler == b.scheduler && a.flags == b.flags && a.timeout_s == b.timeout_s && a.netmask == b.netmask;
}

bool same_dest(const IpvsDest& a, const IpvsDest& b) {
  return a.weight == b.weight && a.fwd_method == b.fwd_method && a.u_thresh == b.u_thresh && a.l_thresh == b.l_thresh;
}

}  // namespace

IpvsBackend::IpvsBackend(IpvsKernel& kernel, VipInterface& iface, IpvsBackendOptions opts)
    : kernel_(kernel), iface_(iface), opts_(std::move(opts)) {
  if (!opts_.run) {
    const int timeout = opts_.command_timeout_ms;
    opts_.run = [timeout](const std::vector<std::string>& argv, const std::string& input) {
      return ipt::run_command(argv, input, timeout);
    };
  }
}

IpvsBackendStats IpvsBackend::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  return stats_;
}

std::vector<DrainingDest> IpvsBackend::draining() const {
  std::lock_guard<std::mutex> lk(mu_);
  return draining_;
}

bool IpvsBackend::wanted_dest(const ServiceKey& key, const DestKey& d) const {
  const auto it = desired_.services.find(key);
  if (it == desired_.services.end()) return false;
  // dests are sorted by (ip, port) (to_desired).
  const auto& v = it->second.dests;
  const auto at = std::lower_bound(v.begin(), v.end(), d, [](const IpvsDest& w, const DestKey& k) {
    return std::tie(w.ip, w.port) < std::tie(k.ip, k.port);
  });
  return at != v.end() && at->ip == d.ip && at->port == d.port;
}

// ---- sysctls ------------------------------------------------------------------
void IpvsBackend::set_sysctls() {
  sysctl_errors_ = 0;
  sysctl_error_.clear();
  if (!opts_.set_sysctls) return;
  std::vector<Sysctl> wanted = required_sysctls();
  if (desired_.has_ipv6()) wanted.insert(wanted.end(), required_sysctls6().begin(), required_sysctls6().end());
  for (const Sysctl& s : wanted) {
    std::string path = opts_.proc_sys + "/" + s.name;
    for (size_t i = opts_.proc_sys.size() + 1; i < path.size(); ++i)
      if (path[i] == '.') path[i] = '/';
    std::string cur;
    {
      std::ifstream in(path);
      if (in) std::getline(in, cur);
    }
    if (cur == s.value) continue;
    std::ofstream out(path);
    if (out) out << s.value << "\n";
    out.close();
    if (out) continue;
    const std::string msg = std::string("cannot set sysctl ") + s.name + " = " + s.value + " (" + path +
                            (cur.empty() ? ": not present (is ip_vs loaded?)" : ": write failed, value is " + cur) +
                            "); without it " + s.why;
    ++sysctl_errors_;
    if (sysctl_error_.empty()) sysctl_error_ = msg;
    if (warned_.insert(msg).second) log_warn("ipvs: " + msg);
  }
}

// ---- VIP addresses ----------------------------------------------------------------
bool IpvsBackend::bind_wanted(std::string* error) {
  for (const IpAddr& a : desired_.vips) {
    if (bound_.count(a)) continue;
    const int e = iface_.bind(a);
    if (e && e != EEXIST) {
      *error = describe_op("bind", host_prefix(a) + " to " + iface_.name(), e);
      if (a.is_v6() && (e == EACCES || e == EPERM || e == EAFNOSUPPORT))
        *error += " (is IPv6 disabled there? net.ipv6.conf." + iface_.name() + ".disable_ipv6)";
      return false;
    }
    bound_.insert(a);
  }
  return true;
}

bool IpvsBackend::unbind_unwanted(std::string* error) {
  for (auto it = bound_.begin(); it != bound_.end();) {
    if (desired_.vips.count(*it)) {
      ++it;
      continue;
    }
    const int e = iface_.unbind(*it);
    if (e && e != ENOENT) {
      *error = describe_op("unbind", host_prefix(*it) + " from " + iface_.name(), e);
      return false;
    }
    it = bound_.erase(it);
  }
  return true;
}

// ---- IPVS services ------------------------------------------------------------------
bool IpvsBackend::reconcile_dests(const DesiredService& want, KService& have, std::string* error) {
  const ServiceKey& key = want.service.key;
  for (const IpvsDest& d : want.dests) {
    const DestKey dk{d.ip, d.port};
    auto it = have.dests.find(dk);
    if (it == have.dests.end()) {
      if (int e = op(kernel_.add_dest(key, d))) {
        *error = describe_op("add real server", dest_text(key, d.ip, d.port), e);
        return false;
      }
      have.dests.emplace(dk, d);
    } else if (!same_dest(it->second, d)) {
      if (int e = op(kernel_.edit_dest(key, d))) {
        *error = describe_op("update real server", dest_text(key, d.ip, d.port), e);
        return false;
      }
      if (it->second.weight == 0) log_info("ipvs: real server " + dest_text(key, d.ip, d.port) + " is back");
      const IpvsDest old = it->second;
      it->second = d;
      it->second.active_conns = old.active_conns;
      it->second.inactive_conns = old.inactive_conns;
    }
  }
  // Real servers no longer wanted: UDP ones go at once, TCP ones drain at weight 0.
  for (auto it = have.dests.begin(); it != have.dests.end();) {
    if (wanted_dest(key, it->first)) {
      ++it;
      continue;
    }
    const std::string what = dest_text(key, it->first.ip, it->first.port);
    if (key.protocol == Protocol::kUdp) {
      if (int e = op(kernel_.del_dest(key, it->first.ip, it->first.port))) {
        *error = describe_op("delete real server", what, e);
        return false;
      }
      it = have.dests.erase(it);
      continue;
    }
    if (it->second.weight != 0) {
      IpvsDest q = it->second;
      q.weight = 0;
      if (int e = op(kernel_.edit_dest(key, q))) {
        *error = describe_op("quiesce real server", what, e);
        return false;
      }
      it->second.weight = 0;
      log_info("ipvs: real server " + what + " draining (weight 0 until its connections are gone)");
    }
    ++it;
  }
  return true;
}

// Brings one service of the kernel to what desired_ says (deleting it when
// desired_ has no such service).
bool IpvsBackend::reconcile(const ServiceKey& key, std::string* error) {
  const auto want = desired_.services.find(key);
  auto have = kstate_.find(key);
  if (want == desired_.services.end()) {
    if (have == kstate_.end()) return true;
    if (int e = op(kernel_.del_service(key))) {
      *error = describe_op("delete service", svc_text(key), e);
      return false;
    }
    kstate_.erase(have);
    return true;
  }
  const IpvsService& ws = want->second.service;
  if (have == kstate_.end()) {
    if (int e = op(kernel_.add_service(ws))) {
      *error = describe_op("add service", svc_text(key) + " (scheduler " + ws.scheduler + ")", e);
      return false;
    }
    have = kstate_.emplace(key, KService{ws, {}}).first;
  } else if (!same_params(have->second.service, ws)) {
    if (int e = op(kernel_.edit_service(ws))) {
      *error = describe_op("update service", svc_text(key) + " (scheduler " + ws.scheduler + ")", e);
      return false;
    }
    have->second.service = ws;
  }
  return reconcile_dests(want->second, have->second, error);
}

bool IpvsBackend::full_sync(std::string* error) {
  set_sysctls();
  if (int e = kernel_.open()) {
    *error = describe_op("open", "IPVS generic netlink", e);
    return false;
  }
  if (int e = iface_.ensure()) {
    *error = describe_op("create", "dummy interface " + iface_.name(), e) +
             (e == EOPNOTSUPP ? " (is the dummy module available? modprobe dummy)" : "");
    return false;
  }
  std::vector<IpAddr> addrs;
  if (int e = iface_.list(&addrs)) {
    *error = describe_op("list addresses of", iface_.name(), e);
    return false;
  }
  std::vector<IpvsServiceState> dump;
  size_t foreign = 0;
  if (int e = kernel_.dump(&dump, &foreign)) {
    *error = describe_op("read back", "the kernel's IPVS services (GET_SERVICE/GET_DEST)", e);
    return false;
  }
  bound_ = std::set<IpAddr>(addrs.begin(), addrs.end());
  std::map<ServiceKey, KService> fresh;
  for (const IpvsServiceState& s : dump) {
    const ServiceKey& k = s.service.key;
    // vipd's: VIP on the dummy interface, wanted now, or programmed by this run.
    if (!bound_.count(k.vip) && !desired_.services.count(k) && !kstate_.count(k)) {
      ++foreign;
      continue;
    }
    KService ks{s.service, {}};
    for (const IpvsDest& d : s.dests) ks.dests.emplace(DestKey{d.ip, d.port}, d);
    fresh.emplace(k, std::move(ks));
  }
  kstate_ = std::move(fresh);
  foreign_ = foreign;
  if (!bind_wanted(error)) return false;
  std::vector<ServiceKey> keys;
  for (const auto& [k, s] : kstate_) keys.push_back(k);
  for (const auto& [k, s] : desired_.services) keys.push_back(k);
  for (const ServiceKey& k : keys) {
    const bool stale = !desired_.services.count(k) && kstate_.count(k);
    if (!reconcile(k, error)) return false;
    if (stale) {
      ++stale_deleted_;
      log_info("ipvs: deleted stale service " + svc_text(k));
    }
  }
  return unbind_unwanted(error) && apply_rules(true, error);
}

bool IpvsBackend::partial_sync(const TableDiff& diff, std::string* error) {
  if (!bind_wanted(error)) return false;
  for (const VirtualService* vs : diff.added)
    if (!reconcile(vs->key, error)) return false;
  for (const VirtualService* vs : diff.changed)
    if (!reconcile(vs->key, error)) return false;
  for (const ServiceKey& k : diff.removed)
    if (!reconcile(k, error)) return false;
  return unbind_unwanted(error) && apply_rules(false, error);
}

// ---- iptables -------------------------------------------------------------------------
bool IpvsBackend::apply_rules(bool full, std::string* error) {
  if (!opts_.manage_iptables) return true;
  if (!apply_family_rules(AddressFamily::kIpv4, full, error)) return false;
  // IPv6: engaged by IPv6 entries, or (full sync) by vipd's chain left in ip6tables.
  if (!v6_rules_ && (desired_.has_ipv6() || (full && ip6tables_has_chain()))) {
    v6_rules_ = true;
    log_info("ipvs: managing vipd's ip6tables chains as well (IPv6 entries, or chains of an earlier run)");
  }
  return !v6_rules_ || apply_family_rules(AddressFamily::kIpv6, full, error);
}

bool IpvsBackend::ip6tables_has_chain() {
  ipt::RunResult r = opts_.run(
      {opts_.ip6tables_cmd, "-w", std::to_string(opts_.lock_wait_s), "-t", "filter", "-S", kServicesChain}, "");
  return r.ok();  // not started (no ip6tables), or exit 1 (no such chain): nothing of vipd's there
}

bool IpvsBackend::apply_family_rules(AddressFamily f, bool full, std::string* error) {
  const bool v6 = f == AddressFamily::kIpv6;
  const std::string& cmd = v6 ? opts_.restore6_cmd : opts_.restore_cmd;
  std::string& applied = v6 ? applied_rules6_ : applied_rules_;
  const std::string payload = render_rules(desired_, opts_.rules, f);
  if (!full && payload == applied) return true;
  ipt::RunResult r = opts_.run({cmd, "--noflush", "-w", std::to_string(opts_.lock_wait_s)}, payload);
  if (!r.ok()) {
    applied.clear();
    *error = ipt::describe_failure(cmd, r) + " (vipd's ipvs-mode chains; the masquerade rule needs the xt_ipvs module" +
             (v6 ? std::string(", IPv6 ones ip6table_nat or nft_chain_nat and ip6t_REJECT)") : std::string(")"));
    return false;
  }
  applied = payload;
  ++rules_applied_;
  return !full || ensure_jumps(f, error);
}

bool IpvsBackend::ensure_jumps(AddressFamily f, std::string* error) {
  const std::string wait = std::to_string(opts_.lock_wait_s);
  const std::string& iptables = f == AddressFamily::kIpv6 ? opts_.ip6tables_cmd : opts_.iptables_cmd;
  for (const IpvsJump& j : ipvs_jumps()) {
    std::vector<std::string> check = {iptables, "-w", wait, "-t", j.table, "-C", j.chain};
    check.insert(check.end(), j.args.begin(), j.args.end());
    ipt::RunResult c = opts_.run(check, "");
    if (c.ok()) continue;
    if (!c.started || c.timed_out || c.exit_code != 1) {  // 1 = no such rule
      *error = ipt::describe_failure(iptables + " -t " + j.table + " -C " + j.chain, c);
      return false;
    }
    std::vector<std::string> insert = {iptables, "-w", wait, "-t", j.table, "-I", j.chain, "1"};
    insert.insert(insert.end(), j.args.begin(), j.args.end());
    ipt::RunResult i = opts_.run(insert, "");
    if (!i.ok()) {
      *error = ipt::describe_failure(iptables + " -t " + j.table + " -I " + j.chain, i);
      return false;
    }
    ++jumps_added_;
    log_info("ipvs: added the jump rule: " + iptables + " " + j.text());
  }
  return true;
}

// ---- Backend -----------------------------------------------------------------------------
void IpvsBackend::publish_stats(bool ok, bool full, double ms) {
  std::vector<DrainingDest> drain;
  uint64_t dests = 0, v6 = 0;
  for (const auto& [k, s] : kstate_) {
    dests += s.dests.size();
    v6 += k.vip.is_v6();
    for (const auto& [dk, d] : s.dests)
      if (!wanted_dest(k, dk)) drain.push_back({k, dk.ip, dk.port, d.active_conns, d.inactive_conns});
  }
  std::lock_guard<std::mutex> lk(mu_);
  if (!ok) ++stats_.failures;
  else if (full) ++stats_.full_syncs;
  else if (ms >= 0) ++stats_.partial_syncs;
  stats_.netlink_ops = ops_;
  stats_.stale_services_deleted = stale_deleted_;
  stats_.dests_drained = drained_;
  stats_.foreign_services = foreign_;
  stats_.services = kstate_.size();
  stats_.dests = dests;
  stats_.draining = drain.size();
  stats_.vips_bound = bound_.size();
  stats_.ipv6_services = v6;
  stats_.ipv6_rules = v6_rules_;
  stats_.cross_family_skipped = desired_.cross_family;
  stats_.rules_applied = rules_applied_;
  stats_.jump_rules_added = jumps_added_;
  stats_.sysctl_errors = sysctl_errors_;
  stats_.sysctl_error = sysctl_error_;
  if (ms >= 0) stats_.last_sync_ms = ms;
  draining_ = std::move(drain);
}

bool IpvsBackend::apply(const ServiceTable& next, const TableDiff& diff, bool full, std::string* error) {
  const auto t0 = std::chrono::steady_clock::now();
  const uint64_t ops0 = ops_;
  desired_ = build_desired(next);
  if (desired_.cross_family != cross_family_warned_ && desired_.cross_family)
    log_warn("ipvs: " + std::to_string(desired_.cross_family) +
             " backend(s) not of their service's address family skipped (IPVS masquerade stays within a family)");
  cross_family_warned_ = desired_.cross_family;
  const bool do_full = full || force_full_;
  const bool ok = do_full ? full_sync(error) : partial_sync(diff, error);
  force_full_ = !ok;
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  publish_stats(ok, do_full, ms);
  {
    std::lock_guard<std::mutex> lk(mu_);
    stats_.last_sync_ops = ops_ - ops0;
  }
  if (ok)
    log_debug("ipvs: " + std::string(do_full ? "full" : "partial") + " sync: " + std::to_string(ops_ - ops0) +
              " netlink requests, " + std::to_string(kstate_.size()) + " services");
  return ok;
}

bool IpvsBackend::tick(std::string* error) {
  if (force_full_) return true;  // the pending full sync reads everything back anyway
  bool any = false;
  for (auto& [key, ks] : kstate_) {
    bool draining = false;
    for (const auto& [dk, d] : ks.dests) draining = draining || !wanted_dest(key, dk);
    if (!draining) continue;
    any = true;
    std::vector<IpvsDest> now;
    if (int e = kernel_.dump_dests(key, &now)) {
      *error = describe_op("read real servers of", svc_text(key), e);
      force_full_ = true;
      publish_stats(false, false, -1);
      return false;
    }
    for (const IpvsDest& d : now) {
      auto it = ks.dests.find(DestKey{d.ip, d.port});
      if (it == ks.dests.end()) continue;
      it->second.active_conns = d.active_conns;
      it->second.inactive_conns = d.inactive_conns;
    }
    for (auto it = ks.dests.begin(); it != ks.dests.end();) {
      const IpvsDest& d = it->second;
      if (wanted_dest(key, it->first) || d.active_conns + d.inactive_conns != 0) {
        ++it;
        continue;
      }
      if (int e = op(kernel_.del_dest(key, d.ip, d.port))) {
        *error = describe_op("delete drained real server", dest_text(key, d.ip, d.port), e);
        force_full_ = true;
        publish_stats(false, false, -1);
        return false;
      }
      ++drained_;
      log_info("ipvs: real server " + dest_text(key, d.ip, d.port) + " drained (no connections left): deleted");
      it = ks.dests.erase(it);
    }
  }
  if (any) publish_stats(true, false, -1);
  return true;
}

}  // namespace vipd::cp::ipvs
