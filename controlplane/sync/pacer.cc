// Thread: the owner's (see pacer.h).
#include "controlplane/sync/pacer.h"

#include <algorithm>
#include <utility>

namespace vipd::cp {
namespace {

int ms_until(Pacer::TimePoint t, Pacer::TimePoint now) {
  const auto d = std::chrono::duration_cast<std::chrono::milliseconds>(t - now);
  return static_cast<int>(std::max<int64_t>(0, d.count()));
}

}  // namespace

Pacer::Pacer(PacerOptions opts, NowFn now)
    : opts_(opts), now_(now ? std::move(now) : NowFn([] { return Clock::now(); })) {}

void Pacer::begin_burst() { burst_end_ = now() + std::chrono::milliseconds(opts_.max_coalesce_ms); }

std::optional<int> Pacer::burst_wait_ms() const {
  const TimePoint t = now();
  if (t >= burst_end_) return std::nullopt;
  return std::min<int>(static_cast<int>(opts_.quiet_ms), ms_until(burst_end_, t));
}

std::optional<int> Pacer::hold_wait_ms() const {
  if (opts_.min_interval_ms == 0 || !ran_once_) return std::nullopt;
  const TimePoint earliest = last_end_ + std::chrono::milliseconds(opts_.min_interval_ms);
  const TimePoint t = now();
  if (t >= earliest) return std::nullopt;
  return ms_until(earliest, t);
}

int Pacer::idle_wait_ms(int poll_ms) const {
  return retry_pending_ ? std::min(poll_ms, ms_until(retry_at_, now())) : poll_ms;
}

bool Pacer::due(bool resync_requested) const {
  if (retry_pending_) return now() >= retry_at_;
  return full_resync_due() || resync_requested;
}

bool Pacer::full_resync_due() const {
  return opts_.full_resync_s && succeeded_once_ &&
         now() - last_full_ >= std::chrono::seconds(opts_.full_resync_s);
}

void Pacer::succeeded(TimePoint end, bool full) {
  ran_once_ = true;
  succeeded_once_ = true;
  last_end_ = end;
  if (full) last_full_ = end;
  retry_pending_ = false;
  retry_delay_ms_ = 0;
}

uint32_t Pacer::failed(TimePoint end) {
  ran_once_ = true;
  last_end_ = end;
  retry_pending_ = true;
  // Exponential backoff with jitter: the delay doubles up to retry_max_ms (not
  // below retry_interval_ms); the wait is drawn from [delay/2, delay].
  retry_delay_ms_ = retry_delay_ms_ == 0
                        ? std::max<uint32_t>(1, opts_.retry_interval_ms)
                        : std::min<uint32_t>(std::max(opts_.retry_max_ms, opts_.retry_interval_ms),
                                             retry_delay_ms_ * 2);
  rng_state_ ^= rng_state_ << 13;
  rng_state_ ^= rng_state_ >> 7;
  rng_state_ ^= rng_state_ << 17;
  const uint32_t wait_ms = retry_delay_ms_ / 2 + static_cast<uint32_t>(rng_state_ % (retry_delay_ms_ / 2 + 1));
  retry_at_ = end + std::chrono::milliseconds(wait_ms);
  return wait_ms;
}

void Pacer::retry_now() {
  retry_pending_ = true;
  retry_at_ = now();
}

}  // namespace vipd::cp
