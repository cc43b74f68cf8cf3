// Thread: main (lookup, prepare, drop); any (thread_credentials, read-only).
// Dropping root after start (docs/security.md "Privileges").
//
// Linux credentials and capabilities belong to each thread. By the time vipd
// can drop anything, DPDK's worker lcores, its interrupt and telemetry threads
// and the control-plane threads already exist, so the drop must reach every
// one of them:
//   - prepare_drop() runs in the main thread before any other thread exists
//     and sets PR_SET_NO_NEW_PRIVS, which every thread created later inherits
//     (no execve can gain privileges again: setuid binaries, file capabilities);
//   - drop_to() calls initgroups/setresgid/setresuid through glibc, which
//     applies each of them to every thread of the process (the "setxid"
//     broadcast). Leaving uid 0 without PR_SET_KEEPCAPS clears the permitted,
//     effective and ambient capability sets of each thread.
// thread_credentials() reads /proc/self/task/*/status, so a caller (vipctl
// status, the tests) can check every thread, not only the main one.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace vipd {

struct UserIdentity {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // every group of the user (getgrouplist), the primary one included
};

// Groups that give root's power, or root's data, to their members: a user in
// one of them is no unprivileged target of the drop. Group 0 (root: write
// access to root-group files) always, and these by name where they exist:
// disk (raw block devices), kmem (kernel memory), shadow (password hashes),
// sudo and wheel (become root), docker and lxd (a root container at will).
const std::vector<std::string>& privileged_group_names();

// The privileged groups of this system, gid -> name: 0 and the gids of
// privileged_group_names() present in the group database.
std::map<gid_t, std::string> privileged_gids();

// "" when neither `primary` nor any of `groups` is in `privileged`; else what
// is: "primary group 0 (root)", "supplementary group 6 (disk)".
std::string privileged_group_in(gid_t primary, const std::vector<gid_t>& groups,
                                const std::map<gid_t, std::string>& privileged);

// getpwnam_r + getgrouplist. nullopt and `error` ("no such user", "is uid 0",
// "is in primary group 0 (root)", "is in supplementary group 6 (disk)") when
// NAME cannot be a target of the drop.
std::optional<UserIdentity> lookup_user(const std::string& name, std::string* error);

// PR_SET_NO_NEW_PRIVS for this thread and every thread it creates afterwards.
bool prepare_drop(std::string* error);

// Switches every thread to `id` (supplementary groups from /etc/group, the
// primary group, the uid) and then checks the result: in this thread, all
// three uids and gids are the target's, no supplementary group is privileged
// (privileged_gids: /etc/group may have changed since lookup_user) and
// setuid(0) fails; in every thread (thread_credentials), no uid 0, no gid 0
// or group 0 and no capability is left. true and the
// number of threads checked in `threads_checked` (if given); false and
// `error` otherwise: a failure after setresgid leaves the process
// half-dropped, so the caller must exit.
bool drop_to(const UserIdentity& id, std::string* error, size_t* threads_checked = nullptr);

// One thread's credentials, from /proc/self/task/TID/status.
struct ThreadCredentials {
  int tid = 0;
  std::string name;             // Name:
  uid_t uid[4] = {0, 0, 0, 0};  // Uid: real, effective, saved, filesystem
  gid_t gid[4] = {0, 0, 0, 0};  // Gid: the same four
  std::vector<gid_t> groups;    // Groups: (supplementary)
  uint64_t cap_prm = 0, cap_eff = 0, cap_amb = 0;
  int no_new_privs = -1;        // NoNewPrivs: (-1 when the kernel does not say)
  bool privileged() const;      // any uid 0, gid 0, group 0 or any capability left
};

// Parses the text of one status file. false when a field is missing.
bool parse_thread_status(const std::string& text, ThreadCredentials* out);

// Every thread of this process; an empty vector and `error` when /proc
// cannot be read.
std::vector<ThreadCredentials> thread_credentials(std::string* error);

}  // namespace vipd
