// Thread: control.
#include "controlplane/backends/iptables/runner.h"

#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

extern char** environ;

namespace vipd::cp::ipt {
namespace {

// An anonymous in-memory file; -1 on failure.
int mem_file(const char* name) { return memfd_create(name, MFD_CLOEXEC); }

bool write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return ::lseek(fd, 0, SEEK_SET) == 0;
}

std::string read_all(int fd) {
  std::string s;
  if (::lseek(fd, 0, SEEK_SET) != 0) return s;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    s.append(buf, static_cast<size_t>(n));
  }
  return s;
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

RunResult run_command(const std::vector<std::string>& argv, const std::string& input, int timeout_ms) {
  RunResult r;
  if (argv.empty() || argv[0].empty()) {
    r.error = "no command given";
    return r;
  }
  Fd in{mem_file("vipd-stdin")}, out{mem_file("vipd-stdout")}, err{mem_file("vipd-stderr")};
  // The child's fds 0..2 must not be one of ours (dup2 onto itself keeps CLOEXEC).
  if (in.fd <= 2 || out.fd <= 2 || err.fd <= 2) {
    r.error = std::string("memfd_create: ") + (in.fd < 0 || out.fd < 0 || err.fd < 0 ? std::strerror(errno)
                                                                                        : "standard streams closed");
    return r;
  }
  if (!write_all(in.fd, input)) {
    r.error = std::string("writing the input: ") + std::strerror(errno);
    return r;
  }
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_adddup2(&fa, in.fd, 0);
  posix_spawn_file_actions_adddup2(&fa, out.fd, 1);
  posix_spawn_file_actions_adddup2(&fa, err.fd, 2);
  // The child starts with default signal handling and an empty signal mask.
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int s : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&defaults, s);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, args[0], &fa, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    r.error = "cannot run " + argv[0] + ": " + std::strerror(rc);
    return r;
  }
  r.started = true;

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  int status = 0;
  auto pause = std::chrono::microseconds(200);
  for (;;) {
    const pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) {
      r.error = std::string("waitpid: ") + std::strerror(errno);
      r.exit_code = -1;
      return r;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      r.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(pause);
    if (pause < std::chrono::milliseconds(10)) pause *= 2;
  }
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status)) r.exit_code = 128 + WTERMSIG(status);
  r.out = read_all(out.fd);
  r.err = read_all(err.fd);
  return r;
}

std::string describe_failure(const std::string& program, const RunResult& r) {
  std::string s = program + ": ";
  if (!r.started) return s + r.error;
  if (r.timed_out) s += "killed after the timeout";
  else if (r.exit_code >= 128) s += "killed by signal " + std::to_string(r.exit_code - 128);
  else s += "exit status " + std::to_string(r.exit_code);
  std::string text;
  for (char c : r.err.empty() ? r.out : r.err) {
    if (c == '\n') {
      if (!text.empty() && text.back() != ' ') text += "; ";
    } else if (c != '\r') {
      text.push_back(c);
    }
  }
  while (!text.empty() && (text.back() == ' ' || text.back() == ';')) text.pop_back();
  if (text.size() > 600) text = text.substr(0, 600) + "...";
  if (!text.empty()) s += ": " + text;
  return s;
}

}  // namespace vipd::cp::ipt
