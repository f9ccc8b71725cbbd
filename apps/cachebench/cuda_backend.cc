#include "apps/cachebench/cuda_backend.h"

#include "lib/core/error.h"

#ifdef CB_HAVE_CUDA
#include "lib/cuda_model/cuda_model.h"
#endif

namespace cb::app {

std::unique_ptr<model::ForwardModel> make_cuda_model(const model::ModelSource& src, uint64_t seed,
                                                     const std::string& storage, int gpu) {
#ifdef CB_HAVE_CUDA
  model::CudaModelOptions o;
  o.storage = storage == "f32"    ? kernels::cuda::Storage::F32
              : storage == "bf16" ? kernels::cuda::Storage::BF16
                                  : kernels::cuda::Storage::F16;
  o.device = gpu;
  // Presets are generated on the device, files uploaded tensor by tensor: no host copy.
  return std::make_unique<model::CudaModel>(src, seed, o);
#else
  (void)src;
  (void)seed;
  (void)storage;
  (void)gpu;
  throw make_error(
      "--backend cuda",
      "this build has no CUDA backend (built with CACHEBENCH_CUDA=OFF or without nvcc)",
      "run with --backend cpu, or rebuild on a machine with the CUDA toolkit");
#endif
}

}  // namespace cb::app
