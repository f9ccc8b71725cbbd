#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/kv_restore.h"

namespace cb::kernels::cuda {
namespace {

using detail::from_f;
using detail::kRopeTokensPerThread;
using detail::to_f;

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

}  // namespace

cudaError_t launch_kv_gather(const KvGatherParams& p, cudaStream_t stream) {
  if (p.n == 0) return cudaSuccess;
  if (!p.k_pool || !p.v_pool || !p.k_out || !p.v_out || !p.view.block_table || p.n < 0 ||
      p.pos0 < 0 || p.view.block_size <= 0 || p.view.kv_dim <= 0) {
    return cudaErrorInvalidValue;
  }
  const LaunchDims d = elementwise_dims(static_cast<size_t>(p.n * p.view.kv_dim));
#define CB_LAUNCH(T)                                                                         \
  kv_gather_kernel<T><<<d.grid, d.block, 0, stream>>>(                                       \
      static_cast<const T*>(p.k_pool), static_cast<const T*>(p.v_pool), p.view, p.pos0, p.n, \
      static_cast<T*>(p.k_out), static_cast<T*>(p.v_out))
  CB_DISPATCH_STORAGE(p.storage, CB_LAUNCH);
#undef CB_LAUNCH
  return cudaGetLastError();
}

cudaError_t launch_kv_restore(const KvRestoreParams& p, cudaStream_t stream) {
  if (p.n == 0) return cudaSuccess;
  if (!p.k_stage || !p.v_stage || !p.k_pool || !p.v_pool || !p.view.block_table || p.n < 0 ||
      p.pos0 < 0 || p.heads <= 0 || p.head_dim <= 0 || p.head_dim % 2 != 0 || p.rope_dims <= 0 ||
      p.rope_dims % 2 != 0 || p.rope_dims > p.head_dim || p.view.block_size <= 0 ||
      p.view.kv_dim != p.heads * p.head_dim || !(p.theta > 0)) {
    return cudaErrorInvalidValue;
  }
  const int64_t chunks = (p.n + detail::kRopeTokensPerThread - 1) / detail::kRopeTokensPerThread;
  const LaunchDims d = elementwise_dims(static_cast<size_t>(chunks * p.heads * (p.head_dim / 2)));
#define CB_LAUNCH(T)                                                                      \
  kv_restore_kernel<T><<<d.grid, d.block, 0, stream>>>(                                   \
      static_cast<const T*>(p.k_stage), static_cast<const T*>(p.v_stage),                 \
      static_cast<T*>(p.k_pool), static_cast<T*>(p.v_pool), p.view, p.pos0, p.n, p.heads, \
      p.head_dim, p.rope_dims, p.rope_offset, static_cast<double>(p.theta),               \
      p.style == RopeStyle::Interleaved)
  CB_DISPATCH_STORAGE(p.storage, CB_LAUNCH);
#undef CB_LAUNCH
  return cudaGetLastError();
}

cudaError_t launch_kv_capture(const KvCaptureParams& p, cudaStream_t stream) {
  if (p.n == 0) return cudaSuccess;
  if (!p.k_src || !p.v_src || !p.k_stage || !p.v_stage || p.n < 0 || p.kv_dim <= 0 ||
      p.src_stride < p.kv_dim) {
    return cudaErrorInvalidValue;
  }
  const LaunchDims d = elementwise_dims(static_cast<size_t>(p.n * p.kv_dim));
#define CB_LAUNCH(T)                                                                \
  kv_capture_kernel<T><<<d.grid, d.block, 0, stream>>>(                             \
      static_cast<const T*>(p.k_src), static_cast<const T*>(p.v_src), p.src_stride, \
      static_cast<T*>(p.k_stage), static_cast<T*>(p.v_stage), p.n, p.kv_dim)
  CB_DISPATCH_STORAGE(p.storage, CB_LAUNCH);
#undef CB_LAUNCH
  return cudaGetLastError();
}

cudaError_t launch_kv_append(const KvAppendParams& p, cudaStream_t stream) {
  if (p.n == 0) return cudaSuccess;
  if (!p.k_src || !p.v_src || !p.k_pool || !p.v_pool || !p.view.block_table || p.n < 0 ||
      p.pos0 < 0 || p.view.block_size <= 0 || p.view.kv_dim <= 0 || p.src_stride < p.view.kv_dim ||
      (p.row_seq == nullptr) != (p.row_slot == nullptr) ||
      (p.row_seq != nullptr && p.table_stride <= 0)) {
    return cudaErrorInvalidValue;
  }
  const LaunchDims d = elementwise_dims(static_cast<size_t>(p.n * p.view.kv_dim));
#define CB_LAUNCH(T)                                                                        \
  kv_append_kernel<T><<<d.grid, d.block, 0, stream>>>(                                      \
      static_cast<const T*>(p.k_src), static_cast<const T*>(p.v_src), p.src_stride,         \
      static_cast<T*>(p.k_pool), static_cast<T*>(p.v_pool), p.view, p.pos0, p.n, p.row_seq, \
      p.row_slot, p.table_stride)
  CB_DISPATCH_STORAGE(p.storage, CB_LAUNCH);
#undef CB_LAUNCH
  return cudaGetLastError();
}

}  // namespace cb::kernels::cuda
