#pragma once
// The FlashAttention-2-style tensor-core paged attention kernel (see attention.h; launched by
// attention_fa2.cu where PagedAttentionParams::fa2 asks for it, as CudaModel does by default:
// on an H100 it passed the parity tests and beat attention_mma.cu's wmma kernel). A block takes a
// tile of 64 query rows of one sequence and one head, 4 warps of 16 rows. Keys and values stream
// through shared memory 64 slots at a time, gathered from the paged blocks with cp.async into two
// buffers (the next tile loads while this one is computed). Per warp and tile, everything stays in
// registers:
//   - S = Q.K^T on mma.sync m16n8k16 (fp32 accumulation), Q's fragments loaded once;
//   - the online softmax of each row in fp32 (a row's 4 lanes agree on its max by shuffles);
//   - P rounded to the storage type, reused in place as the A operand of P.V (the
//     accumulator layout of S is the operand layout of P), V's fragments by ldmatrix.trans;
//   - the fp32 output accumulators rescaled by the softmax correction.
// The row sums are reduced across a row's lanes once, at the end.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/device_math.cuh"

// CB_SIMT_EMULATION (tests/unit/cuda/simt_emulator.h, host compilers only) replaces the
// inline PTX below with its emulation, so the kernel's own source runs on the host.
#ifdef CB_SIMT_EMULATION
#define CB_DYNAMIC_SMEM(name) unsigned char* name = ::cb::simt::dynamic_smem()
#else
#define CB_DYNAMIC_SMEM(name) extern __shared__ __align__(128) unsigned char name[]
#endif

namespace cb::kernels::cuda {
namespace fa2_detail {

using detail::attention_key_range;
using detail::paged_head_offset;
using detail::tile_key_range;

constexpr int kFa2Warps = 4;
constexpr int kFa2Threads = kFa2Warps * 32;
constexpr int kFa2Rows = static_cast<int>(kAttentionMmaTileRows);  // 16 per warp
constexpr int kFa2Keys = 64;                                       // keys per shared tile

// Shared memory for head size HD (elements of 2 bytes): Q, then two K and two V buffers, each
// row padded by 8 elements so that a fragment's 8 rows fall in distinct banks.
template <int HD>
struct Fa2Smem {
  static constexpr int kLd = HD + 8;
  static constexpr size_t q = 0;
  static constexpr size_t kv_tile = size_t{kFa2Keys} * kLd * 2;  // one K or V buffer
  static constexpr size_t k = q + size_t{kFa2Rows} * kLd * 2;
  static constexpr size_t v = k + 2 * kv_tile;
  static constexpr size_t bytes = v + 2 * kv_tile;
};

#ifdef CB_SIMT_EMULATION
using ::cb::simt::cp_async16;
using ::cb::simt::ldmatrix_x4_trans;
using ::cb::simt::mma16816;
inline void cp_async_commit() {}
template <int N>
void cp_async_wait() {}
#else
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, asynchronously; zeros where !valid (nothing is read then).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// D += A.B for one m16n8k16 tile: A 16x16 (row), B 16x8 (col), fp32 accumulators.
template <typename T>
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  if constexpr (sizeof(T) == 2 && std::is_same<T, __half>::value) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// Four 8x8 matrices of 2-byte elements, transposed: lane l gives the address of row l % 8 of
// matrix l / 8.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(row)));
}

#endif  // CB_SIMT_EMULATION

// Two floats as a register of two storage elements (the first in the low half).
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same<T, __half>::value) {
    return static_cast<uint32_t>(__half_as_ushort(__float2half_rn(lo))) |
           (static_cast<uint32_t>(__half_as_ushort(__float2half_rn(hi))) << 16);
  } else {
    return static_cast<uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(lo))) |
           (static_cast<uint32_t>(__bfloat16_as_ushort(__float2bfloat16_rn(hi))) << 16);
  }
}

