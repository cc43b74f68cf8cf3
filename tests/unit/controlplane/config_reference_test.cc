// Thread: test main thread. docs/configuration.md's option table is the table
// the code renders from its option rows (controlplane/config/option_table.cc, options.cc's
// option_table_markdown()): a new option, a changed default, range or text
// shows up here as a difference naming the option.
//
// After changing an option, regenerate the table in the docs with
//   VIPD_UPDATE_DOCS=1 ./build/tests/unit/controlplane/cp_unit_tests --gtest_filter='ConfigReference.*'
// (from the source root), then review the diff.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "controlplane/config/options.h"
#include "tests/unit/controlplane/test_util.h"

namespace vipd::config {
namespace {

constexpr const char* kDoc = "docs/configuration.md";
constexpr const char* kBegin = "<!-- option table: generated from controlplane/config/option_table.cc";
constexpr const char* kEnd = "<!-- end of the option table -->";

// The option name of a table row ("| `--name` | ..."), "" for other lines.
std::string row_name(const std::string& line) {
  const std::string head = "| `--";
  if (line.compare(0, head.size(), head) != 0) return "";
  const auto end = line.find('`', head.size());
  return end == std::string::npos ? "" : line.substr(head.size(), end - head.size());
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

TEST(ConfigReference, DocsOptionTableIsTheCodes) {
  const std::string doc = testing::read_file(kDoc);
  ASSERT_FALSE(doc.empty()) << "run from the source root";
  const auto begin = doc.find(kBegin);
  ASSERT_NE(begin, std::string::npos) << kDoc << " has no line starting with '" << kBegin << "'";
  const auto body = doc.find('\n', begin) + 1;
  const auto end = doc.find(kEnd, body);
  ASSERT_NE(end, std::string::npos) << kDoc << " has no '" << kEnd << "' line";
  const std::string in_doc = doc.substr(body, end - body);
  const std::string expected = option_table_markdown();

  if (const char* u = std::getenv("VIPD_UPDATE_DOCS"); u && *u) {
    std::ofstream(kDoc, std::ios::trunc) << doc.substr(0, body) << expected << doc.substr(end);
    GTEST_SKIP() << "rewrote the option table in " << kDoc;
  }
  if (in_doc == expected) return;

  // Name what differs, option by option.
  std::map<std::string, std::string> doc_rows, code_rows;
  std::vector<std::string> doc_order, code_order;
  for (const auto& l : lines_of(in_doc))
    if (auto n = row_name(l); !n.empty()) doc_rows[n] = l, doc_order.push_back(n);
  for (const auto& l : lines_of(expected))
    if (auto n = row_name(l); !n.empty()) code_rows[n] = l, code_order.push_back(n);
  for (const auto& [name, line] : code_rows) {
    if (!doc_rows.count(name))
      ADD_FAILURE() << "--" << name << " is missing from " << kDoc << "; the code's row:\n" << line;
    else if (doc_rows[name] != line)
      ADD_FAILURE() << "--" << name << " differs:\n  " << kDoc << ": " << doc_rows[name] << "\n  code: " << line;
  }
  for (const auto& [name, line] : doc_rows)
    if (!code_rows.count(name)) ADD_FAILURE() << "--" << name << " is in " << kDoc << " but is not an option";
  if (doc_rows.size() == code_rows.size() && doc_order != code_order)
    ADD_FAILURE() << "the options are in another order than the code's (--help order)";
  FAIL() << kDoc << ": the option table differs from the code's; regenerate it with\n"
         << "  VIPD_UPDATE_DOCS=1 ./build/tests/unit/controlplane/cp_unit_tests --gtest_filter='ConfigReference.*'\n"
         << "The code's table:\n" << expected;
}

// Every row is complete, and names are unique.
TEST(ConfigReference, EveryRowIsDocumented) {
  std::set<std::string> names;
  for (const SettingDoc& s : setting_docs()) {
    EXPECT_TRUE(names.insert(s.name).second) << "--" << s.name << " twice";
    EXPECT_FALSE(s.help.empty()) << "--" << s.name << " has no --help line";
    EXPECT_FALSE(s.meaning.empty()) << "--" << s.name << " has no meaning for the docs";
    EXPECT_EQ(s.meaning.find('\n'), std::string::npos) << "--" << s.name;
    EXPECT_EQ(s.meaning.find('|'), std::string::npos) << "--" << s.name << ": '|' would split the table cell";
    if (s.kind == SettingDoc::Kind::kNumber) {
      EXPECT_LE(s.min, s.max) << "--" << s.name;
      EXPECT_LE(s.max, uint64_t{UINT32_MAX}) << "--" << s.name;
    }
    if (s.kind == SettingDoc::Kind::kChoice) {
      EXPECT_GE(s.choices.size(), 2u) << "--" << s.name;
      EXPECT_NE(std::find(s.choices.begin(), s.choices.end(), s.default_value), s.choices.end())
          << "--" << s.name << ": the default '" << s.default_value << "' is not one of the choices";
    }
  }
  EXPECT_GE(names.size(), 40u);
}

// config/vipd.conf.example shows each option's default (an example value
// where there is none): those defaults are the code's.
TEST(ConfigReference, ExampleFileShowsTheCodesDefaults) {
  const std::string example = testing::read_file("config/vipd.conf.example");
  ASSERT_FALSE(example.empty()) << "run from the source root";
  std::map<std::string, std::string> shown;
  for (const auto& line : lines_of(example)) {
    // "#name = value" (no space after '#') is an option line.
    if (line.size() < 2 || line[0] != '#' || !std::islower(static_cast<unsigned char>(line[1]))) continue;
    const auto eq = line.find(" = ");
    if (eq == std::string::npos) continue;
    shown.emplace(line.substr(1, eq - 1), line.substr(eq + 3));
  }
  int checked = 0;
  for (const SettingDoc& s : setting_docs()) {
    if (!s.in_file || s.default_value.empty() || !shown.count(s.name)) continue;
    EXPECT_EQ(shown[s.name], s.default_value) << "config/vipd.conf.example: " << s.name;
    ++checked;
  }
  EXPECT_GE(checked, 20);
}

}  // namespace
}  // namespace vipd::config
