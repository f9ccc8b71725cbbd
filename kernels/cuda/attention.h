#pragma once
/// Paged attention on the GPU for prefill and decode, over the same cache layout and with the
/// same masking contract as kernels/cpu paged_attention (ops.h), for a batch of sequences in
/// one launch: query row r belongs to sequence q_seq[r] at position q_pos[r] and attends to
/// that sequence's keys j <= min(q_pos[r], n_ctx - 1) (and j > q_pos[r] - window when
/// window > 0). Query head h reads KV head h / (n_heads / n_kv_heads) (GQA, MQA).
///
/// Flash-attention style: a block takes a tile of up to kAttentionTileRows consecutive rows
/// of one sequence and one head, streams the keys they can see through shared memory 32 slots
/// at a time (gathered from the paged blocks) and keeps an online softmax per row in fp32;
/// scores are never written out. For decode over long histories (few rows, many keys) the key
/// range of each (tile, head) is split over `splits` blocks, which write partial results
/// (max, sum, unnormalized output) to a workspace that a second kernel combines.
///
/// Prefill-sized work in fp16/bf16 with head_dim 64 or 128 runs a tensor-core variant instead
/// (attention_mma.cu): tiles of kAttentionMmaTileRows rows, one warp per 16 rows, Q.K^T and
/// P.V on wmma 16x16x16 fragments with fp32 accumulation, the online softmax in fp32 with P
/// rounded to the storage type for P.V (as FlashAttention does); the output stays in fp32
/// registers until the end. PagedAttentionParams::fa2 picks a FlashAttention-2-style variant
/// instead (attention_fa2.cu), which CudaModel runs by default: on an H100 it passed the same
/// parity tests and made prefills 1.03-1.52x faster (docs/perf.md).
///
/// Host planning (tiles, split count, workspace size, kernel choice) is plain C++, unit-tested
/// without a GPU. Each block reads its KV head's keys for one query head: a GQA group reads them
/// once per head (from L2 after the first).

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "kernels/cuda/rope.h"
#include "kernels/cuda/storage.h"

