#pragma once
/// L2 prefetch of a weight matrix's rows, for decode's idle memory bus. At batch 1 a decode
/// layer streams its weights through four GEMVs, and between the QKV GEMV and the next one
/// (RoPE with the append, attention) it reads a few MB of K and V: HBM sits mostly idle for
/// those microseconds. Launched on a second stream once the QKV GEMV is done, this kernel asks
/// L2 for the first bytes of every row of the next GEMV's weights, one bulk prefetch a row
/// (cp.async.bulk.prefetch.L2 on sm_90, per 32-byte sector before it: no register, no write,
/// nothing for a reader to wait on), so that GEMV finds them there.
/// CudaKernelPaths::decode_l2_prefetch. Launch arithmetic in plain C++ (l2_prefetch_plan.cc),
/// unit-tested on the host.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace cb::kernels::cuda {

/// The granularity of a row's prefix: an L2 line.
constexpr int64_t kL2Line = 128;

struct L2PrefetchParams {
  const void* data = nullptr;  ///< [rows, row_bytes], device memory, 16-byte aligned
  int64_t rows = 0;
  int64_t row_bytes = 0;     ///< a multiple of 16
  int64_t prefix_bytes = 0;  ///< of each row, from its start: l2_prefetch_prefix
};

/// The bytes of each row to fetch so that the whole stays within `budget` bytes: whole 128-byte
/// lines, or the whole row when it fits; 0 when not one line a row fits or an argument is not
/// positive. A GEMV whose rows are all resident at once (LLaMA's output projection: one warp a
/// row, one wave) reads each row from its start, so a prefix of every row is what it reads
/// first.
int64_t l2_prefetch_prefix(int64_t rows, int64_t row_bytes, int64_t budget);

/// What to ask for of a [rows, row_bytes] matrix at `data` within `budget` bytes, for a GEMV
/// with one warp a row and about `resident_rows` warps resident at once: every row's first
/// l2_prefetch_prefix bytes when all its rows are resident together (it reads them at once,
/// each from its start: LLaMA's output projection), else the leading rows whole, as many as fit
/// (it reads those first: Falcon's MLP up projection of 18,176 rows).
L2PrefetchParams l2_prefetch_plan(const void* data, int64_t rows, int64_t row_bytes, int64_t budget,
                                  int64_t resident_rows);

/// Blocks of 256 threads, a thread a row: enough for the rows, at most 4 per multiprocessor
/// (the threads then loop), at least 1.
unsigned l2_prefetch_blocks(int64_t rows, int sms);

/// Whether launch_l2_prefetch takes `p`: sizes not negative, a prefix within the row and a
/// multiple of 16 bytes (below 4 GiB; prefetch_l2_bulk splits it into pieces ptxas can
/// encode), a row a multiple of 16 bytes, and, unless there is
/// nothing to fetch, data set and 16-byte aligned. Plain C++, unit-tested on the host.
bool l2_prefetch_applies(const L2PrefetchParams& p);

/// Runs the prefetch on `stream`; a no-op when there are no rows or the prefix is 0;
/// cudaErrorInvalidValue where !l2_prefetch_applies(p).
cudaError_t launch_l2_prefetch(const L2PrefetchParams& p, int sms, cudaStream_t stream);

}  // namespace cb::kernels::cuda
