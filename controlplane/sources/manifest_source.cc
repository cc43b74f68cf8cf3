// Thread: control.
#include "controlplane/sources/manifest_source.h"

#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <yaml-cpp/eventhandler.h>

#include "common/clock.h"
#include "common/log.h"

namespace vipd::cp {
namespace {

constexpr uint32_t kDirMask = IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE |
                              IN_CREATE | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR;
constexpr uint32_t kParentMask = IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_ONLYDIR;
constexpr off_t kMaxFileBytes = 16 << 20;
constexpr int64_t kMaxMtimeAgeNs = 10'000'000'000;  // older mtimes are not "the change"
constexpr int kRewatchPollMs = 100;

// Remembers where the last document started (ManifestSource::load_documents)
// and refuses the first alias.
struct DocStarts : YAML::EventHandler {
  YAML::Mark start = YAML::Mark::null_mark();
  void OnDocumentStart(const YAML::Mark& m) override { start = m; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark& m, YAML::anchor_t) override {
    throw ManifestSource::AliasRefused(m);
  }
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string strip_slashes(std::string d) {
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  return d;
}

std::string parent_of(const std::string& d) {
  const auto slash = d.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : d.substr(0, slash);
}

std::string base_of(const std::string& d) {
  const auto slash = d.rfind('/');
  return slash == std::string::npos ? d : d.substr(slash + 1);
}

}  // namespace

std::string SourceError::to_string() const {
  std::string s = file;
  if (!object.empty()) s += ": " + object;
  return s + ": " + reason;
}

bool ManifestSource::is_manifest_name(const std::string& name) {
  if (name.empty() || name[0] == '.' || name[0] == '#' || ends_with(name, "~")) return false;
  const std::string l = lower(name);
  return ends_with(l, ".yaml") || ends_with(l, ".yml") || ends_with(l, ".json");
}

ManifestSource::ManifestSource(std::string dir, Scheduler default_scheduler)
    : ManifestSource(std::move(dir), default_scheduler, k8s::BuildOptions{}) {}

ManifestSource::ManifestSource(std::string dir, Scheduler default_scheduler, k8s::BuildOptions build)
    : dir_(strip_slashes(std::move(dir))), default_scheduler_(default_scheduler),
      build_(std::move(build)) {
  build_.default_scheduler = default_scheduler_;
  // The parent and base name come from the absolute path ("." has no parent
  // otherwise); symbolic links are kept, so swapping one is seen.
  std::error_code ec;
  watch_path_ = strip_slashes(std::filesystem::absolute(dir_, ec).lexically_normal().string());
  if (ec || watch_path_.empty()) watch_path_ = dir_;
  fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd_ < 0)
    log_error("manifests: inotify_init1: " + std::string(std::strerror(errno)) +
              "; falling back to rescanning " + dir_);
  add_watches();
}

ManifestSource::~ManifestSource() {
  if (fd_ >= 0) close(fd_);
}

void ManifestSource::add_watches() {
  if (fd_ < 0) return;
  if (parent_wd_ < 0) parent_wd_ = inotify_add_watch(fd_, parent_of(watch_path_).c_str(), kParentMask);
  if (dir_wd_ < 0) {
    dir_wd_ = inotify_add_watch(fd_, dir_.c_str(), kDirMask);
    if (dir_wd_ < 0) log_debug("manifests: cannot watch " + dir_ + ": " + std::strerror(errno));
  }
}

void ManifestSource::drop_dir_watch() {
  if (dir_wd_ >= 0) inotify_rm_watch(fd_, dir_wd_);
  dir_wd_ = -1;
}

bool ManifestSource::handle_events() {
  alignas(inotify_event) char buf[16384];
  bool relevant = false;
  int64_t newest = 0;
  const std::string base = base_of(watch_path_);
  for (;;) {
    const ssize_t n = read(fd_, buf, sizeof buf);
    if (n <= 0) break;
    for (ssize_t off = 0; off < n;) {
      const auto* ev = reinterpret_cast<const inotify_event*>(buf + off);
      off += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
      const std::string name = ev->len ? std::string(ev->name) : std::string();
      const int64_t now = now_unix_ns();
      if (ev->mask & IN_Q_OVERFLOW) {
        relevant = true;
        newest = std::max(newest, now);
        continue;
      }
      if (ev->wd == parent_wd_) {
        if (ev->mask & IN_IGNORED) parent_wd_ = -1;
        if (name == base) {  // the directory (or the symlink to it) was replaced
          drop_dir_watch();
          relevant = true;
          newest = std::max(newest, now);
        }
        continue;
      }
      if (ev->wd != dir_wd_) continue;  // stale events of a removed watch
      if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED | IN_UNMOUNT)) {
        if (ev->mask & IN_IGNORED) dir_wd_ = -1;
        else drop_dir_watch();
        relevant = true;
        newest = std::max(newest, now);
        continue;
      }
      const bool interesting = is_manifest_name(name) || name.rfind("..", 0) == 0 ||
                               (ev->mask & IN_ISDIR);
      if (!interesting) continue;
      const std::string path = dir_ + "/" + name;
      struct stat st {};
      const bool exists = !(ev->mask & (IN_DELETE | IN_MOVED_FROM)) && stat(path.c_str(), &st) == 0;
      // A new regular file is still being written: IN_CLOSE_WRITE follows.
      if ((ev->mask & IN_CREATE) && !(ev->mask & IN_ISDIR)) {
        struct stat lst {};
        if (lstat(path.c_str(), &lst) == 0 && S_ISREG(lst.st_mode)) continue;
      }
      int64_t t = now;
      if (exists) {
        // The inode change time moves on every write and also on the rename
        // that publishes a file atomically, so it dates the change as the
        // directory's readers saw it (the mtime would date the earlier write).
        const int64_t ctime = static_cast<int64_t>(st.st_ctim.tv_sec) * 1'000'000'000 + st.st_ctim.tv_nsec;
        if (ctime <= now && ctime >= now - kMaxMtimeAgeNs) t = ctime;
      }
      relevant = true;
      newest = std::max(newest, t);
    }
  }
  if (dir_wd_ < 0 || parent_wd_ < 0) add_watches();
  if (relevant) pending_change_ns_ = std::max(pending_change_ns_, newest);
  return relevant;
}

