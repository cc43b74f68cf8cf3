// Thread: any.
#include "common/text.h"

#include <cstdint>
#include <cstdio>

namespace vipd {
namespace {

unsigned char byte(std::string_view s, size_t i) { return static_cast<unsigned char>(s[i]); }
bool continuation(std::string_view s, size_t i) { return i < s.size() && (byte(s, i) & 0xC0) == 0x80; }

void append_hex(std::string* out, const char* prefix, unsigned v) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%s%02x", prefix, v & 0xFFu);
  *out += buf;
}

}  // namespace

size_t utf8_sequence_length(std::string_view s, size_t i) {
  if (i >= s.size()) return 0;
  const unsigned char c = byte(s, i);
  if (c < 0x80) return 1;
  size_t n;
  uint32_t cp;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
    cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;  // continuation byte, C0/C1 (overlong two-byte), F5..FF
  }
  for (size_t k = 1; k < n; ++k) {
    if (!continuation(s, i + k)) return 0;
    cp = (cp << 6) | (byte(s, i + k) & 0x3F);
  }
  if (n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) return 0;  // overlong, surrogate
  if (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) return 0;
  return n;
}

bool is_valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_sequence_length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string utf8_repair(std::string_view s) {
  if (is_valid_utf8(s)) return std::string(s);
  std::string out;
  out.reserve(s.size() + 8);
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_sequence_length(s, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::string escape_control(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = byte(s, i);
    const size_t n = utf8_sequence_length(s, i);
    if (n == 0) {  // not UTF-8: show the byte
      append_hex(&out, "\\x", c);
      ++i;
    } else if (n == 1 && (c < 0x20 || c == 0x7F)) {
      if (c == '\n') out += "\\n";
      else if (c == '\r') out += "\\r";
      else if (c == '\t') out += "\\t";
      else append_hex(&out, "\\x", c);
      ++i;
    } else if (n == 2 && c == 0xC2 && byte(s, i + 1) < 0xA0) {  // U+0080..U+009F (C1 controls, CSI among them)
      append_hex(&out, "\\u00", byte(s, i + 1));
      i += 2;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

}  // namespace vipd
