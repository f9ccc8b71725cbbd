// cachebench inspect MODEL [--json] [--tensors]
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "apps/cachebench/format.h"
#include "apps/cachebench/subcommands.h"
#include "lib/model/model_source.h"
#include "lib/model/presets.h"
#include "lib/model/tensor_specs.h"

namespace cb::app {
namespace {

struct InspectArgs {
  std::string model;
  bool json = false;
  bool tensors = false;
};

// A float config value as the shortest decimal that round-trips through float.
double clean(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));
  for (int digits = 1; digits <= 9; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, static_cast<double>(v));
    if (std::strtof(buf, nullptr) == v) break;
  }
  return std::strtod(buf, nullptr);
}

/// The element types of a file's tensors, in DType order ({the config's} for a preset). A
/// llama.cpp quantization mixes several (Q4_K_M: q4_k, q6_k and f32 norms), while the
/// config's weight dtype is one representative tensor's.
std::vector<std::string> tensor_dtypes(const model::ModelSource& src) {
  std::set<DType> seen;
  if (src.kind() == model::SourceKind::Preset) seen.insert(src.config().weight_dtype);
  for (const auto& [name, t] : src.tensors()) seen.insert(t.dtype);
  std::vector<std::string> out;
  for (DType t : seen) out.push_back(dtype_name(t));
  return out;
}

nlohmann::json to_json(const model::ModelSource& src, bool with_tensors) {
  const model::ModelConfig& c = src.config();
  nlohmann::json j;
  j["model"] = src.location();
  j["source"] = model::source_kind_name(src.kind());
  if (src.gguf()) j["gguf_version"] = src.gguf()->version();
  j["vocab_only"] = src.vocab_only();
  j["name"] = c.name;
  j["architecture"] = model::arch_name(c.arch);
  j["n_layers"] = c.n_layers;
  j["hidden"] = c.hidden;
  j["n_heads"] = c.n_heads;
  j["n_kv_heads"] = c.n_kv_heads;
  j["attention"] = c.attention_kind();
  j["head_dim"] = c.head_dim;
  j["ffn_hidden"] = c.ffn_hidden;
  j["vocab_size"] = c.vocab_size;
  j["max_context"] = c.max_context;
  j["rope_theta"] = clean(c.rope_theta);
  j["rope_dims"] = c.rope_dims;
  j["rope_style"] = model::rope_style_name(c.rope_style);
  j["sliding_window"] = c.sliding_window;
  j["norm"] = model::norm_type_name(c.norm);
  j["norm_eps"] = clean(c.norm_eps);
  j["parallel_attention"] = c.parallel_attention;
  j["separate_mlp_norm"] = c.separate_mlp_norm;
  j["tied_embeddings"] = c.tied_embeddings;
  j["qkv_layout"] = model::qkv_layout_name(c.qkv_layout);
  j["weight_dtype"] = dtype_name(c.weight_dtype);
  j["tensor_dtypes"] = tensor_dtypes(src);
  j["parameters"] = model::parameter_count(c);
  j["weight_bytes"] = src.weight_bytes();
  j["kv_bytes_per_token_fp16"] = c.kv_bytes_per_token(DType::F16);
  if (with_tensors) {
    nlohmann::json arr = nlohmann::json::array();
    if (src.kind() == model::SourceKind::Preset) {
      for (const auto& s : model::expected_tensors(c)) {
        arr.push_back({{"name", s.name},
                       {"dtype", dtype_name(c.weight_dtype)},
                       {"shape", s.shape},
                       {"bytes", dtype_bytes(c.weight_dtype, static_cast<size_t>(s.numel()))}});
      }
    } else {
      for (const auto& [name, t] : src.tensors()) {
        arr.push_back({{"name", name},
                       {"file_name", t.name},
                       {"dtype", dtype_name(t.dtype)},
                       {"shape", t.shape},
                       {"bytes", t.nbytes}});
      }
    }
    j["tensors"] = arr;
  }
  return j;
}

