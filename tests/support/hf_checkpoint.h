#pragma once
/// Test-only tiny Hugging Face checkpoints: the tensor names and shapes of the LLaMA/Mistral
/// and Falcon modeling files (written out by hand from transformers), random fills, and a
/// writer of config.json + safetensors (optionally sharded with an index).

#include <cstdint>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/safetensors_writer.h"
#include "tests/support/test_data.h"

namespace cb::test {

using HfSpecs = std::vector<std::pair<std::string, std::vector<int64_t>>>;

/// LlamaForCausalLM / MistralForCausalLM: q and kv are the projection widths.
inline HfSpecs llama_hf_tensors(int layers, int h, int q, int kv, int f, int vocab) {
  HfSpecs v = {{"model.embed_tokens.weight", {vocab, h}},
               {"model.norm.weight", {h}},
               {"lm_head.weight", {vocab, h}}};
  for (int l = 0; l < layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    v.push_back({p + "input_layernorm.weight", {h}});
    v.push_back({p + "post_attention_layernorm.weight", {h}});
    v.push_back({p + "self_attn.q_proj.weight", {q, h}});
    v.push_back({p + "self_attn.k_proj.weight", {kv, h}});
    v.push_back({p + "self_attn.v_proj.weight", {kv, h}});
    v.push_back({p + "self_attn.o_proj.weight", {h, q}});
    v.push_back({p + "mlp.gate_proj.weight", {f, h}});
    v.push_back({p + "mlp.up_proj.weight", {f, h}});
    v.push_back({p + "mlp.down_proj.weight", {h, f}});
    v.push_back({p + "self_attn.rotary_emb.inv_freq", {q / 8}});  // ignored buffer
  }
  return v;
}

/// config.json of a LlamaForCausalLM with llama_hf_tensors(2, 32, 32, 16, 48, 40)'s shapes:
/// 2 layers, hidden 32, 4 heads over 2 KV heads, FFN 48, vocabulary 40.
inline nlohmann::json tiny_llama_hf_config() {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"hidden_size", 32},
          {"intermediate_size", 48},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"vocab_size", 40},
          {"max_position_embeddings", 128},
          {"rms_norm_eps", 1e-6}};
}

/// FalconForCausalLM: 7B style (one input_layernorm) or new_decoder_architecture (ln_attn +
/// ln_mlp); `kv` KV heads of h / heads elements; tied embeddings (no lm_head).
inline HfSpecs falcon_hf_tensors(bool new_arch, int layers, int h, int heads, int kv, int f,
                                 int vocab) {
  const int hd = h / heads;
  HfSpecs v = {{"transformer.word_embeddings.weight", {vocab, h}},
               {"transformer.ln_f.weight", {h}},
               {"transformer.ln_f.bias", {h}}};
  for (int l = 0; l < layers; ++l) {
    const std::string p = "transformer.h." + std::to_string(l) + ".";
    for (const std::string& ln : new_arch ? std::vector<std::string>{"ln_attn", "ln_mlp"}
                                          : std::vector<std::string>{"input_layernorm"}) {
      v.push_back({p + ln + ".weight", {h}});
      v.push_back({p + ln + ".bias", {h}});
    }
    v.push_back({p + "self_attention.query_key_value.weight", {h + 2 * kv * hd, h}});
    v.push_back({p + "self_attention.dense.weight", {h, h}});
    v.push_back({p + "mlp.dense_h_to_4h.weight", {f, h}});
    v.push_back({p + "mlp.dense_4h_to_h.weight", {h, f}});
  }
  return v;
}

/// Every tensor filled with seeded uniform values in [-0.5, 0.5), stored as `dtype`.
inline std::vector<StTensor> random_filled(const HfSpecs& specs, const std::string& dtype,
                                           uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  std::vector<StTensor> out;
  for (const auto& [name, shape] : specs) {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    std::vector<float> vals(static_cast<size_t>(n));
    for (float& x : vals) x = u(rng);
    out.push_back({name, dtype, shape, vals});
  }
  return out;
}

/// Writes tmp_dir()/name/{config.json, model.safetensors} (or `shards` shards and the index)
/// and returns the directory.
inline std::string write_checkpoint(const std::string& name, const nlohmann::json& cfg,
                                    const std::vector<StTensor>& tensors, int shards = 1) {
  const std::string dir = make_dir(tmp_dir() + "/" + name);
  write_bytes(dir + "/config.json", cfg.dump());
  if (shards == 1) {
    write_bytes(dir + "/model.safetensors", safetensors_bytes(tensors));
    return dir;
  }
  nlohmann::json index = {{"metadata", {{"total_size", 0}}},
                          {"weight_map", nlohmann::json::object()}};
  for (int s = 0; s < shards; ++s) {
    std::vector<StTensor> part;
    for (size_t i = static_cast<size_t>(s); i < tensors.size(); i += static_cast<size_t>(shards))
      part.push_back(tensors[i]);
    const std::string fname =
        "model-0000" + std::to_string(s + 1) + "-of-0000" + std::to_string(shards) + ".safetensors";
    write_bytes(dir + "/" + fname, safetensors_bytes(part));
    for (const auto& t : part) index["weight_map"][t.name] = fname;
  }
  write_bytes(dir + "/model.safetensors.index.json", index.dump());
  return dir;
}

}  // namespace cb::test