__device__ __forceinline__ uint32_t ld32(const void* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

// grid (tiles, heads), kFa2Threads threads, Fa2Smem<HD>::bytes of dynamic shared memory.
template <typename T, int HD>
__global__ void __launch_bounds__(kFa2Threads)
    paged_attention_fa2_kernel(const T* __restrict__ q, int64_t q_stride, T* __restrict__ out,
                               const int32_t* __restrict__ q_pos, const int32_t* __restrict__ q_seq,
                               int64_t n_heads, int64_t n_kv_heads, const T* __restrict__ k_pool,
                               const T* __restrict__ v_pool,
                               const int32_t* __restrict__ block_tables, int64_t table_stride,
                               const int32_t* __restrict__ n_ctx_of, int64_t block_size,
                               int64_t window, float scale, const int32_t* __restrict__ tiles) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  using L = Fa2Smem<HD>;
  constexpr int kLd = L::kLd;
  constexpr int kVec = HD / 8;     // 16-byte vectors per row
  constexpr int kSteps = HD / 16;  // k-steps of Q.K^T
  constexpr int kKeyBlocks = kFa2Keys / 8;
  constexpr int kOutBlocks = HD / 8;
  CB_DYNAMIC_SMEM(smem);
  T* qs = reinterpret_cast<T*>(smem + L::q);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;  // fragment row group and column pair

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

  // Keys [base, base + kFa2Keys) into buffer `buf`: thread i copies vectors i, i + 128, ...
  // (slot i / kVec, vector i % kVec) of K and of V.
  const auto load_tile = [&](int buf, int64_t base) {
    T* kb = reinterpret_cast<T*>(smem + L::k + buf * L::kv_tile);
    T* vb = reinterpret_cast<T*>(smem + L::v + buf * L::kv_tile);
    for (int i = threadIdx.x; i < kFa2Keys * kVec; i += kFa2Threads) {
      const int j = i / kVec, c = i % kVec;
      const int64_t slot = base + j;
      const bool ok = slot <= hi;
      const int64_t off =
          ok ? paged_head_offset(table, slot, block_size, kv_row, kvh, HD) + c * 8 : 0;
      cp_async16(kb + j * kLd + c * 8, k_pool + off, ok);
      cp_async16(vb + j * kLd + c * 8, v_pool + off, ok);
    }
  };

  for (int i = threadIdx.x; i < kFa2Rows * kVec; i += kFa2Threads) {
    const int r = i / kVec, c = i % kVec;
    const bool ok = r < nrows;
    cp_async16(qs + r * kLd + c * 8, ok ? q + (row0 + r) * q_stride + h * HD + c * 8 : q, ok);
  }
  if (lo <= hi) load_tile(0, lo);
  cp_async_commit();

  // This lane's two rows (g and g + 8 of the warp's 16) and their key ranges.
  const int tr0 = warp * 16 + g, tr1 = tr0 + 8;
  int64_t rlo0 = 1, rhi0 = 0, rlo1 = 1, rhi1 = 0;
  if (tr0 < nrows) attention_key_range(q_pos[row0 + tr0], n_ctx, window, &rlo0, &rhi0);
  if (tr1 < nrows) attention_key_range(q_pos[row0 + tr1], n_ctx, window, &rlo1, &rhi1);
  const bool active = warp * 16 < nrows;
  const float sl2 = scale * 1.4426950408889634f;  // scores in log2 units: exp2f below
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
  float o[kOutBlocks][4];
#pragma unroll
  for (int n = 0; n < kOutBlocks; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  uint32_t qf[kSteps][4];

  int it = 0;
  for (int64_t base = lo; base <= hi; base += kFa2Keys, ++it) {
    const int buf = it & 1;
    if (base + kFa2Keys <= hi) {  // the next tile loads while this one is computed
      load_tile(buf ^ 1, base + kFa2Keys);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    if (it == 0 && active) {
      const T* qw = qs + warp * 16 * kLd;
#pragma unroll
      for (int s = 0; s < kSteps; ++s) {
        qf[s][0] = ld32(qw + g * kLd + s * 16 + 2 * t);
        qf[s][1] = ld32(qw + (g + 8) * kLd + s * 16 + 2 * t);
        qf[s][2] = ld32(qw + g * kLd + s * 16 + 2 * t + 8);
        qf[s][3] = ld32(qw + (g + 8) * kLd + s * 16 + 2 * t + 8);
      }
    }
    if (active) {
      const T* kb = reinterpret_cast<const T*>(smem + L::k + buf * L::kv_tile);
      const T* vb = reinterpret_cast<const T*>(smem + L::v + buf * L::kv_tile);
      // S = Q.K^T: key block n's fragment holds rows g, g + 8 and keys n * 8 + 2t, + 1.
      float s[kKeyBlocks][4];
#pragma unroll
      for (int n = 0; n < kKeyBlocks; ++n) {
        s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
        const T* kr = kb + (n * 8 + g) * kLd + 2 * t;
#pragma unroll
        for (int k = 0; k < kSteps; ++k) {
          mma16816<T>(s[n], qf[k], ld32(kr + k * 16), ld32(kr + k * 16 + 8));
        }
      }
      // Scale, mask, and the rows' new maxima.
      float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
      for (int n = 0; n < kKeyBlocks; ++n) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int64_t key = base + n * 8 + 2 * t + e;
          s[n][e] = key >= rlo0 && key <= rhi0 ? s[n][e] * sl2 : -INFINITY;
          s[n][2 + e] = key >= rlo1 && key <= rhi1 ? s[n][2 + e] * sl2 : -INFINITY;
          mx0 = fmaxf(mx0, s[n][e]);
          mx1 = fmaxf(mx1, s[n][2 + e]);
        }
      }
#pragma unroll
      for (int d = 1; d < 4; d *= 2) {
        mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, d));
        mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, d));
      }
      const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
      // A row with no key yet keeps reference 0: its p are exp2(-inf) = 0, its output 0.
      const float ref0 = mn0 == -INFINITY ? 0.0f : mn0, ref1 = mn1 == -INFINITY ? 0.0f : mn1;
      const float c0 = exp2f(m0 - ref0), c1 = exp2f(m1 - ref1);
      m0 = mn0;
      m1 = mn1;
      float ps0 = 0.0f, ps1 = 0.0f;
