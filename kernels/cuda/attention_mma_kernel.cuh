#pragma once
// The wmma tensor-core paged attention kernel (see attention.h; launched by attention_mma.cu),
// in a header so that tests/unit/cuda/kernels_emulated_test.cc runs its source on the host
// (CB_SIMT_EMULATION: tests/unit/cuda/simt_emulator.h provides nvcuda::wmma and the dynamic
// shared memory). Prefill tiles of 64 query rows of one sequence and one head, 4 warps of 16
// rows. Per tile of 32 keys (gathered from the paged blocks into shared memory): S = Q.K^T on
// wmma fragments (fp32 accumulation), the online softmax of each row in fp32 (two lanes per
// row, 16 keys each), P rounded to the storage type, then P.V on wmma fragments, 16 output
// columns at a time, folded into the row's fp32 output registers with the softmax correction.
#ifndef CB_SIMT_EMULATION
#include <mma.h>
#endif

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/device_math.cuh"

#ifdef CB_SIMT_EMULATION
#define CB_MMA_SMEM(name) unsigned char* name = ::cb::simt::dynamic_smem()
#else
#define CB_MMA_SMEM(name) extern __shared__ __align__(128) unsigned char name[]
#endif

namespace cb::kernels::cuda {
namespace mma_detail {

using detail::attention_key_range;
using detail::from_f;
using detail::paged_head_offset;
using detail::tile_key_range;

namespace wmma = nvcuda::wmma;

constexpr int kMmaWarps = 4;
constexpr int kMmaThreads = kMmaWarps * 32;
constexpr int kMmaRows = static_cast<int>(kAttentionMmaTileRows);  // 16 per warp
constexpr int kMmaKeys = 32;                                       // keys per shared tile
constexpr int kSLd = kMmaKeys + 4;                                 // floats per score row
constexpr int kPLd = kMmaKeys + 8;                                 // elements per P row
constexpr int kOLd = 16 + 4;                                       // floats per P.V chunk row

constexpr size_t align128(size_t b) {
  return (b + 127) / 128 * 128;
}

// Byte offsets of the dynamic shared-memory regions for head size HD (elements of 2 bytes).
template <int HD>
struct MmaSmem {
  static constexpr int kLd = HD + 8;  // Q, K, V rows padded (bank spread; 32-byte fragments)
  static constexpr size_t q = 0;
  static constexpr size_t k = q + align128(size_t{kMmaRows} * kLd * 2);
  static constexpr size_t v = k + align128(size_t{kMmaKeys} * kLd * 2);
  static constexpr size_t s = v + align128(size_t{kMmaKeys} * kLd * 2);
  static constexpr size_t p = s + align128(size_t{kMmaWarps} * 16 * kSLd * 4);
  static constexpr size_t o = p + align128(size_t{kMmaWarps} * 16 * kPLd * 2);
  static constexpr size_t corr = o + align128(size_t{kMmaWarps} * 16 * kOLd * 4);
  static constexpr size_t koff = corr + align128(size_t{kMmaWarps} * 16 * 4);
  static constexpr size_t bytes = koff + align128(size_t{kMmaKeys} * 8);
};

// Copies 8 elements (16 bytes) or writes zeros.
template <typename T>
__device__ __forceinline__ void copy8(T* dst, const T* src, bool ok) {
  *reinterpret_cast<uint4*>(dst) =
      ok ? *reinterpret_cast<const uint4*>(src) : make_uint4(0, 0, 0, 0);
}

// grid (tiles, heads), kMmaThreads threads, MmaSmem<HD>::bytes of dynamic shared memory.
template <typename T, int HD>
__global__ void __launch_bounds__(kMmaThreads)
    paged_attention_mma_kernel(const T* __restrict__ q, int64_t q_stride, T* __restrict__ out,
                               const int32_t* __restrict__ q_pos, const int32_t* __restrict__ q_seq,
                               int64_t n_heads, int64_t n_kv_heads, const T* __restrict__ k_pool,
                               const T* __restrict__ v_pool,
                               const int32_t* __restrict__ block_tables, int64_t table_stride,
                               const int32_t* __restrict__ n_ctx_of, int64_t block_size,
                               int64_t window, float scale, const int32_t* __restrict__ tiles) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  using L = MmaSmem<HD>;
  constexpr int kLd = L::kLd;
  constexpr int kVec = HD / 8;      // 16-byte vectors per row
  constexpr int kChunks = HD / 16;  // 16-column output chunks
  CB_MMA_SMEM(smem);
  T* qs = reinterpret_cast<T*>(smem + L::q);
  T* ks = reinterpret_cast<T*>(smem + L::k);
  T* vs = reinterpret_cast<T*>(smem + L::v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* sw = reinterpret_cast<float*>(smem + L::s) + warp * 16 * kSLd;
  T* pw = reinterpret_cast<T*>(smem + L::p) + warp * 16 * kPLd;
  float* ow = reinterpret_cast<float*>(smem + L::o) + warp * 16 * kOLd;
  float* corr_w = reinterpret_cast<float*>(smem + L::corr) + warp * 16;
  auto* koff = reinterpret_cast<int64_t*>(smem + L::koff);

  const int64_t row0 = tiles[2 * blockIdx.x];
  const int nrows = tiles[2 * blockIdx.x + 1];
  const int64_t h = blockIdx.y;
  const int64_t kvh = h / (n_heads / n_kv_heads);
  const int64_t seq = q_seq[row0];
  const int64_t n_ctx = n_ctx_of[seq];
  const int32_t* table = block_tables + seq * table_stride;
  const int64_t kv_row = n_kv_heads * HD;

  // The tile's key range: the union of its rows' ranges (rows are consecutive positions of
  // one sequence in the engine, but any order is handled).
  int64_t lo, hi;
  tile_key_range(q_pos, row0, nrows, n_ctx, window, &lo, &hi);
  for (int i = threadIdx.x; i < kMmaRows * kVec; i += kMmaThreads) {
    const int r = i / kVec, c = i % kVec;
    copy8(qs + r * kLd + c * 8, q + (row0 + r) * q_stride + h * HD + c * 8, r < nrows);
  }

  // This lane's softmax row (warp-local r, two lanes per row) and key half.
  const int r = lane / 2, half = lane % 2;
  const int tile_row = warp * 16 + r;
  int64_t rlo = 1, rhi = 0;
  if (tile_row < nrows) attention_key_range(q_pos[row0 + tile_row], n_ctx, window, &rlo, &rhi);
  float m = -INFINITY, l = 0.0f;
  // Output element (chunk c, k): row lane / 16 + 2 k, column lane % 16 of the chunk.
  float acc[kChunks][8];
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
#pragma unroll
    for (int k = 0; k < 8; ++k) acc[c][k] = 0.0f;
  }
  const bool active = warp * 16 < nrows;

