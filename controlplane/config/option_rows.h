// Thread: control (parsed once at start-up). The option table's rows: one per
// option, with its name, the field it sets, its range or choices, its default
// (read from a default-constructed Options, never written twice), its --help
// line and its documentation. The Boost descriptions, --help, the parsing and
// range checks, and docs/configuration.md's option table (setting_docs(),
// option_table_markdown()) are all made from these rows (options.cc); the
// rows themselves are in option_table.cc, made with the builders below.
// Internal to controlplane/config.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "controlplane/config/option_values.h"
#include "controlplane/config/options.h"
#include "model/kinds.h"

namespace vipd::config::rows {

using Kind = SettingDoc::Kind;

// The field a row sets: a member of Options, or of Options::dataplane.
template <class T>
struct Field {
  T Options::*top = nullptr;
  T DataplaneSettings::*dp = nullptr;
  Field(T Options::*m) : top(m) {}           // NOLINT: implicit on purpose
  Field(T DataplaneSettings::*m) : dp(m) {}  // NOLINT
  T& of(Options& o) const { return top ? o.*top : o.dataplane.*dp; }
  const T& of(const Options& o) const { return top ? o.*top : o.dataplane.*dp; }
};

struct Setting {
  const char* name;
  Kind kind = Kind::kText;
  const char* arg = nullptr;  // placeholder in --help; nullptr for a switch
  uint64_t min = 0, max = 0;  // kNumber
  std::vector<std::string> choices;  // kChoice
  const char* help = "";      // one line for --help
  const char* meaning = "";   // docs' Meaning column (Markdown)
  const char* value_doc = nullptr;    // docs' Value column; nullptr: made from kind and range
  const char* default_text = nullptr; // nullptr: the default Options' value
  bool in_file = true;        // may appear in the config file
  bool composing = false;     // repeatable, values accumulate (command line + file)
  // Parses, checks and stores one value (each value of a repeatable option).
  std::function<void(Options&, const std::string&)> set;
  // The value as --help and the docs show it ("" = none).
  std::function<std::string(const Options&)> show;
};

// Every option, in --help order (option_table.cc).
const std::vector<Setting>& settings();

// The row's name, kind, placeholder and texts; the builders below fill in the rest.
Setting row(const char* name, Kind kind, const char* arg, const char* help, const char* meaning);

// Whole numbers: "must be between MIN and MAX" names the option, the value
// and the range. `check` (optional) refuses more, returning the problem.
Setting number(const char* name, const char* arg, Field<uint32_t> f, uint64_t min, uint64_t max,
               const char* help, const char* meaning, const char* (*check)(uint64_t) = nullptr);

// true/false (yes/no, on/off, 1/0). A switch takes no value on the command line.
Setting boolean(const char* name, Field<bool> f, bool is_switch, const char* help, const char* meaning);

// Free text, trimmed; `check` (optional) refuses a value, returning the problem.
Setting text(const char* name, const char* arg, Field<std::string> f, const char* help, const char* meaning,
             const char* (*check)(const std::string&) = nullptr);

// Anything else: the row's own parser and printer.
Setting other(const char* name, const char* arg, const char* help, const char* meaning,
              std::function<void(Options&, const std::string&)> set,
              std::function<std::string(const Options&)> show);

// A setting's documentation fields, set after the row is made.
Setting with(Setting s, const char* value_doc, const char* default_text = nullptr);

// Only on the command line (--help, --version, --config): no parser of its own.
Setting command_only(const char* name, const char* arg, const char* help, const char* meaning);

// HOST:PORT, or "" / "off" to switch the endpoint off.
Setting listen_address(const char* name, std::string Options::*f, const char* help, const char* meaning);

// "expected a, b or c" (up to 5 choices), "expected one of a, b, ..., k".
std::string expected_one_of(const std::vector<std::string>& names);

// A value `parse(name, value)` makes whole (a list, ...), shown by `print`;
// docs' Value column `value_doc`.
template <class T, class Owner>
Setting parsed(const char* name, const char* arg, T Owner::*m, const char* help, const char* meaning,
               std::type_identity_t<T> (*parse)(const std::string&, const std::string&),
               std::string (*print)(const std::type_identity_t<T>&), const char* value_doc) {
  const Field<T> f(m);
  return with(other(name, arg, help, meaning,
                    [name, f, parse](Options& o, const std::string& v) { f.of(o) = parse(name, v); },
                    [f, print](const Options& o) { return print(f.of(o)); }),
              value_doc);
}

// One of a fixed list of words, each standing for a value of the field.
template <class T>
Setting choice(const char* name, const char* arg, Field<T> f, std::vector<std::pair<std::string, T>> words,
               const char* help, const char* meaning) {
  Setting s = row(name, Kind::kChoice, arg, help, meaning);
  for (const auto& v : words) s.choices.push_back(v.first);
  s.set = [name, f, words, problem = expected_one_of(s.choices)](Options& o, const std::string& v) {
    const std::string w = values::trim(v);
    for (const auto& [word, value] : words)
      if (w == word) {
        f.of(o) = value;
        return;
      }
    values::fail(name, v, problem);
  };
  s.show = [f, words](const Options& o) {
    for (const auto& [word, value] : words)
      if (f.of(o) == value) return word;
    return std::string("?");
  };
  return s;
}

// The words of one of the model's enums (model/kinds.h), in its name table's
// order (the order help text and error messages list them).
// A table's empty name (ProxyProtocol's none) is spelled `empty_name` here.
template <class E>
std::vector<std::pair<std::string, E>> model_choices(const char* empty_name = "") {
  std::vector<std::pair<std::string, E>> out;
  for (const auto& e : cp::name_table(E{})) out.emplace_back(*e.name ? e.name : empty_name, e.value);
  return out;
}

// Checks for number() and text().
const char* not_empty(const std::string& v);
const char* prime(uint64_t n);

}  // namespace vipd::config::rows
