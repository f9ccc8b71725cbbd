#pragma once
/// L2 prefetch of a weight matrix's rows, for decode's idle memory bus. At batch 1 a decode
/// layer streams its weights through four GEMVs, and between the QKV GEMV and the next one
/// (RoPE with the append, attention) it reads a few MB of K and V: HBM sits mostly idle for
/// those microseconds. Launched on a second stream once the QKV GEMV is done, this kernel asks
/// L2 for the first bytes of every row of the next GEMV's weights (prefetch.global.L2: no
/// register, no write, nothing for a reader to wait on), so that GEMV finds them there.
/// CudaKernelPaths::decode_l2_prefetch. Launch arithmetic in plain C++ (l2_prefetch_plan.cc),
/// unit-tested on the host; the line addresses are __host__ __device__.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/kv_layout.h"  // CB_HOST_DEVICE

namespace cb::kernels::cuda {

/// Bytes one prefetch asks for: an L2 line.
constexpr int64_t kL2Line = 128;

struct L2PrefetchParams {
  const void* data = nullptr;  ///< [rows, row_bytes], device memory
  int64_t rows = 0;
  int64_t row_bytes = 0;
  int64_t prefix_bytes = 0;  ///< of each row, from its start: l2_prefetch_prefix
};

/// The bytes of each row to fetch so that the whole stays within `budget` bytes: whole 128-byte
/// lines, the whole row at most (then rounded up to its last line); 0 when not one line a row
/// fits or an argument is not positive. A GEMV reads all its rows at once, each from its start,
/// so a prefix of every row is what it reads first.
int64_t l2_prefetch_prefix(int64_t rows, int64_t row_bytes, int64_t budget);

/// Lines of each row the launch fetches: ceil(prefix_bytes / 128), at most the row's.
int64_t l2_prefetch_lines_per_row(const L2PrefetchParams& p);

/// Byte offset from p.data of line i of the launch (0 <= i < rows * per_row): row i / per_row,
/// line i % per_row of it, so consecutive threads ask for consecutive lines of a row.
CB_HOST_DEVICE inline int64_t l2_prefetch_offset(int64_t row_bytes, int64_t per_row, int64_t i) {
  return (i / per_row) * row_bytes + (i % per_row) * kL2Line;
}

/// Blocks of 256 threads for `lines` lines: one line a thread, at most 4 blocks per
/// multiprocessor (the threads then loop), at least 1.
unsigned l2_prefetch_blocks(int64_t lines, int sms);

/// Runs the prefetch on `stream`. A prefix of 0 (or no rows) is a no-op; cudaErrorInvalidValue
/// for a null pointer, negative sizes or a prefix past the row.
cudaError_t launch_l2_prefetch(const L2PrefetchParams& p, int sms, cudaStream_t stream);

}  // namespace cb::kernels::cuda
