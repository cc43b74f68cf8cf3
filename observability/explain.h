// Thread: any (pure functions).
// The admin API's /v1/explain: parses the query (proto, src, dst) and turns the
// dataplane's ExplainResult plus the applied table into the JSON document that
// `vipctl explain` prints (docs/vipctl.md).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "model/service_table.h"
#include "dataplane/runtime/dataplane.h"

namespace vipd::cp {

struct ExplainQuery {
  Protocol protocol = Protocol::kTcp;
  IpAddr src, dst;  // one family (IPv4 or IPv6) for both
  uint16_t sport = 0, dport = 0;
};

// From the query parameters proto=tcp|udp, src=IP:PORT, dst=IP:PORT (IPv6 as
// [IP]:PORT, parse_host_port). On error returns nullopt and sets *error to one
// line ("src '1.2.3': expected IPv4:PORT or [IPv6]:PORT ...").
std::optional<ExplainQuery> parse_explain_query(const std::map<std::string, std::string>& params,
                                                std::string* error);

// The /v1/explain document:
// {"query":{"protocol","src","dst"},"worker_lcore":N,"decision":D,
//  "service":{name,protocol,vip,port,scheduler,persistence_timeout_s,when_empty,
//             backends,weighted_backends} | null,
//  "connection":{direction,state,backend,local,expires_in_s,backend_alive} | null,
//  "backend":"IP:PORT" | null,  (addresses as host_port: IPv6 "[fd00::5]:8080")  "reasons":["...", ...]}
// decision: existing_connection | reply | schedule | reschedule | reject | drop |
//           vip_port_not_served | not_a_service.
// `table` may be null; `fnat` selects the wording for the local address.
nlohmann::ordered_json explain_json(const ExplainQuery& q, const dp::ExplainResult& r,
                                    const ServiceTable* table, bool fnat);

}  // namespace vipd::cp
