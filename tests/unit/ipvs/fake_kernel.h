// Thread: test main thread. Fakes of the ipvs mode's kernel interfaces: an
// in-memory IPVS (with the kernel's answers: EEXIST for a second NEW, ESRCH for
// an unknown service, ENOENT for an unknown real server), a dummy interface and
// an iptables command runner. Every call is logged; errors can be injected.
#pragma once

#include <cerrno>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "controlplane/backends/ipvs/ipvs_backend.h"
#include "controlplane/backends/ipvs/ipvs_kernel.h"

namespace vipd::cp::ipvs::testing {

inline IpAddr ip(const char* s) { return *IpAddr::parse(s); }  // IPv4 or IPv6
inline ServiceKey tcp(const char* vip, uint16_t port) { return {ip(vip), port, Protocol::kTcp}; }
inline ServiceKey udp(const char* vip, uint16_t port) { return {ip(vip), port, Protocol::kUdp}; }

class FakeIpvs final : public IpvsKernel {
 public:
  std::map<ServiceKey, IpvsServiceState> svcs;
  std::vector<std::string> calls;
  int open_err = 0;
  // "add_service", "edit_dest", "dump", ... -> errno returned by the next such call.
  std::map<std::string, int> fail_next;

  int open() override {
    log("open");
    return open_err;
  }
  int add_service(const IpvsService& s) override {
    log("add_service " + to_string(s.key) + " " + s.scheduler + " flags=" + std::to_string(s.flags) +
        " timeout=" + std::to_string(s.timeout_s));
    if (int e = fail("add_service")) return e;
    if (svcs.count(s.key)) return EEXIST;
    svcs[s.key].service = s;
    return 0;
  }
  int edit_service(const IpvsService& s) override {
    log("edit_service " + to_string(s.key) + " " + s.scheduler + " flags=" + std::to_string(s.flags) +
        " timeout=" + std::to_string(s.timeout_s));
    if (int e = fail("edit_service")) return e;
    auto it = svcs.find(s.key);
    if (it == svcs.end()) return ESRCH;
    it->second.service = s;
    return 0;
  }
  int del_service(const ServiceKey& k) override {
    log("del_service " + to_string(k));
    if (int e = fail("del_service")) return e;
    return svcs.erase(k) ? 0 : ESRCH;
  }
  int add_dest(const ServiceKey& k, const IpvsDest& d) override {
    log("add_dest " + to_string(k) + " " + dest_to_string(d.ip, d.port) + " w=" + std::to_string(d.weight));
    if (int e = fail("add_dest")) return e;
    auto it = svcs.find(k);
    if (it == svcs.end()) return ESRCH;
    if (find(it->second, d.ip, d.port)) return EEXIST;
    it->second.dests.push_back(d);
    return 0;
  }
  int edit_dest(const ServiceKey& k, const IpvsDest& d) override {
    log("edit_dest " + to_string(k) + " " + dest_to_string(d.ip, d.port) + " w=" + std::to_string(d.weight));
    if (int e = fail("edit_dest")) return e;
    auto it = svcs.find(k);
    if (it == svcs.end()) return ESRCH;
    IpvsDest* x = find(it->second, d.ip, d.port);
    if (!x) return ENOENT;
    x->weight = d.weight;
    x->fwd_method = d.fwd_method;
    x->u_thresh = d.u_thresh;
    x->l_thresh = d.l_thresh;
    return 0;
  }
  int del_dest(const ServiceKey& k, const IpAddr& a, uint16_t port) override {
    log("del_dest " + to_string(k) + " " + dest_to_string(a, port));
    if (int e = fail("del_dest")) return e;
    auto it = svcs.find(k);
    if (it == svcs.end()) return ESRCH;
    auto& v = it->second.dests;
    for (auto d = v.begin(); d != v.end(); ++d)
      if (d->ip == a && d->port == port) {
        v.erase(d);
        return 0;
      }
    return ENOENT;
  }
  int dump(std::vector<IpvsServiceState>* out, size_t* foreign) override {
    log("dump");
    if (foreign) *foreign = 0;
    if (int e = fail("dump")) return e;
    out->clear();
    for (const auto& [k, s] : svcs) out->push_back(s);
    return 0;
  }
  int dump_dests(const ServiceKey& k, std::vector<IpvsDest>* out) override {
    log("dump_dests " + to_string(k));
    if (int e = fail("dump_dests")) return e;
    auto it = svcs.find(k);
    if (it == svcs.end()) return ESRCH;
    *out = it->second.dests;
    return 0;
  }