void print_table(const model::ModelSource& src, bool with_tensors) {
  const model::ModelConfig& c = src.config();
  auto row = [](const char* k, const std::string& v) { std::printf("%-20s %s\n", k, v.c_str()); };
  std::string where = src.location() + " (" + model::source_kind_name(src.kind());
  if (src.gguf()) where += " v" + std::to_string(src.gguf()->version());
  row("model", where + ")");
  row("name", c.name);
  row("architecture", model::arch_name(c.arch));
  row("layers", std::to_string(c.n_layers));
  row("hidden", std::to_string(c.hidden));
  row("heads", std::to_string(c.n_heads) + " (KV heads " + std::to_string(c.n_kv_heads) + ", " +
                   c.attention_kind() + ")");
  row("head dim", std::to_string(c.head_dim));
  row("ffn hidden", std::to_string(c.ffn_hidden));
  row("vocab", std::to_string(c.vocab_size));
  row("context", std::to_string(c.max_context));
  char rope[96];
  std::snprintf(rope, sizeof rope, "%s, theta %g, %d of %d dims",
                model::rope_style_name(c.rope_style), static_cast<double>(c.rope_theta),
                c.rope_dims, c.head_dim);
  row("rope", rope);
  row("sliding window", c.sliding_window > 0 ? std::to_string(c.sliding_window) : "none");
  char norm[64];
  std::snprintf(norm, sizeof norm, "%s, eps %g", model::norm_type_name(c.norm),
                static_cast<double>(c.norm_eps));
  row("norm", norm);
  if (c.arch == model::Arch::Falcon) {
    row("parallel attention", c.parallel_attention ? "yes" : "no");
    row("layer norms", c.separate_mlp_norm ? "2 per block (ln_attn, ln_mlp)" : "1 per block");
    row("qkv layout", model::qkv_layout_name(c.qkv_layout));
  }
  row("tied embeddings", c.tied_embeddings ? "yes" : "no");
  const std::vector<std::string> types = tensor_dtypes(src);
  std::string all;
  for (const std::string& t : types) all += (all.empty() ? "" : ", ") + t;
  row("weights dtype", std::string(dtype_name(c.weight_dtype)) +
                           (types.size() > 1 ? " (tensors: " + all + ")" : ""));
  const uint64_t params = model::parameter_count(c);
  row("parameters", human_count(params) + " (" + std::to_string(params) + ")");
  if (src.vocab_only()) {
    row("weights", "none: vocabulary-only file");
  } else {
    row("weight bytes",
        human_bytes(src.weight_bytes()) +
            (src.kind() == model::SourceKind::Preset ? " (generated, not stored)" : ""));
  }
  const uint64_t kv = c.kv_bytes_per_token(DType::F16);
  row("KV cache (fp16)", human_bytes(kv) + " per token, " +
                             human_bytes(kv * static_cast<uint64_t>(c.max_context)) + " per full " +
                             std::to_string(c.max_context) + "-token context");
  if (with_tensors) {
    std::printf("\n%-36s %-6s %-18s %s\n", "tensor", "dtype", "shape", "bytes");
    if (src.kind() == model::SourceKind::Preset) {
      for (const auto& s : model::expected_tensors(c)) {
        std::printf(
            "%-36s %-6s %-18s %s\n", s.name.c_str(), dtype_name(c.weight_dtype),
            formats::shape_str(s.shape).c_str(),
            human_bytes(dtype_bytes(c.weight_dtype, static_cast<size_t>(s.numel()))).c_str());
      }
    } else {
      for (const auto& [name, t] : src.tensors()) {
        std::printf("%-36s %-6s %-18s %s\n", name.c_str(), dtype_name(t.dtype),
                    formats::shape_str(t.shape).c_str(), human_bytes(t.nbytes).c_str());
      }
    }
  }
}

}  // namespace

void register_inspect(CLI::App& app) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* sub = app.add_subcommand(
      "inspect",
      "Show a model's architecture, configuration, parameter count, weight bytes and "
      "KV-cache bytes per token");
  sub->add_option(
         "MODEL", args->model,
         "a .gguf file, a Hugging Face checkpoint directory, or preset:NAME (presets: " +
             [] {
               std::string s;
               for (const auto& n : model::preset_names()) s += (s.empty() ? "" : ", ") + n;
               return s;
             }() +
             ")")
      ->required();
  sub->add_flag("--json", args->json, "print machine-readable JSON instead of a table");
  sub->add_flag("--tensors", args->tensors, "also list every tensor (name, dtype, shape, bytes)");
  set_action(sub, [args] {
    auto src = model::ModelSource::open(args->model);
    if (args->json) {
      std::printf("%s\n", to_json(*src, args->tensors).dump(2).c_str());
    } else {
      print_table(*src, args->tensors);
    }
    return 0;
  });
}

}  // namespace cb::app