namespace cb::kernels::cuda {

/// Rows per tile (4 warps, 4 rows each) and the largest head_dim the kernel supports.
constexpr int64_t kAttentionTileRows = 16;
constexpr int64_t kAttentionMaxHeadDim = 128;
/// Rows per tile of the tensor-core kernel (4 warps, 16 rows each).
constexpr int64_t kAttentionMmaTileRows = 64;

/// True when the tensor-core kernel should run: fp16 or bf16 storage, head_dim 64 or 128, and
/// prefill-sized work (at least 64 rows, 16 or more per sequence on average). Otherwise
/// (decode, fp32, other head sizes) the CUDA-core kernel runs, with key splitting.
bool attention_uses_mma(Storage storage, int64_t head_dim, int64_t rows, int64_t n_seqs);

/// Tiles for query rows whose sequences are `q_seq` (rows of a sequence consecutive, as the
/// engine packs them): flat pairs (first row, row count), each within one sequence and at most
/// `max_rows` rows. Returns an empty vector when q_seq is empty.
std::vector<int32_t> plan_attention_tiles(const std::vector<int32_t>& q_seq,
                                          int64_t max_rows = kAttentionTileRows);

/// plan_attention_splits' defaults: the fewest keys a split, and the blocks per SM it fills.
constexpr int64_t kAttentionMinKeysPerSplit = 64;
constexpr int64_t kAttentionSplitBlocksPerSm = 2;

/// How many blocks should share each (tile, head)'s keys: 1 when tiles x heads already fill
/// the device (`blocks_per_sm` blocks per SM) or the keys are fewer than two splits' worth;
/// otherwise enough to fill it, with at least `min_keys` keys per split and at most 32 splits
/// (min_keys and blocks_per_sm taken as at least 1).
int64_t plan_attention_splits(int64_t n_tiles, int64_t n_heads, int64_t max_keys, int sm_count,
                              int64_t min_keys = kAttentionMinKeysPerSplit,
                              int64_t blocks_per_sm = kAttentionSplitBlocksPerSm);

/// Floats of workspace a launch with `splits` > 1 needs: (head_dim + 2) per row, head, split.
int64_t attention_workspace_floats(int64_t rows, int64_t n_heads, int64_t head_dim, int64_t splits);

struct PagedAttentionParams {
  const void* q = nullptr;         ///< [rows, n_heads, head_dim], rows q_stride apart
  int64_t q_stride = 0;            ///< elements from a row of q to the next; 0: n_heads * head_dim
  void* out = nullptr;             ///< [rows, n_heads, head_dim]
  const int32_t* q_pos = nullptr;  ///< [rows] (device)
  const int32_t* q_seq = nullptr;  ///< [rows] (device): the row's sequence
  int64_t rows = 0;
  int64_t n_heads = 0, n_kv_heads = 0, head_dim = 0;
  const void* k_pool = nullptr;  ///< one layer: [num_blocks, block_size, n_kv_heads, head_dim]
  const void* v_pool = nullptr;
  const int32_t* block_tables = nullptr;  ///< [n_seqs, table_stride] (device)
  int64_t table_stride = 0;
  const int32_t* n_ctx = nullptr;  ///< [n_seqs] (device): keys valid at [0, n_ctx)
  int64_t block_size = 16;
  int64_t window = 0;  ///< sliding window (0: none)
  float scale = 1.0f;
  Storage storage = Storage::F32;  ///< of q, out and the pools; math is fp32
  const int32_t* tiles = nullptr;  ///< plan_attention_tiles's pairs (device)
  int64_t n_tiles = 0;
  int64_t splits = 1;
  float* workspace = nullptr;  ///< attention_workspace_floats(...) floats when splits > 1
  /// kAttentionTileRows: the CUDA-core kernel; kAttentionMmaTileRows: the tensor-core kernel
  /// (fp16/bf16, head_dim 64 or 128, splits 1), with tiles planned for that many rows.
  int64_t tile_rows = kAttentionTileRows;
  /// With tile_rows kAttentionMmaTileRows: run the FlashAttention-2-style kernel
  /// (attention_fa2.cu: mma.sync with scores, P and output in registers, K/V double-buffered by
  /// cp.async; K and V pools 16-byte aligned) instead of the wmma one (attention_mma.cu).
  /// CudaModel sets it by default (it ran and passed on an H100, docs/perf.md).
  bool fa2 = false;
  /// With tile_rows kAttentionTileRows, single-row tiles (n_tiles == rows: decode), head_dim
  /// 64 or 128 and 16-byte aligned pools: run the decode kernel (attention_decode_kernel.cuh:
  /// a block per row, head and split, every lane on keys, K and V read straight into
  /// registers) instead of the CUDA-core one; ignored otherwise. CudaModel sets it by default
  /// (CudaKernelPaths::decode_attention; passed on an H200, docs/perf.md).
  bool decode_kernel = false;
  /// With the decode kernel and splits > 1: rows * n_heads ints, zero before the launch (and
  /// zero again after it), with which the last split block of each row and head merges the
  /// splits itself instead of a second kernel. Null: the combine kernel runs.
  int32_t* counters = nullptr;
  /// Set (device memory, [rows]: each row's rotary position) to fold RoPE and the KV append
  /// into a decode-kernel launch (attention_uses_decode_rope must hold): q holds the rows' Q
  /// heads before RoPE, k_new and v_new (rows q_stride apart, like q) their new K heads before
  /// RoPE and their V heads, and the row's own slot q_pos[r] is not yet in the pools. The launch
  /// rotates Q and K in registers and writes the rotated K and the V into slot q_pos[r] of
  /// k_pool and v_pool (so they must be writable); the values are those of launch_rope_kv_append
  /// followed by the same launch without rope_pos. No other row of the launch may belong to a
  /// row's sequence. Null: no RoPE, no append.
  const int32_t* rope_pos = nullptr;
  const void* k_new = nullptr;
  const void* v_new = nullptr;
  int64_t rope_dims = 0;  ///< even, <= head_dim: the first rope_dims of each head rotate
  float theta = 10000.0f;
  RopeStyle rope_style = RopeStyle::Interleaved;
};

/// rows == 0 is a no-op. cudaErrorInvalidValue for null pointers, head_dim outside
/// 1..kAttentionMaxHeadDim, a q_stride below n_heads * head_dim (or, for the tensor-core
/// kernel, not a whole number of 16-byte vectors), n_kv_heads not dividing n_heads, block_size <=
/// 0, splits outside 1..64 or a missing workspace, and for a tile_rows the chosen kernel cannot
/// run. A row with no allowed key gets an all-zero output row.
cudaError_t launch_paged_attention(const PagedAttentionParams& p, cudaStream_t stream);

/// Whether launch_paged_attention runs the decode kernel for `p` (decode_kernel asked for, the
/// CUDA-core tiles all single rows, head_dim 64 or 128, K and V pools 16-byte aligned).
bool attention_uses_decode_kernel(const PagedAttentionParams& p);

/// Whether a launch of `p` can fold RoPE and the append in (PagedAttentionParams::rope_pos): the
/// decode kernel runs, rope_pos, k_new and v_new are set, rope_dims is even and in
/// 1..head_dim, theta is positive, k_new, v_new and q_stride's rows are 16-byte aligned, and for rotate-half
/// pairs rope_dims / 2 is a whole number of a lane's 16 bytes (a pair's halves in two lanes).
bool attention_uses_decode_rope(const PagedAttentionParams& p);

}  // namespace cb::kernels::cuda