#pragma unroll
      for (int n = 0; n < kKeyBlocks; ++n) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          s[n][e] = exp2f(s[n][e] - ref0);
          s[n][2 + e] = exp2f(s[n][2 + e] - ref1);
          ps0 += s[n][e];
          ps1 += s[n][2 + e];
        }
      }
      l0 = l0 * c0 + ps0;  // this lane's share of the row sums
      l1 = l1 * c1 + ps1;
#pragma unroll
      for (int n = 0; n < kOutBlocks; ++n) {
        o[n][0] *= c0;
        o[n][1] *= c0;
        o[n][2] *= c1;
        o[n][3] *= c1;
      }
      // O += P.V, 16 keys at a time: key blocks 2kk and 2kk + 1 of S are P's A fragment.
#pragma unroll
      for (int kk = 0; kk < kFa2Keys / 16; ++kk) {
        const uint32_t a[4] = {pack2<T>(s[2 * kk][0], s[2 * kk][1]),
                               pack2<T>(s[2 * kk][2], s[2 * kk][3]),
                               pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                               pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
        // Lane l addresses slot kk * 16 + l % 8 (+ 8 for matrices 1 and 3) at output columns
        // (n + l / 16) * 8: matrices 0 and 1 are V's fragment for block n, 2 and 3 for n + 1.
        const T* vr = vb + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * kLd + (lane >> 4) * 8;
#pragma unroll
        for (int n = 0; n < kOutBlocks; n += 2) {
          uint32_t b[4];
          ldmatrix_x4_trans(b, vr + n * 8);
          mma16816<T>(o[n], a, b[0], b[1]);
          mma16816<T>(o[n + 1], a, b[2], b[3]);
        }
      }
    }
    __syncthreads();  // this buffer is refilled by the next iteration's load
  }
  cp_async_wait<0>();  // a tile with no keys loaded Q alone

  if (!active) return;
#pragma unroll
  for (int d = 1; d < 4; d *= 2) {
    l0 += __shfl_xor_sync(0xffffffffu, l0, d);
    l1 += __shfl_xor_sync(0xffffffffu, l1, d);
  }
  const float inv0 = l0 > 0.0f ? 1.0f / l0 : 0.0f, inv1 = l1 > 0.0f ? 1.0f / l1 : 0.0f;
#pragma unroll
  for (int n = 0; n < kOutBlocks; ++n) {
    const int col = n * 8 + 2 * t;
    if (tr0 < nrows) {
      *reinterpret_cast<uint32_t*>(out + ((row0 + tr0) * n_heads + h) * HD + col) =
          pack2<T>(o[n][0] * inv0, o[n][1] * inv0);
    }
    if (tr1 < nrows) {
      *reinterpret_cast<uint32_t*>(out + ((row0 + tr1) * n_heads + h) * HD + col) =
          pack2<T>(o[n][2] * inv1, o[n][3] * inv1);
    }
  }
#else
  __trap();  // mma.sync on fp16/bf16 with fp32 accumulation and cp.async need sm_80 or newer
#endif
}

}  // namespace fa2_detail
}  // namespace cb::kernels::cuda
