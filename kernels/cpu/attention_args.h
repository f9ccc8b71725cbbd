#pragma once
/// Shared by the two paged-attention kernels (reference and fast): the argument checks that
/// decide when there is nothing to compute or the output is all zeros.

#include <algorithm>

#include "kernels/cpu/ops.h"

namespace cb::kernels::cpu {

/// True when the kernel has nothing more to do: no queries or heads (output untouched), or a
/// head split / block size that admits no key (output filled with zeros).
inline bool attention_trivial(const PagedAttention& p) {
  if (p.n_q <= 0 || p.n_heads <= 0 || p.head_dim <= 0) return true;
  if (p.n_kv_heads <= 0 || p.n_heads % p.n_kv_heads != 0 || p.block_size <= 0) {
    std::fill(p.out, p.out + p.n_q * p.n_heads * p.head_dim, 0.0f);
    return true;
  }
  return false;
}

}  // namespace cb::kernels::cpu
