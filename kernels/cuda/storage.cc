#include "kernels/cuda/storage.h"

#include <algorithm>

namespace cb::kernels::cuda {

LaunchDims elementwise_dims(size_t n, unsigned max_blocks) {
  constexpr unsigned kThreads = 256;
  if (n == 0) return {0, kThreads};
  const size_t blocks = (n + kThreads - 1) / kThreads;
  return {static_cast<unsigned>(std::min<size_t>(blocks, std::max(max_blocks, 1u))), kThreads};
}

LaunchDims row_dims(int64_t rows, int64_t dim) {
  if (rows <= 0 || dim <= 0 || rows > 0x7fffffffLL) return {0, 0};
  unsigned threads = 32;
  while (threads < 1024 && static_cast<int64_t>(threads) * 4 < dim) threads *= 2;
  return {static_cast<unsigned>(rows), threads};
}

}  // namespace cb::kernels::cuda
