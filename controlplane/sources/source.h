// Thread: control (wait()/load() are called by the SyncLoop's thread only).
// Source: where the desired state comes from. The SyncLoop is fed by exactly one
// Source: ManifestSource (a directory of manifests, inotify) or KubeSource
// (list+watch of the Kubernetes API server, see controlplane/kube/). A Source
// may run its own threads (KubeSource does: one per watch), but load() and
// wait() are only called from the SyncLoop's thread, which alone builds and
// applies tables.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/service_table.h"

namespace vipd::cp {

struct SourceError {
  std::string file;    // where the problem is: a file name inside the manifests
                       // directory, or the API resource ("services", "endpointslices")
  std::string object;  // "Service ns/name", "document 2", ... ; empty for the whole file
  std::string reason;
  // For a lost key conflict only: how it was settled, "precedence" (a
  // ClusterIP or NodePort outranks the loser) or "order" (namespace/name); ""
  // for every other error. Counted by vipd_service_conflicts.
  std::string conflict;
  std::string to_string() const;  // "FILE: OBJECT: REASON"
  bool operator==(const SourceError&) const = default;
};

struct LoadResult {
  ServiceTable table;               // generation 0; the caller numbers it
  std::vector<SourceError> errors;  // broken files/objects and conflicts
  std::vector<SourceError> notes;   // ignored objects/ports, stale files kept
  // Realtime (CLOCK_REALTIME, ns) of the newest change seen by wait() since the
  // previous load(); 0 when none (e.g. the first load).
  int64_t newest_change_unix_ns = 0;

  // Incremental sources (KubeSource) answer in delta form: `table` stays empty,
  // `current` points to the source's whole desired table (valid until the next
  // load(); the caller may number its generation), and `touched` lists every key whose entry was added, changed or
  // removed since the previous load(). The SyncLoop then diffs only those keys.
  bool delta = false;
  ServiceTable* current = nullptr;
  std::vector<ServiceKey> touched;
  // True when errors/notes are the same as in the previous load() (they are then
  // left empty and the caller keeps what it has).
  bool issues_unchanged = false;
  // load_full() of an incremental source: how many keys of its incremental
  // view differed from the table rebuilt from scratch (a divergence the full
  // sync repairs; 0 when the incremental path was right).
  size_t diverged = 0;
};

class Source {
 public:
  virtual ~Source() = default;

  // The current desired state. Cheap enough to call after every burst of changes.
  virtual LoadResult load() = 0;
  // The same for a full sync (the periodic resync, a retry after a failed
  // apply): an incremental source rebuilds its whole table from scratch from
  // what it holds, instead of its incrementally maintained view, so that a
  // divergence between the two is repaired. The default is load().
  virtual LoadResult load_full() { return load(); }
  // Waits up to timeout_ms; true when something changed since the last call
  // (the caller then coalesces and load()s).
  virtual bool wait(int timeout_ms) = 0;
  // False while the source has no complete view yet (KubeSource before both
  // initial lists completed): the SyncLoop then programs nothing.
  virtual bool ready() const { return true; }
  // For log lines: "manifests in DIR", "kubernetes API https://...".
  virtual std::string describe() const = 0;

  // What the source opens again while it runs (so a user vipd drops to must
  // be able to read it).
  struct RuntimeFile {
    std::string what;        // what it is, for messages
    std::string path;
    bool directory = false;  // it must be listable too
  };
  virtual std::vector<RuntimeFile> runtime_files() const { return {}; }
};

}  // namespace vipd::cp
