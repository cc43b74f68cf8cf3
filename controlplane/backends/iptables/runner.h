// Thread: control (blocks until the child exits or the timeout passes).
// Runs one external command (iptables-restore, iptables, iptables-save) without
// a shell: posix_spawnp, stdin from an in-memory file holding `input`, stdout and
// stderr captured the same way (no pipes, so no SIGPIPE and no deadlock however
// large the payload or the output).
#pragma once

#include <string>
#include <vector>

namespace vipd::cp::ipt {

struct RunResult {
  bool started = false;     // false: spawn failed (see error)
  bool timed_out = false;   // killed with SIGKILL after the timeout
  int exit_code = -1;       // exit status, or 128 + signal
  std::string out;          // stdout
  std::string err;          // stderr
  std::string error;        // spawn/wait failure, one line
  bool ok() const { return started && !timed_out && exit_code == 0; }
};

RunResult run_command(const std::vector<std::string>& argv, const std::string& input, int timeout_ms);

// One line describing a failed run: "iptables-restore: exit status 1: line 7 failed"
// (stderr lines joined with "; ", at most ~600 characters).
std::string describe_failure(const std::string& program, const RunResult& r);

}  // namespace vipd::cp::ipt
