#include "lib/model/gguf_config.h"

#include <cmath>
#include <limits>

#include "lib/core/error.h"
#include "lib/core/format.h"

namespace cb::model {
namespace {

int required_int(const formats::GgufFile& f, const std::string& key) {
  auto v = f.get_u64(key);
  if (!v) {
    throw make_error(f.path(), "missing metadata key '" + key + "'",
                     "the file is not a complete model; re-convert it with llama.cpp");
  }
  if (*v > static_cast<uint64_t>(std::numeric_limits<int>::max())) {
    throw make_error(f.path(),
                     "metadata key '" + key + "' = " + std::to_string(*v) + " is out of range");
  }
  return static_cast<int>(*v);
}

int optional_int(const formats::GgufFile& f, const std::string& key, int def) {
  return f.has(key) ? required_int(f, key) : def;
}

float optional_float(const formats::GgufFile& f, const std::string& key, float def) {
  auto v = f.get_f64(key);
  return v ? static_cast<float>(*v) : def;
}

}  // namespace

ModelConfig config_from_gguf(const formats::GgufFile& f) {
  const auto arch = f.get_string("general.architecture");
  if (!arch) {
    throw make_error(f.path(), "missing metadata key 'general.architecture'",
                     "the file is not a llama.cpp model; re-convert it");
  }
  const std::string a = *arch;
  ModelConfig c;
  if (a == "llama") {
    c.arch = Arch::Llama;
  } else if (a == "falcon") {
    c.arch = Arch::Falcon;
  } else {
    throw make_error(f.path(), "unsupported architecture '" + a + "'",
                     "cachebench runs llama (LLaMA, Mistral) and falcon models");
  }
  // A name for display and results: a file's bytes that are not UTF-8 text, or control
  // characters (an escape sequence, a NUL), written as \xNN, never sent to a terminal or JSON.
  c.name = printable(f.get_string("general.name").value_or(a));
  c.n_layers = required_int(f, a + ".block_count");
  c.hidden = required_int(f, a + ".embedding_length");
  c.n_heads = required_int(f, a + ".attention.head_count");
  c.n_kv_heads = optional_int(f, a + ".attention.head_count_kv", c.n_heads);
  c.ffn_hidden = required_int(f, a + ".feed_forward_length");
  c.max_context = optional_int(f, a + ".context_length", 2048);
  if (c.n_heads <= 0) {
    throw make_error(f.path(), "metadata key '" + a + ".attention.head_count' must be positive");
  }
  c.head_dim = optional_int(f, a + ".attention.key_length", c.hidden / c.n_heads);
  c.rope_dims = optional_int(f, a + ".rope.dimension_count", c.head_dim);
  c.rope_theta = optional_float(f, a + ".rope.freq_base", 10000.0f);
  c.sliding_window = optional_int(f, a + ".attention.sliding_window", 0);
  // RoPE scaling (llama.cpp's rope.scaling.* keys, or the older rope.scale_linear) changes
  // every position's rotation: refused, not ignored. llama.cpp reads a missing type as
  // "linear" and a factor of 0 as none. (Llama 3.1's rope_freqs.weight tensor is refused as a
  // tensor the model does not use.)
  const std::string scaling = f.get_string(a + ".rope.scaling.type").value_or("linear");
  float factor = optional_float(f, a + ".rope.scaling.factor", 1.0f);
  const float linear = optional_float(f, a + ".rope.scale_linear", 1.0f);
  if (factor == 0.0f) factor = 1.0f;
  if ((scaling != "none" && factor != 1.0f) || (linear != 0.0f && linear != 1.0f)) {
    throw make_error(f.path(),
                     "RoPE scaling (" + scaling + ", factor " +
                         std::to_string(factor != 1.0f ? factor : linear) +
                         ") is set in the metadata",
                     "RoPE scaling variants are not supported; use a checkpoint without it");
  }

  int vocab = optional_int(f, a + ".vocab_size", 0);
  if (vocab == 0) {
    if (const auto* t = f.find_tensor("token_embd.weight"); t && t->shape.size() == 2) {
      vocab = static_cast<int>(t->shape[0]);
    } else if (const auto* tok = f.find("tokenizer.ggml.tokens")) {
      vocab = static_cast<int>(tok->array.size());
    }
  }
  c.vocab_size = vocab;

  if (c.arch == Arch::Llama) {
    c.norm = NormType::RmsNorm;
    c.norm_eps = optional_float(f, a + ".attention.layer_norm_rms_epsilon", 1e-5f);
    c.rope_style = RopeStyle::Interleaved;  // the converter permuted Q/K rows
    c.qkv_layout = QkvLayout::Separate;
    c.tied_embeddings = f.find_tensor("output.weight") == nullptr && !f.tensors().empty();
    if (c.sliding_window > 0) c.arch = Arch::Mistral;
  } else {
    c.norm = NormType::LayerNorm;
    c.norm_eps = optional_float(f, a + ".attention.layer_norm_epsilon", 1e-5f);
    c.rope_style = RopeStyle::RotateHalf;
    c.parallel_attention = true;
    c.separate_mlp_norm = f.find_tensor("blk.0.attn_norm_2.weight") != nullptr;
    c.qkv_layout = QkvLayout::Contiguous;
    c.tied_embeddings = f.find_tensor("output.weight") == nullptr;
  }
  const formats::TensorRef* probe = f.find_tensor("blk.0.ffn_up.weight");
  if (probe == nullptr) probe = f.find_tensor("token_embd.weight");
  c.weight_dtype = probe ? probe->dtype : DType::F32;
  c.validate(f.path());
  return c;
}

}  // namespace cb::model
