// Thread: control.
#include "dataplane/publish/tables_build.h"

#include <string>

namespace vipd::dp {
namespace {

uint64_t fnv1a64(const std::string& s, uint64_t seed) {
  uint64_t h = 0xcbf29ce484222325ull ^ seed;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  // Final avalanche so that close names spread well.
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

std::string dest_name(const DestRef& d) {
  return std::to_string(d.ip >> 24) + "." + std::to_string((d.ip >> 16) & 0xff) + "." +
         std::to_string((d.ip >> 8) & 0xff) + "." + std::to_string(d.ip & 0xff) + ":" +
         std::to_string(d.port);
}

}  // namespace

bool is_prime(uint32_t v) {
  if (v < 2) return false;
  for (uint64_t d = 2; d * d <= v; ++d)
    if (v % d == 0) return false;
  return true;
}

std::vector<uint16_t> build_sh_table(const DestRef* dests, uint32_t n) {
  std::vector<uint16_t> t(kShTableSize, kNoDest);
  std::vector<uint32_t> usable;
  for (uint32_t i = 0; i < n && i < kNoDest; ++i)
    if (dests[i].weight > 0) usable.push_back(i);
  if (usable.empty()) return t;
  size_t cur = 0;
  uint32_t taken = 0;
  for (uint32_t b = 0; b < kShTableSize; ++b) {
    const uint32_t i = usable[cur];
    t[b] = static_cast<uint16_t>(i);
    if (++taken >= dests[i].weight) {
      taken = 0;
      cur = (cur + 1) % usable.size();
    }
  }
  return t;
}

std::vector<uint16_t> build_maglev_table(const DestRef* dests, uint32_t n, uint32_t m) {
  std::vector<uint16_t> table(m, kNoDest);
  struct Perm {
    uint32_t idx, offset, skip, next;
    uint64_t credit;
    uint32_t weight;
  };
  std::vector<Perm> perms;
  uint32_t max_w = 0;
  for (uint32_t i = 0; i < n && i < kNoDest; ++i) {
    if (dests[i].weight == 0) continue;
    const std::string name = dest_name(dests[i]);
    Perm p{};
    p.idx = i;
    p.offset = static_cast<uint32_t>(fnv1a64(name, 0x5bd1e995u) % m);
    p.skip = static_cast<uint32_t>(fnv1a64(name, 0x27d4eb2fu) % (m - 1)) + 1;
    p.weight = dests[i].weight;
    perms.push_back(p);
    if (p.weight > max_w) max_w = p.weight;
  }
  if (perms.empty() || m < 2 || perms.size() >= m) return table;
  uint32_t filled = 0;
  while (filled < m) {
    for (Perm& p : perms) {
      // Weighted turns: a destination earns `weight` credit per round and
      // claims one slot per `max_w` credit.
      p.credit += p.weight;
      while (p.credit >= max_w && filled < m) {
        p.credit -= max_w;
        uint32_t c = static_cast<uint32_t>((p.offset + uint64_t{p.next} * p.skip) % m);
        while (table[c] != kNoDest) {
          ++p.next;
          c = static_cast<uint32_t>((p.offset + uint64_t{p.next} * p.skip) % m);
        }
        table[c] = static_cast<uint16_t>(p.idx);
        ++p.next;
        ++filled;
      }
      if (filled == m) break;
    }
  }
  return table;
}

}  // namespace vipd::dp
