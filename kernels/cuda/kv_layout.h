#pragma once
/// Where a token's K or V lives in the paged pools, computed the same way on the host and on
/// the device (kernels/cuda rope, kv_restore and kv_capture use it; tests compare it with
/// lib/kv KvCache's slot pointers). Plain C++; the functions are __host__ __device__ under nvcc.

#include <cstdint>

#if defined(__CUDACC__)
#define CB_HOST_DEVICE __host__ __device__
#else
#define CB_HOST_DEVICE
#endif

namespace cb::kernels::cuda {

/// A sequence's view of one layer's pool: [num_blocks, block_size, kv_dim] elements, slot s of
/// the sequence in block block_table[s / block_size] at row s % block_size.
struct PagedView {
  const int32_t* block_table = nullptr;  ///< the sequence's blocks
  int64_t block_size = 0;
  int64_t kv_dim = 0;  ///< n_kv_heads * head_dim
};

/// Element offset of (slot, element j of the slot) in the pool.
CB_HOST_DEVICE inline int64_t paged_offset(const PagedView& v, int64_t slot, int64_t j) {
  const int64_t block = v.block_table[slot / v.block_size];
  return (block * v.block_size + slot % v.block_size) * v.kv_dim + j;
}

/// The two elements of a head that pair `i` (0 <= i < head_dim / 2) covers, relative to the
/// head. Pairs below rope_dims / 2 rotate (Interleaved: 2i and 2i + 1; RotateHalf: i and
/// i + rope_dims / 2); the rest cover the unrotated tail [rope_dims, head_dim) two by two.
struct PairElems {
  int64_t a = 0, b = 0;
  bool rotate = false;
};
CB_HOST_DEVICE inline PairElems rope_pair(int64_t i, int64_t rope_dims, bool interleaved) {
  const int64_t half = rope_dims / 2;
  if (i < half)
    return interleaved ? PairElems{2 * i, 2 * i + 1, true} : PairElems{i, i + half, true};
  const int64_t e = rope_dims + 2 * (i - half);
  return PairElems{e, e + 1, false};
}

}  // namespace cb::kernels::cuda
