#include "lib/model/weights.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "lib/core/error.h"
#include "lib/core/parallel.h"
#include "lib/core/sysinfo.h"
#include "lib/model/presets.h"
#include "lib/model/tensor_specs.h"

namespace cb::model {

namespace {

bool is_matrix(const TensorSpec& spec) {
  return spec.role == TensorRole::Embedding || spec.role == TensorRole::Matrix ||
         spec.role == TensorRole::Output;
}

// A file tensor Weights::load uses where it lies: already in the storage type, and aligned.
bool used_in_place(const formats::TensorRef& t, bool bf16) {
  const auto addr = reinterpret_cast<uintptr_t>(t.data);
  return bf16 ? t.dtype == DType::BF16 && addr % alignof(uint16_t) == 0
              : t.dtype == DType::F32 && addr % alignof(float) == 0;
}

// Element i of a plain (F32, F16, BF16) tensor as fp32, read from possibly unaligned bytes.
float element_f32(const formats::TensorRef& t, size_t i) {
  if (t.dtype == DType::F32) {
    float v;
    std::memcpy(&v, t.data + i * sizeof v, sizeof v);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, t.data + i * sizeof h, sizeof h);
  return t.dtype == DType::F16 ? fp16_to_fp32(h) : bf16_to_fp32(h);
}

// Preset values and converted tensors are produced this many elements at a time when they are
// rounded to bf16, so no whole fp32 copy of a large tensor is held; also the least a thread
// generates or converts (preset elements are pure functions of their index: any split gives
// the same values).
constexpr int64_t kConvertChunk = int64_t{1} << 20;

}  // namespace

const char* weight_storage_name(WeightStorage s) {
  return s == WeightStorage::BF16 ? "bf16" : "f32";
}

bool parse_weight_storage(const std::string& name, WeightStorage* out) {
  if (name == "f32") {
    *out = WeightStorage::F32;
  } else if (name == "bf16") {
    *out = WeightStorage::BF16;
  } else {
    return false;
  }
  return true;
}

uint64_t weights_host_bytes(const ModelSource& src, const ModelConfig& cfg, WeightStorage storage) {
  uint64_t bytes = 0;
  for (const auto& spec : expected_tensors(cfg)) {
    const formats::TensorRef* t =
        src.kind() == SourceKind::Preset ? nullptr : src.tensor(spec.name);
    const bool bf16 = storage == WeightStorage::BF16 && is_matrix(spec);
    if (t != nullptr && used_in_place(*t, bf16)) continue;
    bytes += (bf16 ? 2ull : 4ull) * static_cast<uint64_t>(spec.numel());
  }
  return bytes;
}

std::unique_ptr<Weights> Weights::load(const ModelSource& src, uint64_t seed,
                                       WeightStorage storage) {
  return load(src, src.config(), seed, storage);
}

std::unique_ptr<Weights> Weights::load(const ModelSource& src, const ModelConfig& cfg,
                                       uint64_t seed, WeightStorage storage) {
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
  // The CPU backend computes in fp32 from weights it holds in host memory: refuse up front
  // what this machine cannot hold.
  const uint64_t host_bytes = weights_host_bytes(src, cfg, storage);
  const uint64_t phys = physical_memory_bytes();
  if (phys > 0 && host_bytes > phys) {
    const uint64_t bf16_bytes = weights_host_bytes(src, cfg, WeightStorage::BF16);
    const bool bf16_fits = storage == WeightStorage::F32 && bf16_bytes <= phys;
    throw make_error(
        src.location(),
        std::string("its ") + weight_storage_name(storage) + " weights for the CPU backend take " +
            std::to_string(host_bytes >> 20) + " MiB, more than this machine's " +
            std::to_string(phys >> 20) + " MiB of memory",
        std::string(bf16_fits ? "use --cpu-weights bf16 (" + std::to_string(bf16_bytes >> 20) +
                                    " MiB), " + "--backend cuda"
                              : "use --backend cuda") +
            " (weights made or uploaded on the GPU), a smaller model, or fewer "
            "layers where the command offers --layers");
  }
  auto w = std::make_unique<Weights>();
  w->storage_ = storage;
  for (const auto& spec : expected_tensors(cfg)) {
    const size_t n = static_cast<size_t>(spec.numel());
    const bool bf16 = storage == WeightStorage::BF16 && is_matrix(spec);
    const formats::TensorRef* t =
        src.kind() == SourceKind::Preset ? nullptr : src.tensor(spec.name);
    if (src.kind() != SourceKind::Preset && t == nullptr) {
      throw make_error(src.location(), "missing tensor '" + spec.name + "'");
    }
    if (bf16) {
      if (t != nullptr && used_in_place(*t, true)) {
        w->ptr_[spec.name].bf16 = reinterpret_cast<const uint16_t*>(t->data);
        continue;
      }
      std::vector<uint16_t> out(n);
      uint16_t* o = out.data();
      if (t == nullptr) {
        for_each_piece(spec.numel(), kConvertChunk, worker_threads(), [&](int64_t b, int64_t m) {
          std::vector<float> part(static_cast<size_t>(std::min(kConvertChunk, m)));
          for (int64_t c = b; c < b + m; c += kConvertChunk) {
            const int64_t k = std::min(kConvertChunk, b + m - c);
            preset_fill(cfg, spec, seed, c, k, part.data());
            for (int64_t i = 0; i < k; ++i) o[c + i] = fp32_to_bf16(part[static_cast<size_t>(i)]);
          }
        });
      } else if (t->dtype == DType::F32 || t->dtype == DType::F16 || t->dtype == DType::BF16) {
        // Element by element: no fp32 copy of the whole tensor (an unaligned BF16 tensor is
        // copied bit for bit).
        for_each_piece(spec.numel(), kConvertChunk, worker_threads(), [&](int64_t b, int64_t m) {
          for (int64_t i = b; i < b + m; ++i) {
            o[i] = fp32_to_bf16(element_f32(*t, static_cast<size_t>(i)));
          }
        });
      } else {
        // Quantized blocks: dequantized whole (a transient fp32 copy of this one tensor).
        std::vector<float> f(n);
        formats::to_f32(*t, f.data());
        for (size_t i = 0; i < n; ++i) out[i] = fp32_to_bf16(f[i]);
      }
      w->owned_bytes_ += n * sizeof(uint16_t);
      w->owned_bf16_.push_back(std::move(out));
      w->ptr_[spec.name].bf16 = w->owned_bf16_.back().data();
      continue;
    }
    if (t == nullptr) {
      std::vector<float> buf(n);
      float* o = buf.data();
      for_each_piece(spec.numel(), kConvertChunk, worker_threads(),
                     [&](int64_t b, int64_t m) { preset_fill(cfg, spec, seed, b, m, o + b); });
      w->owned_bytes_ += n * sizeof(float);
      w->owned_.push_back(std::move(buf));
      w->ptr_[spec.name].f32 = w->owned_.back().data();
      continue;
    }
    if (used_in_place(*t, false)) {
      w->ptr_[spec.name].f32 = reinterpret_cast<const float*>(t->data);
      continue;
    }
    std::vector<float> buf(n);
    formats::to_f32(*t, buf.data());
    w->owned_bytes_ += n * sizeof(float);
    w->owned_.push_back(std::move(buf));
    w->ptr_[spec.name].f32 = w->owned_.back().data();
  }
  return w;
}

const float* Weights::find(const std::string& name) const {
  auto it = ptr_.find(name);
  if (it == ptr_.end()) return nullptr;
  if (it->second.f32 == nullptr) {
    throw Error("internal: weight '" + name + "' is stored in bf16; read it with matrix()");
  }
  return it->second.f32;
}

const float* Weights::get(const std::string& name) const {
  const float* p = find(name);
  if (p == nullptr) throw Error("internal: weight '" + name + "' was not loaded");
  return p;
}

WeightMatrix Weights::matrix(const std::string& name) const {
  auto it = ptr_.find(name);
  if (it == ptr_.end()) throw Error("internal: weight '" + name + "' was not loaded");
  return it->second;
}

}  // namespace cb::model
