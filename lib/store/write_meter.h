#pragma once
/// What a tier's write path is doing now and how fast it drains: the bytes of the write
/// operations under way (a demotion, a write-back, a save's layer) that have not reached the
/// device yet, and the rate the device has written at while busy. A demotion made on a save's
/// thread waits about (pending + its own bytes) / rate (StoreConfig::drop_slow_demotions).
/// The rate is bytes over the time at least one write was in flight, so writes that overlap
/// (the I/O pool's threads) do not count their time twice.

#include <chrono>
#include <cstdint>
#include <mutex>

namespace cb::store {

class WriteMeter {
 public:
  using Clock = std::chrono::steady_clock;
  /// An operation will write `bytes` (it is queued or under way).
  void add_pending(uint64_t bytes);
  /// Part of what add_pending() announced was written, or will not be.
  void sub_pending(uint64_t bytes);
  uint64_t pending() const;
  /// A write to the device starts; io_end() when it returns, with the bytes it moved.
  void io_begin(Clock::time_point at = Clock::now());
  void io_end(uint64_t bytes, Clock::time_point at = Clock::now());
  /// Bytes per second over the busy time so far; 0 until a write has ended.
  double rate() const;
  /// Seconds until what is pending, and `bytes` more, are written at rate(); a negative
  /// value when the rate is not known yet.
  double drain_seconds(uint64_t bytes) const;

 private:
  double rate_locked() const;
  mutable std::mutex mu_;
  uint64_t pending_ = 0;
  int in_flight_ = 0;
  Clock::time_point busy_since_{};
  double busy_s_ = 0;
  uint64_t written_ = 0;
};

/// add_pending() now, sub_pending() of whatever was not done() when it goes out of scope.
class PendingWrite {
 public:
  PendingWrite(WriteMeter* m, uint64_t bytes) : m_(m), left_(m != nullptr ? bytes : 0) {
    if (m_ != nullptr) m_->add_pending(left_);
  }
  ~PendingWrite() {
    if (m_ != nullptr) m_->sub_pending(left_);
  }
  PendingWrite(const PendingWrite&) = delete;
  PendingWrite& operator=(const PendingWrite&) = delete;
  /// `bytes` of it were written.
  void done(uint64_t bytes);

 private:
  WriteMeter* m_;
  uint64_t left_;
};

}  // namespace cb::store
