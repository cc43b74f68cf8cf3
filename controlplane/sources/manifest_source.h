// Thread: control. A directory of Kubernetes manifests (Service, EndpointSlice,
// List) as a source of desired state, watched with inotify.
//
// load() reads every *.yaml / *.yml / *.json file in the directory (not
// recursive, sorted by name; hidden files and editor leftovers skipped), each
// possibly holding several `---` documents. A file is all or nothing: when it has
// a syntax error or an invalid object, its errors are reported and its last good
// version (if any) stays in force, so a bad edit never loses good state.
// YAML aliases are refused (the whole file, with its line and column).
//
// A read failure (the directory cannot be listed or a file cannot be read, e.g.
// "Too many open files" while descriptors run out) keeps the last good state
// and is retried without waiting for another file event: wait() returns true
// after 100 ms, then 200 ms, ... up to 5 s between attempts, until a load()
// reads everything again ("manifests: reading DIR works again" is logged).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/service_table.h"
#include "controlplane/sources/k8s_objects.h"
#include "controlplane/sources/source.h"

namespace vipd::cp {

class ManifestSource : public Source {
 public:
  // Starts watching `dir` at once so no change between construction and the
  // first load() is missed. Never throws; watch problems are logged and retried.
  ManifestSource(std::string dir, Scheduler default_scheduler);
  // With node identity, proxy name etc. (build.default_scheduler is replaced by
  // `default_scheduler`).
  ManifestSource(std::string dir, Scheduler default_scheduler, k8s::BuildOptions build);
  ~ManifestSource() override;
  ManifestSource(const ManifestSource&) = delete;
  ManifestSource& operator=(const ManifestSource&) = delete;

  LoadResult load() override;

  // The inotify descriptor (for an external poll loop), -1 if unavailable.
  int fd() const { return fd_; }
  // Waits up to timeout_ms for changes, drains all pending events and returns
  // true if something relevant changed (a manifest written, moved, deleted,
  // the directory replaced). Without inotify it sleeps and returns true.
  bool wait(int timeout_ms) override;
  // Newest change timestamp (realtime ns) of the events drained since the last load().
  int64_t newest_change_unix_ns() const { return pending_change_ns_; }
  // Consecutive load()s that failed to read the directory or a file (0: the
  // last one read everything), and the delay before the next retry.
  int read_failures() const { return read_failures_; }
  int retry_delay_ms() const { return retry_delay_ms_; }

  static constexpr int kRetryFirstMs = 100;
  static constexpr int kRetryMaxMs = 5000;

  const std::string& dir() const { return dir_; }
  std::string describe() const override { return dir_; }
  // The directory, listed and read on every change.
  std::vector<RuntimeFile> runtime_files() const override { return {{"--manifests-dir", dir_, true}}; }

  // True for names load() reads: *.yaml, *.yml, *.json, not hidden, not editor temp.
  static bool is_manifest_name(const std::string& name);

  // Thrown by load_documents for the first YAML alias (*name) in a text.
  struct AliasRefused : YAML::ParserException {
    explicit AliasRefused(const YAML::Mark& mark);
  };

  // YAML::LoadAll(text), except that it throws YAML::ParserException where
  // yaml-cpp 0.7 would loop forever (a stray ',' at block level makes it
  // return empty documents without consuming input until memory runs out;
  // found by tests/fuzz/fuzz_manifest), and AliasRefused (a ParserException)
  // for an alias: an alias stands for its whole anchored node, and the object
  // rules read it once per alias, so a 400 KB file of aliases to a large
  // anchored list expands to gigabytes of objects. The check is an event-only
  // pass over the text that stops at the first alias, before any node is built.
  static std::vector<YAML::Node> load_documents(const std::string& text);

 private:
  struct FileState {
    std::string content;  // last content read
    bool parsed = false;  // `content` was read and parsed
    bool good = false;    // content parsed without errors
    std::vector<k8s::Service> services;     // last good objects
    std::vector<k8s::EndpointSlice> slices;
    std::vector<SourceError> errors;        // errors of `content` (when !good)
    std::vector<SourceError> notes;
    bool has_good = false;                  // services/slices hold a good version
  };

  void parse_file(const std::string& name, const std::string& content, FileState* st);
  void add_watches();
  void drop_dir_watch();
  bool handle_events();
  // After a load(): arms the read-failure retry (`problem` says what failed)
  // or, with an empty `problem`, clears it.
  void note_read_result(const std::string& problem, int64_t change_ns);

  std::string dir_;
  std::string watch_path_;  // absolute, normalized dir_ (for the parent watch)
  Scheduler default_scheduler_;
  k8s::BuildOptions build_;
  std::map<std::string, FileState> files_;
  int fd_ = -1;
  int dir_wd_ = -1;
  int parent_wd_ = -1;
  int64_t pending_change_ns_ = 0;
  // Read-failure retry: pending while retry_armed_; due at retry_at_ms_ (steady).
  int read_failures_ = 0;
  int retry_delay_ms_ = 0;
  bool retry_armed_ = false;
  int64_t retry_at_ms_ = 0;
  int64_t failed_change_ns_ = 0;  // the change the failed load() was for
};

}  // namespace vipd::cp
