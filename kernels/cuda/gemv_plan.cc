#include <cstdint>

#include "kernels/cuda/gemv.h"

namespace cb::kernels::cuda {

bool gemv_applies(const GemmWtParams& p) {
  constexpr int64_t kMax = 0x7fffffff;
  const auto aligned = [](const void* ptr) {
    return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0;
  };
  return p.n >= 1 && p.n <= kGemvMaxRows && p.in > 0 && p.in % 8 == 0 && p.out > 0 &&
         p.in <= kMax && p.out <= kMax &&
         (p.storage == Storage::F16 || p.storage == Storage::BF16) && p.x != nullptr &&
         p.w != nullptr && aligned(p.x) && aligned(p.w);
}

unsigned gemv_blocks(int64_t out) {
  return static_cast<unsigned>((out + kGemvWarps - 1) / kGemvWarps);
}

}  // namespace cb::kernels::cuda
