#include "lib/model/hf_config.h"

#include <limits>
#include <nlohmann/json.hpp>
#include <regex>

#include "lib/core/error.h"
#include "lib/core/format.h"
#include "lib/core/json_depth.h"
#include "lib/core/json_parse.h"
#include "lib/core/regular_file.h"

namespace cb::model {
namespace {

using nlohmann::json;

/// A config.json nests 3 levels or so; deeper text is refused before parsing (rendering a
/// value for an error message recurses once per level: see lib/core/json_depth.h).
constexpr size_t kMaxJsonDepth = 64;

/// Short rendering of a value for an error message.
std::string brief(const json& v) {
  return clip_for_message(v.dump(), 80);
}

class Fields {
 public:
  Fields(const json& j, std::string path) : j_(j), path_(std::move(path)) {}

  bool has(const std::string& k) const { return j_.contains(k) && !j_.at(k).is_null(); }

  int get_int(const std::string& k) const {
    if (!has(k)) throw missing(k);
    const json& v = j_.at(k);
    if (!v.is_number_integer() || v.get<int64_t>() < 0 ||
        v.get<int64_t>() > std::numeric_limits<int>::max()) {
      throw make_error(
          path_, "field '" + k + "' must be an integer from 0 to 2147483647, found " + brief(v),
          "fix config.json");
    }
    return static_cast<int>(v.get<int64_t>());
  }
  int get_int(const std::string& k, int def) const { return has(k) ? get_int(k) : def; }
  /// First present key among `keys` (Falcon has renamed fields over time).
  int get_int_any(std::initializer_list<const char*> keys) const {
    for (const char* k : keys)
      if (has(k)) return get_int(k);
    throw missing(*keys.begin());
  }
  float get_float(const std::string& k, float def) const {
    if (!has(k)) return def;
    const json& v = j_.at(k);
    if (!v.is_number()) {
      throw make_error(path_, "field '" + k + "' must be a number, found " + brief(v),
                       "fix config.json");
    }
    return v.get<float>();
  }
  bool get_bool(const std::string& k, bool def) const {
    if (!has(k)) return def;
    const json& v = j_.at(k);
    if (!v.is_boolean()) {
      throw make_error(path_, "field '" + k + "' must be true or false, found " + brief(v),
                       "fix config.json");
    }
    return v.get<bool>();
  }
  std::string get_string(const std::string& k, const std::string& def) const {
    if (!has(k)) return def;
    if (!j_.at(k).is_string()) {
      throw make_error(path_, "field '" + k + "' must be a string", "fix config.json");
    }
    return j_.at(k).get<std::string>();
  }

 private:
  Error missing(const std::string& k) const {
    return make_error(path_, "missing field '" + k + "'",
                      "config.json must come from a Hugging Face checkpoint of a supported model");
  }
  const json& j_;
  std::string path_;
};

std::string architecture_of(const json& j, const std::string& path) {
  if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
      j["architectures"][0].is_string()) {
    return j["architectures"][0].get<std::string>();
  }
  if (j.contains("model_type") && j["model_type"].is_string()) {
    const std::string mt = j["model_type"].get<std::string>();
    if (mt == "llama") return "LlamaForCausalLM";
    if (mt == "mistral") return "MistralForCausalLM";
    if (mt == "falcon" || mt == "RefinedWeb" || mt == "RefinedWebModel") return "FalconForCausalLM";
  }
  throw make_error(path, "no 'architectures' or known 'model_type' field",
                   "pass the directory of a LLaMA, Mistral or Falcon checkpoint");
}

DType dtype_of(const Fields& f) {
  const std::string t = f.get_string("torch_dtype", "float16");
  if (t == "float32") return DType::F32;
  if (t == "bfloat16") return DType::BF16;
  return DType::F16;
}

/// RoPE's base from config.json: `rope_theta`, or transformers 5's `rope_parameters` object
/// (`rope_theta` and `rope_type` inside). Scaled variants (`rope_scaling`, or a `rope_type`
/// other than "default") compute other positions and are refused.
float rope_theta_of(const json& j, const Fields& f, const std::string& path) {
  if (f.has("rope_scaling")) {
    // transformers 4's field: {"rope_type": ...} (or "type"); "default" is plain RoPE.
    static const json kNone = json::object();
    const json& rs = j.at("rope_scaling");
    const Fields r(rs.is_object() ? rs : kNone, path);
    const std::string type = r.get_string("rope_type", r.get_string("type", ""));
    if (type != "default") {
      throw make_error(
          path, "field 'rope_scaling' is " + (type.empty() ? brief(rs) : "of type '" + type + "'"),
          "RoPE scaling variants are not supported; use a checkpoint without it");
    }
  }
  float theta = f.get_float("rope_theta", 10000.0f);
  if (!f.has("rope_parameters")) return theta;
  const json& rp = j.at("rope_parameters");
  if (!rp.is_object()) {
    throw make_error(path, "field 'rope_parameters' must be an object, found " + brief(rp),
                     "fix config.json");
  }
  const Fields r(rp, path);
  const std::string type = r.get_string("rope_type", "default");
  if (type != "default") {
    throw make_error(path, "field 'rope_parameters.rope_type' is '" + type + "'",
                     "RoPE scaling variants are not supported; use a checkpoint without it");
  }
  return r.get_float("rope_theta", theta);
}

}  // namespace

