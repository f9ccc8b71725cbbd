// Launchers of the decode GEMV kernel (gemv_kernel.cuh).
#include "kernels/cuda/gemv_kernel.cuh"

namespace cb::kernels::cuda {
namespace {

using gemv_detail::gemv_wt_kernel;

template <typename T>
cudaError_t launch_typed(const GemmWtParams& p, cudaStream_t stream) {
  const unsigned grid = gemv_blocks(p.out);
  const auto* x = static_cast<const T*>(p.x);
  const auto* w = static_cast<const T*>(p.w);
  auto* y = static_cast<T*>(p.y);
  switch (p.n) {
#define CB_CASE(NB)                                                                 \
  case NB:                                                                          \
    gemv_wt_kernel<T, NB>                                                           \
        <<<grid, kGemvWarps * 32, 0, stream>>>(x, w, y, p.in, p.out, p.accumulate); \
    break;
    CB_CASE(1)
    CB_CASE(2)
    CB_CASE(3)
    CB_CASE(4)
#undef CB_CASE
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

static_assert(kGemvMaxRows == 4, "launch_typed has a case per row count");

}  // namespace

cudaError_t launch_gemv_wt(const GemmWtParams& p, cudaStream_t stream) {
  if (!gemv_applies(p) || p.y == nullptr) return cudaErrorInvalidValue;
  return p.storage == Storage::F16 ? launch_typed<__half>(p, stream)
                                   : launch_typed<__nv_bfloat16>(p, stream);
}

}  // namespace cb::kernels::cuda
