#include <algorithm>

#include "kernels/cuda/l2_prefetch.h"

namespace cb::kernels::cuda {

int64_t l2_prefetch_prefix(int64_t rows, int64_t row_bytes, int64_t budget) {
  if (rows <= 0 || row_bytes <= 0 || budget <= 0) return 0;
  if (budget / rows >= row_bytes) return row_bytes;
  return std::min(budget / rows / kL2Line * kL2Line, row_bytes);
}

L2PrefetchParams l2_prefetch_plan(const void* data, int64_t rows, int64_t row_bytes, int64_t budget,
                                  int64_t resident_rows) {
  L2PrefetchParams p;
  p.data = data;
  p.row_bytes = row_bytes;
  if (rows <= 0 || row_bytes <= 0 || budget <= 0) return p;
  if (rows <= resident_rows) {
    p.rows = rows;
    p.prefix_bytes = l2_prefetch_prefix(rows, row_bytes, budget);
  } else {
    p.rows = std::min(rows, budget / row_bytes);
    p.prefix_bytes = p.rows > 0 ? row_bytes : 0;
  }
  return p;
}

unsigned l2_prefetch_blocks(int64_t rows, int sms) {
  constexpr int64_t kThreads = 256;
  const int64_t cap = 4 * static_cast<int64_t>(std::max(sms, 1));
  return static_cast<unsigned>(std::clamp<int64_t>((rows + kThreads - 1) / kThreads, 1, cap));
}

bool l2_prefetch_applies(const L2PrefetchParams& p) {
  constexpr int64_t kMaxBulk = 0xffffffffLL / 16 * 16;  // prefetch_l2_bulk takes 32 bits
  if (p.rows < 0 || p.row_bytes < 0 || p.prefix_bytes < 0 || p.prefix_bytes > p.row_bytes ||
      p.prefix_bytes > kMaxBulk || p.prefix_bytes % 16 != 0 || p.row_bytes % 16 != 0) {
    return false;
  }
  if (p.rows == 0 || p.prefix_bytes == 0) return true;  // nothing to fetch
  return p.data != nullptr && reinterpret_cast<uintptr_t>(p.data) % 16 == 0;
}

}  // namespace cb::kernels::cuda
