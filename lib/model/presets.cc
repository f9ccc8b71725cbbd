#include "lib/model/presets.h"

#include <cmath>
#include <map>

#include "lib/core/error.h"

namespace cb::model {
namespace {

ModelConfig llama(const std::string& name, int layers, int hidden, int heads, int kv_heads, int ffn,
                  int ctx, float eps) {
  ModelConfig c;
  c.arch = Arch::Llama;
  c.name = name;
  c.n_layers = layers;
  c.hidden = hidden;
  c.n_heads = heads;
  c.n_kv_heads = kv_heads;
  c.head_dim = hidden / heads;
  c.ffn_hidden = ffn;
  c.vocab_size = 32000;
  c.max_context = ctx;
  c.rope_theta = 10000.0f;
  c.rope_dims = c.head_dim;
  c.rope_style = RopeStyle::RotateHalf;
  c.norm = NormType::RmsNorm;
  c.norm_eps = eps;
  c.weight_dtype = DType::F16;
  return c;
}

ModelConfig mistral(const std::string& name, int layers, int hidden, int heads, int kv_heads,
                    int ffn, int ctx, int window) {
  ModelConfig c = llama(name, layers, hidden, heads, kv_heads, ffn, ctx, 1e-5f);
  c.arch = Arch::Mistral;
  c.sliding_window = window;
  return c;
}

ModelConfig falcon(const std::string& name, int layers, int hidden, int heads, int kv_heads,
                   int ffn, bool new_arch) {
  ModelConfig c;
  c.arch = Arch::Falcon;
  c.name = name;
  c.n_layers = layers;
  c.hidden = hidden;
  c.n_heads = heads;
  c.n_kv_heads = kv_heads;
  c.head_dim = hidden / heads;
  c.ffn_hidden = ffn;
  c.vocab_size = 65024;
  c.max_context = 2048;
  c.rope_theta = 10000.0f;
  c.rope_dims = c.head_dim;
  c.rope_style = RopeStyle::RotateHalf;
  c.norm = NormType::LayerNorm;
  c.norm_eps = 1e-5f;
  c.parallel_attention = true;
  c.separate_mlp_norm = new_arch;
  c.tied_embeddings = true;
  c.qkv_layout = QkvLayout::Contiguous;
  c.weight_dtype = DType::BF16;
  return c;
}

const std::map<std::string, ModelConfig>& registry() {
  static const std::map<std::string, ModelConfig> r = [] {
    std::map<std::string, ModelConfig> m;
    auto put = [&m](ModelConfig c) { m.emplace(c.name, c); };
    // LLaMA-1 (Touvron et al. 2023, Table 2) and LLaMA-2 (Touvron et al. 2023b).
    put(llama("llama-7b", 32, 4096, 32, 32, 11008, 2048, 1e-6f));
    put(llama("llama-13b", 40, 5120, 40, 40, 13824, 2048, 1e-6f));
    put(llama("llama-65b", 80, 8192, 64, 64, 22016, 2048, 1e-5f));
    put(llama("llama-2-7b", 32, 4096, 32, 32, 11008, 4096, 1e-5f));
    put(llama("llama-2-13b", 40, 5120, 40, 40, 13824, 4096, 1e-5f));
    put(llama("llama-2-70b", 80, 8192, 64, 8, 28672, 4096, 1e-5f));
    // Mistral-7B v0.1: GQA 32/8, sliding window 4096.
    put(mistral("mistral-7b", 32, 4096, 32, 8, 14336, 32768, 4096));
    // Falcon-7B (multi-query, one layer norm) and Falcon-40B (new decoder architecture).
    put(falcon("falcon-7b", 32, 4544, 71, 1, 18176, false));
    put(falcon("falcon-40b", 60, 8192, 128, 8, 32768, true));
    // Tiny presets for tests: every architectural feature at toy size.
    ModelConfig tl = llama("tiny-llama", 2, 64, 4, 2, 160, 256, 1e-5f);
    tl.vocab_size = 512;
    tl.weight_dtype = DType::F32;
    put(tl);
    ModelConfig tm = mistral("tiny-mistral", 2, 64, 4, 2, 160, 256, 32);
    tm.vocab_size = 512;
    tm.weight_dtype = DType::F32;
    put(tm);
    ModelConfig tf7 = falcon("tiny-falcon-7b", 2, 64, 4, 1, 256, false);
    tf7.vocab_size = 512;
    tf7.max_context = 256;
    tf7.weight_dtype = DType::F32;
    put(tf7);
    ModelConfig tf40 = falcon("tiny-falcon-40b", 2, 64, 4, 2, 256, true);
    tf40.vocab_size = 512;
    tf40.max_context = 256;
    tf40.weight_dtype = DType::F32;
    put(tf40);
    return m;
  }();
  return r;
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : s) h = (h ^ ch) * 0x100000001b3ull;
  return h;
}

}  // namespace

std::vector<std::string> preset_names() {
  std::vector<std::string> big, tiny;
  for (const auto& kv : registry())
    (kv.first.rfind("tiny-", 0) == 0 ? tiny : big).push_back(kv.first);
  big.insert(big.end(), tiny.begin(), tiny.end());
  return big;
}

ModelConfig preset_config(const std::string& name) {
  auto it = registry().find(name);
  if (it == registry().end()) {
    std::string names;
    for (const auto& n : preset_names()) names += (names.empty() ? "" : ", ") + n;
    throw make_error("preset:" + name, "unknown preset", "available presets: " + names);
  }
  return it->second;
}

PresetFill preset_fill_params(const ModelConfig& cfg, const TensorSpec& spec, uint64_t seed) {
  PresetFill f;
  if (spec.role == TensorRole::NormWeight || spec.role == TensorRole::NormBias) {
    f.constant = true;
    f.value = spec.role == TensorRole::NormWeight ? 1.0f : 0.0f;
    return f;
  }
  double stddev = 1.0;
  if (spec.role != TensorRole::Embedding)
    stddev = 1.0 / std::sqrt(static_cast<double>(spec.fan_in));
  const bool residual_out = spec.name.find("attn_output") != std::string::npos ||
                            spec.name.find("ffn_down") != std::string::npos;
  if (residual_out) stddev /= std::sqrt(2.0 * cfg.n_layers);
  f.scale = static_cast<float>(stddev * std::sqrt(3.0));  // uniform(-a, a) has std a/sqrt(3)
  f.key = splitmix64(seed ^ fnv1a(spec.name));
  return f;
}

void preset_fill(const ModelConfig& cfg, const TensorSpec& spec, uint64_t seed, int64_t begin,
                 int64_t count, float* out) {
  const PresetFill f = preset_fill_params(cfg, spec, seed);
  if (f.constant) {
    for (int64_t i = 0; i < count; ++i) out[i] = f.value;
    return;
  }
  for (int64_t i = 0; i < count; ++i) {
    const uint64_t r = splitmix64(f.key + static_cast<uint64_t>(begin + i));
    const float u = static_cast<float>(r >> 40) * (1.0f / 16777216.0f);  // [0, 1), 24 bits
    out[i] = (2.0f * u - 1.0f) * f.scale;
  }
}

}  // namespace cb::model
