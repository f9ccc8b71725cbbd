#pragma once
// The CUDA-core paged attention kernel and the split combiner (see attention.h; launched by
// attention.cu), in a header so that tests/unit/cuda/kernels_emulated_test.cc runs their
// source on the host.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/device_math.cuh"

namespace cb::kernels::cuda {
namespace attention_detail {

using detail::allow_dependent_launch;
using detail::from_f;
using detail::to_f;

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kKeys = 32;                                  // key slots per shared-memory tile
constexpr int kRowsPerWarp = kAttentionTileRows / kWarps;  // 4
constexpr int kDimsPerLane = kAttentionMaxHeadDim / 32;    // 4: lane owns dims lane + 32 i
constexpr int kPad = kAttentionMaxHeadDim + 1;             // K rows padded: no bank conflicts

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ int64_t imin(int64_t a, int64_t b) {
  return a < b ? a : b;
}
__device__ __forceinline__ int64_t imax(int64_t a, int64_t b) {
  return a > b ? a : b;
}

using detail::attention_key_range;
using detail::tile_key_range;

// kVec consecutive elements (16 bytes, 16-byte aligned) of a pool, as floats: one load
// instruction instead of kVec.
// kVec elements as one 16-byte load, copied into an array of T (memcpy, which nvcc turns into
// register moves; writing the vector through a uint4 pointer into a T array is undefined
// behaviour, which g++ -O2 miscompiles in the host emulation).
template <typename T, int kVec>
__device__ __forceinline__ void load16(const T* __restrict__ src, float (&dst)[kVec]) {
  static_assert(kVec * sizeof(T) == 16, "16 bytes");
  const uint4 v = __ldg(reinterpret_cast<const uint4*>(src));
  T tmp[kVec];
  memcpy(static_cast<void*>(tmp), &v, 16);
#pragma unroll
  for (int e = 0; e < kVec; ++e) dst[e] = to_f(tmp[e]);
}

// One key tile for the first NR rows of a warp (row i of the warp is tile row warp + 4 i):
// scores (each ks[lane][d] read once for all rows), the online-softmax update, and P.V (each V
// element read once for all rows; p of key j comes from lane j).
template <int HD, int NR, int kDims>
__device__ __forceinline__ void tile_step(
    const float (&qs)[kAttentionTileRows][kAttentionMaxHeadDim], const float (&ks)[kKeys][kPad],
    const float (&vs)[kKeys][kAttentionMaxHeadDim], int warp, int lane, int64_t slot, int head_dim,
    const int64_t (&rlo)[kRowsPerWarp], const int64_t (&rhi)[kRowsPerWarp],
    float (&m)[kRowsPerWarp], float (&l)[kRowsPerWarp], float (&acc)[kRowsPerWarp][kDims]) {
  float dot[NR];
#pragma unroll
  for (int i = 0; i < NR; ++i) dot[i] = 0.0f;
  if constexpr (HD > 0) {
#pragma unroll 16
    for (int d = 0; d < HD; ++d) {
      const float kd = ks[lane][d];
#pragma unroll
      for (int i = 0; i < NR; ++i) dot[i] += qs[warp + kWarps * i][d] * kd;
    }
  } else {
    for (int d = 0; d < head_dim; ++d) {
      const float kd = ks[lane][d];
#pragma unroll
      for (int i = 0; i < NR; ++i) dot[i] += qs[warp + kWarps * i][d] * kd;
    }
  }
  float p[NR];
#pragma unroll
  for (int i = 0; i < NR; ++i) {
    const bool ok = slot >= rlo[i] && slot <= rhi[i];
    const float s = ok ? dot[i] : -INFINITY;
    const float m_new = fmaxf(m[i], warp_max(s));  // the same in every lane
    p[i] = ok ? expf(s - m_new) : 0.0f;
    if (m_new != -INFINITY) {
      const float corr = m[i] == -INFINITY ? 0.0f : expf(m[i] - m_new);
      l[i] = l[i] * corr + warp_sum(p[i]);
#pragma unroll
      for (int c = 0; c < kDims; ++c) acc[i][c] *= corr;
      m[i] = m_new;
    }
  }
#pragma unroll 4
  for (int j = 0; j < kKeys; ++j) {
    float v[kDims];
#pragma unroll
    for (int c = 0; c < kDims; ++c) {
      const int d = lane + 32 * c;
      v[c] = (HD > 0 || d < head_dim) ? vs[j][d] : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < NR; ++i) {
      const float pj = __shfl_sync(0xffffffffu, p[i], j);
#pragma unroll
      for (int c = 0; c < kDims; ++c) acc[i][c] += pj * v[c];
    }
  }
}

// grid (tiles, heads, splits), kThreads threads. HD > 0: the head dimension at compile time
// (64 and 128: unrolled loops, shifts); HD == 0: any head_dim up to kAttentionMaxHeadDim.
template <typename T, int HD>
__global__ void __launch_bounds__(kThreads)
    paged_attention_kernel(const T* __restrict__ q, int64_t q_stride, T* __restrict__ out,
                           const int32_t* __restrict__ q_pos, const int32_t* __restrict__ q_seq,
                           int64_t n_heads, int64_t n_kv_heads, int head_dim_rt,
                           const T* __restrict__ k_pool, const T* __restrict__ v_pool,
                           const int32_t* __restrict__ block_tables, int64_t table_stride,
                           const int32_t* __restrict__ n_ctx_of, int64_t block_size, int64_t window,
                           float scale, const int32_t* __restrict__ tiles, int64_t splits,
                           float* __restrict__ workspace) {
  allow_dependent_launch();
  constexpr int kDims = HD > 0 ? HD / 32 : kDimsPerLane;  // dims per lane
  const int head_dim = HD > 0 ? HD : head_dim_rt;
  __shared__ float qs[kAttentionTileRows][kAttentionMaxHeadDim];
  __shared__ float ks[kKeys][kPad];
  __shared__ float vs[kKeys][kAttentionMaxHeadDim];
  __shared__ int64_t koff[kKeys];  // element offset of each tile slot's KV head row; -1: none

  const int64_t row0 = tiles[2 * blockIdx.x];
  const int nrows = tiles[2 * blockIdx.x + 1];
  const int64_t h = blockIdx.y;
  const int64_t split = blockIdx.z;
  const int64_t kvh = h / (n_heads / n_kv_heads);
  const int64_t seq = q_seq[row0];
  const int64_t n_ctx = n_ctx_of[seq];
  const int32_t* table = block_tables + seq * table_stride;
  const int64_t kv_row = n_kv_heads * head_dim;  // elements per slot
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  // The tile's key range: the union of its rows' ranges.
  int64_t lo, hi;
  tile_key_range(q_pos, row0, nrows, n_ctx, window, &lo, &hi);
  // This split's share, in whole tiles of kKeys.
  if (hi >= lo) {
    const int64_t tiles_total = (hi - lo + kKeys) / kKeys;
    const int64_t per = (tiles_total + splits - 1) / splits;
    const int64_t first = lo + split * per * kKeys;
    const int64_t last = imin(hi, first + per * kKeys - 1);
    lo = first;
    hi = last;
  }

  for (int i = threadIdx.x; i < kAttentionTileRows * head_dim; i += kThreads) {
    const int r = i / head_dim, d = i - r * head_dim;
    qs[r][d] = r < nrows ? to_f(q[(row0 + r) * q_stride + h * head_dim + d]) * scale : 0.0f;
  }

  float m[kRowsPerWarp], l[kRowsPerWarp], acc[kRowsPerWarp][kDims];
  int64_t rlo[kRowsPerWarp], rhi[kRowsPerWarp];
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.0f;
#pragma unroll
    for (int c = 0; c < kDims; ++c) acc[i][c] = 0.0f;
    const int r = warp + kWarps * i;
    rlo[i] = 1;
    rhi[i] = 0;
    if (r < nrows) attention_key_range(q_pos[row0 + r], n_ctx, window, &rlo[i], &rhi[i]);
  }