ModelConfig config_from_hf(const std::string& path) {
  const char* fix = "a Hugging Face model directory needs config.json next to the weights";
  if (!path_exists_checked(path)) throw make_error(path, "cannot open config.json", fix);
  // Not std::ifstream: it opens a FIFO and waits for a writer, and fails on a directory only
  // at its first read, with the library's words.
  const std::string text = read_regular_file(path, fix);
  refuse_json_nul(text, path, "fix or re-download config.json");
  check_json_depth(text, kMaxJsonDepth, path, "fix or re-download config.json");
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw make_error(path, std::string("malformed JSON: ") + e.what(),
                     "fix or re-download config.json");
  }
  if (!j.is_object()) throw make_error(path, "top level is not a JSON object", "fix config.json");
  const Fields f(j, path);
  const std::string archs = architecture_of(j, path);
  ModelConfig c;
  // Shown and written to results: control characters (an escape sequence) as \xNN.
  c.name = printable(f.get_string("_name_or_path", archs));
  c.weight_dtype = dtype_of(f);
  if (archs == "LlamaForCausalLM" || archs == "MistralForCausalLM") {
    c.arch = archs == "LlamaForCausalLM" ? Arch::Llama : Arch::Mistral;
    c.n_layers = f.get_int("num_hidden_layers");
    c.hidden = f.get_int("hidden_size");
    c.n_heads = f.get_int("num_attention_heads");
    c.n_kv_heads = f.get_int("num_key_value_heads", c.n_heads);
    c.head_dim = f.get_int("head_dim", c.n_heads > 0 ? c.hidden / c.n_heads : 0);
    c.ffn_hidden = f.get_int("intermediate_size");
    c.vocab_size = f.get_int("vocab_size");
    c.max_context = f.get_int("max_position_embeddings", 2048);
    c.rope_theta = rope_theta_of(j, f, path);
    c.norm = NormType::RmsNorm;
    c.norm_eps = f.get_float("rms_norm_eps", 1e-6f);
    c.tied_embeddings = f.get_bool("tie_word_embeddings", false);
    // transformers' MistralConfig: no key means its default window of 4096, null means none.
    if (c.arch == Arch::Mistral) {
      c.sliding_window = j.contains("sliding_window") ? f.get_int("sliding_window", 0) : 4096;
    }
    c.qkv_layout = QkvLayout::Separate;
    // The MLP cachebench runs is SwiGLU: another activation would compute another model.
    const std::string act = f.get_string("hidden_act", "silu");
    if (act != "silu" && act != "swish") {
      throw make_error(path, "field 'hidden_act' is '" + act + "'",
                       "only SiLU (SwiGLU MLPs, hidden_act \"silu\") is supported");
    }
  } else if (archs == "FalconForCausalLM" || archs == "RWForCausalLM") {
    c.arch = Arch::Falcon;
    c.n_layers = f.get_int_any({"num_hidden_layers", "n_layer"});
    c.hidden = f.get_int_any({"hidden_size", "n_embed"});
    c.n_heads = f.get_int_any({"num_attention_heads", "n_head"});
    // The original falcon-40b config (model_type "RefinedWeb", RWForCausalLM) predates the
    // field: its remote code is the new decoder architecture, as transformers converts it.
    const bool new_arch =
        f.get_bool("new_decoder_architecture", f.get_string("model_type", "") == "RefinedWeb");
    const bool multi_query = f.get_bool("multi_query", true);
    if (new_arch) {
      // transformers' FalconConfig: num_kv_heads (n_head_kv in RW configs) defaults to the
      // number of attention heads.
      c.n_kv_heads =
          f.has("num_kv_heads") ? f.get_int("num_kv_heads") : f.get_int("n_head_kv", c.n_heads);
    } else {
      c.n_kv_heads = multi_query ? 1 : c.n_heads;
    }
    c.head_dim = c.n_heads > 0 ? c.hidden / c.n_heads : 0;
    c.ffn_hidden = f.get_int("ffn_hidden_size", 4 * c.hidden);
    c.vocab_size = f.get_int("vocab_size");
    c.max_context = f.get_int("max_position_embeddings", 2048);
    c.rope_theta = rope_theta_of(j, f, path);
    c.norm = NormType::LayerNorm;
    c.norm_eps = f.get_float("layer_norm_epsilon", 1e-5f);
    c.parallel_attention = new_arch || f.get_bool("parallel_attn", true);
    // transformers' FalconDecoderLayer: ln_attn and ln_mlp when num_ln_in_parallel_attn is 2
    // (the new architecture's default), else one input_layernorm (Falcon2-11B sets 1).
    c.separate_mlp_norm = new_arch && f.get_int("num_ln_in_parallel_attn", 2) == 2;
    c.tied_embeddings = f.get_bool("tie_word_embeddings", true);
    // transformers' _split_heads: the new architecture groups [q.., k, v] per KV head; without
    // multi-query each head is [q, k, v], the same with one query head a group; multi-query is
    // all queries, then K, then V.
    c.qkv_layout = new_arch || !multi_query ? QkvLayout::Grouped : QkvLayout::Contiguous;
    const std::string act = f.get_string("activation", "gelu");
    if (act != "gelu") {
      throw make_error(path, "field 'activation' is '" + act + "'",
                       "only Falcon's exact GELU (activation \"gelu\") is supported");
    }
    if (f.get_bool("alibi", false)) {
      throw make_error(path, "field 'alibi' is true",
                       "ALiBi Falcon variants are not supported (cachebench needs RoPE)");
    }
    if (f.get_bool("bias", false)) {
      throw make_error(path, "field 'bias' is true",
                       "Falcon variants with linear biases are not supported");
    }
    if (!c.parallel_attention || (new_arch && !f.get_bool("parallel_attn", true))) {
      throw make_error(path, "field 'parallel_attn' is false",
                       "only Falcon's parallel attention/MLP blocks are supported");
    }
    if (!new_arch && f.has("num_ln_in_parallel_attn") &&
        f.get_int("num_ln_in_parallel_attn") != 1) {
      // transformers' FalconDecoderLayer builds ln_attn and ln_mlp only for the new
      // architecture, so it cannot run this config; which norm was meant is unknown.
      throw make_error(path,
                       "field 'num_ln_in_parallel_attn' is " +
                           std::to_string(f.get_int("num_ln_in_parallel_attn")) +
                           " without new_decoder_architecture",
                       "the 7B-style block has one input norm: drop the field or set it to 1");
    }
  } else {
    throw make_error(path, "unsupported architecture '" + archs + "'",
                     "supported: LlamaForCausalLM, MistralForCausalLM, FalconForCausalLM");
  }
  c.rope_dims = c.head_dim;
  c.rope_style = RopeStyle::RotateHalf;
  c.validate(path);
  return c;
}

