#include "eval/bench_gpu_targets.h"

#include <algorithm>
#include <string>
#include <utility>

#include "lib/core/error.h"

namespace cb::eval {
namespace {

using nlohmann::json;

// A 7B-class model by the parameter count the result records (LLaMA-2-7B 6.7B, Mistral-7B
// 7.2B, Falcon-7B 6.9B); names say too little (preset:tiny-falcon-7b has 119K).
bool is_7b(const json& model) {
  if (!model.contains("parameters") || !model["parameters"].is_number()) return false;
  const double n = model["parameters"].get<double>();
  return n >= 6e9 && n < 8e9;
}

// The array `key` of `j`, or an empty one when absent.
const json& array_of(const json& j, const char* key, const std::string& origin) {
  static const json empty = json::array();
  if (!j.is_object() || !j.contains(key)) return empty;
  if (!j[key].is_array()) {
    throw make_error(origin, std::string("field '") + key + "' is not an array",
                     "pass the JSON that `bench gpu --out` wrote");
  }
  return j[key];
}

double number(const json& row, const char* key, const std::string& origin) {
  if (!row.is_object() || !row.contains(key) || !row[key].is_number()) {
    throw make_error(origin, std::string("a row lacks the number '") + key + "'",
                     "pass the JSON that `bench gpu --out` wrote");
  }
  return row[key].get<double>();
}

std::string text(const json& row, const char* key, const std::string& origin) {
  if (!row.is_object() || !row.contains(key) || !row[key].is_string()) {
    throw make_error(origin, std::string("a row lacks the text '") + key + "'",
                     "pass the JSON that `bench gpu --out` wrote");
  }
  return row[key].get<std::string>();
}

// The configurations `bench gpu` measures beside the default (its keys' prefixes), by name;
// "" for any other prefix (a baseline such as cuBLAS's, or a key of no configuration).
std::string alternative_name(const std::string& prefix) {
  static const std::pair<const char*, const char*> names[] = {
      {"fa2", "FlashAttention-2-style attention"},
      {"wmma", "wmma attention"},
      {"launch_fused", "launch fusions"},
      {"all_opt_ins", "every opt-in"},
      {"decode_kernel", "decode attention kernel"},
      {"fused", "RMSNorm in the GEMVs"},
      {"pdl", "PDL-launched GEMVs"}};
  for (const auto& [p, name] : names) {
    if (prefix == p) return name;
  }
  return "";
}

}  // namespace

json bench_gpu_targets(const json& bench, const std::string& origin) {
  if (!bench.is_object()) {
    throw make_error(origin, "is not a JSON object", "pass the JSON that `bench gpu --out` wrote");
  }
  json out = json::array();
  const auto add = [&](const char* target, const std::string& model, const std::string& config,
                       double ratio, double goal) {
    out.push_back({{"target", target},
                   {"model", model},
                   {"config", config},
                   {"ratio", ratio},
                   {"goal", goal},
                   {"met", ratio >= goal}});
  };
  // The default's ratio under `key`, then each same-run alternative's (`PREFIX_` + key).
  const auto add_all = [&](const char* target, const std::string& model, const json& row,
                           const std::string& key, double goal) {
    add(target, model, "default", number(row, key.c_str(), origin), goal);
    for (const auto& [k, v] : row.items()) {
      if (k.size() <= key.size() + 1 || k.compare(k.size() - key.size(), key.size(), key) != 0 ||
          k[k.size() - key.size() - 1] != '_' || !v.is_number()) {
        continue;
      }
      const std::string prefix = k.substr(0, k.size() - key.size() - 1);
      const std::string name = alternative_name(prefix);
      if (name.empty()) continue;
      double ratio = v.get<double>();
      if (prefix == "launch_fused" && row.contains("launch_fused_ratio_to_fused_gemm_ceiling")) {
        // The fused GEMM's shapes have a ceiling of their own: the lower ratio counts.
        ratio = std::min(ratio, number(row, "launch_fused_ratio_to_fused_gemm_ceiling", origin));
      }
      add(target, model, name, ratio, goal);
    }
  };
  const json& models = array_of(bench, "models", origin);
  for (const json& m : models) {
    const std::string model = text(m, "model", origin);
    for (const json& p : array_of(m, "prefill", origin)) {
      if (p.contains("skipped") || !is_7b(m)) continue;
      if (number(p, "prompt", origin) != 2048 || number(p, "prefix", origin) != 0) continue;
      add_all("prefill", model, p, "ratio_to_gemm_ceiling", kPrefillTarget);
    }
  }
  for (const json& m : models) {
    const std::string model = text(m, "model", origin);
    for (const json& p : array_of(m, "decode", origin)) {
      if (number(p, "batch", origin) != 1) continue;
      add_all("decode", model, p, "ratio_to_copy_ceiling", kDecodeTarget);
    }
  }
  for (const json& k : array_of(bench, "kv", origin)) {
    const std::string model = text(k, "model", origin);
    add("restore", model, "one stream", number(k, "restore_ratio_to_h2d", origin), kRestoreTarget);
    if (k.contains("restore_pipelined_ratio_to_h2d")) {
      add("restore", model, "pipelined", number(k, "restore_pipelined_ratio_to_h2d", origin),
          kRestoreTarget);
    }
  }
  return out;
}

}  // namespace cb::eval