  // Test helpers.
  IpvsDest* dest(const ServiceKey& k, const char* a, uint16_t port) {
    auto it = svcs.find(k);
    return it == svcs.end() ? nullptr : find(it->second, ip(a), port);
  }
  size_t count(const std::string& prefix) const {
    size_t n = 0;
    for (const auto& c : calls) n += c.rfind(prefix, 0) == 0;
    return n;
  }
  bool called(const std::string& line) const {
    for (const auto& c : calls)
      if (c == line) return true;
    return false;
  }

 private:
  static IpvsDest* find(IpvsServiceState& s, const IpAddr& a, uint16_t port) {
    for (auto& d : s.dests)
      if (d.ip == a && d.port == port) return &d;
    return nullptr;
  }
  bool log(const std::string& c) {
    calls.push_back(c);
    return false;
  }
  int fail(const std::string& op) {
    auto it = fail_next.find(op);
    if (it == fail_next.end()) return 0;
    const int e = it->second;
    fail_next.erase(it);
    return e;
  }
};

class FakeVips final : public VipInterface {
 public:
  std::string n = "vipd-ipvs0";
  bool exists = false;
  int ensure_err = 0;
  std::set<IpAddr> addrs;
  std::vector<std::string> calls;

  const std::string& name() const override { return n; }
  int ensure() override {
    calls.push_back("ensure");
    if (ensure_err) return ensure_err;
    exists = true;
    return 0;
  }
  int list(std::vector<IpAddr>* out) override {
    out->assign(addrs.begin(), addrs.end());
    return exists ? 0 : ENODEV;
  }
  int bind(const IpAddr& a) override {
    calls.push_back("bind " + a.to_string());
    return addrs.insert(a).second ? 0 : EEXIST;
  }
  int unbind(const IpAddr& a) override {
    calls.push_back("unbind " + a.to_string());
    return addrs.erase(a) ? 0 : ENOENT;
  }
};

// iptables-restore / iptables -C / -I (and the ip6tables ones, kept apart;
// ip6tables -S CHAIN answers whether v6_chain_exists): payloads kept, jump
// rules remembered.
class FakeIptables {
 public:
  std::vector<std::string> payloads;
  std::set<std::string> jumps;  // "TABLE CHAIN args..."
  std::vector<std::string> payloads6;
  std::set<std::string> jumps6;
  std::vector<std::string> commands;
  bool restore_fails = false;
  bool restore6_fails = false;
  bool v6_chain_exists = false;

  CommandRunner runner() {
    return [this](const std::vector<std::string>& argv, const std::string& input) {
      ipt::RunResult r;
      r.started = true;
      r.exit_code = 0;
      std::string line;
      for (const auto& a : argv) line += (line.empty() ? "" : " ") + a;
      commands.push_back(line);
      if (argv[0] == "iptables-restore") {
        payloads.push_back(input);
        if (restore_fails) {
          r.exit_code = 1;
          r.err = "iptables-restore v1.8.9 (nf_tables): Couldn't load match `ipvs':No such file or directory";
        }
        return r;
      }
      if (argv[0] == "ip6tables-restore") {
        payloads6.push_back(input);
        if (restore6_fails) {
          r.exit_code = 2;
          r.err = "ip6tables-restore v1.8.9 (nf_tables): line 4: RULE_APPEND failed (No such file or directory)";
        }
        return r;
      }
      // iptables -w 5 -t TABLE -C|-I|-S CHAIN [1] args...
      if (argv.size() < 7) {
        r.exit_code = 2;
        return r;
      }
      const bool v6 = argv[0] == "ip6tables";
      const std::string table = argv[4], verb = argv[5], chain = argv[6];
      if (verb == "-S") {
        r.exit_code = v6 && v6_chain_exists ? 0 : 1;
        return r;
      }
      size_t first = verb == "-I" ? 8 : 7;
      std::string key = table + " " + chain;
      for (size_t i = first; i < argv.size(); ++i) key += " " + argv[i];
      std::set<std::string>& j = v6 ? jumps6 : jumps;
      if (verb == "-C") r.exit_code = j.count(key) ? 0 : 1;
      if (verb == "-I") j.insert(key);
      return r;
    };
  }
};

}  // namespace vipd::cp::ipvs::testing
