#pragma once
/// fp32 weights for the CPU backend, under canonical names. F32 tensors of a file are
/// used in place (zero-copy from the memory mapping when aligned); F16/BF16/quantized
/// tensors are converted once; presets are generated from their seed.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lib/model/model_source.h"

namespace cb::model {

class Weights {
 public:
  /// Materializes every tensor of src's config. `seed` is used by presets only.
  static std::unique_ptr<Weights> load(const ModelSource& src, uint64_t seed = 0);
  /// Same, for `cfg` = src.config() with possibly fewer layers (benchmarks of big presets
  /// truncated to a few layers); throws cb::Error for any other difference.
  static std::unique_ptr<Weights> load(const ModelSource& src, const ModelConfig& cfg,
                                       uint64_t seed);

  /// The fp32 data of canonical tensor `name`; throws cb::Error if absent.
  const float* get(const std::string& name) const;
  /// Like get(), but nullptr when absent (optional tensors such as output.weight).
  const float* find(const std::string& name) const;
  /// Bytes of fp32 data this object owns (excludes zero-copy tensors).
  uint64_t owned_bytes() const { return owned_bytes_; }

 private:
  std::map<std::string, const float*> ptr_;
  std::vector<std::vector<float>> owned_;
  uint64_t owned_bytes_ = 0;
};

}  // namespace cb::model
