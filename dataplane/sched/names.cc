// Thread: any.
#include <cstring>

#include "dataplane/sched/sched.h"

namespace vipd::dp {
namespace {
constexpr const char* kNames[] = {"rr", "wrr", "lc", "wlc", "sed", "nq", "sh", "dh", "lblc", "lblcr", "mh"};
}

const char* sched_name(Sched s) noexcept {
  const auto i = static_cast<unsigned>(s);
  return i < sizeof kNames / sizeof kNames[0] ? kNames[i] : "rr";
}

bool sched_from_name(const char* name, Sched* out) noexcept {
  for (unsigned i = 0; i < sizeof kNames / sizeof kNames[0]; ++i) {
    if (std::strcmp(name, kNames[i]) == 0) {
      *out = static_cast<Sched>(i);
      return true;
    }
  }
  return false;
}

}  // namespace vipd::dp