bool ManifestSource::wait(int timeout_ms) {
  if (timeout_ms < 0) timeout_ms = 0;
  if (fd_ < 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(timeout_ms));
    pending_change_ns_ = std::max(pending_change_ns_, now_unix_ns());
    return true;
  }
  const bool rewatch = dir_wd_ < 0;
  if (rewatch) timeout_ms = std::min(timeout_ms, kRewatchPollMs);
  if (retry_armed_)
    timeout_ms = static_cast<int>(std::clamp<int64_t>(retry_at_ms_ - steady_now_ms(), 0, timeout_ms));
  // Irrelevant events (editor temp files, ...) do not end the wait early.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  bool changed = false;
  for (int left = timeout_ms; !changed;) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, left) <= 0) break;
    changed = handle_events();
    left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                deadline - std::chrono::steady_clock::now())
                                .count());
    if (left <= 0) break;
  }
  if (rewatch && dir_wd_ < 0) {
    add_watches();
    if (dir_wd_ >= 0) {  // the directory is back
      changed = true;
      pending_change_ns_ = std::max(pending_change_ns_, now_unix_ns());
    }
  }
  if (retry_armed_ && steady_now_ms() >= retry_at_ms_) {
    // Retry the failed read; its change is still the one to date.
    retry_armed_ = false;
    changed = true;
    pending_change_ns_ = std::max(pending_change_ns_, failed_change_ns_);
  }
  return changed;
}

ManifestSource::AliasRefused::AliasRefused(const YAML::Mark& mark)
    : YAML::ParserException(mark, "YAML aliases (*name) are not allowed in manifests: each alias "
                                  "repeats its anchored node, so a small file can expand without "
                                  "bound") {}

std::vector<YAML::Node> ManifestSource::load_documents(const std::string& text) {
  {
    // Event-only pass first: every document must start after the previous
    // one, else the parser is stuck and LoadAll would never return.
    std::istringstream in(text);
    YAML::Parser parser(in);
    DocStarts h;
    int last = -1;
    while (parser.HandleNextDocument(h)) {
      if (h.start.pos == last)
        throw YAML::ParserException(h.start, "the YAML parser makes no progress here (a stray ','?)");
      last = h.start.pos;
    }
  }
  return YAML::LoadAll(text);
}

void ManifestSource::parse_file(const std::string& name, const std::string& content,
                                FileState* st) {
  st->content = content;
  st->parsed = true;
  st->errors.clear();
  st->notes.clear();
  k8s::ParsedObjects objs;
  try {
    std::string text = content;
    // JSON allows tabs as whitespace, YAML indentation does not; inside JSON
    // strings a tab must be escaped, so every raw tab here is whitespace.
    if (ends_with(lower(name), ".json")) std::replace(text.begin(), text.end(), '\t', ' ');
    const std::vector<YAML::Node> docs = load_documents(text);
    for (size_t i = 0; i < docs.size(); ++i)
      k8s::parse_document(docs[i], static_cast<int>(i + 1), &objs);
  } catch (const AliasRefused& e) {
    st->errors.push_back({name, "", "YAML alias at line " + std::to_string(e.mark.line + 1) +
                                        ", column " + std::to_string(e.mark.column + 1) + ": " + e.msg +
                                        "; file refused"});
  } catch (const YAML::Exception& e) {
    st->errors.push_back({name, "", e.mark.is_null()
                                        ? "YAML error: " + e.msg
                                        : "YAML syntax error at line " + std::to_string(e.mark.line + 1) +
                                              ", column " + std::to_string(e.mark.column + 1) + ": " + e.msg});
  } catch (const std::exception& e) {
    st->errors.push_back({name, "", std::string("cannot parse: ") + e.what()});
  }
  for (const auto& e : objs.errors) st->errors.push_back({name, e.object, e.reason});
  for (const auto& e : objs.notes) st->notes.push_back({name, e.object, e.reason});
  st->good = st->errors.empty();
  if (!st->good) return;
  for (auto& s : objs.services) s.origin = name;
  for (auto& s : objs.slices) s.origin = name;
  st->services = std::move(objs.services);
  st->slices = std::move(objs.slices);
  st->has_good = true;
}

