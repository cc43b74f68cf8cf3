// Builds fast-path Service objects (flexible DestRef array) on the C heap,
// with n_weighted/max_weight/gcd_weight computed here from the weights.
#pragma once

#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include "dataplane/fastpath/tables.h"

namespace vipd::dp::test {

struct FreeDeleter {
  void operator()(Service* s) const { std::free(s); }
};
using ServicePtr = std::unique_ptr<Service, FreeDeleter>;

inline ServicePtr make_service(const std::vector<uint32_t>& weights, Sched sched, uint32_t id = 0) {
  const size_t n = weights.size();
  auto* s = static_cast<Service*>(std::malloc(sizeof(Service) + n * sizeof(DestRef) + 1));
  std::memset(s, 0, sizeof(Service) + n * sizeof(DestRef));
  s->id = id;
  s->vip = 0x0a600064;
  s->port = 8080;
  s->proto = 6;
  s->sched = sched;
  s->n_dests = static_cast<uint32_t>(n);
  int32_t maxw = 0, g = 0;
  uint32_t nw = 0;
  for (size_t i = 0; i < n; ++i) {
    s->dests[i].ip = 0x0a01000b + static_cast<uint32_t>(i);
    s->dests[i].port = 80;
    s->dests[i].weight = weights[i];
    s->dests[i].slot = static_cast<uint32_t>(i);
    if (weights[i] > 0) {
      ++nw;
      maxw = std::max<int32_t>(maxw, static_cast<int32_t>(weights[i]));
      g = std::gcd(g, static_cast<int32_t>(weights[i]));
    }
  }
  s->n_weighted = nw;
  s->max_weight = maxw;
  s->gcd_weight = g > 0 ? g : 1;
  return ServicePtr(s);
}

}  // namespace vipd::dp::test
