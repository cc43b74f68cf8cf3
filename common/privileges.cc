#include "common/privileges.h"

#include <dirent.h>
#include <grp.h>
#include <pwd.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>

#include "common/file.h"

namespace vipd {
namespace {

std::string errno_text(int e) { return std::strerror(e); }

}  // namespace

bool ThreadCredentials::privileged() const {
  for (uid_t u : uid)
    if (u == 0) return true;
  for (gid_t g : gid)
    if (g == 0) return true;
  for (gid_t g : groups)
    if (g == 0) return true;
  return cap_prm != 0 || cap_eff != 0 || cap_amb != 0;
}

const std::vector<std::string>& privileged_group_names() {
  static const std::vector<std::string> k = {"disk", "kmem", "shadow", "sudo", "wheel", "docker", "lxd"};
  return k;
}

std::map<gid_t, std::string> privileged_gids() {
  std::map<gid_t, std::string> out{{0, "root"}};
  long sz = sysconf(_SC_GETGR_R_SIZE_MAX);
  std::vector<char> buf(sz > 0 ? static_cast<size_t>(sz) : 16384);
  for (const auto& name : privileged_group_names()) {
    group gr{};
    group* res = nullptr;
    int rc;
    while ((rc = getgrnam_r(name.c_str(), &gr, buf.data(), buf.size(), &res)) == ERANGE && buf.size() < (1u << 24))
      buf.resize(buf.size() * 2);
    if (rc == 0 && res) out.emplace(gr.gr_gid, name);
  }
  return out;
}

std::string privileged_group_in(gid_t primary, const std::vector<gid_t>& groups,
                                const std::map<gid_t, std::string>& privileged) {
  auto named = [&](gid_t g) { return std::to_string(g) + " (" + privileged.at(g) + ")"; };
  if (privileged.count(primary)) return "primary group " + named(primary);
  for (gid_t g : groups)
    if (privileged.count(g)) return "supplementary group " + named(g);
  return "";
}

std::optional<UserIdentity> lookup_user(const std::string& name, std::string* error) {
  if (name.empty()) {
    *error = "empty user name";
    return std::nullopt;
  }
  long sz = sysconf(_SC_GETPW_R_SIZE_MAX);
  std::vector<char> buf(sz > 0 ? static_cast<size_t>(sz) : 16384);
  passwd pw{};
  passwd* res = nullptr;
  int rc;
  while ((rc = getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &res)) == ERANGE && buf.size() < (1u << 20))
    buf.resize(buf.size() * 2);
  if (rc != 0) {
    *error = "cannot look up the user: " + errno_text(rc);
    return std::nullopt;
  }
  if (!res) {
    *error = "no such user";
    return std::nullopt;
  }
  if (pw.pw_uid == 0) {
    *error = "is uid 0 (root): name an unprivileged user, or leave --user unset to keep root";
    return std::nullopt;
  }
  UserIdentity id{name, pw.pw_uid, pw.pw_gid, {}};
  // The groups initgroups() will give it: /etc/group's, the primary one included.
  int n = 64;
  for (int tries = 0; tries < 8; ++tries) {
    id.groups.assign(static_cast<size_t>(n), 0);
    int want = n;
    if (getgrouplist(name.c_str(), pw.pw_gid, id.groups.data(), &want) >= 0) {
      id.groups.resize(static_cast<size_t>(want));
      break;
    }
    n = std::max(want, n * 2);
    id.groups.clear();
  }
  if (id.groups.empty()) {
    *error = "cannot list the user's groups (getgrouplist)";
    return std::nullopt;
  }
  if (const std::string bad = privileged_group_in(pw.pw_gid, id.groups, privileged_gids()); !bad.empty()) {
    std::string names = "root";
    for (const auto& g : privileged_group_names()) names += ", " + g;
    *error = "is in " + bad + ", a privileged group: name a user outside the groups " + names + " (docs/security.md)";
    return std::nullopt;
  }
  return id;
}

bool prepare_drop(std::string* error) {
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    *error = std::string("prctl(PR_SET_NO_NEW_PRIVS): ") + errno_text(errno);
    return false;
  }
  return true;
}

