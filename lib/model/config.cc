#include "lib/model/config.h"

#include <cmath>
#include <cstdio>

#include "lib/core/error.h"

namespace cb::model {

const char* arch_name(Arch a) {
  switch (a) {
    case Arch::Llama: return "llama";
    case Arch::Mistral: return "mistral";
    case Arch::Falcon: return "falcon";
  }
  return "?";
}

const char* rope_style_name(RopeStyle r) {
  return r == RopeStyle::Interleaved ? "interleaved" : "rotate-half";
}

const char* norm_type_name(NormType n) {
  return n == NormType::RmsNorm ? "rmsnorm" : "layernorm";
}

const char* qkv_layout_name(QkvLayout q) {
  switch (q) {
    case QkvLayout::Separate: return "separate";
    case QkvLayout::Contiguous: return "fused-contiguous";
    case QkvLayout::Grouped: return "fused-grouped";
  }
  return "?";
}

const char* ModelConfig::attention_kind() const {
  if (n_kv_heads == n_heads) return "MHA";
  if (n_kv_heads == 1) return "MQA";
  return "GQA";
}

uint64_t ModelConfig::kv_bytes_per_token(DType dtype) const {
  return 2ull * static_cast<uint64_t>(n_layers) * static_cast<uint64_t>(n_kv_heads) *
         static_cast<uint64_t>(head_dim) * dtype_bytes(dtype, 1);
}

void ModelConfig::validate(const std::string& source) const {
  auto bad = [&](const std::string& field, long long v, const std::string& rule) {
    throw make_error(
        source, "invalid model config: " + field + " = " + std::to_string(v) + " (" + rule + ")",
        "the file's configuration is inconsistent; fix or re-convert it");
  };
  auto bad_real = [&](const std::string& field, double v, const std::string& rule) {
    char b[32];
    std::snprintf(b, sizeof b, "%g", v);  // nan and inf as such (a cast to an integer is UB)
    throw make_error(source, "invalid model config: " + field + " = " + b + " (" + rule + ")",
                     "the file's configuration is inconsistent; fix or re-convert it");
  };
  constexpr int kMax = 1 << 24;
  if (n_layers <= 0 || n_layers > 4096) bad("n_layers", n_layers, "must be in 1..4096");
  if (hidden <= 0 || hidden > kMax) bad("hidden", hidden, "must be positive");
  if (n_heads <= 0 || n_heads > 4096) bad("n_heads", n_heads, "must be in 1..4096");
  if (n_kv_heads <= 0 || n_kv_heads > n_heads)
    bad("n_kv_heads", n_kv_heads, "must be in 1..n_heads = " + std::to_string(n_heads));
  if (n_heads % n_kv_heads != 0)
    bad("n_kv_heads", n_kv_heads, "must divide n_heads = " + std::to_string(n_heads));
  if (head_dim <= 0 || head_dim > 1024 || head_dim % 2 != 0)
    bad("head_dim", head_dim, "must be even and in 2..1024");
  if (ffn_hidden <= 0 || ffn_hidden > kMax) bad("ffn_hidden", ffn_hidden, "must be positive");
  if (vocab_size <= 0 || vocab_size > kMax) bad("vocab_size", vocab_size, "must be positive");
  if (max_context <= 0) bad("max_context", max_context, "must be positive");
  if (rope_dims <= 0 || rope_dims > head_dim || rope_dims % 2 != 0)
    bad("rope_dims", rope_dims,
        "must be even and in 2..head_dim = " + std::to_string(head_dim) +
            (head_dim * n_heads == hidden
                 ? ", hidden " + std::to_string(hidden) + " / n_heads " + std::to_string(n_heads)
                 : std::string()));
  if (sliding_window < 0) bad("sliding_window", sliding_window, "must be >= 0");
  if (!(rope_theta > 0.0f && std::isfinite(rope_theta)))
    bad_real("rope_theta", rope_theta, "must be finite and > 0");
  if (!(norm_eps > 0.0f && norm_eps < 1.0f)) bad_real("norm_eps", norm_eps, "must be in (0, 1)");
}

}  // namespace cb::model
