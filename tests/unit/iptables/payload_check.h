// Thread: test main thread. A check of iptables-restore payloads against names
// that try to break them (NUL, newline, quotes, ESC, bytes that are not UTF-8,
// 1,100 characters), shared by the iptables mode's and the ipvs mode's tests.
#pragma once

#include <string>
#include <vector>

namespace vipd::cp::ipt::payload_check {

// Names a Kubernetes object or a manifest could carry, each as "ns/NAME:port".
inline std::vector<std::string> hostile_names() {
  return {
      std::string("ns/nul\0-j ACCEPT:http", 21),
      "ns/new\nline\n-A VIPD-SERVICES -j ACCEPT\n:http",
      "ns/quote\" -j ACCEPT \"x:http",
      "ns/back\\slash\\:http",
      "ns/esc\x1b[31mred\x1b[0m:http",
      "ns/\xff\xfe\xc3:http",
      "ns/tab\there\r:http",
      "ns/" + std::string(1100, 'a') + ":http",
  };
}

// `s` printable, for test messages: other bytes as \xNN.
inline std::string escaped(const std::string& s) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (char c : s.substr(0, 120)) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) out.push_back(c);
    else out += std::string("\\x") + kHex[u >> 4] + kHex[u & 15];
  }
  return out;
}

// One token of a rule line as iptables-restore splits it: on spaces outside
// double quotes. `ok` false when a quote is left open.
inline std::vector<std::string> split_rule(const std::string& line, bool* ok) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false, have = false;
  for (char c : line) {
    if (c == '"') {
      quoted = !quoted;
      have = true;
    } else if (c == ' ' && !quoted) {
      if (have) out.push_back(cur);
      cur.clear();
      have = false;
    } else {
      cur.push_back(c);
      have = true;
    }
  }
  if (have) out.push_back(cur);
  *ok = !quoted;
  return out;
}

// "" when `payload` is a well-formed iptables-restore payload: only printable
// ASCII in its lines, every line a table header, a chain declaration, COMMIT,
// -A CHAIN RULE or -X CHAIN; in every rule the quotes are closed, no argument
// exceeds 255 characters (xt_comment's limit; a longer argument fails the
// whole iptables-restore) and a comment holds only the sanitiser's characters.
// Otherwise a description of the first problem. `shape` receives each line
// with comment texts replaced by C and vipd chain hashes by H, so that
// payloads of different names can be compared rule for rule.
inline std::string check_payload(const std::string& payload, std::vector<std::string>* shape) {
  size_t start = 0;
  int n = 0;
  while (start < payload.size()) {
    const size_t end = payload.find('\n', start);
    if (end == std::string::npos) return "the payload does not end with a newline";
    const std::string line = payload.substr(start, end - start);
    start = end + 1;
    ++n;
    const std::string where = "line " + std::to_string(n) + " (" + line.substr(0, 80) + "): ";
    for (char c : line)
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f)
        return where + "byte " + std::to_string(static_cast<unsigned char>(c)) + " in a line";
    if (line.empty()) return where + "empty line";
    if (line == "COMMIT" || line[0] == '*') {
      shape->push_back(line);
      continue;
    }
    if (line[0] == ':') {  // ":CHAIN - [0:0]"
      std::string chain = line.substr(1, line.find(' ') - 1);
      for (const char* p : {"VIPD-SVC-", "VIPD-SEP-", "VIPD-FW-"})
        if (chain.rfind(p, 0) == 0) chain = std::string(p) + "H";
      if (line.substr(line.find(' ')) != " - [0:0]") return where + "not a chain declaration";
      shape->push_back(":" + chain);
      continue;
    }
    if (line.rfind("-A ", 0) != 0 && line.rfind("-X ", 0) != 0) return where + "not a rule";
    bool ok = false;
    std::vector<std::string> tok = split_rule(line, &ok);
    if (!ok) return where + "a quote is left open";
    std::string s;
    for (size_t i = 0; i < tok.size(); ++i) {
      std::string t = tok[i];
      if (t.size() > 255) return where + "an argument of " + std::to_string(t.size()) + " characters";
      if (i > 0 && tok[i - 1] == "--comment") {
        for (char c : t)
          if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                std::string(" ._/:->|[]").find(c) != std::string::npos))
            return where + "comment character " + std::to_string(static_cast<unsigned char>(c));
        t = "C";
      }
      for (const char* p : {"VIPD-SVC-", "VIPD-SEP-", "VIPD-FW-"})
        if (t.rfind(p, 0) == 0) t = std::string(p) + "H";
      s += (s.empty() ? "" : " ") + t;
    }
    shape->push_back(s);
  }
  return "";
}

}  // namespace vipd::cp::ipt::payload_check
