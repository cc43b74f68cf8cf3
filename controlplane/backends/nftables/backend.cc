// Thread: control (apply); stats() from any thread.
#include "controlplane/backends/nftables/backend.h"

#include <nftables/libnftables.h>

#include <chrono>

#include "common/log.h"

namespace vipd::cp::nft {
namespace {

class LibNftRunner final : public Runner {
 public:
  explicit LibNftRunner(bool check_only) : ctx_(nft_ctx_new(NFT_CTX_DEFAULT)) {
    if (ctx_) {
      nft_ctx_buffer_output(ctx_);
      nft_ctx_buffer_error(ctx_);
      nft_ctx_set_dry_run(ctx_, check_only);
    }
  }
  ~LibNftRunner() override {
    if (ctx_) nft_ctx_free(ctx_);
  }
  LibNftRunner(const LibNftRunner&) = delete;
  LibNftRunner& operator=(const LibNftRunner&) = delete;

  bool run(const std::string& script, std::string* error) override {
    if (!ctx_) {
      *error = "nftables: nft_ctx_new failed";
      return false;
    }
    if (nft_run_cmd_from_buffer(ctx_, script.c_str()) == 0) return true;
    std::string e = nft_ctx_get_error_buffer(ctx_);
    // nft's error: "Error: ...\n<the command>\n   ^^^"; one line, bounded.
    for (char& c : e)
      if (c == '\n' || c == '\r' || c == '\t') c = ' ';
    if (e.size() > 600) e = e.substr(0, 600) + "...";
    *error = "nftables: transaction refused: " + (e.empty() ? std::string("(no error text)") : e);
    return false;
  }

  bool list_tables(std::vector<std::string>* out, std::string* error) override {
    if (!ctx_) {
      *error = "nftables: nft_ctx_new failed";
      return false;
    }
    if (nft_run_cmd_from_buffer(ctx_, "list tables") != 0) {
      std::string e = nft_ctx_get_error_buffer(ctx_);
      for (char& c : e)
        if (c == '\n' || c == '\r' || c == '\t') c = ' ';
      *error = "nftables: list tables: " + e.substr(0, 300);
      return false;
    }
    // "table ip vipd\ntable ip vipd-2\n..."
    const std::string text = nft_ctx_get_output_buffer(ctx_);
    size_t pos = 0;
    while (pos < text.size()) {
      size_t nl = text.find('\n', pos);
      if (nl == std::string::npos) nl = text.size();
      const std::string line = text.substr(pos, nl - pos);
      if (line.compare(0, 6, "table ") == 0) out->push_back(line.substr(6));
      pos = nl + 1;
    }
    return true;
  }

 private:
  nft_ctx* ctx_;
};

}  // namespace

std::unique_ptr<Runner> make_libnftables_runner(bool check_only) { return std::make_unique<LibNftRunner>(check_only); }

NftablesBackend::NftablesBackend(RenderOptions opts, std::unique_ptr<Runner> runner)
    : opts_(opts), runner_(std::move(runner)) {}

NftablesStats NftablesBackend::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  return stats_;
}

bool NftablesBackend::apply(const ServiceTable& next, const TableDiff& diff, bool full, std::string* error) {
  // The TableDiff is relative to the last successful apply (Backend); after a
  // failure the next apply is a full sync, which does not use it.
  auto fail = [&](std::string why) {
    *error = std::move(why);
    force_full_ = true;
    std::lock_guard<std::mutex> lk(mu_);
    ++stats_.failures;
    return false;
  };
  // table ip6 vipd exists only while there are IPv6 entries (render_full):
  // the first one and the removal of the last one take a full sync.
  const bool next_v6 = !next.services.empty() && next.services.rbegin()->first.vip.is_v6();
  const bool do_full = full || force_full_ || next_v6 != applied_.has_v6();
  const auto t0 = std::chrono::steady_clock::now();
  size_t rendered = 0;
  std::string why;
  Transaction tx;
  // A partial sync with the loop's diff: the applied state is updated from the
  // changed entries alone (O(changes)); it falls back to the whole-table
  // comparison below when the diff does not match the applied state.
  bool incremental = false;
  if (!do_full && !diff.empty()) {
    switch (apply_diff(&applied_, diff, opts_, &tx, &rendered, &why)) {
      case DiffResult::kBadInput:
        return fail(why);
      case DiffResult::kApplied:
        incremental = true;
        break;
      case DiffResult::kFallback:
        break;
    }
  }
  if (!incremental) {
    Desired desired;
    // A full sync renders everything again (the kernel's state is not trusted).
    static const Desired kNothing;
    if (!build_desired(next, opts_, do_full ? kNothing : applied_, &desired, &rendered, &why)) return fail(why);
    std::vector<std::string> existing;
    if (do_full && !runner_->list_tables(&existing, &why)) return fail(why);
    tx = do_full ? render_full(desired, opts_, existing) : render_delta(applied_, desired);
    desired.retired_chains = tx.retired_chains;
    desired.retired_sets = tx.retired_sets;
    applied_ = std::move(desired);
  }
  // From here applied_ is the state after tx; a failed tx forces a full sync.
  const double render_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (tx.empty()) {
    std::lock_guard<std::mutex> lk(mu_);
    ++stats_.noop_syncs;
    stats_.entries_rendered = rendered;
    stats_.chains_written = stats_.chains_deleted = stats_.elements_changed = stats_.transaction_bytes = 0;
    stats_.last_render_ms = render_ms;
    return true;
  }
  const auto t1 = std::chrono::steady_clock::now();
  if (!runner_->run(tx.text, &why)) {
    last_ = std::move(tx.text);
    return fail(why);
  }
  const double tx_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count();
  force_full_ = false;
  std::lock_guard<std::mutex> lk(mu_);
  ++(do_full ? stats_.full_syncs : stats_.partial_syncs);
  stats_.entries_rendered = rendered;
  stats_.chains_written = tx.chains_written;
  stats_.chains_deleted = tx.chains_deleted;
  stats_.chains_retired = tx.chains_retired;
  stats_.retired_pending = applied_.retired_chains.size();
  stats_.elements_changed = tx.elements_added + tx.elements_deleted;
  stats_.transaction_bytes = tx.text.size();
  stats_.chains = applied_.chains();
  stats_.last_render_ms = render_ms;
  stats_.last_transaction_ms = tx_ms;
  log_debug("nftables: " + std::string(do_full ? "full" : "partial") + " sync: " + std::to_string(rendered) +
            " entries rendered, " + std::to_string(tx.chains_written) + " chains written, " +
            std::to_string(tx.chains_deleted) + " deleted, " + std::to_string(tx.text.size()) + " bytes, " +
            std::to_string(render_ms) + " ms render, " + std::to_string(tx_ms) + " ms transaction");
  last_ = std::move(tx.text);
  return true;
}

}  // namespace vipd::cp::nft
