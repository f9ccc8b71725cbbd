#pragma once
/// CachedAttention's KV restore and capture on the GPU. Restore takes a contiguous chunk of
/// pre-RoPE K and V of one layer in a staging buffer ([n, kv_dim] each), rotates K to its new
/// positions and scatters both into a sequence's paged blocks in one pass (the contract of
/// model::Model::restore_kv). Capture copies the pre-RoPE K and V rows of new tokens (which
/// may be strided, e.g. inside a fused QKV output) into a contiguous staging buffer for the
/// store. Append writes the new tokens' K (already rotated) and V rows, which may be strided
/// too, into the sequence's paged blocks for attention. Host-callable from plain C++.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/kv_layout.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/storage.h"

namespace cb::kernels::cuda {

struct KvRestoreParams {
  const void* k_stage = nullptr;  ///< [n, kv_dim] pre-RoPE keys
  const void* v_stage = nullptr;  ///< [n, kv_dim]
  void* k_pool = nullptr;         ///< one layer: [num_blocks, block_size, kv_dim]
  void* v_pool = nullptr;
  PagedView view;    ///< the sequence's block table (device memory), sizes
  int64_t pos0 = 0;  ///< staging row t goes to slot pos0 + t
  int64_t n = 0;     ///< rows
  int64_t heads = 0, head_dim = 0, rope_dims = 0;  ///< kv_dim == heads * head_dim
  int64_t rope_offset = 0;  ///< keys rotate to positions pos0 + rope_offset + t
  float theta = 10000.0f;
  RopeStyle style = RopeStyle::Interleaved;
  Storage storage = Storage::F32;  ///< of the staging buffers and the pools
};

struct KvCaptureParams {
  const void* k_src = nullptr;  ///< row t at k_src + t * src_stride (elements)
  const void* v_src = nullptr;  ///< row t at v_src + t * src_stride
  int64_t src_stride = 0;       ///< elements between rows (>= kv_dim)
  void* k_stage = nullptr;      ///< [n, kv_dim], contiguous
  void* v_stage = nullptr;
  int64_t n = 0, kv_dim = 0;
  Storage storage = Storage::F32;
};

struct KvAppendParams {
  const void* k_src = nullptr;  ///< row t at k_src + t * src_stride (elements), post-RoPE
  const void* v_src = nullptr;  ///< row t at v_src + t * src_stride
  int64_t src_stride = 0;       ///< elements between rows (>= view.kv_dim)
  void* k_pool = nullptr;       ///< one layer: [num_blocks, block_size, kv_dim]
  void* v_pool = nullptr;
  PagedView view;    ///< the sequence's block table (device memory), sizes
  int64_t pos0 = 0;  ///< row t goes to slot pos0 + t
  int64_t n = 0;     ///< rows
  Storage storage = Storage::F32;
  /// Batched: rows of several sequences in one launch. When set (device memory, [n] each), row t
  /// belongs to the sequence whose block table is view.block_table + row_seq[t] * table_stride
  /// and goes to its slot row_slot[t]; pos0 is then unused.
  const int32_t* row_seq = nullptr;
  const int32_t* row_slot = nullptr;
  int64_t table_stride = 0;
};

/// RoPE and append in one launch (the model's per-layer path): the new tokens' Q heads rotated
/// in place in their fused QKV rows, their K heads rotated on the way into the paged blocks
/// (the rows keep the pre-RoPE keys) and their V heads copied there. The same values as
/// launch_rope on the Q and K heads, then launch_kv_append of the rotated rows: one launch and
/// one pass over K fewer.
struct RopeKvAppendParams {
  void* qkv = nullptr;  ///< row t at qkv + t * token_stride: q_heads of Q, then K's and V's heads
  const int32_t* positions = nullptr;  ///< [n], device memory: each row's rotary position
  int64_t n = 0, q_heads = 0, kv_heads = 0, head_dim = 0;
  int64_t rope_dims = 0;     ///< even, <= head_dim: the first rope_dims of each head rotate
  int64_t token_stride = 0;  ///< elements between rows (>= (q_heads + 2 * kv_heads) * head_dim)
  float theta = 10000.0f;
  RopeStyle style = RopeStyle::Interleaved;
  Storage storage = Storage::F32;
  void* k_pool = nullptr;  ///< one layer: [num_blocks, block_size, kv_dim]
  void* v_pool = nullptr;
  PagedView view;  ///< block tables (device memory), sizes; kv_dim == kv_heads * head_dim
  /// Row t belongs to the sequence whose block table is view.block_table + row_seq[t] *
  /// table_stride and goes to its slot row_slot[t] (device memory, [n] each).
  const int32_t* row_seq = nullptr;
  const int32_t* row_slot = nullptr;
  int64_t table_stride = 0;
};

/// The inverse of append: slots [pos0, pos0 + n) of a sequence's paged blocks (K as cached,
/// i.e. rotated) into contiguous rows [n, kv_dim] (for NKVT, which keeps rotated keys).
struct KvGatherParams {
  const void* k_pool = nullptr;  ///< one layer: [num_blocks, block_size, kv_dim]
  const void* v_pool = nullptr;
  PagedView view;  ///< the sequence's block table (device memory), sizes
  int64_t pos0 = 0, n = 0;
  void* k_out = nullptr;  ///< [n, kv_dim]
  void* v_out = nullptr;
  Storage storage = Storage::F32;
};

/// One thread per (token, head, pair); n == 0 is a no-op; bad shapes or null pointers give
/// cudaErrorInvalidValue. head_dim and rope_dims must be even, rope_dims <= head_dim.
cudaError_t launch_kv_restore(const KvRestoreParams& p, cudaStream_t stream);
/// One thread per element of K and of V.
cudaError_t launch_kv_capture(const KvCaptureParams& p, cudaStream_t stream);
/// One thread per element of K and of V; n == 0 is a no-op, bad shapes or null pointers give
/// cudaErrorInvalidValue (batched: row_seq and row_slot both set, table_stride > 0).
cudaError_t launch_kv_append(const KvAppendParams& p, cudaStream_t stream);
/// One thread per (8 tokens, head, pair); n == 0 is a no-op, bad shapes or null pointers give
/// cudaErrorInvalidValue.
cudaError_t launch_rope_kv_append(const RopeKvAppendParams& p, cudaStream_t stream);
/// One thread per element of K and of V; n == 0 is a no-op, bad shapes or null pointers give
/// cudaErrorInvalidValue.
cudaError_t launch_kv_gather(const KvGatherParams& p, cudaStream_t stream);

}  // namespace cb::kernels::cuda
