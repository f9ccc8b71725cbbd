#include "lib/store/write_meter.h"

#include <algorithm>

namespace cb::store {

void WriteMeter::add_pending(uint64_t bytes) {
  std::lock_guard<std::mutex> g(mu_);
  pending_ += bytes;
}

void WriteMeter::sub_pending(uint64_t bytes) {
  std::lock_guard<std::mutex> g(mu_);
  pending_ -= std::min(pending_, bytes);
}

uint64_t WriteMeter::pending() const {
  std::lock_guard<std::mutex> g(mu_);
  return pending_;
}

void WriteMeter::io_begin(Clock::time_point at) {
  std::lock_guard<std::mutex> g(mu_);
  if (in_flight_++ == 0) busy_since_ = at;
}

void WriteMeter::io_end(uint64_t bytes, Clock::time_point at) {
  std::lock_guard<std::mutex> g(mu_);
  if (in_flight_ == 0) return;  // no io_begin(): nothing timed, so no bytes counted either
  written_ += bytes;
  // Bank the busy time so far at every end, so a device that never idles has a rate too.
  busy_s_ += std::max(0.0, std::chrono::duration<double>(at - busy_since_).count());
  busy_since_ = at;
  --in_flight_;
}

double WriteMeter::rate_locked() const {
  return written_ > 0 && busy_s_ > 0 ? static_cast<double>(written_) / busy_s_ : 0;
}

double WriteMeter::rate() const {
  std::lock_guard<std::mutex> g(mu_);
  return rate_locked();
}

double WriteMeter::drain_seconds(uint64_t bytes) const {
  std::lock_guard<std::mutex> g(mu_);  // one snapshot of the backlog and the rate
  const double r = rate_locked();
  return r > 0 ? static_cast<double>(pending_ + bytes) / r : -1;
}

void PendingWrite::done(uint64_t bytes) {
  if (m_ == nullptr) return;
  bytes = std::min(bytes, left_);
  left_ -= bytes;
  m_->sub_pending(bytes);
}

}  // namespace cb::store