  for (int64_t base = lo; base <= hi; base += kKeys) {
    __syncthreads();  // the previous tile is no longer read (and qs is written, first time)
    if (threadIdx.x < kKeys) {  // one paged lookup per slot, not per element
      const int64_t slot = base + threadIdx.x;
      koff[threadIdx.x] =
          slot <= hi ? detail::paged_head_offset(table, slot, block_size, kv_row, kvh, head_dim)
                     : -1;
    }
    __syncthreads();
    if constexpr (HD > 0) {  // 16-byte loads: head rows are HD elements, pools aligned
      constexpr int kVec = 16 / sizeof(T);
      constexpr int kPerRow = HD / kVec;
      for (int i = threadIdx.x; i < kKeys * kPerRow; i += kThreads) {
        const int j = i / kPerRow, d = (i - j * kPerRow) * kVec;
        const int64_t off = koff[j];
        float kf[kVec], vf[kVec];
        if (off >= 0) {
          load16<T, kVec>(k_pool + off + d, kf);
          load16<T, kVec>(v_pool + off + d, vf);
        } else {
#pragma unroll
          for (int e = 0; e < kVec; ++e) kf[e] = vf[e] = 0.0f;
        }
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          ks[j][d + e] = kf[e];
          vs[j][d + e] = vf[e];
        }
      }
    } else {
      for (int i = threadIdx.x; i < kKeys * head_dim; i += kThreads) {
        const int j = i / head_dim, d = i - j * head_dim;
        const int64_t off = koff[j];
        ks[j][d] = off >= 0 ? to_f(k_pool[off + d]) : 0.0f;
        vs[j][d] = off >= 0 ? to_f(v_pool[off + d]) : 0.0f;
      }
    }
    __syncthreads();
    // Rows of this warp in the tile: none (e.g. decode tiles of one row: warps 1-3 idle), one
    // (decode) or up to four; the compute is specialised so absent rows cost nothing.
    const int nr = nrows > warp ? min((nrows - warp + kWarps - 1) / kWarps, kRowsPerWarp) : 0;
    if (nr == 1) {
      tile_step<HD, 1, kDims>(qs, ks, vs, warp, lane, base + lane, head_dim, rlo, rhi, m, l, acc);
    } else if (nr > 1) {
      tile_step<HD, kRowsPerWarp, kDims>(qs, ks, vs, warp, lane, base + lane, head_dim, rlo, rhi, m,
                                         l, acc);
    }
  }

#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int r = warp + kWarps * i;
    if (r >= nrows) break;
    const int64_t row = row0 + r;
    if (splits == 1) {
      const float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
#pragma unroll
      for (int c = 0; c < kDims; ++c) {
        const int d = lane + 32 * c;
        if (HD > 0 || d < head_dim) {
          out[(row * n_heads + h) * head_dim + d] = from_f<T>(acc[i][c] * inv);
        }
      }
    } else {
      float* w = workspace + ((row * n_heads + h) * splits + split) * (head_dim + 2);
      if (lane == 0) {
        w[0] = m[i];
        w[1] = l[i];
      }
#pragma unroll
      for (int c = 0; c < kDims; ++c) {
        const int d = lane + 32 * c;
        if (HD > 0 || d < head_dim) w[2 + d] = acc[i][c];
      }
    }
  }
}

