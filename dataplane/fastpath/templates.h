// Thread: worker (one table per worker). Persistence templates (IPVS -p /
// sessionAffinity ClientIP): (service, client address) -> destination, with an
// expiry refreshed by every packet of a connection that uses the template.
#pragma once

#include <cstdint>
#include <string>

struct rte_hash;

namespace vipd::dp {

struct TemplateKey {
  uint32_t vip;
  uint32_t client;
  uint16_t port;
  uint8_t proto;
  uint8_t pad;
};
static_assert(sizeof(TemplateKey) == 12);

struct Template {
  TemplateKey key;
  uint32_t dest_slot, dest_gen;
  uint64_t expires;  // TSC
  uint8_t in_use;
};

class TemplateTable {
 public:
  TemplateTable() = default;
  TemplateTable(const TemplateTable&) = delete;
  TemplateTable& operator=(const TemplateTable&) = delete;
  ~TemplateTable();

  bool init(const std::string& name, uint32_t capacity, int socket, std::string* error);
  Template* lookup(const TemplateKey& k) noexcept;
  Template* insert(const TemplateKey& k) noexcept;  // nullptr when full
  void remove(Template* t) noexcept;
  uint32_t index(const Template* t) const noexcept { return static_cast<uint32_t>(t - t_); }
  Template* at(uint32_t i) noexcept { return i < capacity_ ? &t_[i] : nullptr; }
  // Removes up to `budget` visited entries that expired.
  void sweep(uint64_t now, uint32_t budget) noexcept;
  uint32_t size() const noexcept { return used_; }
  uint32_t capacity() const noexcept { return capacity_; }

 private:
  rte_hash* hash_ = nullptr;
  Template* t_ = nullptr;
  uint32_t* free_ = nullptr;
  uint32_t free_top_ = 0, capacity_ = 0, used_ = 0, cursor_ = 0;
};

}  // namespace vipd::dp
