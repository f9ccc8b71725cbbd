#include <cstdint>

#include "kernels/cuda/gemv.h"
#include "kernels/cuda/norm_gemv.h"

namespace cb::kernels::cuda {
namespace {

bool aligned16(const void* ptr) {
  return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0;
}

// What both kernels need: 1..kGemvMaxRows rows of whole 16-byte vectors of fp16/bf16, x and w
// set and 16-byte aligned, the dimensions within int32.
bool gemv_shape_fits(int64_t n, int64_t in, int64_t out, Storage st, const void* x, const void* w) {
  constexpr int64_t kMax = 0x7fffffff;
  return n >= 1 && n <= kGemvMaxRows && in > 0 && in % 8 == 0 && out > 0 && in <= kMax &&
         out <= kMax && (st == Storage::F16 || st == Storage::BF16) && x != nullptr &&
         w != nullptr && aligned16(x) && aligned16(w);
}

}  // namespace

bool gemv_applies(const GemmWtParams& p) {
  return gemv_shape_fits(p.n, p.in, p.out, p.storage, p.x, p.w);
}

bool gemv_swiglu_applies(const GemmWtParams& p, const void* w_up) {
  return gemv_applies(p) && !p.accumulate && w_up != nullptr && aligned16(w_up);
}

bool norm_gemv_applies(const NormGemvParams& p) {
  return gemv_shape_fits(p.n, p.in, p.out, p.storage, p.x, p.w) && p.norm_w != nullptr &&
         aligned16(p.norm_w) && aligned16(p.w2);
}

unsigned gemv_blocks(int64_t out) {
  return static_cast<unsigned>((out + kGemvWarps - 1) / kGemvWarps);
}

bool gemv_deep_fits(int64_t out, int sm_count) {
  return out > 0 && sm_count > 0 &&
         (out + kGemvWarps - 1) / kGemvWarps <= int64_t{kGemvDeepBlocksPerSm} * sm_count;
}

}  // namespace cb::kernels::cuda
