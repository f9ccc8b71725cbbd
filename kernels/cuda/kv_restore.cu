#include "kernels/cuda/kv_restore_kernel.cuh"

namespace cb::kernels::cuda {
namespace {

using detail::kv_append_kernel;
using detail::kv_capture_kernel;
using detail::kv_gather_kernel;
using detail::kv_restore_kernel;
using detail::rope_kv_append_kernel;

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

cudaError_t launch_rope_kv_append(const RopeKvAppendParams& p, cudaStream_t stream) {
  if (p.n == 0) return cudaSuccess;
  if (!p.qkv || !p.positions || !p.k_pool || !p.v_pool || !p.view.block_table || !p.row_seq ||
      !p.row_slot || p.n < 0 || p.q_heads <= 0 || p.kv_heads <= 0 || p.head_dim <= 0 ||
      p.head_dim % 2 != 0 || p.rope_dims <= 0 || p.rope_dims % 2 != 0 || p.rope_dims > p.head_dim ||
      p.token_stride < (p.q_heads + 2 * p.kv_heads) * p.head_dim || p.view.block_size <= 0 ||
      p.view.kv_dim != p.kv_heads * p.head_dim || p.table_stride <= 0 || !(p.theta > 0)) {
    return cudaErrorInvalidValue;
  }
  const int64_t chunks = (p.n + detail::kRopeTokensPerThread - 1) / detail::kRopeTokensPerThread;
  const int64_t per_chunk = p.q_heads * (p.rope_dims / 2) + p.kv_heads * (p.head_dim / 2);
  const LaunchDims d = elementwise_dims(static_cast<size_t>(chunks * per_chunk));
#define CB_LAUNCH(T)                                                                            \
  rope_kv_append_kernel<T><<<d.grid, d.block, 0, stream>>>(                                     \
      static_cast<T*>(p.qkv), p.positions, p.n, p.q_heads, p.kv_heads, p.head_dim, p.rope_dims, \
      p.token_stride, static_cast<double>(p.theta), p.style == RopeStyle::Interleaved,          \
      static_cast<T*>(p.k_pool), static_cast<T*>(p.v_pool), p.view, p.row_seq, p.row_slot,      \
      p.table_stride)
  CB_DISPATCH_STORAGE(p.storage, CB_LAUNCH);
#undef CB_LAUNCH
  return cudaGetLastError();
}

}  // namespace cb::kernels::cuda
