#pragma once
// The fused RMSNorm + GEMV (+ SwiGLU) decode kernel (see norm_gemv.h; launched by
// norm_gemv.cu; CudaModel's default). In a header so that
// tests/unit/cuda/kernels_emulated_test.cc runs its source on the host (CB_SIMT_EMULATION
// swaps gemv_kernel.cuh's inline PTX load for a plain one).
#include <cstring>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/gemv.h"
#include "kernels/cuda/gemv_kernel.cuh"
#include "kernels/cuda/norm_gemv.h"

namespace cb::kernels::cuda {
namespace norm_gemv_detail {

using detail::from_f;
using detail::to_f;
using gemv_detail::load_stream;
using gemv_detail::warp_sum;

template <typename T>
struct NormGemvArgs {
  const T* x;
  const T* norm_w;
  float norm_eps;
  const T* w;
  const T* w2;
  T* y;
  int64_t in, out;
};

// For the 8 elements of x's vector v in every row b: ss[b] += x^2, and with h = x * norm_w
// (not rounded), acc[b] += w4 . h and (GLU) acc2[b] += u4 . h.
template <typename T, int NB, bool GLU>
__device__ __forceinline__ void norm_dot8(const uint4& w4, const uint4& u4,
                                          const NormGemvArgs<T>& a, int64_t v, float (&ss)[NB],
                                          float (&acc)[NB], float (&acc2)[NB]) {
  T w[8], u[8], g[8];
  memcpy(static_cast<void*>(w), &w4, 16);
  if constexpr (GLU) memcpy(static_cast<void*>(u), &u4, 16);
  const uint4 g4 = __ldg(reinterpret_cast<const uint4*>(a.norm_w) + v);
  memcpy(static_cast<void*>(g), &g4, 16);
  float wf[8], uf[8], gf[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    wf[e] = to_f(w[e]);
    uf[e] = GLU ? to_f(u[e]) : 0.0f;
    gf[e] = to_f(g[e]);
  }
#pragma unroll
  for (int b = 0; b < NB; ++b) {
    const uint4 x4 = __ldg(reinterpret_cast<const uint4*>(a.x + b * a.in) + v);
    T xv[8];
    memcpy(static_cast<void*>(xv), &x4, 16);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const float xf = to_f(xv[e]);
      ss[b] = fmaf(xf, xf, ss[b]);
      const float h = xf * gf[e];
      acc[b] = fmaf(wf[e], h, acc[b]);
      if constexpr (GLU) acc2[b] = fmaf(uf[e], h, acc2[b]);
    }
  }
}

// grid gemv_blocks(out), kGemvWarps * 32 threads, no shared memory: warp w of block b computes
// output row b * kGemvWarps + w for all NB rows of x, four vectors of each weight row in flight
// per lane, and RMSNorm's scale of each row of x from the squares its lanes summed.
// DEEP: launch bounds of kGemvDeepBlocksPerSm blocks an SM (NormGemvParams::deep).
template <typename T, int NB, bool GLU, bool PDL = false, bool DEEP = false>
__global__ void __launch_bounds__(kGemvWarps * 32, DEEP ? kGemvDeepBlocksPerSm : 0)
    norm_gemv_kernel(const NormGemvArgs<T> a) {
  const int lane = threadIdx.x % 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kGemvWarps + threadIdx.x / 32;
  if (row >= a.out) return;
  const int64_t in = a.in, nvec = in / 8;
  const auto* wr = reinterpret_cast<const uint4*>(a.w + row * in);
  const auto* wr2 = reinterpret_cast<const uint4*>(GLU ? a.w2 + row * in : a.w);
  gemv_detail::prefetch_then_wait<PDL>(wr, GLU ? wr2 : nullptr, lane, nvec);
  float ss[NB], acc[NB], acc2[NB];
#pragma unroll
  for (int b = 0; b < NB; ++b) ss[b] = acc[b] = acc2[b] = 0.0f;
  int64_t v = lane;
  for (; v + 96 < nvec; v += 128) {
    uint4 w4[4], u4[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) w4[k] = load_stream(wr + v + 32 * k);
#pragma unroll
    for (int k = 0; k < 4; ++k) u4[k] = GLU ? load_stream(wr2 + v + 32 * k) : w4[k];
#pragma unroll
    for (int k = 0; k < 4; ++k) norm_dot8<T, NB, GLU>(w4[k], u4[k], a, v + 32 * k, ss, acc, acc2);
  }
  uint4 tw[3], tu[3] = {};
  gemv_detail::load_tail(wr, v, nvec, tw);
  if constexpr (GLU) gemv_detail::load_tail(wr2, v, nvec, tu);
#pragma unroll
  for (int k = 0; k < 3; ++k) {
    if (v + 32 * k < nvec) {
      norm_dot8<T, NB, GLU>(tw[k], GLU ? tu[k] : tw[k], a, v + 32 * k, ss, acc, acc2);
    }
  }
  warp_sum<NB>(ss);
  warp_sum<NB>(acc);
  if constexpr (GLU) warp_sum<NB>(acc2);
  if (lane != 0) return;
#pragma unroll
  for (int b = 0; b < NB; ++b) {
    const float inv = rsqrtf(ss[b] / static_cast<float>(in) + a.norm_eps);
    T* yp = a.y + b * a.out + row;
    if constexpr (GLU) {
      const float g = to_f(from_f<T>(acc[b] * inv)), u = to_f(from_f<T>(acc2[b] * inv));
      *yp = from_f<T>(g / (1.0f + expf(-g)) * u);
    } else {
      *yp = from_f<T>(acc[b] * inv);
    }
  }
}

}  // namespace norm_gemv_detail
}  // namespace cb::kernels::cuda