namespace {

/// One Hugging Face name and its canonical (GGUF-style) name; for layer tensors, the parts
/// after "model.layers.N." / "transformer.h.N." and after "blk.N.".
struct NamePair {
  const char* hf;
  const char* canonical;
};

constexpr NamePair kFalconTop[] = {{"transformer.word_embeddings.weight", "token_embd.weight"},
                                   {"transformer.ln_f.weight", "output_norm.weight"},
                                   {"transformer.ln_f.bias", "output_norm.bias"},
                                   {"lm_head.weight", "output.weight"}};
// The older RWForCausalLM checkpoints name the first norms ln_attn; the newer input_layernorm
// (listed first: the name the reverse mapping gives).
constexpr NamePair kFalconLayer[] = {{"input_layernorm.weight", "attn_norm.weight"},
                                     {"ln_attn.weight", "attn_norm.weight"},
                                     {"input_layernorm.bias", "attn_norm.bias"},
                                     {"ln_attn.bias", "attn_norm.bias"},
                                     {"ln_mlp.weight", "attn_norm_2.weight"},
                                     {"ln_mlp.bias", "attn_norm_2.bias"},
                                     {"self_attention.query_key_value.weight", "attn_qkv.weight"},
                                     {"self_attention.dense.weight", "attn_output.weight"},
                                     {"mlp.dense_h_to_4h.weight", "ffn_up.weight"},
                                     {"mlp.dense_4h_to_h.weight", "ffn_down.weight"}};
constexpr NamePair kLlamaTop[] = {{"model.embed_tokens.weight", "token_embd.weight"},
                                  {"model.norm.weight", "output_norm.weight"},
                                  {"lm_head.weight", "output.weight"}};
constexpr NamePair kLlamaLayer[] = {{"input_layernorm.weight", "attn_norm.weight"},
                                    {"post_attention_layernorm.weight", "ffn_norm.weight"},
                                    {"self_attn.q_proj.weight", "attn_q.weight"},
                                    {"self_attn.k_proj.weight", "attn_k.weight"},
                                    {"self_attn.v_proj.weight", "attn_v.weight"},
                                    {"self_attn.o_proj.weight", "attn_output.weight"},
                                    {"mlp.gate_proj.weight", "ffn_gate.weight"},
                                    {"mlp.up_proj.weight", "ffn_up.weight"},
                                    {"mlp.down_proj.weight", "ffn_down.weight"}};

template <size_t N>
const char* lookup(const NamePair (&table)[N], const std::string& name, bool from_hf) {
  for (const NamePair& p : table) {
    if (name == (from_hf ? p.hf : p.canonical)) return from_hf ? p.canonical : p.hf;
  }
  return nullptr;
}

/// `n` mapped from HF to canonical names (`from_hf`) or back, through cfg's architecture's
/// tables; "" for a name they do not hold.
std::string map_name(const std::string& n, const ModelConfig& cfg, bool from_hf) {
  static const std::regex hf_layer(R"(^(?:model\.layers|transformer\.h)\.(\d+)\.(.+)$)");
  static const std::regex canonical_layer(R"(^blk\.(\d+)\.(.+)$)");
  const bool falcon = cfg.arch == Arch::Falcon;
  const char* top = falcon ? lookup(kFalconTop, n, from_hf) : lookup(kLlamaTop, n, from_hf);
  if (top != nullptr) return top;
  std::smatch m;
  if (!std::regex_match(n, m, from_hf ? hf_layer : canonical_layer)) return "";
  const std::string rest = m[2].str();
  const char* layer =
      falcon ? lookup(kFalconLayer, rest, from_hf) : lookup(kLlamaLayer, rest, from_hf);
  if (layer == nullptr) return "";
  const char* prefix = from_hf ? "blk." : falcon ? "transformer.h." : "model.layers.";
  return prefix + m[1].str() + "." + layer;
}

}  // namespace

std::string hf_to_canonical(const std::string& n, const ModelConfig& cfg) {
  return map_name(n, cfg, true);
}

std::string canonical_to_hf(const std::string& n, const ModelConfig& cfg) {
  return map_name(n, cfg, false);
}

}  // namespace cb::model
