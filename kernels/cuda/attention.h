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
/// Host planning (tiles, split count, workspace size) is plain C++, unit-tested without a GPU.
/// Each block reads its KV head's keys for one query head: a GQA group reads them once per
/// head (from L2 after the first); CUDA cores, not tensor cores, compute the dot products.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "kernels/cuda/storage.h"

namespace cb::kernels::cuda {

/// Rows per tile (4 warps, 4 rows each) and the largest head_dim the kernel supports.
constexpr int64_t kAttentionTileRows = 16;
constexpr int64_t kAttentionMaxHeadDim = 128;

/// Tiles for query rows whose sequences are `q_seq` (rows of a sequence consecutive, as the
/// engine packs them): flat pairs (first row, row count), each within one sequence and at most
/// `max_rows` rows. Returns an empty vector when q_seq is empty.
std::vector<int32_t> plan_attention_tiles(const std::vector<int32_t>& q_seq,
                                          int64_t max_rows = kAttentionTileRows);

/// How many blocks should share each (tile, head)'s keys: 1 when tiles x heads already fill
/// the device (2 blocks per SM) or the keys are few; otherwise enough to fill it, with at least
/// 256 keys per split and at most 32 splits.
int64_t plan_attention_splits(int64_t n_tiles, int64_t n_heads, int64_t max_keys, int sm_count);

/// Floats of workspace a launch with `splits` > 1 needs: (head_dim + 2) per row, head, split.
int64_t attention_workspace_floats(int64_t rows, int64_t n_heads, int64_t head_dim, int64_t splits);

struct PagedAttentionParams {
  const void* q = nullptr;         ///< [rows, n_heads, head_dim]
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
};

/// rows == 0 is a no-op. cudaErrorInvalidValue for null pointers, head_dim outside
/// 1..kAttentionMaxHeadDim, n_kv_heads not dividing n_heads, block_size <= 0, splits outside
/// 1..64 or a missing workspace. A row with no allowed key gets an all-zero output row.
cudaError_t launch_paged_attention(const PagedAttentionParams& p, cudaStream_t stream);

}  // namespace cb::kernels::cuda
