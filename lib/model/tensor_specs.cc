#include "lib/model/tensor_specs.h"

namespace cb::model {
namespace {

void add(std::vector<TensorSpec>* v, std::string name, std::vector<int64_t> shape,
         TensorRole role) {
  TensorSpec s;
  s.name = std::move(name);
  s.fan_in = shape.size() == 2 ? shape[1] : 1;
  s.shape = std::move(shape);
  s.role = role;
  v->push_back(std::move(s));
}

void add_norm(std::vector<TensorSpec>* v, const ModelConfig& c, const std::string& base) {
  add(v, base + ".weight", {c.hidden}, TensorRole::NormWeight);
  if (c.norm == NormType::LayerNorm) add(v, base + ".bias", {c.hidden}, TensorRole::NormBias);
}

}  // namespace

std::vector<TensorSpec> expected_tensors(const ModelConfig& c) {
  std::vector<TensorSpec> v;
  const int64_t h = c.hidden, q = c.q_dim(), kv = c.kv_dim(), f = c.ffn_hidden;
  add(&v, "token_embd.weight", {c.vocab_size, h}, TensorRole::Embedding);
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    add_norm(&v, c, b + "attn_norm");
    if (c.arch == Arch::Falcon) {
      if (c.separate_mlp_norm) add_norm(&v, c, b + "attn_norm_2");
      add(&v, b + "attn_qkv.weight", {q + 2 * kv, h}, TensorRole::Matrix);
      add(&v, b + "attn_output.weight", {h, q}, TensorRole::Matrix);
      add(&v, b + "ffn_up.weight", {f, h}, TensorRole::Matrix);
      add(&v, b + "ffn_down.weight", {h, f}, TensorRole::Matrix);
    } else {
      add(&v, b + "attn_q.weight", {q, h}, TensorRole::Matrix);
      add(&v, b + "attn_k.weight", {kv, h}, TensorRole::Matrix);
      add(&v, b + "attn_v.weight", {kv, h}, TensorRole::Matrix);
      add(&v, b + "attn_output.weight", {h, q}, TensorRole::Matrix);
      add_norm(&v, c, b + "ffn_norm");
      add(&v, b + "ffn_gate.weight", {f, h}, TensorRole::Matrix);
      add(&v, b + "ffn_up.weight", {f, h}, TensorRole::Matrix);
      add(&v, b + "ffn_down.weight", {h, f}, TensorRole::Matrix);
    }
  }
  add_norm(&v, c, "output_norm");
  if (!c.tied_embeddings) add(&v, "output.weight", {c.vocab_size, h}, TensorRole::Output);
  return v;
}

uint64_t parameter_count(const ModelConfig& cfg) {
  uint64_t n = 0;
  for (const auto& s : expected_tensors(cfg)) n += static_cast<uint64_t>(s.numel());
  return n;
}

}  // namespace cb::model
