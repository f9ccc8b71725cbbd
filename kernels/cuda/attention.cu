// Paged attention (see attention.h): launchers of the tiled online-softmax kernel and the split
// combiner (attention_kernel.cuh).
#include "kernels/cuda/attention_decode_kernel.cuh"
#include "kernels/cuda/attention_kernel.cuh"

namespace cb::kernels::cuda {
namespace detail {
cudaError_t launch_paged_attention_mma(const PagedAttentionParams& p, cudaStream_t stream);
cudaError_t launch_paged_attention_fa2(const PagedAttentionParams& p, cudaStream_t stream);
}  // namespace detail
namespace {

using attention_detail::combine_splits_kernel;
using attention_detail::kThreads;
using attention_detail::paged_attention_kernel;

// The decode kernel's RoPE arguments (ignored unless p.rope_pos is set). The pools are the
// caller's writable device memory (PagedAttentionParams::rope_pos).
template <typename T>
decode_detail::DecodeRope<T> decode_rope(const PagedAttentionParams& p) {
  decode_detail::DecodeRope<T> r;
  r.positions = p.rope_pos;
  r.k_new = static_cast<const T*>(p.k_new);
  r.v_new = static_cast<const T*>(p.v_new);
  r.k_pool = static_cast<T*>(const_cast<void*>(p.k_pool));
  r.v_pool = static_cast<T*>(const_cast<void*>(p.v_pool));
  r.rope_dims = p.rope_dims;
  r.theta = p.theta;
  r.interleaved = p.rope_style == RopeStyle::Interleaved;
  return r;
}

}  // namespace

cudaError_t launch_paged_attention(const PagedAttentionParams& p, cudaStream_t stream) {
  if (p.rows == 0) return cudaSuccess;
  if (!p.q || !p.out || !p.q_pos || !p.q_seq || !p.k_pool || !p.v_pool || !p.block_tables ||
      !p.n_ctx || !p.tiles || p.rows < 0 || p.n_tiles <= 0 || p.n_heads <= 0 || p.n_kv_heads <= 0 ||
      p.n_heads % p.n_kv_heads != 0 || p.head_dim <= 0 || p.head_dim > kAttentionMaxHeadDim ||
      p.block_size <= 0 || p.table_stride <= 0 || p.splits < 1 || p.splits > 64 ||
      (p.splits > 1 && !p.workspace) || p.window < 0 || p.n_tiles > 0x7fffffffLL ||
      p.n_heads > 65535 ||
      (p.tile_rows != kAttentionTileRows && p.tile_rows != kAttentionMmaTileRows) ||
      (p.q_stride != 0 && p.q_stride < p.n_heads * p.head_dim)) {
    return cudaErrorInvalidValue;
  }
  // RoPE and the append fold only into the decode kernel, under attention_uses_decode_rope.
  if (p.rope_pos != nullptr && !attention_uses_decode_rope(p)) return cudaErrorInvalidValue;
  if (p.tile_rows == kAttentionMmaTileRows) {
    return p.fa2 ? detail::launch_paged_attention_fa2(p, stream)
                 : detail::launch_paged_attention_mma(p, stream);
  }
  const int64_t q_stride = p.q_stride != 0 ? p.q_stride : p.n_heads * p.head_dim;
  const dim3 grid(static_cast<unsigned>(p.n_tiles), static_cast<unsigned>(p.n_heads),
                  static_cast<unsigned>(p.splits));
#define CB_ATTN(T, HD)                                                                           \
  paged_attention_kernel<T, HD><<<grid, kThreads, 0, stream>>>(                                  \
      static_cast<const T*>(p.q), q_stride, static_cast<T*>(p.out), p.q_pos, p.q_seq, p.n_heads, \
      p.n_kv_heads, static_cast<int>(p.head_dim), static_cast<const T*>(p.k_pool),               \
      static_cast<const T*>(p.v_pool), p.block_tables, p.table_stride, p.n_ctx, p.block_size,    \
      p.window, p.scale, p.tiles, p.splits, p.workspace)
  // The compiled head sizes load whole 16-byte vectors: pools must be 16-byte aligned.
  const bool aligned = reinterpret_cast<uintptr_t>(p.k_pool) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(p.v_pool) % 16 == 0;
  const bool decode = attention_uses_decode_kernel(p);
  const bool rope = p.rope_pos != nullptr;  // checked above: the decode kernel runs
  const dim3 dgrid(static_cast<unsigned>(p.rows), static_cast<unsigned>(p.n_heads),
                   static_cast<unsigned>(p.splits));
#define CB_DECODE(T, HD, ROPE)                                                                    \
  decode_detail::paged_attention_decode_kernel<T, HD, ROPE>                                       \
      <<<dgrid, decode_detail::kThreads, 0, stream>>>(                                            \
          static_cast<const T*>(p.q), q_stride, static_cast<T*>(p.out), p.q_pos, p.q_seq,         \
          p.n_heads, p.n_kv_heads, static_cast<const T*>(p.k_pool),                               \
          static_cast<const T*>(p.v_pool), p.block_tables, p.table_stride, p.n_ctx, p.block_size, \
          p.window, p.scale, p.splits, p.workspace, p.counters, decode_rope<T>(p))
#define CB_LAUNCH(T)                         \
  if (decode && rope && p.head_dim == 128) { \
    CB_DECODE(T, 128, true);                 \
  } else if (decode && rope) {               \
    CB_DECODE(T, 64, true);                  \
  } else if (decode && p.head_dim == 128) {  \
    CB_DECODE(T, 128, false);                \
  } else if (decode) {                       \
    CB_DECODE(T, 64, false);                 \
  } else if (aligned && p.head_dim == 128) { \
    CB_ATTN(T, 128);                         \
  } else if (aligned && p.head_dim == 64) {  \
    CB_ATTN(T, 64);                          \
  } else {                                   \
    CB_ATTN(T, 0);                           \
  }
  CB_DISPATCH_STORAGE(p.storage, CB_LAUNCH);
#undef CB_ATTN
#undef CB_DECODE
#undef CB_LAUNCH
  // The decode kernel merges the splits itself when it has counters.
  if (p.splits == 1 || (decode && p.counters != nullptr)) return cudaGetLastError();
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  const dim3 cgrid(static_cast<unsigned>(p.rows), static_cast<unsigned>(p.n_heads));
#define CB_LAUNCH(T)                                                                      \
  combine_splits_kernel<T><<<cgrid, 32, 0, stream>>>(p.workspace, static_cast<T*>(p.out), \
                                                     p.n_heads, p.head_dim, p.splits)
  CB_DISPATCH_STORAGE(p.storage, CB_LAUNCH);
#undef CB_LAUNCH
  return cudaGetLastError();
}

}  // namespace cb::kernels::cuda
