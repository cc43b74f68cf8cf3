// libFuzzer target: vipd's configuration parser (controlplane/config/options.h)
// on a fuzzed config file plus fuzzed command-line arguments.
//
// Input: "ARGS\n%%\nFILE" (without the "%%" line: all of it is the file).
// ARGS: one argument per line. The harness always passes
// `--config <temporary file holding FILE>`; arguments that name a path (a
// '/') or another --config are dropped, so the parser never reads anything
// but that file.
// Invariants: no crash; parse() either returns options or throws ConfigError
// (anything else escaping is a bug: vipd must print one line and exit 2);
// returned options are within their documented ranges.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "controlplane/config/options.h"

namespace {

std::string g_path;

[[noreturn]] void fail(const std::string& what) {
  fprintf(stderr, "fuzz_config: %s\n", what.c_str());
  abort();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  char tmpl[] = "/tmp/fuzz_config.XXXXXX";
  const int fd = mkstemp(tmpl);
  if (fd < 0) fail("mkstemp");
  close(fd);
  g_path = tmpl;
  atexit([] { unlink(g_path.c_str()); });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string in(reinterpret_cast<const char*>(data), size);
  std::string file = in;
  std::vector<std::string> args{"vipd"};
  const size_t sep = in.find("\n%%\n");
  if (sep != std::string::npos) {
    file = in.substr(sep + 4);
    std::istringstream a(in.substr(0, sep));
    for (std::string line; std::getline(a, line);) {
      if (line.find('/') != std::string::npos || line.find('\0') != std::string::npos) continue;
      if (line.rfind("--config", 0) == 0 || line.rfind("-c", 0) == 0) continue;
      if (args.size() < 32) args.push_back(line);
    }
  }
  {
    std::ofstream f(g_path, std::ios::trunc | std::ios::binary);
    f << file;
  }
  args.push_back("--config");
  args.push_back(g_path);
  std::vector<const char*> argv;
  for (const auto& s : args) argv.push_back(s.c_str());
  argv.push_back(nullptr);
  std::ostringstream out;
  try {
    const auto o = vipd::config::parse(static_cast<int>(args.size()), argv.data(), out);
    if (!o) return 0;  // --help / --version
    if (o->dataplane.worker_lcores.empty()) fail("no worker lcores");
    for (const auto& p : o->ports)
      if (p.prefix_len < 1 || p.prefix_len > 32 || p.device.empty()) fail("port out of range: " + p.device);
    // Every whole number within its row's range (controlplane/config/option_table.cc).
    static const auto rows = vipd::config::setting_docs();
    for (const auto& s : rows) {
      if (s.kind != vipd::config::SettingDoc::Kind::kNumber) continue;
      const uint64_t v = std::stoull(vipd::config::setting_value(*o, s.name));
      if (v < s.min || v > s.max) fail("--" + s.name + " " + std::to_string(v) + " outside its range");
    }
  } catch (const vipd::config::ConfigError& e) {
    if (std::string(e.what()).find('\n') != std::string::npos) fail(std::string("multi-line error: ") + e.what());
  }
  return 0;
}
