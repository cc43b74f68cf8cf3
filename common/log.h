// Thread: any (not for the fast path). Minimal leveled logger to stderr with
// a timestamp; one line per message. Control characters and bytes that are
// not UTF-8 in a message are written as escapes (common/text.h escape_control),
// so a message is always exactly one line.
#pragma once

#include <atomic>
#include <cstdio>
#include <string>

namespace vipd {

enum class LogSeverity { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

void set_log_level(LogSeverity s);
bool log_enabled(LogSeverity s);
void log_line(LogSeverity s, const std::string& msg);

inline void log_debug(const std::string& m) { if (log_enabled(LogSeverity::kDebug)) log_line(LogSeverity::kDebug, m); }
inline void log_info(const std::string& m) { log_line(LogSeverity::kInfo, m); }
inline void log_warn(const std::string& m) { log_line(LogSeverity::kWarn, m); }
inline void log_error(const std::string& m) { log_line(LogSeverity::kError, m); }

}  // namespace vipd
