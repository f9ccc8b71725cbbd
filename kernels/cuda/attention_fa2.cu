// Launcher of the FlashAttention-2-style tensor-core paged attention kernel
// (attention_fa2_kernel.cuh; CudaModel's default prefill attention, run on an H100).
#include "kernels/cuda/attention_fa2_kernel.cuh"

namespace cb::kernels::cuda {
namespace detail {

template <typename T, int HD>
cudaError_t launch_fa2(const PagedAttentionParams& p, cudaStream_t stream) {
  constexpr size_t bytes = fa2_detail::Fa2Smem<HD>::bytes;
  // Per launch (cheap), so every device the process uses gets it.
  const cudaError_t attr =
      cudaFuncSetAttribute(fa2_detail::paged_attention_fa2_kernel<T, HD>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
  if (attr != cudaSuccess) return attr;
  const dim3 grid(static_cast<unsigned>(p.n_tiles), static_cast<unsigned>(p.n_heads));
  const int64_t q_stride = p.q_stride != 0 ? p.q_stride : p.n_heads * HD;
  fa2_detail::paged_attention_fa2_kernel<T, HD><<<grid, fa2_detail::kFa2Threads, bytes, stream>>>(
      static_cast<const T*>(p.q), q_stride, static_cast<T*>(p.out), p.q_pos, p.q_seq, p.n_heads,
      p.n_kv_heads, static_cast<const T*>(p.k_pool), static_cast<const T*>(p.v_pool),
      p.block_tables, p.table_stride, p.n_ctx, p.block_size, p.window, p.scale, p.tiles);
  return cudaGetLastError();
}

// Called by launch_paged_attention once the common parameters are checked.
cudaError_t launch_paged_attention_fa2(const PagedAttentionParams& p, cudaStream_t stream) {
  if (p.storage == Storage::F32 || (p.head_dim != 64 && p.head_dim != 128) || p.splits != 1 ||
      p.q_stride % 8 != 0 || reinterpret_cast<uintptr_t>(p.q) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(p.k_pool) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(p.v_pool) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(p.out) % 4 != 0) {  // the output is stored as 32-bit pairs
    return cudaErrorInvalidValue;
  }
  if (p.storage == Storage::F16) {
    return p.head_dim == 64 ? launch_fa2<__half, 64>(p, stream)
                            : launch_fa2<__half, 128>(p, stream);
  }
  return p.head_dim == 64 ? launch_fa2<__nv_bfloat16, 64>(p, stream)
                          : launch_fa2<__nv_bfloat16, 128>(p, stream);
}

}  // namespace detail
}  // namespace cb::kernels::cuda
