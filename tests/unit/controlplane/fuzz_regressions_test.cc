// Thread: test main thread. Regression tests for bugs found by the fuzzers
// (tests/fuzz; the crashing inputs are in tests/fuzz/regressions/ and are
// replayed by scripts/fuzz.sh as well).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "model/service_table.h"
#include "controlplane/sources/manifest_source.h"

namespace vipd::cp {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Runs fn in a child process with a deadline: a regression of the endless
// loop must fail the test, not hang the suite (the loop grows by ~60 MB/s).
template <typename Fn>
void expect_returns_within(int seconds, Fn fn, const char* what) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(static_cast<unsigned>(seconds));
    _exit(fn() ? 0 : 1);
  }
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  EXPECT_TRUE(WIFEXITED(st)) << what << ": killed by signal " << (WIFSIGNALED(st) ? WTERMSIG(st) : 0)
                             << " (SIGALRM = " << SIGALRM << ": it did not return within " << seconds << " s)";
  if (WIFEXITED(st)) EXPECT_EQ(WEXITSTATUS(st), 0) << what;
}

bool throws_yaml_error(const std::string& text) {
  try {
    ManifestSource::load_documents(text);
  } catch (const YAML::Exception&) {
    return true;
  }
  return false;
}

// fuzz_manifest: yaml-cpp 0.7's LoadAll loops forever, allocating, on a stray
// ',' at block level; a manifest holding one made vipd's control thread eat
// all memory. load_documents reports a syntax error instead.
TEST(FuzzRegressions, StrayCommaIsASyntaxErrorNotAnEndlessLoop) {
  expect_returns_within(5, [] { return throws_yaml_error(","); }, "','");
  expect_returns_within(5, [] { return throws_yaml_error("a: b\n---\n,\n"); }, "a second document ','");
  expect_returns_within(5, [] { return throws_yaml_error("[a]\n,\n"); }, "after a flow sequence");
  expect_returns_within(5, [] {
    return throws_yaml_error(read_file("tests/fuzz/regressions/fuzz_manifest/stray-comma-loop.json"));
  }, "the fuzzer's input");
  // Well-formed multi-document files still load.
  const auto docs = ManifestSource::load_documents("a: 1\n---\nb: [1, 2]\n");
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[1]["b"][1].as<int>(), 2);
  EXPECT_TRUE(ManifestSource::load_documents("").empty());
}

// fuzz_manifest: a manifest name that is not UTF-8 made to_dry_run_json throw
// nlohmann type_error 316 (vipd --dry-run aborted; the admin dump got a 500).
TEST(FuzzRegressions, DryRunJsonReplacesInvalidUtf8) {
  ServiceTable t;
  VirtualService v;
  v.key = {0x0a600064u, 8080, Protocol::kTcp};
  v.name = std::string("default/\xe2") + "b:http";
  t.services[v.key] = v;
  std::string out;
  ASSERT_NO_THROW(out = to_dry_run_json(t));
  EXPECT_NE(out.find("default/\xef\xbf\xbd"), std::string::npos) << out;
  EXPECT_EQ(nlohmann::json::parse(out)["services"][0]["port"], 8080);
}

}  // namespace
}  // namespace vipd::cp
