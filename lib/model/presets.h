#pragma once
/// Presets: published model dimensions with deterministic random weights, so that
/// paper-scale models (7B..70B) can be inspected, simulated and benchmarked without
/// downloading checkpoints, plus tiny presets of each architecture for tests.

#include <cstdint>
#include <string>
#include <vector>

#include "lib/model/config.h"
#include "lib/model/tensor_specs.h"

namespace cb::model {

/// All preset names, paper-scale first, then the tiny-* test presets.
std::vector<std::string> preset_names();
/// The config of preset `name` (without the "preset:" prefix); throws cb::Error that
/// lists the available names when unknown.
ModelConfig preset_config(const std::string& name);

/// Deterministic weights for a preset tensor: element i of tensor `spec` is a pure
/// function of (seed, spec.name, i), so any slice can be generated independently (on
/// the host or, later, on the device). Matrices are uniform with std 1/sqrt(fan_in)
/// (residual-branch outputs further scaled by 1/sqrt(2 * n_layers)), embeddings have
/// std 1, norm weights are 1 and biases 0: activations stay finite over long sequences.
/// Writes elements [begin, begin + count) of the tensor to `out`.
void preset_fill(const ModelConfig& cfg, const TensorSpec& spec, uint64_t seed, int64_t begin,
                 int64_t count, float* out);

/// What preset_fill computes for a tensor, for generators elsewhere (the GPU's,
/// kernels/cuda preset_fill): a constant, or element i = preset_element(key, scale, i).
struct PresetFill {
  bool constant = false;
  float value = 0.0f;  ///< when constant
  uint64_t key = 0;
  float scale = 0.0f;
};
PresetFill preset_fill_params(const ModelConfig& cfg, const TensorSpec& spec, uint64_t seed);

}  // namespace cb::model
