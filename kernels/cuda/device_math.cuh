#pragma once
// Device helpers shared by the kernels: fp32 load/store of any storage type, block reductions
// and the storage-type dispatch of the launchers. nvcc only.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "kernels/cuda/storage.h"

namespace cb::kernels::cuda::detail {

__device__ __forceinline__ float to_f(float v) {
  return v;
}
__device__ __forceinline__ float to_f(__half v) {
  return __half2float(v);
}
__device__ __forceinline__ float to_f(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

template <typename T>
__device__ __forceinline__ T from_f(float v);
template <>
__device__ __forceinline__ float from_f<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __half from_f<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

/// Lets a grid launched after this one with programmatic dependent launch (decode's GEMVs with
/// GemmWtParams::pdl) start once every block of this one has begun, rather than once every block
/// has exited; that grid still waits for this one to complete before reading what it writes
/// (gemv_kernel.cuh's grid_dependency_wait). No effect on a grid launched without the attribute;
/// sm_90 and later, nothing below.
__device__ __forceinline__ void allow_dependent_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}

/// Pair i's inverse frequency theta^(-2i / rope_dims), in double as kernels/cpu rope computes
/// it. The RoPE kernels compute it once per thread and reuse it for several tokens.
__device__ __forceinline__ double rope_inv_freq(int64_t i, int64_t rope_dims, double theta) {
  return pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(rope_dims));
}

/// The sine and cosine of a RoPE angle (a position times rope_inv_freq, formed in double as
/// kernels/cpu rope forms it, so exact at any position), first reduced to [-pi, pi] in double.
/// For fp16 and bf16 they are fp32 (errors near 1e-7, far below their rounding; the double
/// sincos of the full angle made the KV restore kernel compute-bound); fp32 storage keeps them
/// in double, as the CPU does, since fp32's absolute errors near 1e-7 show where the rotation
/// nearly cancels.
template <typename T>
struct RopeSinCos {
  using V = typename std::conditional<sizeof(T) == 4, double, float>::type;
  V s, c;
};

template <typename T>
__device__ __forceinline__ RopeSinCos<T> rope_sincos(double angle) {
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  const double r = angle - kTwoPi * rint(angle * (1.0 / kTwoPi));
  RopeSinCos<T> sc;
  if constexpr (sizeof(T) == 4) {
    sincos(r, &sc.s, &sc.c);
  } else {
    sincosf(static_cast<float>(r), &sc.s, &sc.c);
  }
  return sc;
}

/// Rotates the pair (x0, x1), values of storage type T, by the angle of `sc` (rope_sincos): in
/// double for fp32 storage, in fp32 otherwise.
template <typename T>
__device__ __forceinline__ void rope_apply(float& x0, float& x1, const RopeSinCos<T>& sc) {
  if constexpr (sizeof(T) == 4) {
    const double d0 = x0, d1 = x1;
    x0 = static_cast<float>(d0 * sc.c - d1 * sc.s);
    x1 = static_cast<float>(d0 * sc.s + d1 * sc.c);
  } else {
    const float r0 = x0 * sc.c - x1 * sc.s;
    x1 = x0 * sc.s + x1 * sc.c;
    x0 = r0;
  }
}

/// Rotates the pair (x0, x1) by `angle`: rope_apply of rope_sincos.
template <typename T>
__device__ __forceinline__ void rope_rotate(float& x0, float& x1, double angle) {
  rope_apply<T>(x0, x1, rope_sincos<T>(angle));
}

/// Tokens each thread of the RoPE kernels rotates (one pair of one head in each), so that the
/// pair's inverse frequency is computed once for them.
constexpr int64_t kRopeTokensPerThread = 8;

/// The keys a query at slot `pos` may see, clipped to [0, n_ctx) (causal, and within `window`
/// when > 0): [lo, hi], empty when lo > hi.
__device__ __forceinline__ void attention_key_range(int64_t pos, int64_t n_ctx, int64_t window,
                                                    int64_t* lo, int64_t* hi) {
  *hi = pos < n_ctx - 1 ? pos : n_ctx - 1;
  *lo = window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
}

/// The union of attention_key_range over query rows row0 .. row0 + nrows - 1 (a tile's keys):
/// [lo, hi], empty (lo > hi) when no row sees a key.
__device__ __forceinline__ void tile_key_range(const int32_t* q_pos, int64_t row0, int nrows,
                                               int64_t n_ctx, int64_t window, int64_t* lo,
                                               int64_t* hi) {
  *lo = INT64_MAX;
  *hi = -1;
  for (int r = 0; r < nrows; ++r) {
    int64_t a, b;
    attention_key_range(q_pos[row0 + r], n_ctx, window, &a, &b);
    if (a <= b) {
      *lo = a < *lo ? a : *lo;
      *hi = b > *hi ? b : *hi;
    }
  }
}

/// Element offset of KV head `kvh`'s row of slot `slot` in a paged pool of `kv_row` elements
/// per slot (the sequence's block table `table`).
__device__ __forceinline__ int64_t paged_head_offset(const int32_t* table, int64_t slot,
                                                     int64_t block_size, int64_t kv_row,
                                                     int64_t kvh, int64_t head_dim) {
  return (static_cast<int64_t>(table[slot / block_size]) * block_size + slot % block_size) *
             kv_row +
         kvh * head_dim;
}

/// Sum over the block, returned to every thread. blockDim.x is a multiple of 32 and at most
/// 1024; every thread of the block must call it (it synchronizes, so a row may be rewritten
/// in place after it).
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float partial[32];
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // partial[] may still be read by a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const int warps = blockDim.x / 32;
  v = lane < warps ? partial[lane] : 0.0f;
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

}  // namespace cb::kernels::cuda::detail

/// Calls LAUNCH(T) with T the C++ type of `storage` (float, __half, __nv_bfloat16).
#define CB_DISPATCH_STORAGE(storage, LAUNCH)                                 \
  do {                                                                       \
    switch (storage) {                                                       \
      case ::cb::kernels::cuda::Storage::F32: LAUNCH(float); break;          \
      case ::cb::kernels::cuda::Storage::F16: LAUNCH(__half); break;         \
      case ::cb::kernels::cuda::Storage::BF16: LAUNCH(__nv_bfloat16); break; \
      default: return cudaErrorInvalidValue;                                 \
    }                                                                        \
  } while (0)
