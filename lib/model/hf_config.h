#pragma once
/// Hugging Face checkpoints: config.json -> ModelConfig (LlamaForCausalLM,
/// MistralForCausalLM, FalconForCausalLM incl. the older RWForCausalLM keys) and the
/// mapping from HF tensor names to canonical (GGUF-style) names.

#include <string>

#include "lib/model/config.h"

namespace cb::model {

/// Parses `config_json_path`; a missing or mistyped field gives a cb::Error naming the
/// file and the field.
ModelConfig config_from_hf(const std::string& config_json_path);

/// Canonical name of an HF tensor name ("model.layers.3.self_attn.q_proj.weight" ->
/// "blk.3.attn_q.weight"), or "" for names cachebench does not use (e.g. rotary buffers).
std::string hf_to_canonical(const std::string& hf_name, const ModelConfig& cfg);

/// The Hugging Face name of a canonical tensor name ("blk.3.attn_q.weight" ->
/// "model.layers.3.self_attn.q_proj.weight"; Falcon's as transformers writes it now), or ""
/// for a name no HF checkpoint of `cfg`'s architecture holds.
std::string canonical_to_hf(const std::string& canonical, const ModelConfig& cfg);

}  // namespace cb::model
