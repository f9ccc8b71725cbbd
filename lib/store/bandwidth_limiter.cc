// Pacing of emulated links: one queue per limiter, transfers served in arrival order.
#include "lib/store/bandwidth_limiter.h"

#include <algorithm>
#include <thread>

namespace cb::store {

void BandwidthLimiter::pace(uint64_t bytes, std::chrono::steady_clock::time_point started) {
  if (gbps_ <= 0 || bytes == 0) return;
  using clock = std::chrono::steady_clock;
  const auto cost = std::chrono::duration_cast<clock::duration>(
      std::chrono::duration<double>(static_cast<double>(bytes) / (gbps_ * 1e9)));
  clock::time_point until;
  {
    std::lock_guard<std::mutex> g(mu_);
    until = std::max(free_at_, started) + cost;
    free_at_ = until;
  }
  std::this_thread::sleep_until(until);
}

}  // namespace cb::store
