// Thread: control. VIP announcement through the kernel routing table
// (docs/gateway.md, "Announcing VIPs"): vipd puts each announced VIP as a /32
// (IPv4) or /128 (IPv6) route on the first port's exception interface into a
// dedicated routing
// table; a routing daemon (BIRD's kernel protocol with `learn`, FRR's
// `redistribute table`) exports that table over BGP. Routes on the exception
// interface vanish with it when vipd dies, so a kill -9 withdraws them too.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>

#include "model/backend.h"
#include "model/service_table.h"

namespace vipd::cp::host {

// The VIP addresses (both families) to announce for a table: every service
// address, or with require_endpoints only those with at least one service that
// has a backend taking new flows (weight > 0). `with_v6` false leaves IPv6
// addresses out (IPv6 could not be enabled on the interface). While `draining`
// (vipctl drain, --drain-on-sigterm) nothing is announced.
std::set<IpAddr> announced_vips(const ServiceTable& t, bool require_endpoints, bool draining,
                                bool with_v6 = true);

// Makes `ifname` (vipd's exception interface) take IPv6 routes without taking
// part in IPv6 itself: no address is generated (addr_gen_mode 1, so no
// link-local a routing daemon would advertise as next hop, no DAD or router
// solicitation), then IPv6 is switched off and on (disable_ipv6), which drops
// any address made before. Through /proc/sys/net/ipv6/conf/IFNAME. False +
// *error when a file cannot be written (no IPv6 in the kernel, read-only
// /proc/sys).
bool enable_ipv6_routes(const std::string& ifname, std::string* error);

// The routes of one table and interface over rtnetlink (libnl-route-3).
class RouteAnnouncer {
 public:
  RouteAnnouncer(std::string ifname, uint32_t table) : ifname_(std::move(ifname)), table_(table) {}
  ~RouteAnnouncer() = default;

  // Adds the routes of `want` that are missing and deletes the others vipd
  // added; `refresh` (a full sync) writes every route of `want` again, so one
  // deleted behind vipd's back comes back. False + *error (what failed); the
  // routes that were changed stay so.
  bool sync(const std::set<IpAddr>& want, std::string* error, bool refresh = false);
  // Deletes every route vipd added.
  bool withdraw_all(std::string* error) { return sync({}, error); }

  const std::set<IpAddr>& announced() const { return have_; }
  const std::string& ifname() const { return ifname_; }
  uint32_t table() const { return table_; }

 private:
  struct Session;
  bool route_op(Session& s, const IpAddr& vip, bool add, std::string* error);
  std::string ifname_;
  uint32_t table_;
  std::set<IpAddr> have_;
};

// A Backend that programs `inner` and, after each successful apply, the
// announcements of the table it applied (so a VIP is announced only once the
// dataplane serves it). An announcement failure fails the apply (retried).
// apply() runs on the sync thread, set_draining() on the admin thread (and at
// shutdown): a mutex serialises them (control threads only, never the workers).
class AnnouncingBackend final : public Backend {
 public:
  // with_v6: announce IPv6 VIPs too (false: enable_ipv6_routes failed).
  AnnouncingBackend(Backend& inner, RouteAnnouncer& ann, bool require_endpoints, bool with_v6 = true)
      : inner_(inner), ann_(ann), require_endpoints_(require_endpoints), with_v6_(with_v6) {}
  const char* name() const override { return inner_.name(); }
  bool apply(const ServiceTable& next, const TableDiff& diff, bool full, std::string* error) override {
    if (!inner_.apply(next, diff, full, error)) return false;
    std::lock_guard<std::mutex> lk(mu_);
    eligible_ = announced_vips(next, require_endpoints_, false, with_v6_);
    const bool ok = ann_.sync(draining_ ? std::set<IpAddr>{} : eligible_, error, full);
    announced_count_.store(ann_.announced().size(), std::memory_order_relaxed);
    return ok;
  }
  uint32_t tick_interval_ms() const override { return inner_.tick_interval_ms(); }
  bool tick(std::string* error) override { return inner_.tick(error); }

  // Draining withdraws every route at once and keeps them withdrawn through
  // later applies; leaving it announces the last applied table's VIPs again.
  // False + *error when a route could not be changed (the state is set anyway,
  // the next apply retries).
  bool set_draining(bool on, std::string* error) {
    std::lock_guard<std::mutex> lk(mu_);
    draining_ = on;
    const bool ok = ann_.sync(on ? std::set<IpAddr>{} : eligible_, error);
    announced_count_.store(ann_.announced().size(), std::memory_order_relaxed);
    return ok;
  }
  // Shutdown: withdraw everything and announce nothing more.
  bool withdraw_all(std::string* error) { return set_draining(true, error); }
  // Routes in place now, both families together (any thread).
  size_t announced_count() const { return announced_count_.load(std::memory_order_relaxed); }

 private:
  Backend& inner_;
  RouteAnnouncer& ann_;
  bool require_endpoints_;
  bool with_v6_;
  std::mutex mu_;
  bool draining_ = false;     // guarded by mu_
  std::set<IpAddr> eligible_;  // guarded by mu_: the VIPs of the last applied table, not draining
  std::atomic<size_t> announced_count_{0};
};

}  // namespace vipd::cp::host
