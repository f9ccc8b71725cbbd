#pragma once
// The decode attention kernel (see attention.h, PagedAttentionParams::decode_kernel; launched
// by attention.cu), in a header so that tests/unit/cuda/kernels_emulated_test.cc runs its
// source on the host. CudaModel's default for decode since it passed on an H200 (2026-11-27).
//
// One block of 4 warps per (query row, head, split), for launches whose tiles are single rows
// (decode). A key's head row is read by a group of kLanes lanes, 16 bytes each, so a warp
// reads 32 / kLanes keys at once (fp16/bf16: 2 keys at head size 128, 4 at 64) and the block 4
// times as many, consecutive slots side by side. Each group scores its key with the query
// elements its lanes hold in registers (a shuffle reduction over the group) and keeps its own
// online softmax: the running max, the sum, and its lanes' share of P.V. A step issues the K
// and V loads of kUnroll keys per group before using any. At the end the groups' states are
// merged through shared memory into the output row (splits == 1) or into the split's (max,
// sum, unnormalized output) in the workspace layout that combine_splits_kernel reads. With
// `counters` (one int per row and head, zero before the launch), the last split block of each
// (row, head) to finish merges the splits itself, as the threadFenceReduction pattern does,
// and sets its counter back to zero: no combine launch.
//
// With kRope (PagedAttentionParams::rope_pos: CudaKernelPaths::decode_rope_fusion) the launch
// also does what launch_rope_kv_append did before it: Q is read as the QKV GEMV left it
// (before RoPE) and rotated in registers, and so is the row's new key, which every block
// takes from its QKV row rather than from the pool; one block per (row, KV head) writes the
// rotated key and the value into the row's slot. The values are those of the two launches:
// the same rotation, each rotated element rounded to the storage type as that kernel stores it.
//
// Against the CUDA-core kernel on a decode row, which stages 32-key tiles in shared memory
// with all 4 warps and then scores them with one warp (its other three idle, each lane looping
// over the head's dimensions alone), this keeps every lane of the block on keys and reads K
// and V straight into registers.
#include <cmath>
#include <cstdint>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_kernel.cuh"
#include "kernels/cuda/device_math.cuh"

