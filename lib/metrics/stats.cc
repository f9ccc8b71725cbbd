#include "lib/metrics/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <utility>

#include "lib/core/error.h"

namespace cb::metrics {
namespace {

/// Percentile of an already sorted, non-empty sample, computed as numpy computes it
/// (virtual index (n - 1) * (q / 100); lerp from the nearer end), so results match
/// numpy.percentile to the last bit.
double percentile_sorted(const std::vector<double>& x, double q) {
  const double h = static_cast<double>(x.size() - 1) * (q / 100.0);
  const double lo = std::floor(h);
  const size_t i = static_cast<size_t>(lo);
  if (i + 1 >= x.size()) return x.back();
  const double t = h - lo;
  const double a = x[i], b = x[i + 1], diff = b - a;
  return t >= 0.5 ? b - diff * (1.0 - t) : a + diff * t;
}

void check_q(double q) {
  if (!(q >= 0.0 && q <= 100.0))
    throw make_error("metrics::percentile", "q = " + std::to_string(q) + " is outside [0, 100]",
                     "pass a percentile between 0 and 100");
}

}  // namespace

double percentile(std::vector<double> values, double q) {
  check_q(q);
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  return percentile_sorted(values, q);
}

double mean(const std::vector<double>& values) {
  if (values.empty()) return 0.0;
  return std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

double median(std::vector<double> values) {
  return percentile(std::move(values), 50.0);
}

Distribution distribution(std::vector<double> values) {
  Distribution d;
  if (values.empty()) return d;
  std::sort(values.begin(), values.end());
  d.count = values.size();
  d.mean = mean(values);
  d.median = percentile_sorted(values, 50.0);
  d.p90 = percentile_sorted(values, 90.0);
  d.p99 = percentile_sorted(values, 99.0);
  d.min = values.front();
  d.max = values.back();
  return d;
}

}  // namespace cb::metrics
