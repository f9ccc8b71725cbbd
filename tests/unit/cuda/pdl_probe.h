#pragma once
/// Kernels for the programmatic-dependent-launch ordering test (gemm_test.cc): a producer that
/// lets the next grid start at once but writes its output only later, and a reader launched
/// with PDL that does not wait, to show that the next grid really can start early.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace cb::cuda_test {

/// One block of 32 threads: signals griddepcontrol.launch_dependents as it starts (sm_90), then
/// spins for `spin_ns` nanoseconds (%globaltimer) and only then copies `bytes` (a multiple of
/// 4) from `src` to `dst`, and `bytes2` from `src2` to `dst2` (0: none).
cudaError_t launch_late_copy(void* dst, const void* src, size_t bytes, void* dst2, const void* src2,
                             size_t bytes2, uint64_t spin_ns, cudaStream_t stream);

/// Launched with programmatic dependent launch and without griddepcontrol.wait: copies the first
/// 4 bytes of `x` to `seen`. After launch_late_copy on the same stream, `seen` holds what `x`
/// held before the copy whenever the reader started before the producer wrote.
cudaError_t launch_pdl_peek(const void* x, uint32_t* seen, cudaStream_t stream);

/// Loads both probe kernels now (cudaFuncGetAttributes): with lazy module loading (CUDA 12.2+'s
/// default) a kernel's first launch loads it, which may wait for the work in flight and so
/// serialize exactly the launches the probes time.
cudaError_t preload_pdl_probes();

}  // namespace cb::cuda_test
