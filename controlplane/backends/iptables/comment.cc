// Thread: any.
#include "controlplane/backends/iptables/comment.h"

#include <algorithm>

namespace vipd::cp::ipt {

bool comment_char_allowed(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == ' ' || c == '.' ||
         c == '_' || c == '/' || c == ':' || c == '-' || c == '>' || c == '|' || c == '[' || c == ']';
}

std::string comment_text(std::string_view text, size_t max_len) {
  std::string s;
  s.reserve(std::min(text.size(), max_len));
  for (char c : text) {
    if (s.size() == max_len) break;
    s.push_back(comment_char_allowed(c) ? c : '_');
  }
  return s;
}

std::string comment_match(std::string_view text) { return "-m comment --comment \"" + comment_text(text) + "\""; }

}  // namespace vipd::cp::ipt
