// Thread: any (pure functions, no shared state).
// vipctl's formatting: admin API JSON documents (see docs/vipctl.md) -> text.
// Missing or mistyped fields are tolerated: numbers read as 0, strings as "".
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace vipd::ctl {

// "fnat" -> "FullNat", "nat" -> "Masq", anything else unchanged.
std::string forward_label(const std::string& method);

// `vipctl list`: ipvsadm -Ln layout. `services_doc` is the /v1/services document.
std::string format_list(const nlohmann::json& services_doc);

// `vipctl list --stats`: ipvsadm -Ln --stats --exact layout (Conns InPkts
// OutPkts InBytes OutBytes per service and backend).
std::string format_list_stats(const nlohmann::json& services_doc);

// Rates from two /v1/services samples taken `interval_s` seconds apart.
// Services are matched by protocol/vip/port, backends by ip/port; an entry
// missing from `before` counts from zero; a counter that went backwards gives 0.
// Result: {"generation":G,"forward_method":F,"interval_s":S,"services":[
//   {"name","protocol","vip","port","scheduler","persistence_timeout_s",
//    "rate":{"cps","inpps","outpps","inbps","outbps"},
//    "backends":[{"ip","port","weight","rate":{...}}]}]}   (rates: per second)
nlohmann::json compute_rates(const nlohmann::json& before, const nlohmann::json& after,
                             double interval_s);

// `vipctl list --rate`: ipvsadm -Ln --rate layout (CPS InPPS OutPPS InBPS
// OutBPS, rounded to integers). `rates_doc` is compute_rates()'s result.
std::string format_list_rate(const nlohmann::json& rates_doc);

// `vipctl stats`: per-worker table, then drops by reason summed over workers.
std::string format_stats(const nlohmann::json& stats_doc);

// `vipctl status`: one "Field: value" line each. `now_unix_ns` is used for the
// age of the last sync.
std::string format_status(const nlohmann::json& status_doc, int64_t now_unix_ns);
// One line for the drain state of a /v1/drain document ("drain" in /v1/status):
// "no" or "yes, since 12.0s ago, 3 connection(s) left".
std::string drain_summary(const nlohmann::json& drain_doc, int64_t now_unix_ns);
// `vipctl drain`: "Field: value" lines (draining, since, connections, announced VIPs).
std::string format_drain(const nlohmann::json& drain_doc, int64_t now_unix_ns);

// "4.2s", "3m12s", "2h03m", "5d04h".
std::string format_age(double seconds);

// `vipctl explain`: the /v1/explain document as "Field: value" lines (Flow,
// Service, Connection, Decision, Backend, Worker), then "Why:" and the reasons.
std::string format_explain(const nlohmann::json& explain_doc);

// `vipctl dump`: the "table" value of the /v1/table document on one line,
// followed by a newline. Parse the response as ordered_json to keep the
// daemon's key order. Throws std::runtime_error if "table" is missing.
std::string format_dump(const nlohmann::ordered_json& table_doc);

}  // namespace vipd::ctl
