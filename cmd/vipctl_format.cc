// Thread: any.
#include "cmd/vipctl_format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <utility>
#include <vector>

#include "common/text.h"
#include "model/kinds.h"

namespace vipd::ctl {
namespace {

using nlohmann::json;

const json& field(const json& j, const char* key) {
  static const json kNull;
  if (!j.is_object()) return kNull;
  auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

uint64_t as_u64(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer()) return static_cast<uint64_t>(std::max<int64_t>(0, v.get<int64_t>()));
  if (v.is_number_float()) {
    double d = v.get<double>();
    return d > 0 ? static_cast<uint64_t>(d) : 0;
  }
  return 0;
}

double as_double(const json& v) { return v.is_number() ? v.get<double>() : 0.0; }
// Every string of the daemon's answer reaches the terminal through here (and
// scalar_text): names come from Kubernetes objects and manifests, so control
// characters (newline, ESC sequences) and bytes that are not UTF-8 are shown
// as escapes, never written raw.
std::string as_str(const json& v) { return v.is_string() ? escape_control(v.get<std::string>()) : std::string(); }

uint64_t u64(const json& j, const char* key) { return as_u64(field(j, key)); }
std::string str(const json& j, const char* key) { return as_str(field(j, key)); }
const json& arr(const json& j, const char* key) {
  static const json kEmpty = json::array();
  const json& v = field(j, key);
  return v.is_array() ? v : kEmpty;
}

std::string pad_right(std::string s, size_t w) {
  if (s.size() < w) s.append(w - s.size(), ' ');
  return s;
}

std::string pad_left(const std::string& s, size_t w) {
  return s.size() < w ? std::string(w - s.size(), ' ') + s : s;
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string rtrim(std::string s) {
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

// "10.96.0.100:8080", "[fd00::10]:8080" (an IPv6 address in brackets, as ipvsadm prints it).
std::string addr_port(const std::string& addr, uint64_t port) {
  const bool v6 = addr.find(':') != std::string::npos;
  return (v6 ? "[" + addr + "]" : addr) + ":" + std::to_string(port);
}

// "TCP  10.96.0.100:8080", as ipvsadm prints a service.
std::string service_label(const json& svc) {
  return pad_right(str(svc, "protocol"), 4) + " " + addr_port(str(svc, "vip"), u64(svc, "port"));
}

std::string backend_label(const json& be) { return addr_port(str(be, "ip"), u64(be, "port")); }

std::string title_line(const json& doc) {
  return "IP Virtual Server (vipd) generation " + std::to_string(u64(doc, "generation")) + ", " +
         std::to_string(arr(doc, "services").size()) + " services\n";
}

// ipvsadm --stats / --rate rows: label padded to 33, then five 8-wide columns.
constexpr size_t kStatLabelWidth = 33;
constexpr size_t kStatColWidth = 8;

std::string stat_row(const std::string& label, const std::vector<std::string>& cols) {
  std::string line = pad_right(label, kStatLabelWidth);
  for (const auto& c : cols) line += " " + pad_left(c, kStatColWidth);
  return line + "\n";
}

std::vector<std::string> counter_cols(const json& stats) {
  return {std::to_string(u64(stats, "conns")), std::to_string(u64(stats, "inpkts")),
          std::to_string(u64(stats, "outpkts")), std::to_string(u64(stats, "inbytes")),
          std::to_string(u64(stats, "outbytes"))};
}

std::string round_str(double v) {
  return std::to_string(static_cast<uint64_t>(std::llround(std::max(0.0, v))));
}

std::vector<std::string> rate_cols(const json& rate) {
  return {round_str(as_double(field(rate, "cps"))), round_str(as_double(field(rate, "inpps"))),
          round_str(as_double(field(rate, "outpps"))), round_str(as_double(field(rate, "inbps"))),
          round_str(as_double(field(rate, "outbps")))};
}

constexpr const char* kCounterKeys[] = {"conns", "inpkts", "outpkts", "inbytes", "outbytes"};
constexpr const char* kRateKeys[] = {"cps", "inpps", "outpps", "inbps", "outbps"};

json rate_of(const json& before_stats, const json& after_stats, double interval_s) {
  json r = json::object();
  for (size_t i = 0; i < std::size(kCounterKeys); ++i) {
    uint64_t a = u64(after_stats, kCounterKeys[i]);
    uint64_t b = u64(before_stats, kCounterKeys[i]);
    double delta = a >= b ? static_cast<double>(a - b) : 0.0;
    r[kRateKeys[i]] = interval_s > 0 ? delta / interval_s : 0.0;
  }
  return r;
}

// A simple right-aligned table: first column left-aligned, two-space gaps.
std::string table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> w;
  for (const auto& r : rows) {
    if (w.size() < r.size()) w.resize(r.size(), 0);
    for (size_t i = 0; i < r.size(); ++i) w[i] = std::max(w[i], r[i].size());
  }
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) {
      if (i == 0) {
        line += pad_right(r[i], w[i]);
      } else {
        line += "  " + pad_left(r[i], w[i]);
      }
    }
    out += rtrim(line) + "\n";
  }
  return out;
}

std::string field_line(const std::string& name, const std::string& value) {
  return pad_right(name + ":", 27) + value + "\n";
}

std::string scalar_text(const json& v) {
  if (v.is_string()) return escape_control(v.get<std::string>());
  return v.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

std::string forward_label(const std::string& method) {
  if (const auto f = cp::parse_forward_method(method)) return *f == cp::ForwardMethod::kFnat ? "FullNat" : "Masq";
  return method;
}

std::string format_list(const json& doc) {
  std::string out = title_line(doc);
  out += "Prot LocalAddress:Port Scheduler Flags\n";
  out += "  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn\n";
  const std::string fwd = forward_label(str(doc, "forward_method"));
  for (const auto& svc : arr(doc, "services")) {
    std::string line = service_label(svc) + " " + str(svc, "scheduler");
    if (uint64_t p = u64(svc, "persistence_timeout_s"); p > 0) line += " persistent " + std::to_string(p);
    if (const std::string pp = str(svc, "proxy_protocol"); !pp.empty()) line += " proxy-protocol " + pp;
    out += line + "\n";
    for (const auto& be : arr(svc, "backends")) {
      std::string b = "  -> " + pad_right(backend_label(be), 28) + " " + pad_right(fwd, 7) + " " +
                      pad_right(std::to_string(u64(be, "weight")), 6) + " " +
                      pad_right(std::to_string(u64(be, "active_conns")), 10) + " " +
                      std::to_string(u64(be, "inactive_conns"));
      // Outlier ejection (dpdk): no new connections for a while.
      if (field(be, "ejected").is_boolean() && field(be, "ejected").get<bool>())
        b += "  ejected (consecutive failed connections; ejections " + std::to_string(u64(be, "ejections")) + ")";
      out += b + "\n";
    }
  }
  return out;
}

std::string format_list_stats(const json& doc) {
  std::string out = title_line(doc);
  out += stat_row("Prot LocalAddress:Port", {"Conns", "InPkts", "OutPkts", "InBytes", "OutBytes"});
  out += "  -> RemoteAddress:Port\n";
  for (const auto& svc : arr(doc, "services")) {
    out += stat_row(service_label(svc), counter_cols(field(svc, "stats")));
    for (const auto& be : arr(svc, "backends")) {
      out += stat_row("  -> " + backend_label(be), counter_cols(field(be, "stats")));
    }
  }
  return out;
}

json compute_rates(const json& before, const json& after, double interval_s) {
  std::map<std::string, const json*> before_svcs;
  for (const auto& svc : arr(before, "services")) before_svcs[service_label(svc)] = &svc;

  json out = json::object();
  out["generation"] = u64(after, "generation");
  out["forward_method"] = str(after, "forward_method");
  out["interval_s"] = interval_s;
  json services = json::array();
  static const json kNoStats = json::object();
  for (const auto& svc : arr(after, "services")) {
    auto it = before_svcs.find(service_label(svc));
    const json* prev = it == before_svcs.end() ? nullptr : it->second;
    std::map<std::string, const json*> before_bes;
    if (prev) {
      for (const auto& be : arr(*prev, "backends")) before_bes[backend_label(be)] = &be;
    }
    json s = json::object();
    s["name"] = str(svc, "name");
    s["protocol"] = str(svc, "protocol");
    s["vip"] = str(svc, "vip");
    s["port"] = u64(svc, "port");
    s["scheduler"] = str(svc, "scheduler");
    s["persistence_timeout_s"] = u64(svc, "persistence_timeout_s");
    s["rate"] = rate_of(prev ? field(*prev, "stats") : kNoStats, field(svc, "stats"), interval_s);
    json backends = json::array();
    for (const auto& be : arr(svc, "backends")) {
      auto bit = before_bes.find(backend_label(be));
      const json& prev_stats = bit == before_bes.end() ? kNoStats : field(*bit->second, "stats");
      json b = json::object();
      b["ip"] = str(be, "ip");
      b["port"] = u64(be, "port");
      b["weight"] = u64(be, "weight");
      b["rate"] = rate_of(prev_stats, field(be, "stats"), interval_s);
      backends.push_back(std::move(b));
    }
    s["backends"] = std::move(backends);
    services.push_back(std::move(s));
  }
  out["services"] = std::move(services);
  return out;
}

std::string format_list_rate(const json& doc) {
  std::string out = title_line(doc);
  out += stat_row("Prot LocalAddress:Port", {"CPS", "InPPS", "OutPPS", "InBPS", "OutBPS"});
  out += "  -> RemoteAddress:Port\n";
  for (const auto& svc : arr(doc, "services")) {
    out += stat_row(service_label(svc), rate_cols(field(svc, "rate")));
    for (const auto& be : arr(svc, "backends")) {
      out += stat_row("  -> " + backend_label(be), rate_cols(field(be, "rate")));
    }
  }
  return out;
}

std::string format_stats(const json& doc) {
  const json& workers = arr(doc, "workers");
  if (workers.empty()) {
    // iptables mode: no dataplane, the daemon says where the counters are instead.
    const std::string note = str(doc, "note");
    return note.empty() ? "No workers.\n" : "No workers: " + note + "\n";
  }
  constexpr const char* kCols[] = {"rx", "tx", "drops", "new_flows", "active_flows", "redirects"};
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"Lcore", "RX", "TX", "Drops", "NewFlows", "ActiveFlows", "Redirects"});
  std::vector<uint64_t> totals(std::size(kCols), 0);
  std::map<std::string, uint64_t> reasons;
  std::map<std::string, uint64_t> resteers;  // re-steered connections by reason
  uint64_t resteer_gave_up = 0, resteer_pool_full = 0;
  uint64_t ho[6] = {};  // hand-over: sent, matched, not_held, rate_limited, not_peer, no_mbuf
  static constexpr const char* kHo[6] = {"sent", "matched", "not_held", "rate_limited", "not_peer", "no_mbuf"};
  for (const auto& w : workers) {
    std::vector<std::string> row{std::to_string(u64(w, "lcore"))};
    for (size_t i = 0; i < std::size(kCols); ++i) {
      uint64_t v = u64(w, kCols[i]);
      totals[i] += v;
      row.push_back(std::to_string(v));
    }
    rows.push_back(std::move(row));
    const json& dr = field(w, "drop_reasons");
    if (dr.is_object()) {
      for (auto it = dr.begin(); it != dr.end(); ++it) reasons[it.key()] += as_u64(it.value());
    }
    const json& rs = field(w, "resteers");
    if (rs.is_object()) {
      for (auto it = rs.begin(); it != rs.end(); ++it) resteers[it.key()] += as_u64(it.value());
    }
    resteer_gave_up += u64(w, "resteer_gave_up");
    resteer_pool_full += u64(w, "resteer_pool_full");
    const json& h = field(w, "handover");
    if (h.is_object())
      for (int i = 0; i < 6; ++i) ho[i] += u64(h, kHo[i]);
  }
  if (workers.size() > 1) {
    std::vector<std::string> row{"total"};
    for (uint64_t t : totals) row.push_back(std::to_string(t));
    rows.push_back(std::move(row));
  }
  std::string out = table(rows);
  uint64_t n_resteered = 0;
  for (const auto& [name, n] : resteers) n_resteered += n;
  if (n_resteered || resteer_gave_up || resteer_pool_full) {
    out += "\nRe-steered connections:";
    for (const auto& [name, n] : resteers) out += " " + name + " " + std::to_string(n);
    out += "; gave up " + std::to_string(resteer_gave_up) + ", pool full " + std::to_string(resteer_pool_full) + "\n";
  }
  if (ho[0] || ho[1] || ho[2] || ho[3] || ho[4] || ho[5]) {  // full-NAT hand-over between gateways (docs/gateway.md)
    out += "\nHand-over: sent " + std::to_string(ho[0]) + ", from peers matched " + std::to_string(ho[1]) +
           ", not held " + std::to_string(ho[2]) + "; rate limited " + std::to_string(ho[3]) + ", not from a peer " +
           std::to_string(ho[4]) + ", no mbuf " + std::to_string(ho[5]) + "\n";
  }
  // Kernel exception path (docs/gateway.md), one line per port that has one.
  for (const auto& p : arr(doc, "ports")) {
    const json& e = field(p, "exception");
    if (!e.is_object()) continue;
    out += "\nException path " + str(e, "interface") + ": to kernel " + std::to_string(u64(e, "to_kernel")) +
           ", from kernel " + std::to_string(u64(e, "from_kernel")) + "; dropped: rate limited " +
           std::to_string(u64(e, "rate_limited")) + ", kernel full " + std::to_string(u64(e, "kernel_full")) +
           ", from-kernel queue full " + std::to_string(u64(e, "from_kernel_full")) + "\n";
  }

