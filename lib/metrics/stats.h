#pragma once
/// Order statistics over samples (latencies, sizes), in the conventions of vLLM's
/// benchmark_serving (which calls numpy): percentiles interpolate linearly between the
/// closest ranks, and an empty sample gives 0 (vLLM's `np.mean(x or 0)`), never a division
/// by zero.

#include <cstddef>
#include <vector>

namespace cb::metrics {

/// The q-th percentile (q in [0, 100]) of `values`, numpy's default method ("linear"):
/// sort, h = (n - 1) * (q / 100), a = x[floor(h)], b = x[floor(h) + 1], t = h - floor(h),
/// result = a + t * (b - a) (evaluated from the nearer end, as numpy does, so results match
/// numpy.percentile bit for bit). So p50 of {1, 2, 3, 4} is 2.5 and p90 of {1..10} is 9.1.
/// 0 when `values` is empty; a cb::Error when q is outside [0, 100] or not a number.
double percentile(std::vector<double> values, double q);

/// Arithmetic mean; 0 when `values` is empty.
double mean(const std::vector<double>& values);

/// percentile(values, 50): the middle value, or the mean of the two middle ones.
double median(std::vector<double> values);

/// Summary of one sample; every field is 0 when count is 0.
struct Distribution {
  size_t count = 0;   ///< number of samples
  double mean = 0;    ///< arithmetic mean
  double median = 0;  ///< p50 (linear interpolation)
  double p90 = 0;     ///< 90th percentile (linear interpolation)
  double p99 = 0;     ///< 99th percentile (linear interpolation)
  double min = 0;     ///< smallest sample
  double max = 0;     ///< largest sample
};

/// All of Distribution's statistics of `values` (sorted once).
Distribution distribution(std::vector<double> values);

}  // namespace cb::metrics