  for (int64_t base = lo; base <= hi; base += kMmaKeys) {
    __syncthreads();  // the previous tile is no longer read (and Q is written, first time)
    if (threadIdx.x < kMmaKeys) {  // one paged lookup per slot
      const int64_t slot = base + threadIdx.x;
      koff[threadIdx.x] =
          slot <= hi ? paged_head_offset(table, slot, block_size, kv_row, kvh, HD) : -1;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < kMmaKeys * kVec; i += kMmaThreads) {
      const int j = i / kVec, c = i % kVec;
      const int64_t off = koff[j];
      copy8(ks + j * kLd + c * 8, k_pool + off + c * 8, off >= 0);
      copy8(vs + j * kLd + c * 8, v_pool + off + c * 8, off >= 0);
    }
    __syncthreads();
    if (!active) continue;

    // S = Q.K^T for this warp's 16 rows and the tile's 32 keys.
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> s_acc[2];
    wmma::fill_fragment(s_acc[0], 0.0f);
    wmma::fill_fragment(s_acc[1], 0.0f);
#pragma unroll
    for (int kk = 0; kk < HD / 16; ++kk) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
      wmma::load_matrix_sync(a, qs + warp * 16 * kLd + kk * 16, kLd);
#pragma unroll
      for (int n = 0; n < 2; ++n) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> b;
        wmma::load_matrix_sync(b, ks + n * 16 * kLd + kk * 16, kLd);
        wmma::mma_sync(s_acc[n], a, b, s_acc[n]);
      }
    }
    wmma::store_matrix_sync(sw, s_acc[0], kSLd, wmma::mem_row_major);
    wmma::store_matrix_sync(sw + 16, s_acc[1], kSLd, wmma::mem_row_major);
    __syncwarp();

    // Online softmax of row r over keys half * 16 .. + 16.
    float sv[16];
    float mx = -INFINITY;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const int col = half * 16 + j;
      const int64_t slot = base + col;
      const bool ok = slot >= rlo && slot <= rhi;
      sv[j] = ok ? sw[r * kSLd + col] * scale : -INFINITY;
      mx = fmaxf(mx, sv[j]);
    }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    const float m_new = fmaxf(m, mx);
    float corr = 1.0f, psum = 0.0f;
    if (m_new == -INFINITY) {
#pragma unroll
      for (int j = 0; j < 16; ++j) pw[r * kPLd + half * 16 + j] = from_f<T>(0.0f);
    } else {
      corr = m == -INFINITY ? 0.0f : expf(m - m_new);
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        const float p = sv[j] == -INFINITY ? 0.0f : expf(sv[j] - m_new);
        psum += p;
        pw[r * kPLd + half * 16 + j] = from_f<T>(p);
      }
    }
    psum += __shfl_xor_sync(0xffffffffu, psum, 1);
    l = l * corr + psum;
    m = m_new;
    if (half == 0) corr_w[r] = corr;
    __syncwarp();

    // O = O * corr + P.V, 16 output columns at a time.
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> pv;
      wmma::fill_fragment(pv, 0.0f);
#pragma unroll
      for (int k0 = 0; k0 < kMmaKeys; k0 += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> b;
        wmma::load_matrix_sync(a, pw + k0, kPLd);
        wmma::load_matrix_sync(b, vs + k0 * kLd + c * 16, kLd);
        wmma::mma_sync(pv, a, b, pv);
      }
      wmma::store_matrix_sync(ow, pv, kOLd, wmma::mem_row_major);
      __syncwarp();
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const int row = lane / 16 + 2 * k, col = lane % 16;
        acc[c][k] = acc[c][k] * corr_w[row] + ow[row * kOLd + col];
      }
      __syncwarp();
    }
  }

  if (!active) return;
  // The row sums, then the normalized output.
  __syncwarp();
  if (half == 0) corr_w[r] = l;
  __syncwarp();
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const int row = lane / 16 + 2 * k, col = lane % 16;
    const int tr = warp * 16 + row;
    if (tr >= nrows) continue;
    const float sum = corr_w[row];
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    T* o = out + ((row0 + tr) * n_heads + h) * HD + col;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) o[c * 16] = from_f<T>(acc[c][k] * inv);
  }
#else
  __trap();  // wmma on fp16/bf16 with fp32 accumulation needs sm_80 or newer
#endif
}

}  // namespace mma_detail
}  // namespace cb::kernels::cuda