  std::vector<std::pair<std::string, uint64_t>> nonzero;
  for (const auto& [name, n] : reasons) {
    if (n > 0) nonzero.emplace_back(name, n);
  }
  std::stable_sort(nonzero.begin(), nonzero.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  out += "\n";
  if (nonzero.empty()) {
    out += "Drops by reason: none (all reasons zero)\n";
    return out;
  }
  out += "Drops by reason (all workers):\n";
  std::vector<std::vector<std::string>> reason_rows;
  for (const auto& [name, n] : nonzero) reason_rows.push_back({"  " + name, std::to_string(n)});
  out += table(reason_rows);
  return out;
}

std::string format_age(double s) {
  if (s < 0) s = 0;
  if (s < 60) return fixed(s, 1) + "s";
  auto total = static_cast<uint64_t>(s);
  char buf[64];
  if (total < 3600) {
    std::snprintf(buf, sizeof buf, "%llum%02llus", static_cast<unsigned long long>(total / 60),
                  static_cast<unsigned long long>(total % 60));
  } else if (total < 86400) {
    std::snprintf(buf, sizeof buf, "%lluh%02llum", static_cast<unsigned long long>(total / 3600),
                  static_cast<unsigned long long>(total % 3600 / 60));
  } else {
    std::snprintf(buf, sizeof buf, "%llud%02lluh", static_cast<unsigned long long>(total / 86400),
                  static_cast<unsigned long long>(total % 86400 / 3600));
  }
  return buf;
}

std::string drain_summary(const json& doc, int64_t now_unix_ns) {
  if (field(doc, "draining") != true) return "no";
  std::string out = "yes";
  if (const uint64_t since = u64(doc, "since_unix_ns"); since > 0)
    out += ", since " + format_age((static_cast<double>(now_unix_ns) - static_cast<double>(since)) / 1e9) + " ago";
  out += ", " + std::to_string(u64(doc, "connections")) + " connection(s) left";
  if (field(doc, "stopping") == true) out += " (stopping)";
  return out;
}

std::string format_drain(const json& doc, int64_t now_unix_ns) {
  std::string out;
  const bool on = field(doc, "draining") == true;
  out += field_line("Draining", on ? (field(doc, "stopping") == true ? "yes (stopping)" : "yes") : "no");
  if (on) {
    const uint64_t since = u64(doc, "since_unix_ns");
    out += field_line("Since", since > 0 ? format_age((static_cast<double>(now_unix_ns) -
                                                        static_cast<double>(since)) / 1e9) + " ago"
                                         : "n/a");
  }
  out += field_line("Connections", std::to_string(u64(doc, "connections")));
  const uint64_t table = u64(doc, "announce_table");
  out += field_line("Announced VIPs", table > 0 ? std::to_string(u64(doc, "announced_vips")) + " (table " +
                                                       std::to_string(table) + ")"
                                                : "none (no --announce-table)");
  return out;
}

std::string format_status(const json& doc, int64_t now_unix_ns) {
  std::string out;
  out += field_line("Mode", str(doc, "mode"));
  out += field_line("Forward method", str(doc, "forward_method"));
  out += field_line("Generation", std::to_string(u64(doc, "generation")));
  std::string syncs = std::to_string(u64(doc, "syncs")) + " (" + std::to_string(u64(doc, "full_syncs")) + " full";
  // Full syncs that found the applied table diverged from a rebuild from the
  // source's objects (should stay 0; shown only when not).
  if (const uint64_t repairs = u64(doc, "resync_repairs"))
    syncs += ", " + std::to_string(repairs) + " repaired a divergence";
  out += field_line("Syncs", syncs + ")");
  out += field_line("Sync errors", std::to_string(u64(doc, "sync_errors")));
  if (const uint64_t retry = u64(doc, "next_retry_ms"); retry > 0)
    out += field_line("Next retry", "full sync in " + fixed(static_cast<double>(retry) / 1000.0, 1) + " s");
  uint64_t last = u64(doc, "last_sync_unix_ns");
  std::string age = "never";
  if (last > 0) {
    double secs = (static_cast<double>(now_unix_ns) - static_cast<double>(last)) / 1e9;
    age = format_age(secs) + " ago";
  }
  out += field_line("Last sync", age);
  const json& lat = field(doc, "last_change_to_applied_ms");
  out += field_line("Last change to dataplane", lat.is_number() ? fixed(lat.get<double>(), 2) + " ms" : "n/a");
  std::string last_error = str(doc, "last_error");
  out += field_line("Last error", last_error.empty() ? "none" : last_error);
  const json& errs = arr(doc, "source_errors");
  out += field_line("Source errors", errs.empty() ? "none" : std::to_string(errs.size()));
  for (const auto& e : errs) out += "  " + scalar_text(e) + "\n";
  if (const json& api = field(doc, "kubernetes_api"); api.is_object()) {
    std::string tls = field(api, "plain_http") == true ? "none (plain http)"
                      : field(api, "insecure_skip_tls_verify") == true
                          ? "OFF (insecure-skip-tls-verify): the API server is not authenticated"
                          : "verified";
    if (field(api, "token_in_clear") == true) tls += "; bearer token sent in clear (--api-allow-insecure-token)";
    out += field_line("Kubernetes API", str(api, "server"));
    out += field_line("TLS verification", tls);
  }
  if (const json& pr = field(doc, "privileges"); pr.is_object()) {
    const std::string user = str(pr, "user");
    std::string line = (user == "root" ? std::string("root (no --user)") : "user " + user) + ", uid " +
                       std::to_string(u64(pr, "uid")) + "; " + std::to_string(u64(pr, "privileged_threads")) +
                       " of " + std::to_string(u64(pr, "threads")) + " threads keep root or a capability";
    out += field_line("Privileges", line);
  }
  if (const json& dr = field(doc, "drain"); dr.is_object()) out += field_line("Draining", drain_summary(dr, now_unix_ns));
  const json& cfg = field(doc, "config");
  if (cfg.is_object() && !cfg.empty()) {
    out += "Config:\n";
    size_t w = 0;
    for (auto it = cfg.begin(); it != cfg.end(); ++it) w = std::max(w, it.key().size() + 1);
    for (auto it = cfg.begin(); it != cfg.end(); ++it) {
      out += rtrim("  " + pad_right(it.key() + ":", w) + " " + scalar_text(it.value())) + "\n";
    }
  }
  return out;
}

std::string format_dump(const nlohmann::ordered_json& doc) {
  if (!doc.is_object() || !doc.contains("table")) {
    throw std::runtime_error("response has no \"table\" field");
  }
  return doc["table"].dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace vipd::ctl

namespace vipd::ctl {

std::string format_explain(const json& doc) {
  const json& q = field(doc, "query");
  const json& svc = field(doc, "service");
  const json& conn = field(doc, "connection");
  auto field_line = [](const std::string& name, const std::string& value) {
    return pad_right(name + ":", 12) + value + "\n";
  };
  std::string out;
  out += field_line("Flow", str(q, "protocol") + " " + str(q, "src") + " -> " + str(q, "dst"));
  if (svc.is_object()) {
    std::string s = str(svc, "name");
    if (s.empty()) s = "(unnamed)";
    s += " (" + str(svc, "scheduler");
    if (u64(svc, "persistence_timeout_s") > 0)
      s += ", persistent " + std::to_string(u64(svc, "persistence_timeout_s"));
    if (const std::string pp = str(svc, "proxy_protocol"); !pp.empty()) s += ", proxy-protocol " + pp;
    s += ", " + std::to_string(u64(svc, "backends")) + " backends, " +
         std::to_string(u64(svc, "weighted_backends")) + " with weight > 0)";
    out += field_line("Service", s);
  } else {
    out += field_line("Service", "none");
  }
  if (conn.is_object()) {
    std::string c = str(conn, "state") + " to " + str(conn, "backend");
    if (field(conn, "local").is_string()) c += " via " + str(conn, "local");
    c += ", expires in " + fixed(as_double(field(conn, "expires_in_s")), 0) + " s";
    if (str(conn, "direction") == "reply") c += " (this is its reply direction)";
    else if (field(conn, "backend_alive").is_boolean() && !field(conn, "backend_alive").get<bool>())
      c += " (backend removed)";
    out += field_line("Connection", c);
  } else {
    out += field_line("Connection", "none");
  }
  out += field_line("Decision", str(doc, "decision"));
  const json& be = field(doc, "backend");
  out += field_line("Backend", be.is_string() ? escape_control(be.get<std::string>()) : "none");
  out += field_line("Worker", "lcore " + std::to_string(u64(doc, "worker_lcore")));
  const json& why = arr(doc, "reasons");
  if (!why.empty()) {
    out += "Why:\n";
    for (const auto& r : why) out += "  " + as_str(r) + "\n";
  }
  return out;
}

}  // namespace vipd::ctl
