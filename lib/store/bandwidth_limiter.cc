// Pacing of emulated links: one queue per limiter, transfers served in arrival order.
#include "lib/store/bandwidth_limiter.h"

#include <algorithm>

namespace cb::store {

std::chrono::steady_clock::time_point BandwidthLimiter::reserve(
    uint64_t bytes, std::chrono::steady_clock::time_point started) {
  if (gbps_ <= 0 || bytes == 0) return started;
  using clock = std::chrono::steady_clock;
  const auto cost = std::chrono::duration_cast<clock::duration>(
      std::chrono::duration<double>(static_cast<double>(bytes) / (gbps_ * 1e9)));
  std::lock_guard<std::mutex> g(mu_);
  free_at_ = std::max(free_at_, started) + cost;
  return free_at_;
}

}  // namespace cb::store