namespace cb::kernels::cuda {
namespace decode_detail {

using attention_detail::load16;
using detail::allow_dependent_launch;
using detail::from_f;
using detail::rope_apply;
using detail::rope_inv_freq;
using detail::rope_sincos;
using detail::RopeSinCos;
using detail::to_f;

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kUnroll = 4;  // keys per group per step, their loads issued together

template <typename T, int HD>
struct DecodeShape {
  static constexpr int kVec = 16 / static_cast<int>(sizeof(T));  // elements a lane loads
  static constexpr int kLanes = HD / kVec;                       // lanes per key row
  static constexpr int kGroups = 32 / kLanes;                    // keys a warp reads at once
  static constexpr int kBlockGroups = kWarps * kGroups;
  static_assert(HD % kVec == 0 && kLanes >= 1 && kLanes <= 32 && 32 % kLanes == 0,
                "a head row must be 1-32 whole 16-byte vectors");
};

// What the kRope kernel needs beyond the plain one (see PagedAttentionParams::rope_pos).
template <typename T>
struct DecodeRope {
  const int32_t* positions = nullptr;  // [rows]: each row's rotary position
  const T* k_new = nullptr;            // the rows' new K heads before RoPE, rows q_stride apart
  const T* v_new = nullptr;            // and their V heads
  T* k_pool = nullptr;                 // the pools the launch reads, written at each row's own slot
  T* v_pool = nullptr;
  int64_t rope_dims = 0;  // even, <= HD; rotate-half needs rope_dims / 2 a multiple of kVec
  double theta = 10000.0;
  bool interleaved = true;
};

// Rotates a query row and a key row held as a lane's kVec elements (dims d0 .. d0 + kVec - 1;
// a row's kLanes lanes side by side in the warp) by the row's position, as rope_kv_append_kernel
// rotates Q and K (rope_pair's pairs, rope_inv_freq, rope_sincos, rope_apply), and rounds each
// rotated element to T as it stores them. A rotate-half pair's halves lie half / kVec lanes
// apart (the caller checks half % kVec == 0); interleaved pairs lie in one lane. Every lane of
// the warp calls it (shuffles).
template <typename T, int kVec>
__device__ __forceinline__ void rope_q_and_k(float (&q)[kVec], float (&k)[kVec], int d0, int lane,
                                             int64_t pos, const DecodeRope<T>& r) {
  const int64_t half = r.rope_dims / 2;
  if (r.interleaved) {
#pragma unroll
    for (int e = 0; e < kVec; e += 2) {  // d0 is even: pairs (d0 + e, d0 + e + 1)
      const int64_t d = d0 + e;
      if (d >= r.rope_dims) continue;
      const RopeSinCos<T> sc =
          rope_sincos<T>(static_cast<double>(pos) * rope_inv_freq(d / 2, r.rope_dims, r.theta));
      rope_apply<T>(q[e], q[e + 1], sc);
      rope_apply<T>(k[e], k[e + 1], sc);
    }
  } else {
    const int off = static_cast<int>(half) / kVec;
    const int src = d0 < half ? lane + off : (d0 < r.rope_dims ? lane - off : lane);
    const bool first = d0 < half;
#pragma unroll
    for (int e = 0; e < kVec; ++e) {
      const float qp = __shfl_sync(0xffffffffu, q[e], src);
      const float kp = __shfl_sync(0xffffffffu, k[e], src);
      const int64_t d = d0 + e;
      if (d >= r.rope_dims) continue;
      const int64_t i = first ? d : d - half;
      const RopeSinCos<T> sc =
          rope_sincos<T>(static_cast<double>(pos) * rope_inv_freq(i, r.rope_dims, r.theta));
      // (a, b) = (element i, element i + half), as the pair kernel holds them.
      float qa = first ? q[e] : qp, qb = first ? qp : q[e];
      float ka = first ? k[e] : kp, kb = first ? kp : k[e];
      rope_apply<T>(qa, qb, sc);
      rope_apply<T>(ka, kb, sc);
      q[e] = first ? qa : qb;
      k[e] = first ? ka : kb;
    }
  }
#pragma unroll
  for (int e = 0; e < kVec; ++e) {
    q[e] = to_f(from_f<T>(q[e]));
    k[e] = to_f(from_f<T>(k[e]));
  }
}

// grid (rows, heads, splits), kThreads threads; HD is 64 or 128 (a multiple of 16 bytes of T
// in general), K and V pools 16-byte aligned.
template <typename T, int HD, bool kRope = false>
__global__ void __launch_bounds__(kThreads)
    paged_attention_decode_kernel(const T* __restrict__ q, int64_t q_stride, T* __restrict__ out,
                                  const int32_t* __restrict__ q_pos,
                                  const int32_t* __restrict__ q_seq, int64_t n_heads,
                                  int64_t n_kv_heads, const T* __restrict__ k_pool,
                                  const T* __restrict__ v_pool,
                                  const int32_t* __restrict__ block_tables, int64_t table_stride,
                                  const int32_t* __restrict__ n_ctx_of, int64_t block_size,
                                  int64_t window, float scale, int64_t splits,
                                  float* __restrict__ workspace, int32_t* __restrict__ counters,
                                  DecodeRope<T> rope) {
  allow_dependent_launch();
  using S = DecodeShape<T, HD>;
  constexpr int kVec = S::kVec, kLanes = S::kLanes, kBlockGroups = S::kBlockGroups;
  __shared__ float sm_m[kBlockGroups];
  __shared__ float sm_l[kBlockGroups];
  __shared__ float sm_acc[kBlockGroups][HD];

  const int64_t row = blockIdx.x, h = blockIdx.y, split = blockIdx.z;
  const int64_t kvh = h / (n_heads / n_kv_heads);
  const int64_t seq = q_seq[row];
  const int32_t* table = block_tables + seq * table_stride;
  const int64_t kv_row = n_kv_heads * HD;  // elements per slot
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = warp * S::kGroups + lane / kLanes;  // 0 .. kBlockGroups - 1
  const int d0 = (lane % kLanes) * kVec;                // this lane's dims d0 .. d0 + kVec - 1

  int64_t lo, hi;
  detail::attention_key_range(q_pos[row], n_ctx_of[seq], window, &lo, &hi);
  if (hi >= lo) {  // this split's share of the row's keys (empty for the last ones when short)
    const int64_t per = (hi - lo + splits) / splits;
    const int64_t first = lo + split * per;
    hi = hi < first + per - 1 ? hi : first + per - 1;
    lo = first;
  }

  float qv[kVec];
#pragma unroll
  for (int e = 0; e < kVec; ++e) qv[e] = to_f(q[row * q_stride + h * HD + d0 + e]);
  // kRope: the row's own key and value (its slot not yet in the pool), rotated as Q is.
  const int64_t own = kRope ? q_pos[row] : -1;
  float kn[kVec] = {}, vn[kVec] = {};
  if constexpr (kRope) {
    load16<T, kVec>(rope.k_new + row * q_stride + kvh * HD + d0, kn);
    load16<T, kVec>(rope.v_new + row * q_stride + kvh * HD + d0, vn);
    rope_q_and_k<T, kVec>(qv, kn, d0, lane, rope.positions[row], rope);
    if (split == 0 && h % (n_heads / n_kv_heads) == 0 && group == 0) {  // one writer a KV head
      const int64_t off = detail::paged_head_offset(table, own, block_size, kv_row, kvh, HD);
#pragma unroll
      for (int e = 0; e < kVec; ++e) {
        rope.k_pool[off + d0 + e] = from_f<T>(kn[e]);  // (both values of T: exact)
        rope.v_pool[off + d0 + e] = from_f<T>(vn[e]);
      }
    }
  }
#pragma unroll
  for (int e = 0; e < kVec; ++e) qv[e] *= scale;

  float m = -INFINITY, l = 0.0f, acc[kVec];
#pragma unroll
  for (int e = 0; e < kVec; ++e) acc[e] = 0.0f;

  // The loop is uniform over the block (every lane takes part in the group's shuffles); a
  // group whose slot is past hi scores -inf and adds nothing.
  for (int64_t base = lo; base <= hi; base += kBlockGroups * kUnroll) {
    float kf[kUnroll][kVec], vf[kUnroll][kVec];
    bool ok[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t slot = base + u * kBlockGroups + group;
      ok[u] = slot <= hi;
      // With kRope the row's own slot is written through rope.k_pool/v_pool by this launch
      // while k_pool/v_pool are read as __restrict__ through the read-only path: that holds
      // only because no block reads the own slot from the pool (the registers below) and one
      // row a sequence writes (Model's batch_rows refuses a sequence twice in a batch).
      if (ok[u] && kRope && slot == own) {
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
          kf[u][e] = kn[e];
          vf[u][e] = vn[e];
        }
      } else if (ok[u]) {
        const int64_t off = detail::paged_head_offset(table, slot, block_size, kv_row, kvh, HD);
        load16<T, kVec>(k_pool + off + d0, kf[u]);
        load16<T, kVec>(v_pool + off + d0, vf[u]);
      } else {
#pragma unroll
        for (int e = 0; e < kVec; ++e) kf[u][e] = vf[u][e] = 0.0f;
      }
    }
    float s[kUnroll];
    float mx = m;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float dot = 0.0f;
#pragma unroll
      for (int e = 0; e < kVec; ++e) dot += qv[e] * kf[u][e];
#pragma unroll
      for (int o = kLanes / 2; o > 0; o /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, o);
      s[u] = ok[u] ? dot : -INFINITY;
      mx = fmaxf(mx, s[u]);
    }
    // The butterfly leaves the same sum in every lane of a group, so its lanes agree on mx.
    if (mx != -INFINITY) {  // else no key of this group in this step, nor before
      const float corr = m == -INFINITY ? 0.0f : expf(m - mx);
      l *= corr;
#pragma unroll
      for (int e = 0; e < kVec; ++e) acc[e] *= corr;
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const float p = ok[u] ? expf(s[u] - mx) : 0.0f;
        l += p;
#pragma unroll
        for (int e = 0; e < kVec; ++e) acc[e] += p * vf[u][e];
      }
      m = mx;
    }
  }

  if (lane % kLanes == 0) {
    sm_m[group] = m;
    sm_l[group] = l;
  }
