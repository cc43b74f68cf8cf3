// Thread: any.
#include "common/log.h"

#include <ctime>
#include <mutex>

#include "common/text.h"

namespace vipd {
namespace {
std::atomic<int> g_level{static_cast<int>(LogSeverity::kInfo)};
std::mutex g_mu;
const char* kNames[] = {"debug", "info", "warn", "error"};
}  // namespace

void set_log_level(LogSeverity s) { g_level.store(static_cast<int>(s)); }
bool log_enabled(LogSeverity s) { return static_cast<int>(s) >= g_level.load(std::memory_order_relaxed); }

void log_line(LogSeverity s, const std::string& msg) {
  if (!log_enabled(s)) return;
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  tm t{};
  gmtime_r(&ts.tv_sec, &t);
  char buf[32];
  strftime(buf, sizeof buf, "%H:%M:%S", &t);
  // Messages carry names from outside (Kubernetes objects, manifests): one with
  // a newline must not forge a second line, one with ESC must not reach a
  // terminal, a NUL must not cut the line short.
  const std::string text = escape_control(msg);
  std::lock_guard<std::mutex> g(g_mu);
  std::fprintf(stderr, "%s.%03ldZ vipd %s: %s\n", buf, ts.tv_nsec / 1000000L,
               kNames[static_cast<int>(s)], text.c_str());
  std::fflush(stderr);
}

}  // namespace vipd
