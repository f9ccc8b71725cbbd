#pragma once
/// Emulates a slower link or device under a tier: transfers share one pipe of a fixed
/// bandwidth, so concurrent transfers queue behind each other as they would on a PCIe link
/// or an SSD. Used to slow a tier on purpose (overlap tests, ablations on a fast machine).

#include <chrono>
#include <cstdint>
#include <mutex>

namespace cb::store {

/// A shared pipe of `gbps` (1e9 bytes/s); 0 = unlimited.
class BandwidthLimiter {
 public:
  explicit BandwidthLimiter(double gbps = 0) : gbps_(gbps) {}
  /// Bandwidth in GB/s (0 = unlimited).
  double gbps() const { return gbps_; }
  /// Call as a transfer of `bytes` begins at `started`: reserves the next free interval of
  /// the pipe for it and returns when that interval ends (`started` when unlimited); the
  /// caller sleeps until then once the transfer is done. The pipe serves transfers in the
  /// order they reserve, so one issued later never overtakes it, however the threads that
  /// move the bytes are scheduled.
  std::chrono::steady_clock::time_point reserve(uint64_t bytes,
                                                std::chrono::steady_clock::time_point started);

 private:
  double gbps_;
  std::mutex mu_;
  std::chrono::steady_clock::time_point free_at_{};
};

}  // namespace cb::store
