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

bool NftablesBackend::apply(const ServiceTable& next, const TableDiff& /*diff*/, bool full, std::string* error) {
  // The TableDiff is not needed: entries are compared with the applied state,
  // which also holds when a sync failed half-way through the loop's view.
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
  Desired desired;
  size_t rendered = 0;
  std::string why;
  // A full sync renders everything again (the kernel's state is not trusted).
  static const Desired kNothing;
  if (!build_desired(next, opts_, do_full ? kNothing : applied_, &desired, &rendered, &why)) return fail(why);
  Transaction tx = do_full ? render_full(desired, opts_) : render_delta(applied_, desired);
  const double render_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  desired.retired_chains = tx.retired_chains;
  desired.retired_sets = tx.retired_sets;
  if (tx.empty()) {
    applied_ = std::move(desired);
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
  applied_ = std::move(desired);
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
