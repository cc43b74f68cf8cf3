// dp_unit_tests entry point: initialises DPDK's EAL once (no hugepages, no
// PCI, four net_ring vdevs), then runs every test. When EAL cannot start, the
// pure tests (checksums, parsing, schedulers, neighbour cache) still run and
// the DPDK-dependent ones skip with the reason.
#include <gtest/gtest.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/unit/dataplane/test_util.h"

namespace vipd::dp::test {
bool g_eal_ok = false;
std::string g_eal_error = "not attempted";
}  // namespace vipd::dp::test

namespace {

// EAL pins the main lcore to its CPU: use CPU 0 when this process may run
// there (the usual case), else map lcore 0 onto the first allowed CPU.
std::vector<std::string> lcore_args() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0 || CPU_ISSET(0, &set)) return {"-l", "0"};
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) return {"--lcores", "0@" + std::to_string(c)};
  return {"-l", "0"};
}

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  using vipd::dp::test::g_eal_error;
  using vipd::dp::test::g_eal_ok;

  std::vector<std::string> args{"dp_unit_tests", "--no-huge", "-m", "256", "--no-shconf", "--no-pci",
                                "--no-telemetry", "--log-level=*:error"};
  for (auto& a : lcore_args()) args.push_back(a);
  // net_ring0/1: the worker_*_test.cc suites; net_ring2/3: icmp_error_test.cc
  // (worker_fixture.h: each suite configures its pair once per process).
  for (const char* v : {"net_ring0", "net_ring1", "net_ring2", "net_ring3"}) {
    args.push_back("--vdev");
    args.push_back(v);
  }
  std::string line;
  for (const auto& a : args) line += " " + a;
  std::vector<char*> av;
  for (auto& a : args) av.push_back(a.data());
  av.push_back(nullptr);

  // Unprivileged EAL keeps its runtime directory under $XDG_RUNTIME_DIR, or
  // /tmp/dpdk/<prefix> without it, which breaks once another user created
  // /tmp/dpdk (mode 0700). Use a private temporary directory instead.
  std::string tmp_runtime;
  if (getuid() != 0 && getenv("XDG_RUNTIME_DIR") == nullptr) {
    char tmpl[] = "/tmp/dp_unit_tests.XXXXXX";
    if (mkdtemp(tmpl) != nullptr) {
      tmp_runtime = tmpl;
      setenv("XDG_RUNTIME_DIR", tmpl, 1);
    }
  }

  if (getenv("VIPD_TEST_NO_EAL") != nullptr) {
    g_eal_error = "VIPD_TEST_NO_EAL is set";
  } else if (rte_eal_init(static_cast<int>(args.size()), av.data()) < 0) {
    g_eal_error = std::string("rte_eal_init failed: ") + rte_strerror(rte_errno) + " (uid " +
                  std::to_string(getuid()) + ", args:" + line + ")";
  } else {
    g_eal_ok = true;
  }
  if (!g_eal_ok) {
    fprintf(stderr,
            "\n"
            "**********************************************************************\n"
            "*** dp_unit_tests: DPDK EAL IS NOT AVAILABLE                       ***\n"
            "*** %s\n"
            "*** Tests that need DPDK (conn table, publisher, worker) are SKIPPED ***\n"
            "**********************************************************************\n\n",
            g_eal_error.c_str());
  }
  const int rc = RUN_ALL_TESTS();
  if (g_eal_ok) rte_eal_cleanup();
  if (!tmp_runtime.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(tmp_runtime, ec);
  }
  return rc;
}
