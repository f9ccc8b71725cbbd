// Launchers of the decode GEMV kernel (gemv_kernel.cuh).
#include "kernels/cuda/gemv_kernel.cuh"
#include "kernels/cuda/pdl_launch.cuh"

namespace cb::kernels::cuda {
namespace {

using gemv_detail::gemv_swiglu_kernel;
using gemv_detail::gemv_wt_kernel;

template <typename T, int NB, bool DEEP>
cudaError_t launch_kernel(const GemmWtParams& p, cudaStream_t stream) {
  const dim3 grid(gemv_blocks(p.out)), block(kGemvWarps * 32);
  const auto* x = static_cast<const T*>(p.x);
  const auto* w = static_cast<const T*>(p.w);
  auto* y = static_cast<T*>(p.y);
  if (p.pdl && gemv_pdl_supported()) {
    return launch_pdl(gemv_wt_kernel<T, NB, true, DEEP>, grid, block, stream, x, w, y, p.in, p.out,
                      p.accumulate);
  }
  gemv_wt_kernel<T, NB, false, DEEP>
      <<<grid, block, 0, stream>>>(x, w, y, p.in, p.out, p.accumulate);
  return cudaGetLastError();
}

template <typename T, int NB>
cudaError_t launch_rows(const GemmWtParams& p, cudaStream_t stream) {
  // Deep at one row only: at two or more, 64 registers make ptxas spill.
  if constexpr (NB == 1) {
    if (p.deep) return launch_kernel<T, NB, true>(p, stream);
  }
  return launch_kernel<T, NB, false>(p, stream);
}

template <typename T>
cudaError_t launch_typed(const GemmWtParams& p, cudaStream_t stream) {
  switch (p.n) {
    case 1: return launch_rows<T, 1>(p, stream);
    case 2: return launch_rows<T, 2>(p, stream);
    case 3: return launch_rows<T, 3>(p, stream);
    case 4: return launch_rows<T, 4>(p, stream);
    default: return cudaErrorInvalidValue;
  }
}

template <typename T, int NB>
cudaError_t launch_swiglu_rows(const GemmWtParams& p, const void* w_up, cudaStream_t stream) {
  const dim3 grid(gemv_blocks(p.out)), block(kGemvWarps * 32);
  const auto* x = static_cast<const T*>(p.x);
  const auto* wg = static_cast<const T*>(p.w);
  const auto* wu = static_cast<const T*>(w_up);
  auto* y = static_cast<T*>(p.y);
  if (p.pdl && gemv_pdl_supported()) {
    return launch_pdl(gemv_swiglu_kernel<T, NB, true>, grid, block, stream, x, wg, wu, y, p.in,
                      p.out);
  }
  gemv_swiglu_kernel<T, NB><<<grid, block, 0, stream>>>(x, wg, wu, y, p.in, p.out);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_swiglu_typed(const GemmWtParams& p, const void* w_up, cudaStream_t stream) {
  switch (p.n) {
    case 1: return launch_swiglu_rows<T, 1>(p, w_up, stream);
    case 2: return launch_swiglu_rows<T, 2>(p, w_up, stream);
    case 3: return launch_swiglu_rows<T, 3>(p, w_up, stream);
    case 4: return launch_swiglu_rows<T, 4>(p, w_up, stream);
    default: return cudaErrorInvalidValue;
  }
}

static_assert(kGemvMaxRows == 4, "launch_typed has a case per row count");

}  // namespace

bool gemv_pdl_supported() {
  static const bool supported = [] {
    cudaFuncAttributes a{};
    if (cudaFuncGetAttributes(&a, gemv_wt_kernel<__half, 1, true>) != cudaSuccess) {
      (void)cudaGetLastError();  // no usable device: nothing is launched early
      return false;
    }
    return a.ptxVersion >= 90;
  }();
  return supported;
}

cudaError_t launch_gemv_wt(const GemmWtParams& p, cudaStream_t stream) {
  if (!gemv_applies(p) || p.y == nullptr) return cudaErrorInvalidValue;
  return p.storage == Storage::F16 ? launch_typed<__half>(p, stream)
                                   : launch_typed<__nv_bfloat16>(p, stream);
}

cudaError_t launch_gemv_swiglu(const GemmWtParams& p, const void* w_up, cudaStream_t stream) {
  if (!gemv_swiglu_applies(p, w_up) || p.y == nullptr) return cudaErrorInvalidValue;
  return p.storage == Storage::F16 ? launch_swiglu_typed<__half>(p, w_up, stream)
                                   : launch_swiglu_typed<__nv_bfloat16>(p, w_up, stream);
}

}  // namespace cb::kernels::cuda
