#pragma once
/// One ModelConfig for every supported family (LLaMA-1/2, Mistral, Falcon 7B/40B),
/// whatever the source: GGUF metadata, a Hugging Face config.json, or a preset.

#include <cstdint>
#include <string>

#include "lib/core/dtype.h"

namespace cb::model {

enum class Arch : uint8_t { Llama, Mistral, Falcon };
/// How RoPE pairs dimensions: Interleaved = (2i, 2i+1) as in GGUF llama files (whose
/// Q/K rows were permuted by the converter); RotateHalf = (i, i + d/2) as in Hugging
/// Face checkpoints and Falcon ("NeoX" style).
enum class RopeStyle : uint8_t { Interleaved, RotateHalf };
enum class NormType : uint8_t { RmsNorm, LayerNorm };
/// Layout of Falcon's fused query_key_value rows: Contiguous = all Q heads, then all
/// K, then all V (GGUF, and HF multi-query 7B); Grouped = per KV group, its Q heads
/// then its K then its V (HF new_decoder_architecture, i.e. 40B).
enum class QkvLayout : uint8_t { Separate, Contiguous, Grouped };

const char* arch_name(Arch a);
const char* rope_style_name(RopeStyle r);
const char* norm_type_name(NormType n);
const char* qkv_layout_name(QkvLayout q);

struct ModelConfig {
  Arch arch = Arch::Llama;
  std::string name;  ///< e.g. "llama-2-7b" or general.name
  int n_layers = 0;
  int hidden = 0;  ///< model dimension
  int n_heads = 0;
  int n_kv_heads = 0;  ///< == n_heads (MHA), < n_heads (GQA), 1 (MQA)
  int head_dim = 0;
  int ffn_hidden = 0;  ///< SwiGLU inner size (LLaMA/Mistral) or MLP size (Falcon)
  int vocab_size = 0;
  int max_context = 0;  ///< trained context window
  float rope_theta = 10000.0f;
  int rope_dims = 0;  ///< rotated dimensions per head (partial rotary when < head_dim)
  RopeStyle rope_style = RopeStyle::RotateHalf;
  int sliding_window = 0;  ///< 0: full causal attention (Mistral: 4096)
  NormType norm = NormType::RmsNorm;
  float norm_eps = 1e-5f;
  bool parallel_attention = false;  ///< Falcon: attention and MLP read the same input
  bool separate_mlp_norm = false;   ///< Falcon-40B style: ln_attn and ln_mlp
  bool tied_embeddings = false;     ///< LM head shares token_embd.weight
  QkvLayout qkv_layout = QkvLayout::Separate;
  DType weight_dtype = DType::F16;  ///< storage dtype of matrices (as found / preset)
  /// Which model this is (weights_identity: the weights and the fields above that change what it
  /// computes, which put_config in weights_id.cc lists; and how a backend holds the weights when
  /// that changes its numbers); set when a model is loaded, empty for a config alone. Part of
  /// the store's model fingerprint.
  std::string weights_id;

  int q_dim() const { return n_heads * head_dim; }
  int kv_dim() const { return n_kv_heads * head_dim; }
  /// "MHA", "GQA" or "MQA".
  const char* attention_kind() const;
  /// Bytes of K and V for one token across all layers at `dtype` (fp16 by default):
  /// 2 * n_layers * n_kv_heads * head_dim * sizeof(dtype). Drives every tier-size decision.
  uint64_t kv_bytes_per_token(DType dtype = DType::F16) const;

  /// Throws cb::Error naming `source` and the field when the config is inconsistent
  /// (non-positive sizes, heads not dividing, head_dim odd, rope_dims > head_dim...).
  void validate(const std::string& source) const;
};

}  // namespace cb::model
