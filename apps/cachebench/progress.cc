// One progress reporter for every subcommand.
#include "apps/cachebench/progress.h"

#include <unistd.h>

#include <cstdio>

namespace cb::app {

Progress::Progress(std::string label, std::string unit)
    : label_(std::move(label)),
      unit_(std::move(unit)),
      tty_(::isatty(STDERR_FILENO) != 0),
      t0_(std::chrono::steady_clock::now()) {}

void Progress::operator()(int64_t done, int64_t total) {
  if (done == last_done_ && done != total) return;
  last_done_ = done;
  const int64_t decile = total > 0 ? done * 10 / total : 10;
  if (!tty_ && decile == last_decile_) return;
  last_decile_ = decile;
  const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  const double rate = el > 0 ? done / el : 0;
  const double eta = rate > 0 ? (total - done) / rate : 0;
  std::fprintf(stderr, "%s  %s: %lld/%lld %s, %.1f %s/s, ETA %.0f s%s", tty_ ? "\r" : "",
               label_.c_str(), static_cast<long long>(done), static_cast<long long>(total),
               unit_.c_str(), rate, unit_.c_str(), eta, tty_ && done < total ? "" : "\n");
}

}  // namespace cb::app
