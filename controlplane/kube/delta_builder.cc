// Thread: the SyncLoop thread (KubeSource::load, load_full). DeltaBuilder:
// the reflectors' object changes -> the k8s index -> the LoadResult (the
// touched services, or a full rebuild compared with the incremental table).
#include <string>
#include <utility>
#include <vector>

#include "controlplane/kube/kube_source.h"

namespace vipd::cp::kube {
namespace {

std::pair<std::string, std::string> split_key(const std::string& key) {
  const auto slash = key.find('/');
  return {key.substr(0, slash), slash == std::string::npos ? "" : key.substr(slash + 1)};
}

}  // namespace

void DeltaBuilder::feed(ObjectChanges& changes) {
  for (auto& [key, v] : changes.services) {
    if (v) index_.set_service(*v);
    else {
      auto [ns, name] = split_key(key);
      index_.erase_service(ns, name);
    }
  }
  for (auto& [key, v] : changes.slices) {
    if (v) index_.set_slice(*v);
    else {
      auto [ns, name] = split_key(key);
      index_.erase_slice(ns, name);
    }
  }
}

LoadResult DeltaBuilder::load(ObjectChanges changes, const std::vector<SourceError>* invalid_services,
                              const std::vector<SourceError>* invalid_slices) {
  if (invalid_services) invalid_services_ = *invalid_services;
  if (invalid_slices) invalid_slices_ = *invalid_slices;
  if (invalid_services || invalid_slices) invalid_changed_ = true;
  feed(changes);
  LoadResult r;
  index_.flush(&r.touched);
  return answer(std::move(r));
}

LoadResult DeltaBuilder::rebuild(ObjectChanges changes, ObjectSnapshot all,
                                 std::vector<SourceError> invalid_services,
                                 std::vector<SourceError> invalid_slices) {
  invalid_services_ = std::move(invalid_services);
  invalid_slices_ = std::move(invalid_slices);
  invalid_changed_ = true;
  // First the incremental path, as load() would: what differs between its
  // result and the rebuild is a divergence, not a pending change.
  LoadResult r;
  const bool was_empty = index_.services() == 0 && index_.slices() == 0;
  feed(changes);
  index_.flush(&r.touched);
  // From nothing (the first sync), the incremental path already built from scratch.
  if (was_empty) return answer(std::move(r));
  k8s::TableIndex fresh(opts_);
  for (const auto& [key, v] : all.services) fresh.set_service(v);
  for (const auto& [key, v] : all.slices) fresh.set_slice(v);
  std::vector<ServiceKey> ignored;
  fresh.flush(&ignored);
  // Every key whose entry differs between the incremental index and the rebuild.
  const auto& before = index_.table().services;
  const auto& after = fresh.table().services;
  size_t n_diverged = 0;
  for (const auto& [k, vs] : before) {
    auto n = after.find(k);
    if (n == after.end() || !(n->second == vs)) {
      r.touched.push_back(k);
      ++n_diverged;
    }
  }
  for (const auto& [k, vs] : after)
    if (!before.count(k)) {
      r.touched.push_back(k);
      ++n_diverged;
    }
  r.diverged = n_diverged;
  std::sort(r.touched.begin(), r.touched.end());
  r.touched.erase(std::unique(r.touched.begin(), r.touched.end()), r.touched.end());
  index_ = std::move(fresh);
  return answer(std::move(r));
}

LoadResult DeltaBuilder::answer(LoadResult r) {
  r.delta = true;
  r.current = &index_.table();
  if (!invalid_changed_ && index_.issues_version() == reported_issues_version_) {
    r.issues_unchanged = true;
    return r;
  }
  invalid_changed_ = false;
  reported_issues_version_ = index_.issues_version();
  r.errors = invalid_services_;
  r.errors.insert(r.errors.end(), invalid_slices_.begin(), invalid_slices_.end());
  std::vector<k8s::ObjectError> errors, notes;
  index_.issues(&errors, &notes);
  for (const auto& e : errors) r.errors.push_back({"api", e.object, e.reason, e.conflict});
  for (const auto& n : notes) r.notes.push_back({"api", n.object, n.reason});
  return r;
}

}  // namespace vipd::cp::kube
