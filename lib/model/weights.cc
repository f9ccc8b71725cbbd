#include "lib/model/weights.h"

#include <cstdint>

#include "lib/core/error.h"
#include "lib/core/sysinfo.h"
#include "lib/model/presets.h"

namespace cb::model {

std::unique_ptr<Weights> Weights::load(const ModelSource& src, uint64_t seed) {
  return load(src, src.config(), seed);
}

std::unique_ptr<Weights> Weights::load(const ModelSource& src, const ModelConfig& cfg,
                                       uint64_t seed) {
  ModelConfig same_but_layers = src.config();
  same_but_layers.n_layers = cfg.n_layers;
  if (cfg.n_layers < 1 || cfg.n_layers > src.config().n_layers ||
      expected_tensors(same_but_layers).size() != expected_tensors(cfg).size() ||
      cfg.hidden != src.config().hidden || cfg.vocab_size != src.config().vocab_size) {
    throw make_error(src.location(), "weights requested for a config that differs from the model's",
                     "only the number of layers may be reduced");
  }
  if (src.vocab_only()) {
    throw make_error(src.location(), "the file holds a vocabulary but no weights",
                     "pass a model file with tensors");
  }
  // The CPU backend computes in fp32: a preset, and every tensor not stored as fp32, takes
  // 4 bytes per weight of host memory. Refuse up front what this machine cannot hold.
  uint64_t host_bytes = 0;
  for (const auto& spec : expected_tensors(cfg)) {
    const formats::TensorRef* t =
        src.kind() == SourceKind::Preset ? nullptr : src.tensor(spec.name);
    if (t == nullptr || t->dtype != DType::F32) host_bytes += 4ull * spec.numel();
  }
  const uint64_t phys = physical_memory_bytes();
  if (phys > 0 && host_bytes > phys) {
    throw make_error(src.location(),
                     "its fp32 weights for the CPU backend take " +
                         std::to_string(host_bytes >> 20) + " MiB, more than this machine's " +
                         std::to_string(phys >> 20) + " MiB of memory",
                     "use --backend cuda (weights made or uploaded on the GPU), a smaller model, "
                     "or fewer layers where the command offers --layers");
  }
  auto w = std::make_unique<Weights>();
  for (const auto& spec : expected_tensors(cfg)) {
    const size_t n = static_cast<size_t>(spec.numel());
    if (src.kind() == SourceKind::Preset) {
      std::vector<float> buf(n);
      preset_fill(cfg, spec, seed, 0, spec.numel(), buf.data());
      w->owned_bytes_ += n * sizeof(float);
      w->owned_.push_back(std::move(buf));
      w->ptr_[spec.name] = w->owned_.back().data();
      continue;
    }
    const formats::TensorRef* t = src.tensor(spec.name);
    if (t == nullptr) throw make_error(src.location(), "missing tensor '" + spec.name + "'");
    const bool aligned = reinterpret_cast<uintptr_t>(t->data) % alignof(float) == 0;
    if (t->dtype == DType::F32 && aligned) {
      w->ptr_[spec.name] = reinterpret_cast<const float*>(t->data);
      continue;
    }
    std::vector<float> buf(n);
    formats::to_f32(*t, buf.data());
    w->owned_bytes_ += n * sizeof(float);
    w->owned_.push_back(std::move(buf));
    w->ptr_[spec.name] = w->owned_.back().data();
  }
  return w;
}

const float* Weights::find(const std::string& name) const {
  auto it = ptr_.find(name);
  return it == ptr_.end() ? nullptr : it->second;
}

const float* Weights::get(const std::string& name) const {
  const float* p = find(name);
  if (p == nullptr) throw Error("internal: weight '" + name + "' was not loaded");
  return p;
}

}  // namespace cb::model
