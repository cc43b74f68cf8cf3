// Thread: control (parsed once at start-up). The row builders of
// option_rows.h.
#include "controlplane/config/option_rows.h"

namespace vipd::config::rows {

using values::fail;
using values::trim;

Setting row(const char* name, Kind kind, const char* arg, const char* help, const char* meaning) {
  Setting s{name, kind, arg};
  s.help = help;
  s.meaning = meaning;
  return s;
}

Setting number(const char* name, const char* arg, Field<uint32_t> f, uint64_t min, uint64_t max,
               const char* help, const char* meaning, const char* (*check)(uint64_t)) {
  Setting s = row(name, Kind::kNumber, arg, help, meaning);
  s.min = min;
  s.max = max;
  s.set = [name, f, min, max, check](Options& o, const std::string& v) {
    const uint32_t n = values::parse_number(name, v, min, max);
    if (check)
      if (const char* problem = check(n)) fail(name, v, problem);
    f.of(o) = n;
  };
  s.show = [f](const Options& o) { return std::to_string(f.of(o)); };
  return s;
}

Setting boolean(const char* name, Field<bool> f, bool is_switch, const char* help, const char* meaning) {
  Setting s = row(name, is_switch ? Kind::kSwitch : Kind::kBool, is_switch ? nullptr : "BOOL", help, meaning);
  s.set = [name, f](Options& o, const std::string& v) { f.of(o) = values::parse_bool(name, v); };
  s.show = [f](const Options& o) { return std::string(f.of(o) ? "true" : "false"); };
  return s;
}

std::string expected_one_of(const std::vector<std::string>& names) {
  std::string out = names.size() > 5 ? "expected one of " : "expected ";
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += names.size() > 5 || i + 1 < names.size() ? ", " : " or ";
    out += names[i];
  }
  return out;
}

Setting text(const char* name, const char* arg, Field<std::string> f, const char* help, const char* meaning,
             const char* (*check)(const std::string&)) {
  Setting s = row(name, Kind::kText, arg, help, meaning);
  s.set = [name, f, check](Options& o, const std::string& v) {
    const std::string t = trim(v);
    if (check)
      if (const char* problem = check(t)) fail(name, v, problem);
    f.of(o) = t;
  };
  s.show = [f](const Options& o) { return f.of(o); };
  return s;
}

Setting other(const char* name, const char* arg, const char* help, const char* meaning,
              std::function<void(Options&, const std::string&)> set,
              std::function<std::string(const Options&)> show) {
  Setting s = row(name, Kind::kText, arg, help, meaning);
  s.set = std::move(set);
  s.show = std::move(show);
  return s;
}

Setting with(Setting s, const char* value_doc, const char* default_text) {
  s.value_doc = value_doc;
  s.default_text = default_text;
  return s;
}

Setting command_only(const char* name, const char* arg, const char* help, const char* meaning) {
  Setting s = row(name, Kind::kText, arg, help, meaning);
  s.in_file = false;
  return s;
}

Setting listen_address(const char* name, std::string Options::*f, const char* help, const char* meaning) {
  return with(other(name, "HOST:PORT", help, meaning,
                    [name, f](Options& o, const std::string& v) {
                      const std::string a = trim(v);
                      if (a.empty() || a == "off") {
                        (o.*f).clear();
                      } else {
                        values::check_host_port(name, a);
                        o.*f = a;
                      }
                    },
                    [f](const Options& o) { return o.*f; }),
              "`IPv4:PORT` \\| `off`");
}

const char* not_empty(const std::string& v) { return v.empty() ? "must not be empty" : nullptr; }

const char* prime(uint64_t n) {
  bool p = n > 1;
  for (uint64_t d = 2; p && d * d <= n; ++d) p = n % d != 0;
  return p ? nullptr : "must be a prime number (e.g. 251, 4093, 65537)";
}

}  // namespace vipd::config::rows
