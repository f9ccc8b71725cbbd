#pragma once
// The fused RMSNorm + GEMV (+ SwiGLU) decode kernel (see norm_gemv.h; launched by
// norm_gemv.cu; opt-in, slower than the separate launches on an H100). CB_SIMT_EMULATION
// (tests/unit/cuda/simt_emulator.h, host compilers only) replaces its inline PTX, so the kernel's
// own source runs on the host. Unlike gemv_kernel.cuh's dot8, elements are taken from the vectors'
// 32-bit words (no aliasing of a uint4 as T), so the host compiler builds the same code as nvcc.
#include <type_traits>

#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/gemv.h"
#include "kernels/cuda/gemv_kernel.cuh"
#include "kernels/cuda/norm_gemv.h"

#ifdef CB_SIMT_EMULATION
#define CB_NORM_GEMV_SMEM(name) unsigned char* name = ::cb::simt::dynamic_smem()
#else
#define CB_NORM_GEMV_SMEM(name) extern __shared__ __align__(16) unsigned char name[]
#endif

namespace cb::kernels::cuda {
namespace norm_gemv_detail {

using detail::from_f;
using detail::to_f;
using gemv_detail::load_stream;

// Element e (0-7) of 8 storage-type values in a 16-byte vector, as a float (from the words'
// bits: no aliasing of the vector as T).
template <typename T>
__device__ __forceinline__ float elem8(const uint4& v, int e) {
  const unsigned word = e < 2 ? v.x : e < 4 ? v.y : e < 6 ? v.z : v.w;
  const auto bits = static_cast<unsigned short>(e % 2 == 0 ? word & 0xffffu : word >> 16);
  if constexpr (std::is_same<T, __half>::value) {
    return __half2float(__ushort_as_half(bits));
  } else {
    return __bfloat162float(__ushort_as_bfloat16(bits));
  }
}

// acc[b] += w4 . x[b][v * 8 .. v * 8 + 8) for every row b of x (rows `in` apart).
template <typename T, int NB>
__device__ __forceinline__ void dot8(const uint4& w4, const T* __restrict__ x, int64_t in,
                                     int64_t v, float (&acc)[NB]) {
  float wf[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) wf[e] = elem8<T>(w4, e);
#pragma unroll
  for (int b = 0; b < NB; ++b) {
    const uint4 x4 = *reinterpret_cast<const uint4*>(x + b * in + v * 8);
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[b] = fmaf(wf[e], elem8<T>(x4, e), acc[b]);
  }
}

template <int NB>
__device__ __forceinline__ void warp_sum(float (&acc)[NB]) {
#pragma unroll
  for (int b = 0; b < NB; ++b) {
#pragma unroll
    for (int o = 16; o > 0; o /= 2) acc[b] += __shfl_xor_sync(0xffffffffu, acc[b], o);
  }
}

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

// The block's NB rows of RMSNorm(x) * norm_w, rounded to T as launch_rmsnorm writes them, in
// shared memory. The norm's partial sums [kGemvWarps][NB] and scales [NB] follow them in the
// same dynamic allocation (NB * in elements are a multiple of 16 bytes, in being a multiple of
// 8), so the kernel has no static shared memory and a launch needs exactly
// norm_gemv_smem_bytes: the launcher's opt-in above 48 KiB and norm_gemv_applies' device limit
// see the whole of it.
template <typename T, int NB>
__device__ __forceinline__ const T* normalize_rows(const NormGemvArgs<T>& a, unsigned char* smem) {
  T* xn = reinterpret_cast<T*>(smem);
  float* partial = reinterpret_cast<float*>(smem + static_cast<size_t>(NB) * a.in * sizeof(T));
  float* inv = partial + kGemvWarps * NB;
  float ss[NB];
#pragma unroll
  for (int b = 0; b < NB; ++b) ss[b] = 0.0f;
  for (int64_t i = threadIdx.x; i < a.in; i += blockDim.x) {
#pragma unroll
    for (int b = 0; b < NB; ++b) {
      const float v = to_f(a.x[b * a.in + i]);
      ss[b] += v * v;
    }
  }
  warp_sum<NB>(ss);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
#pragma unroll
    for (int b = 0; b < NB; ++b) partial[warp * NB + b] = ss[b];
  }
  __syncthreads();
  if (threadIdx.x < NB) {
    float s = 0.0f;
    for (int k = 0; k < kGemvWarps; ++k) s += partial[k * NB + threadIdx.x];
    inv[threadIdx.x] = rsqrtf(s / static_cast<float>(a.in) + a.norm_eps);
  }
  __syncthreads();
  for (int64_t i = threadIdx.x; i < a.in; i += blockDim.x) {
    const float g = to_f(a.norm_w[i]);
#pragma unroll
    for (int b = 0; b < NB; ++b) {
      xn[b * a.in + i] = from_f<T>(to_f(a.x[b * a.in + i]) * inv[b] * g);
    }
  }
  __syncthreads();
  return xn;
}

// grid gemv_blocks(out), kGemvWarps * 32 threads, norm_gemv_smem_bytes of dynamic shared
// memory: warp w of block b computes output row b * kGemvWarps + w for all NB rows of x.
template <typename T, int NB, bool GLU>
__global__ void __launch_bounds__(kGemvWarps * 32) norm_gemv_kernel(const NormGemvArgs<T> a) {
  CB_NORM_GEMV_SMEM(smem);
  const T* __restrict__ x = normalize_rows<T, NB>(a, smem);
  const int lane = threadIdx.x % 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kGemvWarps + threadIdx.x / 32;
  if (row >= a.out) return;
  const int64_t in = a.in, nvec = in / 8;
  const auto* wr = reinterpret_cast<const uint4*>(a.w + row * in);
  const auto* wr2 = reinterpret_cast<const uint4*>(GLU ? a.w2 + row * in : a.w);
  float acc[NB], acc2[NB];
#pragma unroll
  for (int b = 0; b < NB; ++b) acc[b] = acc2[b] = 0.0f;
  int64_t v = lane;
  for (; v + 96 < nvec; v += 128) {  // four vectors of each weight row in flight per lane
    uint4 w4[4], u4[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) w4[k] = load_stream(wr + v + 32 * k);
    if constexpr (GLU) {
#pragma unroll
      for (int k = 0; k < 4; ++k) u4[k] = load_stream(wr2 + v + 32 * k);
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      dot8<T, NB>(w4[k], x, in, v + 32 * k, acc);
      if constexpr (GLU) dot8<T, NB>(u4[k], x, in, v + 32 * k, acc2);
    }
  }
  for (; v < nvec; v += 32) {
    dot8<T, NB>(load_stream(wr + v), x, in, v, acc);
    if constexpr (GLU) dot8<T, NB>(load_stream(wr2 + v), x, in, v, acc2);
  }
  warp_sum<NB>(acc);
  if constexpr (GLU) warp_sum<NB>(acc2);
  if (lane != 0) return;
#pragma unroll
  for (int b = 0; b < NB; ++b) {
    T* yp = a.y + b * a.out + row;
    if constexpr (GLU) {
      const float g = to_f(from_f<T>(acc[b])), u = to_f(from_f<T>(acc2[b]));
      *yp = from_f<T>(g / (1.0f + expf(-g)) * u);
    } else {
      *yp = from_f<T>(acc[b]);
    }
  }
}

}  // namespace norm_gemv_detail
}  // namespace cb::kernels::cuda
