#pragma once
/// --backend cuda: the GPU model of lib/cuda_model, or a clear error in builds without CUDA.

#include <memory>
#include <string>

#include "lib/model/model.h"
#include "lib/model/model_source.h"

namespace cb::app {

/// Loads `src`'s weights and uploads them to GPU `gpu` in `storage` ("f32", "f16" or "bf16");
/// a preset's weights (with `seed`) are generated on the GPU instead. Throws cb::Error naming
/// --backend when this build has no CUDA backend or no GPU is usable.
std::unique_ptr<model::ForwardModel> make_cuda_model(const model::ModelSource& src, uint64_t seed,
                                                     const std::string& storage, int gpu);

}  // namespace cb::app
