// Thread: test main thread. The fixture of the options tests (config_test.cc,
// config_table_test.cc): parses a command line, with or without a valid
// manifests dir and --dry-run.
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "controlplane/config/options.h"
#include "tests/unit/controlplane/test_util.h"

namespace vipd::config {

class ConfigTest : public ::testing::Test {
 protected:
  // Parses "vipd ARGS..."; throws what parse() throws.
  std::optional<Options> run(std::vector<std::string> args) {
    args.insert(args.begin(), "vipd");
    std::vector<const char*> argv;
    for (const auto& a : args) argv.push_back(a.c_str());
    out_.str("");
    return parse(static_cast<int>(argv.size()), argv.data(), out_);
  }
  // Parses with a valid manifests dir and --dry-run (so no port is needed).
  Options ok(std::vector<std::string> args) {
    args.insert(args.begin(), {"--manifests-dir", dir_.path(), "--dry-run"});
    auto o = run(args);
    EXPECT_TRUE(o.has_value());
    return o.value_or(Options{});
  }
  // The error message for ARGS (with the manifests dir and --dry-run added).
  std::string error(std::vector<std::string> args, bool add_base = true) {
    if (add_base) args.insert(args.begin(), {"--manifests-dir", dir_.path(), "--dry-run"});
    try {
      run(args);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "no error";
  }

  testing::TempDir dir_;
  std::ostringstream out_;
};

}  // namespace vipd::config
