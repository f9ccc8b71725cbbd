#pragma once
/// Weights for the CPU backend, under canonical names, in fp32 (the default) or with the
/// matrices (embedding, linear layers, LM head) in bfloat16 (WeightStorage::BF16: half the
/// memory; norms stay fp32). Tensors already in the storage type are used in place (zero-copy
/// from the memory mapping when aligned); others are converted once (to bf16 by rounding to
/// nearest even); presets are generated from their seed.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lib/model/model_source.h"

namespace cb::model {

enum class WeightStorage : uint8_t { F32, BF16 };
/// "f32" / "bf16", and back (false when unknown).
const char* weight_storage_name(WeightStorage s);
bool parse_weight_storage(const std::string& name, WeightStorage* out);

/// A 2-D weight: exactly one of the pointers is set.
struct WeightMatrix {
  const float* f32 = nullptr;
  const uint16_t* bf16 = nullptr;
};

/// Host bytes Weights::load would allocate for `cfg` from `src` in `storage` (tensors used in
/// place count nothing).
uint64_t weights_host_bytes(const ModelSource& src, const ModelConfig& cfg, WeightStorage storage);

class Weights {
 public:
  /// Materializes every tensor of src's config. `seed` is used by presets only.
  static std::unique_ptr<Weights> load(const ModelSource& src, uint64_t seed = 0,
                                       WeightStorage storage = WeightStorage::F32);
  /// Same, for `cfg` = src.config() with possibly fewer layers (benchmarks of big presets
  /// truncated to a few layers); throws cb::Error for any other difference.
  static std::unique_ptr<Weights> load(const ModelSource& src, const ModelConfig& cfg,
                                       uint64_t seed, WeightStorage storage = WeightStorage::F32);

  WeightStorage storage() const { return storage_; }
  /// The fp32 data of canonical tensor `name`; throws cb::Error if absent or not fp32 (a
  /// matrix stored in bf16: use matrix()).
  const float* get(const std::string& name) const;
  /// Like get(), but nullptr when absent (optional tensors such as output.weight).
  const float* find(const std::string& name) const;
  /// A 2-D tensor in whichever storage it has; throws cb::Error if absent.
  WeightMatrix matrix(const std::string& name) const;
  /// Bytes of data this object owns (excludes zero-copy tensors).
  uint64_t owned_bytes() const { return owned_bytes_; }

 private:
  WeightStorage storage_ = WeightStorage::F32;
  std::map<std::string, WeightMatrix> ptr_;
  std::vector<std::vector<float>> owned_;
  std::vector<std::vector<uint16_t>> owned_bf16_;
  uint64_t owned_bytes_ = 0;
};

}  // namespace cb::model
