#pragma once
/// Shared by the paged-attention kernels (reference, sgemm and direct): the argument checks that
/// decide when there is nothing to compute or the output is all zeros, a query's key range and
/// the walk over a key range's slots block by block.

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/ops.h"

namespace cb::kernels::cpu {

/// True when the head split and the block size admit keys: KV heads that divide the heads,
/// blocks of at least one slot.
inline bool attention_admits_keys(const PagedAttention& p) {
  return p.n_kv_heads > 0 && p.n_heads % p.n_kv_heads == 0 && p.block_size > 0;
}

/// True when the kernel has nothing more to do: no queries or heads (output untouched), or a
/// head split / block size that admits no key (output filled with zeros).
inline bool attention_trivial(const PagedAttention& p) {
  if (p.n_q <= 0 || p.n_heads <= 0 || p.head_dim <= 0) return true;
  if (!attention_admits_keys(p)) {
    std::fill(p.out, p.out + p.n_q * p.n_heads * p.head_dim, 0.0f);
    return true;
  }
  return false;
}

/// The key positions [lo, hi] a query at `pos` attends to (ops.h's definition); empty when
/// hi < lo. The reference kernel keeps its own copy of the rule, as the oracle.
struct KeyRange {
  int64_t lo, hi;
};
inline KeyRange key_range(const PagedAttention& p, int64_t pos) {
  return {p.window > 0 ? std::max<int64_t>(0, pos - p.window + 1) : 0, std::min(pos, p.n_ctx - 1)};
}

/// Calls fn(j, n, row) for each run [j, j + n) of key positions within [lo, hi] that lies in
/// one block; row is the element offset of slot j's [n_kv_heads, head_dim] row in the pools.
template <typename Fn>
inline void for_each_run(const int32_t* block_table, int64_t block_size, int64_t row_stride,
                         int64_t lo, int64_t hi, Fn&& fn) {
  for (int64_t j = lo; j <= hi;) {
    const int64_t blk = j / block_size;
    const int64_t first = blk * block_size;
    const int64_t end = std::min(hi + 1, first + block_size);
    const int64_t row =
        (static_cast<int64_t>(block_table[blk]) * block_size + (j - first)) * row_stride;
    fn(j, end - j, row);
    j = end;
  }
}

}  // namespace cb::kernels::cpu
