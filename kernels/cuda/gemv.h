#pragma once
/// Linear layers of a few rows (decode): y[n, out] = x[n, in] . w[out, in]^T (+ y), fp16 or
/// bf16 storage, fp32 accumulation, as gemm_wt computes them. At batch 1-4 a decode step is a
/// stream of weight reads; cuBLAS's GEMV-shaped kernels reached 2.2-2.6 TB/s of an H100's
/// 3 TB/s there (docs/perf.md). This kernel gives each warp one output row, reads the row as
/// 16-byte vectors that bypass L1 (x stays there, shared by every warp), four in flight per
/// lane, and reduces across the warp. gemm_wt calls it where gemv_applies.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cuda/gemm.h"

namespace cb::kernels::cuda {

/// Rows of x a single pass handles (each adds a register accumulator per lane).
constexpr int64_t kGemvMaxRows = 4;

/// Whether launch_gemv_wt takes `p`: 1..kGemvMaxRows rows, fp16 or bf16, `in` a multiple of 8
/// and x, w 16-byte aligned (so every row starts on a 16-byte vector), and the dimensions
/// within int32. Plain C++, unit-tested on the host.
bool gemv_applies(const GemmWtParams& p);

/// Grid of the kernel: one warp per output row, kGemvWarps warps a block.
constexpr int kGemvWarps = 8;
/// GemmWtParams::deep / NormGemvParams::deep: the kernels' launch bounds ask for this many
/// blocks an SM (at most 64 registers a thread). Without it ptxas keeps them at 36-46
/// registers and issues only two of a lane's four weight vectors before the first dot product
/// (one in the norm GEMV; nvdisasm of the sm_90 code, 2026-11-28: a 4096-row output projection
/// then has about 31 KB in flight an SM); with it, four (three in the bf16 norm GEMV). The same
/// operations in the same order, so the same bits. No spills on sm_90 at one row of x and one
/// weight matrix, the only forms the launchers compile it for (the SwiGLU forms spilled). It
/// also lowers the blocks an SM holds at once from 5-6 to 4: use it only where
/// gemv_deep_fits.
constexpr int kGemvDeepBlocksPerSm = 4;

/// Whether a batch-1 GEMV of `out` rows keeps its one wave with GemmWtParams::deep on a device
/// of `sm_count` SMs: gemv_blocks(out) <= kGemvDeepBlocksPerSm * sm_count (4,224 rows on a
/// 132-SM H100; llama-2-7b's 4,096-row output and down projections fit, 13B's 5,120 do not).
bool gemv_deep_fits(int64_t out, int sm_count);
unsigned gemv_blocks(int64_t out);

/// Runs the kernel; cudaErrorInvalidValue where !gemv_applies(p) or y is null.
cudaError_t launch_gemv_wt(const GemmWtParams& p, cudaStream_t stream);

/// Whether GemmWtParams::pdl (and NormGemvParams::pdl) takes effect on the current device: the
/// GEMV kernels it runs were compiled from PTX for sm_90 or later, so they wait for the grid
/// before them. (A build for older architectures, JIT-compiled on a newer GPU, has no wait in
/// them: launched early they would race.) Where it is false the launchers ignore `pdl`.
bool gemv_pdl_supported();

/// LLaMA's gate and up layers with their SwiGLU, one launch for 1-4 rows (decode):
/// y[n, out] = silu(x . w^T) * (x . w_up^T), each product rounded to the storage type first, as
/// two gemm_wt calls and launch_swiglu compute it. One warp per output element reads both
/// weight rows (four 16-byte vectors of each in flight per lane) against x read once: two
/// launches fewer than GEMV, GEMV, SwiGLU. `p.accumulate` must be false.
bool gemv_swiglu_applies(const GemmWtParams& p, const void* w_up);
/// cudaErrorInvalidValue where !gemv_swiglu_applies(p, w_up) or y is null.
cudaError_t launch_gemv_swiglu(const GemmWtParams& p, const void* w_up, cudaStream_t stream);

}  // namespace cb::kernels::cuda
