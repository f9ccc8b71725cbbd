#pragma once
/// The clock injected into whatever stamps EntryMeta::last_access / inserted. Policies
/// never read time themselves; the store passes its Clock (wall clock in real mode,
/// virtual time in sim mode, ManualClock in tests).

#include <cstdint>

namespace cb::policy {

/// A monotonic source of timestamps in caller-chosen units (e.g. microseconds).
class Clock {
 public:
  virtual ~Clock() = default;
  /// Current time; never decreases.
  virtual int64_t now() const = 0;
};

/// A clock that moves only when told to: deterministic tests and discrete-event sims.
class ManualClock : public Clock {
 public:
  /// Starts at `start`.
  explicit ManualClock(int64_t start = 0) : now_(start) {}
  /// The time last set.
  int64_t now() const override { return now_; }
  /// Moves time forward by `delta` (negative deltas are ignored: time never goes back).
  void advance(int64_t delta) {
    if (delta > 0) now_ += delta;
  }

 private:
  int64_t now_;
};

}  // namespace cb::policy
