// Thread: any. The two clocks vipd reads: wall-clock time for what is reported
// (status, health, log-facing timestamps) and the steady clock for timeouts.
#pragma once

#include <time.h>

#include <chrono>
#include <cstdint>

namespace vipd {

// Wall-clock time (CLOCK_REALTIME), nanoseconds since the Unix epoch.
inline int64_t now_unix_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// The steady clock in milliseconds since its (arbitrary) epoch: for deadlines
// and intervals only, never for what is reported.
inline int64_t steady_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace vipd
