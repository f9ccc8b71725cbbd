#pragma once
// The KV restore, capture, append and gather kernels (see kv_restore.h; launched by
// kv_restore.cu), in a header so that tests/unit/cuda/kernels_emulated_test.cc runs their
// source on the host.
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/kv_restore.h"

namespace cb::kernels::cuda {
namespace detail {

template <typename T>
__global__ void kv_restore_kernel(const T* __restrict__ k_stage, const T* __restrict__ v_stage,
                                  T* __restrict__ k_pool, T* __restrict__ v_pool, PagedView view,
                                  int64_t pos0, int64_t n, int64_t heads, int64_t head_dim,
                                  int64_t rope_dims, int64_t rope_offset, double theta,
                                  bool interleaved) {
  // Work item k: pair k % (heads * pairs) of the kRopeTokensPerThread tokens of chunk
  // k / (heads * pairs), so the pair's inverse frequency is computed once for them.
  const int64_t pairs = head_dim / 2;
  const int64_t total = (n + kRopeTokensPerThread - 1) / kRopeTokensPerThread * heads * pairs;
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < total;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = k % pairs;
    const int64_t h = (k / pairs) % heads;
    const int64_t t0 = k / (pairs * heads) * kRopeTokensPerThread;
    const int64_t t1 = t0 + kRopeTokensPerThread < n ? t0 + kRopeTokensPerThread : n;
    const PairElems e = rope_pair(i, rope_dims, interleaved);
    const double inv_freq = e.rotate ? detail::rope_inv_freq(i, rope_dims, theta) : 0.0;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t src = t * view.kv_dim + h * head_dim;
      const int64_t dst_a = paged_offset(view, pos0 + t, h * head_dim + e.a);
      const int64_t dst_b = dst_a + (e.b - e.a);  // same slot, same head
      float x0 = to_f(k_stage[src + e.a]), x1 = to_f(k_stage[src + e.b]);
      if (e.rotate) {
        detail::rope_rotate<T>(x0, x1, static_cast<double>(pos0 + rope_offset + t) * inv_freq);
      }
      k_pool[dst_a] = from_f<T>(x0);
      k_pool[dst_b] = from_f<T>(x1);
      // V: the same two elements, copied.
      v_pool[dst_a] = v_stage[src + e.a];
      v_pool[dst_b] = v_stage[src + e.b];
    }
  }
}

template <typename T>
__global__ void kv_capture_kernel(const T* __restrict__ k_src, const T* __restrict__ v_src,
                                  int64_t src_stride, T* __restrict__ k_stage,
                                  T* __restrict__ v_stage, int64_t n, int64_t kv_dim) {
  const int64_t total = n * kv_dim;
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < total;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = k / kv_dim, j = k % kv_dim;
    k_stage[k] = k_src[t * src_stride + j];
    v_stage[k] = v_src[t * src_stride + j];
  }
}

template <typename T>
__global__ void kv_append_kernel(const T* __restrict__ k_src, const T* __restrict__ v_src,
                                 int64_t src_stride, T* __restrict__ k_pool, T* __restrict__ v_pool,
                                 PagedView view, int64_t pos0, int64_t n,
                                 const int32_t* __restrict__ row_seq,
                                 const int32_t* __restrict__ row_slot, int64_t table_stride) {
  allow_dependent_launch();
  const int64_t total = n * view.kv_dim;
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < total;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = k / view.kv_dim, j = k % view.kv_dim;
    PagedView v = view;
    int64_t slot = pos0 + t;
    if (row_seq != nullptr) {  // batched: this row's sequence and slot
      v.block_table = view.block_table + row_seq[t] * table_stride;
      slot = row_slot[t];
    }
    const int64_t dst = paged_offset(v, slot, j);
    k_pool[dst] = k_src[t * src_stride + j];
    v_pool[dst] = v_src[t * src_stride + j];
  }
}

// Work items per chunk of kRopeTokensPerThread rows: q_heads * (rope_dims / 2) rotating pairs of
// Q, then kv_heads * (head_dim / 2) pairs of K (rotated where they rotate) and of V (copied).
template <typename T>
__global__ void rope_kv_append_kernel(T* qkv, const int32_t* __restrict__ positions, int64_t n,
                                      int64_t q_heads, int64_t kv_heads, int64_t head_dim,
                                      int64_t rope_dims, int64_t token_stride, double theta,
                                      bool interleaved, T* __restrict__ k_pool,
                                      T* __restrict__ v_pool, PagedView view,
                                      const int32_t* __restrict__ row_seq,
                                      const int32_t* __restrict__ row_slot, int64_t table_stride) {
  allow_dependent_launch();
  const int64_t half = rope_dims / 2, pairs = head_dim / 2;
  const int64_t q_items = q_heads * half, per_chunk = q_items + kv_heads * pairs;
  const int64_t total = (n + kRopeTokensPerThread - 1) / kRopeTokensPerThread * per_chunk;
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < total;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t item = k % per_chunk;
    const int64_t t0 = k / per_chunk * kRopeTokensPerThread;
    const int64_t t1 = t0 + kRopeTokensPerThread < n ? t0 + kRopeTokensPerThread : n;
    if (item < q_items) {  // a rotating pair of a Q head, in place
      const int64_t i = item % half, h = item / half;
      const PairElems e = rope_pair(i, rope_dims, interleaved);
      const double inv_freq = rope_inv_freq(i, rope_dims, theta);
      for (int64_t t = t0; t < t1; ++t) {
        T* xh = qkv + t * token_stride + h * head_dim;
        float x0 = to_f(xh[e.a]), x1 = to_f(xh[e.b]);
        rope_rotate<T>(x0, x1, static_cast<double>(positions[t]) * inv_freq);
        xh[e.a] = from_f<T>(x0);
        xh[e.b] = from_f<T>(x1);
      }
      continue;
    }
    const int64_t i = (item - q_items) % pairs, h = (item - q_items) / pairs;
    const PairElems e = rope_pair(i, rope_dims, interleaved);
    const double inv_freq = e.rotate ? rope_inv_freq(i, rope_dims, theta) : 0.0;
    for (int64_t t = t0; t < t1; ++t) {
      const T* ks = qkv + t * token_stride + (q_heads + h) * head_dim;
      const T* vs = ks + kv_heads * head_dim;
      PagedView v = view;
      v.block_table = view.block_table + row_seq[t] * table_stride;
      const int64_t dst_a = paged_offset(v, row_slot[t], h * head_dim + e.a);
      const int64_t dst_b = dst_a + (e.b - e.a);  // same slot, same head
      float x0 = to_f(ks[e.a]), x1 = to_f(ks[e.b]);
      if (e.rotate) rope_rotate<T>(x0, x1, static_cast<double>(positions[t]) * inv_freq);
      k_pool[dst_a] = from_f<T>(x0);
      k_pool[dst_b] = from_f<T>(x1);
      v_pool[dst_a] = vs[e.a];
      v_pool[dst_b] = vs[e.b];
    }
  }
}

template <typename T>
__global__ void kv_gather_kernel(const T* __restrict__ k_pool, const T* __restrict__ v_pool,
                                 PagedView view, int64_t pos0, int64_t n, T* __restrict__ k_out,
                                 T* __restrict__ v_out) {
  const int64_t total = n * view.kv_dim;
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < total;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = k / view.kv_dim, j = k % view.kv_dim;
    const int64_t src = paged_offset(view, pos0 + t, j);
    k_out[k] = k_pool[src];
    v_out[k] = v_pool[src];
  }
}

}  // namespace detail
}  // namespace cb::kernels::cuda
