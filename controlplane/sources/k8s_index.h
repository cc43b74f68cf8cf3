// Thread: control (one owner; not thread-safe). TableIndex: the ServiceTable of a
// set of Services and EndpointSlices kept up to date one object at a time, so
// that one endpoint change costs the work of one Service, not of the whole
// table (the target: p99 < 1 ms per change with 10k services).
//
// The result is the same as build_service_table over the same objects (a
// randomized unit test checks it after every change): entries are built per
// Service by build_service_entries, and when several entries claim one key the
// one of the lowest claim_rank (ClusterIP, then NodePort, then external and
// load balancer addresses) wins, ties going to the first in (namespace, name,
// entry order); the others are reported as conflicts. Object keys are unique (a Kubernetes cache), so the "defined
// again" rule of the manifests source does not arise here.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "controlplane/sources/k8s_objects.h"

namespace vipd::cp::k8s {

class TableIndex {
 public:
  explicit TableIndex(BuildOptions options) : opts_(std::move(options)) {}

  // Object changes. They take effect at the next flush().
  void set_service(const Service& s);
  void erase_service(const std::string& ns, const std::string& name);
  void set_slice(const EndpointSlice& s);
  void erase_slice(const std::string& ns, const std::string& name);
  // Drops every object (the next flush() reports every key as touched).
  void clear();

  // Rebuilds the Services changed since the last flush and updates table().
  // Appends the keys whose entry was added, changed or removed (each once).
  void flush(std::vector<ServiceKey>* touched);

  // The table as of the last flush(); generation 0.
  const ServiceTable& table() const { return table_; }
  ServiceTable& table() { return table_; }  // the caller may set its generation
  // Current problems and notes (object rules and key conflicts), as of the last
  // flush. version() changes whenever they may have changed.
  void issues(std::vector<ObjectError>* errors, std::vector<ObjectError>* notes) const;
  uint64_t issues_version() const { return issues_version_; }

  size_t services() const { return services_.size(); }
  size_t slices() const { return slices_.size(); }

 private:
  using Name = std::pair<std::string, std::string>;  // namespace, name
  using Claim = std::tuple<int, std::string, std::string, size_t>;  // claim_rank, ns, name, entry index

  struct Built {
    std::vector<VirtualService> entries;
    std::vector<ObjectError> errors;
    std::vector<ObjectError> notes;
  };
  struct SliceRec {
    EndpointSlice slice;
    Name owner;        // (ns, service) it feeds; empty name when ignored
    bool ignored = false;
    ObjectError note;  // why, when ignored
  };

  void mark_owner(const SliceRec& r);
  void rebuild(const Name& n, std::set<ServiceKey>* keys);
  void settle(const ServiceKey& k, std::vector<ServiceKey>* touched);

  BuildOptions opts_;
  std::map<Name, Service> services_;
  std::map<Name, SliceRec> slices_;
  std::map<Name, std::set<Name>> slices_of_;  // service -> its usable slices
  std::set<Name> dirty_;
  std::map<Name, Built> built_;
  // Every key's claimants, best first; the winner's entry is in table_.
  std::map<ServiceKey, std::map<Claim, const VirtualService*>> claims_;
  std::set<ServiceKey> conflicted_;  // keys with more than one claimant
  ServiceTable table_;
  uint64_t issues_version_ = 0;
  std::set<Name> with_issues_;  // services with errors or notes of their own
  std::set<Name> ignored_;      // slices that feed no service
};

}  // namespace vipd::cp::k8s
