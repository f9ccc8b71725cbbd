#include <algorithm>

#include "kernels/cuda/l2_prefetch.h"

namespace cb::kernels::cuda {

int64_t l2_prefetch_prefix(int64_t rows, int64_t row_bytes, int64_t budget) {
  if (rows <= 0 || row_bytes <= 0 || budget <= 0) return 0;
  const int64_t row_lines = (row_bytes + kL2Line - 1) / kL2Line;
  const int64_t lines = std::min(budget / rows / kL2Line, row_lines);
  return lines == row_lines ? row_bytes : lines * kL2Line;
}

int64_t l2_prefetch_lines_per_row(const L2PrefetchParams& p) {
  if (p.rows <= 0 || p.row_bytes <= 0 || p.prefix_bytes <= 0) return 0;
  const int64_t prefix = std::min(p.prefix_bytes, p.row_bytes);
  return (prefix + kL2Line - 1) / kL2Line;
}

unsigned l2_prefetch_blocks(int64_t lines, int sms) {
  constexpr int64_t kThreads = 256;
  const int64_t cap = 4 * static_cast<int64_t>(std::max(sms, 1));
  return static_cast<unsigned>(std::clamp<int64_t>((lines + kThreads - 1) / kThreads, 1, cap));
}

}  // namespace cb::kernels::cuda
