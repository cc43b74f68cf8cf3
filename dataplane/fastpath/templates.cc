// Thread: worker.
#include "dataplane/fastpath/templates.h"

#include <rte_errno.h>
#include <rte_hash.h>
#include <rte_hash_crc.h>
#include <rte_malloc.h>

namespace vipd::dp {

TemplateTable::~TemplateTable() {
  if (hash_) rte_hash_free(hash_);
  rte_free(t_);
  rte_free(free_);
}

bool TemplateTable::init(const std::string& name, uint32_t capacity, int socket, std::string* error) {
  if (capacity < 16) capacity = 16;
  rte_hash_parameters p{};
  p.name = name.c_str();
  p.entries = capacity;
  p.key_len = sizeof(TemplateKey);
  p.hash_func = rte_hash_crc;
  p.socket_id = socket;
  p.extra_flag = RTE_HASH_EXTRA_FLAGS_EXT_TABLE;
  hash_ = rte_hash_create(&p);
  t_ = static_cast<Template*>(rte_zmalloc_socket("tmpl", sizeof(Template) * capacity, 64, socket));
  free_ = static_cast<uint32_t*>(rte_zmalloc_socket("tmpl_free", sizeof(uint32_t) * capacity, 64, socket));
  if (!hash_ || !t_ || !free_) {
    *error = "persistence templates " + name + ": cannot allocate " + std::to_string(capacity) +
             " entries: " + rte_strerror(rte_errno);
    return false;
  }
  capacity_ = capacity;
  for (uint32_t i = 0; i < capacity; ++i) free_[i] = capacity - 1 - i;
  free_top_ = capacity;
  return true;
}

Template* TemplateTable::lookup(const TemplateKey& k) noexcept {
  void* data = nullptr;
  if (rte_hash_lookup_data(hash_, &k, &data) < 0) return nullptr;
  return &t_[reinterpret_cast<uintptr_t>(data)];
}

Template* TemplateTable::insert(const TemplateKey& k) noexcept {
  if (free_top_ == 0 || rte_hash_lookup(hash_, &k) >= 0) return nullptr;
  const uint32_t idx = free_[free_top_ - 1];
  if (rte_hash_add_key_data(hash_, &k, reinterpret_cast<void*>(uintptr_t{idx})) < 0) return nullptr;
  --free_top_;
  ++used_;
  Template* t = &t_[idx];
  *t = Template{};
  t->key = k;
  t->in_use = 1;
  return t;
}

void TemplateTable::remove(Template* t) noexcept {
  if (!t->in_use) return;
  rte_hash_del_key(hash_, &t->key);
  t->in_use = 0;
  free_[free_top_++] = index(t);
  --used_;
}

void TemplateTable::sweep(uint64_t now, uint32_t budget) noexcept {
  for (uint32_t n = 0; n < budget && capacity_ > 0; ++n) {
    Template& t = t_[cursor_];
    if (++cursor_ >= capacity_) cursor_ = 0;
    if (t.in_use && t.expires <= now) remove(&t);
  }
}

}  // namespace vipd::dp