bool drop_to(const UserIdentity& id, std::string* error, size_t* threads_checked) {
  const std::string who = id.name + " (uid " + std::to_string(id.uid) + ", gid " + std::to_string(id.gid) + ")";
  // glibc applies setgroups, setresgid and setresuid to every thread.
  if (initgroups(id.name.c_str(), id.gid) != 0) {
    *error = "initgroups for " + who + ": " + errno_text(errno);
    return false;
  }
  if (setresgid(id.gid, id.gid, id.gid) != 0) {
    *error = "setresgid to " + who + ": " + errno_text(errno);
    return false;
  }
  if (setresuid(id.uid, id.uid, id.uid) != 0) {
    *error = "setresuid to " + who + ": " + errno_text(errno);
    return false;
  }
  uid_t r, e, s;
  gid_t gr, ge, gs;
  if (getresuid(&r, &e, &s) != 0 || r != id.uid || e != id.uid || s != id.uid ||
      getresgid(&gr, &ge, &gs) != 0 || gr != id.gid || ge != id.gid || gs != id.gid) {
    *error = "after the switch to " + who + " this thread still has other user or group ids";
    return false;
  }
  if (setuid(0) == 0) {
    *error = "after the switch to " + who + " setuid(0) still succeeds";
    return false;
  }
  // The groups actually held now (initgroups read /etc/group again).
  const int ng = getgroups(0, nullptr);
  std::vector<gid_t> held(ng > 0 ? static_cast<size_t>(ng) : 0);
  if (ng < 0 || (ng > 0 && getgroups(ng, held.data()) != ng)) {
    *error = "after the switch to " + who + ": getgroups: " + errno_text(errno);
    return false;
  }
  if (const std::string bad = privileged_group_in(getegid(), held, privileged_gids()); !bad.empty()) {
    *error = "after the switch to " + who + " the process is in " + bad + ", a privileged group";
    return false;
  }
  // Every thread, this one included: a thread the broadcast missed shows here.
  std::string why;
  const auto threads = thread_credentials(&why);
  if (threads.empty()) {
    *error = "after the switch to " + who + ": cannot check the threads: " + why;
    return false;
  }
  std::string kept;
  for (const auto& t : threads)
    if (t.privileged()) kept += (kept.empty() ? "" : ", ") + std::to_string(t.tid) + " (" + t.name + ")";
  if (!kept.empty()) {
    *error = "after the switch to " + who + " these threads kept root (user or group) or a capability: " + kept;
    return false;
  }
  if (threads_checked) *threads_checked = threads.size();
  return true;
}

bool parse_thread_status(const std::string& text, ThreadCredentials* out) {
  ThreadCredentials c;
  bool have_uid = false, have_gid = false, have_prm = false, have_eff = false;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, colon);
    std::istringstream v(line.substr(colon + 1));
    auto hex = [&](uint64_t* dst) {
      std::string h;
      if (!(v >> h)) return false;
      char* end = nullptr;
      errno = 0;
      *dst = std::strtoull(h.c_str(), &end, 16);
      return errno == 0 && end && *end == '\0' && !h.empty();
    };
    if (key == "Name") {
      std::getline(v >> std::ws, c.name);
    } else if (key == "Pid") {
      v >> c.tid;
    } else if (key == "Uid") {
      have_uid = static_cast<bool>(v >> c.uid[0] >> c.uid[1] >> c.uid[2] >> c.uid[3]);
    } else if (key == "Gid") {
      have_gid = static_cast<bool>(v >> c.gid[0] >> c.gid[1] >> c.gid[2] >> c.gid[3]);
    } else if (key == "Groups") {
      gid_t g;
      while (v >> g) c.groups.push_back(g);
    } else if (key == "CapPrm") {
      have_prm = hex(&c.cap_prm);
    } else if (key == "CapEff") {
      have_eff = hex(&c.cap_eff);
    } else if (key == "CapAmb") {
      hex(&c.cap_amb);
    } else if (key == "NoNewPrivs") {
      v >> c.no_new_privs;
    }
  }
  if (!have_uid || !have_gid || !have_prm || !have_eff) return false;
  *out = std::move(c);
  return true;
}

std::vector<ThreadCredentials> thread_credentials(std::string* error) {
  std::vector<ThreadCredentials> out;
  DIR* d = opendir("/proc/self/task");
  if (!d) {
    *error = "/proc/self/task: " + errno_text(errno);
    return out;
  }
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::string text;
    ThreadCredentials c;
    // A thread may end between readdir and the read: skip it.
    if (!read_file(std::string("/proc/self/task/") + e->d_name + "/status", &text)) continue;
    if (!parse_thread_status(text, &c)) continue;
    out.push_back(std::move(c));
  }
  closedir(d);
  if (out.empty()) *error = "/proc/self/task: no thread could be read";
  return out;
}

}  // namespace vipd