#pragma unroll
  for (int e = 0; e < kVec; ++e) sm_acc[group][d0 + e] = acc[e];
  __syncthreads();
  for (int d = threadIdx.x; d < HD; d += kThreads) {
    float mx = -INFINITY;
    for (int g = 0; g < kBlockGroups; ++g) mx = fmaxf(mx, sm_m[g]);
    float sum = 0.0f, o = 0.0f;
    if (mx != -INFINITY) {
      for (int g = 0; g < kBlockGroups; ++g) {
        if (sm_m[g] == -INFINITY) continue;
        const float w = expf(sm_m[g] - mx);
        sum += sm_l[g] * w;
        o += sm_acc[g][d] * w;
      }
    }
    if (splits == 1) {
      out[(row * n_heads + h) * HD + d] = from_f<T>(sum > 0.0f ? o / sum : 0.0f);
    } else {
      float* w = workspace + ((row * n_heads + h) * splits + split) * (HD + 2);
      if (d == 0) {
        w[0] = mx;
        w[1] = sum;
      }
      w[2 + d] = o;
    }
  }
  if (splits == 1 || counters == nullptr) return;
  // Publish this split's partial, then count it; the block that counts last merges them all.
  // The block's writes are ordered before thread 0's fence by the barrier; thread 0 releases
  // them with its count and acquires the other blocks' with its second fence (the pattern of
  // cooperative groups' grid sync).
  __shared__ int last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    last = atomicAdd(&counters[row * n_heads + h], 1) == static_cast<int>(splits) - 1;
    __threadfence();
  }
  __syncthreads();
  if (!last) return;
  const float* w = workspace + (row * n_heads + h) * splits * (HD + 2);
  float mx = -INFINITY;
  for (int64_t sp = 0; sp < splits; ++sp) mx = fmaxf(mx, __ldcg(w + sp * (HD + 2)));
  for (int d = threadIdx.x; d < HD; d += kThreads) {
    float sum = 0.0f, o = 0.0f;
    for (int64_t sp = 0; sp < splits; ++sp) {
      const float* ws = w + sp * (HD + 2);
      const float ms = __ldcg(ws);
      if (ms == -INFINITY) continue;
      const float e = expf(ms - mx);
      sum += __ldcg(ws + 1) * e;
      o += __ldcg(ws + 2 + d) * e;
    }
    out[(row * n_heads + h) * HD + d] = from_f<T>(sum > 0.0f ? o / sum : 0.0f);
  }
  if (threadIdx.x == 0) counters[row * n_heads + h] = 0;  // ready for the next launch
}

}  // namespace decode_detail
}  // namespace cb::kernels::cuda
