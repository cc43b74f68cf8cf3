// Thread: any.
#include "observability/explain.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

namespace vipd::cp {
namespace {


std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// TCP states in which a new SYN from the same client port starts a new connection.
bool closing(const std::string& state) {
  return state == "FIN_WAIT" || state == "TIME_WAIT" || state == "CLOSE" || state == "CLOSE_WAIT" ||
         state == "LAST_ACK";
}

std::string secs(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f", std::max(0.0, s));
  return buf;
}

}  // namespace

std::optional<ExplainQuery> parse_explain_query(const std::map<std::string, std::string>& params,
                                                std::string* error) {
  auto get = [&](const char* k) -> std::optional<std::string> {
    auto it = params.find(k);
    if (it == params.end()) return std::nullopt;
    return it->second;
  };
  ExplainQuery q;
  const auto proto = get("proto");
  const auto src = get("src");
  const auto dst = get("dst");
  if (!proto || !src || !dst) {
    *error = "expected the query parameters proto=tcp|udp, src=IP:PORT and dst=IP:PORT";
    return std::nullopt;
  }
  const std::string p = lower(*proto);
  if (p == "tcp") q.protocol = Protocol::kTcp;
  else if (p == "udp") q.protocol = Protocol::kUdp;
  else {
    *error = "proto '" + *proto + "': expected tcp or udp";
    return std::nullopt;
  }
  const char* expected = "': expected IPv4:PORT or [IPv6]:PORT (port 1..65535)";
  if (!parse_host_port(*src, &q.src, &q.sport)) {
    *error = "src '" + *src + expected;
    return std::nullopt;
  }
  if (!parse_host_port(*dst, &q.dst, &q.dport)) {
    *error = "dst '" + *dst + expected;
    return std::nullopt;
  }
  if (q.src.family() != q.dst.family()) {
    *error = "src '" + *src + "' and dst '" + *dst + "': expected addresses of one family";
    return std::nullopt;
  }
  return q;
}

nlohmann::ordered_json explain_json(const ExplainQuery& q, const dp::ExplainResult& r,
                                    const ServiceTable* table, bool fnat) {
  const char* proto = name(q.protocol);
  const bool tcp = q.protocol == Protocol::kTcp;
  const std::string dst = host_port(q.dst, q.dport);
  const VirtualService* svc = nullptr;
  if (table) {
    auto it = table->services.find(ServiceKey{q.dst, q.dport, q.protocol});
    if (it != table->services.end()) svc = &it->second;
  }
  const std::string sched = name(svc ? svc->scheduler : r.scheduler);

  nlohmann::ordered_json j;
  j["query"] = {{"protocol", proto}, {"src", host_port(q.src, q.sport)}, {"dst", dst}};
  j["worker_lcore"] = r.worker_lcore;
  j["decision"] = "";
  if (r.service_found) {
    nlohmann::ordered_json s;
    s["name"] = svc ? svc->name : "";
    s["protocol"] = proto;
    s["vip"] = q.dst.to_string();
    s["port"] = q.dport;
    s["scheduler"] = sched;
    s["persistence_timeout_s"] = svc ? svc->persistence_timeout_s : 0;
    s["when_empty"] = name(r.drop_when_empty ? WhenEmpty::kDrop : WhenEmpty::kReject);
    // The header full NAT sends to the backend ("" when none; nat cannot send one).
    s["proxy_protocol"] = fnat && svc ? name(svc->proxy_protocol) : "";
    s["backends"] = r.n_dests;
    s["weighted_backends"] = r.n_weighted;
    j["service"] = s;
  } else {
    j["service"] = nullptr;
  }
  if (r.conn_found) {
    nlohmann::ordered_json c;
    c["direction"] = r.conn_reply ? "reply" : "original";
    c["state"] = r.conn_state;
    c["backend"] = host_port(r.conn_dest_ip, r.conn_dest_port);
    c["local"] = r.conn_local_ip != IpAddr()
                     ? nlohmann::ordered_json(host_port(r.conn_local_ip, r.conn_local_port))
                     : nlohmann::ordered_json(nullptr);
    c["expires_in_s"] = std::round(r.conn_expires_in_s * 1000.0) / 1000.0;
    c["backend_alive"] = r.conn_dest_alive;
    j["connection"] = c;
  } else {
    j["connection"] = nullptr;
  }
  if (r.affinity_found) {
    nlohmann::ordered_json a;
    a["backend"] = host_port(r.next_dest_ip, r.next_dest_port);
    a["expires_in_s"] = std::round(r.affinity_expires_in_s * 1000.0) / 1000.0;
    j["affinity"] = a;
  } else {
    j["affinity"] = nullptr;
  }
  j["backend"] = nullptr;

  std::vector<std::string> why;
  std::string decision;
  const std::string conn_backend = host_port(r.conn_dest_ip, r.conn_dest_port);
  const std::string next = host_port(r.next_dest_ip, r.next_dest_port);
  const std::string owner = "owned by worker lcore " + std::to_string(r.worker_lcore);
  if (r.service_found) {
    std::string line = "virtual service " + (svc ? svc->name + " " : std::string()) + "(" + proto + " " +
                       dst + "), scheduler " + sched + ", " + std::to_string(r.n_dests) + " backend" +
                       (r.n_dests == 1 ? "" : "s") + " (" + std::to_string(r.n_weighted) + " with weight > 0)";
    why.push_back(line);
  }
  // What a new connection would get (for schedule and reschedule).
  auto schedule_lines = [&](const std::string& lead) {
    if (r.would_schedule) {
      j["backend"] = next;
      if (r.affinity_found) {
        why.push_back(lead + "session affinity ClientIP: this client's persistence entry (expires in " +
                      secs(r.affinity_expires_in_s) + " s unless used) pins it to " + next);
        return true;
      }
      why.push_back(lead + "scheduler " + sched + " picks " + next);
      if (svc && svc->persistence_timeout_s > 0)
        why.push_back("session affinity ClientIP (" + std::to_string(svc->persistence_timeout_s) +
                      " s): this client has no live persistence entry; the backend chosen now "
                      "becomes its entry");
      return true;
    }
    if (r.drop_when_empty) {
      why.push_back("no backend with weight > 0: the packet is dropped (no_endpoints_drop)");
      decision = "drop";
    } else {
      why.push_back(std::string("no backend with weight > 0: rejected, ") +
                    (tcp ? "a TCP RST goes back to the client" : "an ICMP port unreachable goes back to the client"));
      decision = "reject";
    }
    return false;
  };

  if (r.conn_found && r.conn_reply) {
    decision = "reply";
    why.push_back("a reply of an existing connection (state " + r.conn_state + ", expires in " +
                  secs(r.conn_expires_in_s) + " s) from backend " + conn_backend +
                  ": translated back and sent to the client; " + owner);
    j["backend"] = conn_backend;
  } else if (r.conn_found && r.conn_dest_alive && tcp && closing(r.conn_state) && r.service_found) {
    // Port reuse: a SYN for a closing connection starts a new one.
    decision = "schedule";
    why.push_back("an earlier connection from this client port (state " + r.conn_state + ", expires in " +
                  secs(r.conn_expires_in_s) + " s) to backend " + conn_backend +
                  " is closing: a SYN starts a new connection, other packets still go to " + conn_backend +
                  "; " + owner);
    schedule_lines("a new connection: ");
  } else if (r.conn_found && r.conn_dest_alive) {
    decision = "existing_connection";
    std::string line = "existing connection (state " + r.conn_state + ", expires in " +
                       secs(r.conn_expires_in_s) + " s) to backend " + conn_backend;
    if (fnat && r.conn_local_ip != IpAddr())
      line += ", source rewritten to " + host_port(r.conn_local_ip, r.conn_local_port);
    why.push_back(line + "; " + owner);
    j["backend"] = conn_backend;
  } else if (r.conn_found) {
    decision = "reschedule";
    why.push_back("existing connection to backend " + conn_backend + " (state " + r.conn_state +
                  "), which was removed: " +
                  (tcp ? "a TCP packet other than a SYN gets a RST (the client reconnects); a SYN is "
                         "scheduled afresh"
                       : "the packet is scheduled afresh") +
                  "; " + owner);
    schedule_lines("a new connection: ");
  } else if (r.service_found) {
    decision = "schedule";
    if (schedule_lines("no existing connection; a new connection (" + owner + "): ") && tcp)
      why.push_back("only a SYN starts a connection; another TCP packet without one is dropped (no_connection)");
  } else if (r.vip_address) {
    decision = "vip_port_not_served";
    why.push_back(q.dst.to_string() + " is a VIP, but " + proto + " port " + std::to_string(q.dport) +
                  " is not served there: dropped (vip_port_not_served)");
  } else {
    decision = "not_a_service";
    why.push_back(dst + " (" + proto + ") is not a virtual service: not load balanced (dropped as no_service, "
                  "unless it is a reply or addressed to vipd itself)");
  }
  j["decision"] = decision;
  j["reasons"] = why;
  return j;
}

}  // namespace vipd::cp
