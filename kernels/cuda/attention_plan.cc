#include <algorithm>

#include "kernels/cuda/attention.h"

namespace cb::kernels::cuda {

std::vector<int32_t> plan_attention_tiles(const std::vector<int32_t>& q_seq, int64_t max_rows) {
  std::vector<int32_t> tiles;
  max_rows = std::max<int64_t>(max_rows, 1);
  size_t r = 0;
  while (r < q_seq.size()) {
    size_t end = r + 1;
    while (end < q_seq.size() && q_seq[end] == q_seq[r] &&
           static_cast<int64_t>(end - r) < max_rows) {
      ++end;
    }
    tiles.push_back(static_cast<int32_t>(r));
    tiles.push_back(static_cast<int32_t>(end - r));
    r = end;
  }
  return tiles;
}

int64_t plan_attention_splits(int64_t n_tiles, int64_t n_heads, int64_t max_keys, int sm_count,
                              int64_t min_keys, int64_t blocks_per_sm) {
  // By default two key tiles of the CUDA-core kernel. Measured on an H100 (llama-2-7b decode,
  // 512-token histories, batch 1): 256 keys per split gave 32 heads x 2 splits = 64 blocks on
  // 132 SMs, and attention took 166 us of a layer's ~385 us.
  constexpr int64_t kMaxSplits = 32;
  min_keys = std::max<int64_t>(min_keys, 1);
  const int64_t blocks = n_tiles * n_heads;
  const int64_t target =
      std::max<int64_t>(blocks_per_sm, 1) * static_cast<int64_t>(std::max(sm_count, 1));
  if (blocks <= 0 || blocks >= target || max_keys < 2 * min_keys) return 1;
  const int64_t by_fill = (target + blocks - 1) / blocks;
  const int64_t by_keys = max_keys / min_keys;
  return std::max<int64_t>(1, std::min({by_fill, by_keys, kMaxSplits}));
}

bool attention_uses_decode_kernel(const PagedAttentionParams& p) {
  return p.decode_kernel && p.tile_rows == kAttentionTileRows && p.n_tiles == p.rows &&
         (p.head_dim == 64 || p.head_dim == 128) &&
         reinterpret_cast<uintptr_t>(p.k_pool) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(p.v_pool) % 16 == 0;
}

bool attention_uses_decode_rope(const PagedAttentionParams& p) {
  if (!attention_uses_decode_kernel(p) || !p.rope_pos || !p.k_new || !p.v_new) return false;
  const int64_t esz = static_cast<int64_t>(storage_bytes(p.storage));
  const int64_t vec = 16 / esz;  // elements a lane of the decode kernel holds
  const int64_t stride = p.q_stride != 0 ? p.q_stride : p.n_heads * p.head_dim;
  const bool aligned = reinterpret_cast<uintptr_t>(p.k_new) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(p.v_new) % 16 == 0 && (stride * esz) % 16 == 0;
  const bool pairs = p.rope_style == RopeStyle::Interleaved || (p.rope_dims / 2) % vec == 0;
  return p.rope_dims > 0 && p.rope_dims % 2 == 0 && p.rope_dims <= p.head_dim && p.theta > 0.0f &&
         aligned && pairs;
}

bool attention_uses_mma(Storage storage, int64_t head_dim, int64_t rows, int64_t n_seqs) {
  return storage != Storage::F32 && (head_dim == 64 || head_dim == 128) &&
         rows >= kAttentionMmaTileRows && n_seqs > 0 && rows >= 16 * n_seqs;
}

int64_t attention_workspace_floats(int64_t rows, int64_t n_heads, int64_t head_dim,
                                   int64_t splits) {
  return splits <= 1 ? 0 : rows * n_heads * splits * (head_dim + 2);
}

}  // namespace cb::kernels::cuda
