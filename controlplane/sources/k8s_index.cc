// Thread: control.
#include "controlplane/sources/k8s_index.h"

namespace vipd::cp::k8s {
namespace {

bool same_issues(const std::vector<ObjectError>& a, const std::vector<ObjectError>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].origin != b[i].origin || a[i].object != b[i].object || a[i].reason != b[i].reason)
      return false;
  return true;
}

}  // namespace

void TableIndex::set_service(const Service& s) {
  const Name n{s.meta.namespace_, s.meta.name};
  auto it = services_.find(n);
  if (it != services_.end() && it->second == s) return;  // e.g. a relist of an unchanged object
  services_[n] = s;
  dirty_.insert(n);
}

void TableIndex::erase_service(const std::string& ns, const std::string& name) {
  const Name n{ns, name};
  if (services_.erase(n)) dirty_.insert(n);
}

void TableIndex::mark_owner(const SliceRec& r) {
  if (!r.ignored) dirty_.insert(r.owner);
}

void TableIndex::set_slice(const EndpointSlice& s) {
  const Name n{s.meta.namespace_, s.meta.name};
  auto it = slices_.find(n);
  if (it != slices_.end()) {
    if (it->second.slice == s) return;
    erase_slice(n.first, n.second);
  }
  SliceRec r;
  r.slice = s;
  if (auto why = slice_ignored(s)) {
    r.ignored = true;
    r.note = std::move(*why);
    ignored_.insert(n);
    ++issues_version_;
  } else {
    r.owner = {s.meta.namespace_, s.service_name()};
    slices_of_[r.owner].insert(n);
  }
  mark_owner(r);
  slices_.emplace(n, std::move(r));
}

void TableIndex::erase_slice(const std::string& ns, const std::string& name) {
  auto it = slices_.find({ns, name});
  if (it == slices_.end()) return;
  const SliceRec& r = it->second;
  mark_owner(r);
  if (r.ignored) {
    ignored_.erase(it->first);
    ++issues_version_;
  } else if (auto o = slices_of_.find(r.owner); o != slices_of_.end()) {
    o->second.erase(it->first);
    if (o->second.empty()) slices_of_.erase(o);
  }
  slices_.erase(it);
}

void TableIndex::clear() {
  for (const auto& [n, b] : built_) dirty_.insert(n);
  services_.clear();
  slices_.clear();
  slices_of_.clear();
  if (!ignored_.empty()) ++issues_version_;
  ignored_.clear();
}

void TableIndex::rebuild(const Name& n, std::set<ServiceKey>* keys) {
  auto b = built_.find(n);
  Built old;
  if (b != built_.end()) {
    for (size_t i = 0; i < b->second.entries.size(); ++i) {
      const ServiceKey& k = b->second.entries[i].key;
      auto c = claims_.find(k);
      if (c != claims_.end()) c->second.erase(Claim{claim_rank(b->second.entries[i]), n.first, n.second, i});
      keys->insert(k);
    }
    old = std::move(b->second);
    built_.erase(b);
    with_issues_.erase(n);
  }
  auto s = services_.find(n);
  if (s == services_.end()) {
    if (!old.errors.empty() || !old.notes.empty()) ++issues_version_;
    return;
  }
  std::vector<const EndpointSlice*> mine;
  if (auto o = slices_of_.find(n); o != slices_of_.end())
    for (const Name& sn : o->second) mine.push_back(&slices_.at(sn).slice);
  ServiceEntries e = build_service_entries(s->second, mine, opts_);
  if (!same_issues(old.errors, e.errors) || !same_issues(old.notes, e.notes)) ++issues_version_;
  Built& nb = built_[n];
  nb.entries = std::move(e.entries);
  nb.errors = std::move(e.errors);
  nb.notes = std::move(e.notes);
  if (!nb.errors.empty() || !nb.notes.empty()) with_issues_.insert(n);
  for (size_t i = 0; i < nb.entries.size(); ++i) {
    claims_[nb.entries[i].key][Claim{claim_rank(nb.entries[i]), n.first, n.second, i}] = &nb.entries[i];
    keys->insert(nb.entries[i].key);
  }
}

void TableIndex::settle(const ServiceKey& k, std::vector<ServiceKey>* touched) {
  auto c = claims_.find(k);
  auto t = table_.services.find(k);
  if (c == claims_.end() || c->second.empty()) {
    if (c != claims_.end()) claims_.erase(c);
    if (conflicted_.erase(k)) ++issues_version_;
    if (t != table_.services.end()) {
      table_.services.erase(t);
      touched->push_back(k);
    }
    return;
  }
  const VirtualService& winner = *c->second.begin()->second;
  if (c->second.size() > 1 || conflicted_.count(k)) ++issues_version_;  // who lost may have changed
  if (c->second.size() > 1) conflicted_.insert(k);
  else conflicted_.erase(k);
  if (t == table_.services.end()) {
    table_.services.emplace(k, winner);
    touched->push_back(k);
  } else if (!(t->second == winner)) {
    t->second = winner;
    touched->push_back(k);
  }
}

void TableIndex::flush(std::vector<ServiceKey>* touched) {
  if (dirty_.empty()) return;
  std::set<ServiceKey> keys;
  for (const Name& n : dirty_) rebuild(n, &keys);
  dirty_.clear();
  for (const ServiceKey& k : keys) settle(k, touched);
}

void TableIndex::issues(std::vector<ObjectError>* errors, std::vector<ObjectError>* notes) const {
  for (const Name& n : with_issues_) {
    const Built& b = built_.at(n);
    errors->insert(errors->end(), b.errors.begin(), b.errors.end());
    notes->insert(notes->end(), b.notes.begin(), b.notes.end());
  }
  for (const Name& n : ignored_) notes->push_back(slices_.at(n).note);
  for (const ServiceKey& k : conflicted_) {
    const auto& cl = claims_.at(k);
    const VirtualService& winner = *cl.begin()->second;
    for (auto it = std::next(cl.begin()); it != cl.end(); ++it) {
      const Service& s = services_.at({std::get<1>(it->first), std::get<2>(it->first)});
      errors->push_back({s.origin, object_id("Service", s.meta), conflict_reason(*it->second, winner),
                         conflict_kind(*it->second, winner)});
    }
  }
}

}  // namespace vipd::cp::k8s
