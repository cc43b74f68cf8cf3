// Thread: control (apply); stats() from any thread.
#include "controlplane/backends/nftables/backend.h"

#include <nftables/libnftables.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "common/log.h"
#include "controlplane/backends/nftables/netlink_fast.h"

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

  // One NFT_MSG_GETTABLE dump over a plain netlink socket: libnftables' `list
  // tables` fetches the whole ruleset first (every rule of every table).
  bool list_tables(std::vector<std::string>* out, std::string* error) override {
    return dump_tables(out, error);
  }

 private:
  nft_ctx* ctx_;
};

// libnftables for everything but the partial syncs parse_fast takes, which
// go as one libnftnl netlink batch (netlink_fast.h: no cache setup per table).
class FastRunner final : public Runner {
 public:
  static constexpr size_t kMaxFastScript = 32 * 1024;
  bool run(const std::string& script, std::string* error) override {
    // One sendmsg must fit the socket's send buffer (net.core.wmem_default,
    // about 208 KiB; the batch is about twice the text): larger
    // transactions, where libnftables' cache setup does not matter, go
    // through libnftables, which sizes its buffer.
    fast_ = script.size() <= kMaxFastScript && parse_fast(script, &cmds_);
    if (!fast_) return nft_.run(script, error);
    return sender_.send(cmds_, error);
  }
  bool list_tables(std::vector<std::string>* out, std::string* error) override { return dump_tables(out, error); }
  bool last_was_netlink() const override { return fast_; }

 private:
  LibNftRunner nft_{false};
  NetlinkBatchSender sender_;
  std::vector<FastCmd> cmds_;
  bool fast_ = false;
};

}  // namespace

bool dump_tables(std::vector<std::string>* out, std::string* error) {
  const int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
  if (fd < 0) {
    *error = std::string("nftables: netlink socket: ") + std::strerror(errno);
    return false;
  }
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  struct {
    nlmsghdr nh;
    nfgenmsg nfg;
  } req{};
  req.nh.nlmsg_len = sizeof req;
  req.nh.nlmsg_type = (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETTABLE;
  req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  req.nh.nlmsg_seq = 1;
  req.nfg.nfgen_family = AF_UNSPEC;
  req.nfg.version = NFNETLINK_V0;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (sendto(fd, &req, sizeof req, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0) {
    *error = std::string("nftables: netlink send: ") + std::strerror(errno);
    return false;
  }
  std::vector<char> buf(64 * 1024);
  for (;;) {
    const ssize_t n = recv(fd, buf.data(), buf.size(), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      *error = std::string("nftables: netlink receive: ") + std::strerror(errno);
      return false;
    }
    size_t left = static_cast<size_t>(n);
    for (auto* nh = reinterpret_cast<nlmsghdr*>(buf.data()); NLMSG_OK(nh, left); nh = NLMSG_NEXT(nh, left)) {
      if (nh->nlmsg_type == NLMSG_DONE) return true;
      if (nh->nlmsg_type == NLMSG_ERROR) {
        const auto* e = static_cast<const nlmsgerr*>(NLMSG_DATA(nh));
        *error = std::string("nftables: table dump: ") + std::strerror(-e->error);
        return false;
      }
      if (nh->nlmsg_len < NLMSG_LENGTH(sizeof(nfgenmsg))) continue;
      const auto* g = static_cast<const nfgenmsg*>(NLMSG_DATA(nh));
      const char* fam = g->nfgen_family == NFPROTO_IPV4 ? "ip" : g->nfgen_family == NFPROTO_IPV6 ? "ip6" : nullptr;
      if (!fam) continue;  // other families hold no table of vipd's
      const char* p = reinterpret_cast<const char*>(NLMSG_DATA(nh)) + NLMSG_ALIGN(sizeof(nfgenmsg));
      size_t alen = nh->nlmsg_len - NLMSG_LENGTH(NLMSG_ALIGN(sizeof(nfgenmsg)));
      while (alen >= sizeof(nlattr)) {
        const auto* a = reinterpret_cast<const nlattr*>(p);
        if (a->nla_len < sizeof(nlattr) || a->nla_len > alen) break;
        if ((a->nla_type & NLA_TYPE_MASK) == NFTA_TABLE_NAME) {
          const char* name = p + NLA_HDRLEN;
          out->push_back(std::string(fam) + " " + std::string(name, strnlen(name, a->nla_len - NLA_HDRLEN)));
        }
        const size_t step = NLA_ALIGN(a->nla_len);
        if (step >= alen) break;
        p += step;
        alen -= step;
      }
    }
  }
}

std::unique_ptr<Runner> make_libnftables_runner(bool check_only, bool netlink_fast_path) {
  if (!check_only && netlink_fast_path) return std::make_unique<FastRunner>();
  return std::make_unique<LibNftRunner>(check_only);
}

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
  if (runner_->last_was_netlink()) ++stats_.netlink_syncs;
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
            std::to_string(tx.chains_deleted) + " deleted, " + std::to_string(tx.text.size()) + " bytes" +
            (runner_->last_was_netlink() ? " (netlink batch), " : ", ") +
            std::to_string(render_ms) + " ms render, " + std::to_string(tx_ms) + " ms transaction");
  last_ = std::move(tx.text);
  return true;
}

}  // namespace vipd::cp::nft