// grid (rows, heads), 32 threads: out = sum_s acc_s e^(m_s - M) / sum_s l_s e^(m_s - M).
template <typename T>
__global__ void combine_splits_kernel(const float* __restrict__ workspace, T* __restrict__ out,
                                      int64_t n_heads, int64_t head_dim, int64_t splits) {
  allow_dependent_launch();
  const int64_t row = blockIdx.x, h = blockIdx.y;
  const float* w = workspace + (row * n_heads + h) * splits * (head_dim + 2);
  float mx = -INFINITY;
  for (int64_t s = 0; s < splits; ++s) mx = fmaxf(mx, w[s * (head_dim + 2)]);
  float denom = 0.0f;
  for (int64_t s = 0; s < splits; ++s) {
    const float ms = w[s * (head_dim + 2)];
    if (ms != -INFINITY) denom += w[s * (head_dim + 2) + 1] * expf(ms - mx);
  }
  const float inv = denom > 0.0f ? 1.0f / denom : 0.0f;
  for (int64_t d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float v = 0.0f;
    for (int64_t s = 0; s < splits; ++s) {
      const float ms = w[s * (head_dim + 2)];
      if (ms != -INFINITY) v += w[s * (head_dim + 2) + 2 + d] * expf(ms - mx);
    }
    out[(row * n_heads + h) * head_dim + d] = from_f<T>(v * inv);
  }
}

}  // namespace attention_detail
}  // namespace cb::kernels::cuda
