// Thread: test main thread. Tests for controlplane/config/options.cc driven by
// its option table: every number's range, every row's field, the --help text
// and config/vipd.conf.example against the table.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <string>

#include "controlplane/config/options.h"
#include "tests/unit/controlplane/config_test_fixture.h"

namespace vipd::config {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// Every whole-number option, from the option table: one past each end of its
// range is refused, on the command line and in the file, with the option, the
// value and the range named; both ends are accepted.
TEST_F(ConfigTest, EveryNumberRefusesValuesOutsideItsRange) {
  int numbers = 0;
  for (const SettingDoc& s : setting_docs()) {
    if (s.kind != SettingDoc::Kind::kNumber) continue;
    ++numbers;
    const std::string opt = "--" + s.name;
    const std::string range = "must be between " + std::to_string(s.min) + " and " + std::to_string(s.max);
    std::vector<std::string> outside{std::to_string(s.max + 1)};
    if (s.min > 0) outside.push_back(std::to_string(s.min - 1));
    for (const std::string& v : outside) {
      EXPECT_EQ(error({opt, v}), "config: " + opt + " '" + v + "': " + range);
      const std::string f = dir_.write("range.conf", s.name + " = " + v + "\n");
      EXPECT_EQ(error({"--config", f}), "config: " + opt + " '" + v + "': " + range);
    }
    // The ends, with what other options must then allow (the backoff pair).
    for (uint64_t v : {s.min, s.max}) {
      std::vector<std::string> args{opt, std::to_string(v)};
      if (s.name == "api-backoff-initial-ms") args.insert(args.end(), {"--api-backoff-max-ms", "600000"});
      if (s.name == "api-backoff-max-ms") args.insert(args.end(), {"--api-backoff-initial-ms", "1"});
      EXPECT_EQ(error(args), "no error") << opt << " " << v;
    }
  }
  EXPECT_GE(numbers, 15);
}

// Every row sets its own field: a value other than the default, given on the
// command line, is what the row then reads back (numbers: the end of the range
// away from the default; choices: each one; booleans: the other one), and no
// other row reads a changed value.
TEST_F(ConfigTest, EveryRowSetsItsField) {
  const Options defaults;
  const Options base = ok({});
  int checked = 0;
  for (const SettingDoc& s : setting_docs()) {
    std::vector<std::string> values;
    if (s.kind == SettingDoc::Kind::kNumber)
      values.push_back(std::to_string(s.default_value == std::to_string(s.min) ? s.max : s.min));
    if (s.kind == SettingDoc::Kind::kChoice) values = s.choices;
    if (s.kind == SettingDoc::Kind::kBool) values.push_back(s.default_value == "true" ? "false" : "true");
    for (const std::string& v : values) {
      std::vector<std::string> args{"--" + s.name, v};
      if (s.name == "api-backoff-initial-ms") args.insert(args.end(), {"--api-backoff-max-ms", "600000"});
      if (s.name == "api-backoff-max-ms") args.insert(args.end(), {"--api-backoff-initial-ms", "1"});
      const Options o = ok(args);
      EXPECT_EQ(setting_value(o, s.name), v) << "--" << s.name;
      // ... and no other row's field (two rows on one field would show here).
      for (const SettingDoc& other : setting_docs())
        if (other.name != s.name && !other.name.starts_with("api-backoff"))
          EXPECT_EQ(setting_value(o, other.name), setting_value(base, other.name))
              << "--" << s.name << " " << v << " changed --" << other.name;
      ++checked;
    }
  }
  for (const SettingDoc& s : setting_docs()) {
    if (s.kind != SettingDoc::Kind::kSwitch || s.name == "dry-run") continue;
    EXPECT_EQ(setting_value(ok({"--" + s.name}), s.name), "true") << "--" << s.name;
    EXPECT_EQ(setting_value(defaults, s.name), "false") << "--" << s.name;
    ++checked;
  }
  EXPECT_GE(checked, 40);
}

// --help shows every row of the table with its default.
TEST_F(ConfigTest, HelpShowsEveryRowAndItsDefault) {
  run({"--help"});
  const std::string h = out_.str();
  for (const SettingDoc& s : setting_docs()) {
    const std::string left = "  --" + s.name + (s.arg.empty() ? "" : " " + s.arg);
    const auto at = h.find(left + " ");
    ASSERT_NE(at, std::string::npos) << left;
    const std::string line = h.substr(at, h.find('\n', at) - at);
    EXPECT_THAT(line, HasSubstr(s.help)) << s.name;
    if (!s.default_shown.empty()) {
      EXPECT_THAT(line, HasSubstr("(default: " + s.default_shown + ")")) << s.name;
    }
  }
}
// config/vipd.conf.example documents every option, and every option line in it
// parses when uncommented (run from the source root).
TEST_F(ConfigTest, ExampleFileCoversEveryOptionAndParses) {
  const std::string example = testing::read_file("config/vipd.conf.example");
  ASSERT_FALSE(example.empty()) << "run from the source root";
  run({"--help"});
  const std::string help = out_.str();
  std::istringstream lines(example);
  std::string uncommented;
  std::set<std::string> names;
  for (std::string line; std::getline(lines, line);) {
    // "#name = value" (no space after '#') is an option line.
    if (line.size() > 1 && line[0] == '#' && std::islower(static_cast<unsigned char>(line[1]))) {
      const std::string name = line.substr(1, line.find(' ') - 1);
      names.insert(name);
      EXPECT_THAT(help, HasSubstr("--" + name + " ")) << name;
      if (name == "manifests-dir") line = "#manifests-dir = " + dir_.path();
      uncommented += line.substr(1) + "\n";
    }
  }
  // Every option the file may set, from the option table ("# name = value",
  // with a space, is shown but not uncommented here: kubeconfig must exist).
  for (const SettingDoc& s : setting_docs())
    if (s.in_file)
      EXPECT_TRUE(names.count(s.name) || example.find("\n# " + s.name + " = ") != std::string::npos)
          << s.name << " missing from config/vipd.conf.example";
  const std::string f = dir_.write("all.conf", uncommented);
  const auto o = run({"--config", f});
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->ports.size(), 2u);
  EXPECT_EQ(o->dataplane.conn_table_size, Options{}.dataplane.conn_table_size);
}

}  // namespace
}  // namespace vipd::config