void ManifestSource::note_read_result(const std::string& problem, int64_t change_ns) {
  if (problem.empty()) {
    if (read_failures_ > 0)
      log_info("manifests: reading " + dir_ + " works again after " + std::to_string(read_failures_) +
               " failed attempt(s)");
    read_failures_ = 0;
    retry_delay_ms_ = 0;
    retry_armed_ = false;
    failed_change_ns_ = 0;
    return;
  }
  ++read_failures_;
  retry_delay_ms_ = read_failures_ == 1 ? kRetryFirstMs : std::min(retry_delay_ms_ * 2, kRetryMaxMs);
  retry_armed_ = true;
  retry_at_ms_ = steady_now_ms() + retry_delay_ms_;
  failed_change_ns_ = std::max(failed_change_ns_, change_ns);
  if (read_failures_ == 1)
    log_warn("manifests: " + dir_ + ": " + problem + "; keeping the last good state, retrying in " +
             std::to_string(retry_delay_ms_) + " ms (backing off to " + std::to_string(kRetryMaxMs / 1000) + " s)");
}

LoadResult ManifestSource::load() {
  LoadResult r;
  r.newest_change_unix_ns = pending_change_ns_;
  pending_change_ns_ = 0;
  if (dir_wd_ < 0) add_watches();
  std::string read_problem;  // why the directory or a file could not be read

  std::error_code ec;
  std::vector<std::string> names;
  bool listed = true;
  std::filesystem::directory_iterator it(dir_, ec), end;
  if (ec) listed = false;
  for (; listed && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!is_manifest_name(name)) continue;
    std::error_code sec;
    if (!std::filesystem::is_regular_file(it->path(), sec)) {  // follows symlinks
      if (!std::filesystem::exists(it->path(), sec))
        r.errors.push_back({name, "", "dangling symbolic link"});
      else
        r.notes.push_back({name, "", "not a regular file; skipped"});
      continue;
    }
    names.push_back(name);
  }
  if (ec) listed = false;

  if (!listed) {
    read_problem = "cannot read directory: " + ec.message();
    r.errors.push_back({dir_, "", read_problem + "; keeping the last good state"});
  } else {
    std::sort(names.begin(), names.end());
    for (auto f = files_.begin(); f != files_.end();)  // deleted files go away
      f = std::binary_search(names.begin(), names.end(), f->first) ? std::next(f) : files_.erase(f);
    for (const auto& name : names) {
      FileState& st = files_[name];
      const std::string path = dir_ + "/" + name;
      struct stat sb {};
      std::ifstream in(path, std::ios::binary);
      std::string problem;
      if (stat(path.c_str(), &sb) != 0 || !in) {
        problem = std::string("cannot read: ") + std::strerror(errno);
        read_problem = name + ": " + problem;
      } else if (sb.st_size > kMaxFileBytes) {
        problem = "file is larger than 16 MiB";
      }
      if (problem.empty()) {
        std::ostringstream text;
        text << in.rdbuf();
        if (in.bad()) {
          problem = "read error";
          read_problem = name + ": " + problem;
        }
        else if (!st.parsed || text.str() != st.content) parse_file(name, text.str(), &st);
      }
      if (!problem.empty()) {
        st.parsed = false;
        st.good = false;
        st.errors = {SourceError{name, "", problem}};
        st.notes.clear();
      }
    }
  }

  note_read_result(read_problem, r.newest_change_unix_ns);

  std::vector<k8s::Service> services;
  std::vector<k8s::EndpointSlice> slices;
  for (const auto& [name, st] : files_) {
    if (!st.good) {
      r.errors.insert(r.errors.end(), st.errors.begin(), st.errors.end());
      if (st.has_good) r.notes.push_back({name, "", "has errors; its last good version stays in force"});
    } else {
      r.notes.insert(r.notes.end(), st.notes.begin(), st.notes.end());
    }
    if (!st.has_good) continue;
    services.insert(services.end(), st.services.begin(), st.services.end());
    slices.insert(slices.end(), st.slices.begin(), st.slices.end());
  }
  k8s::BuildResult built = k8s::build_service_table(services, slices, build_);
  r.table = std::move(built.table);
  for (const auto& e : built.errors) r.errors.push_back({e.origin, e.object, e.reason, e.conflict});
  for (const auto& e : built.notes) r.notes.push_back({e.origin, e.object, e.reason});
  return r;
}

}  // namespace vipd::cp
