#include "eval/bench_gpu_targets.h"

#include <algorithm>
#include <string>

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

// The alternative of `prefix`, or nullptr.
const BenchGpuAlternative* alternative_of(const std::string& prefix) {
  for (const BenchGpuAlternative& a : bench_gpu_alternatives()) {
    if (prefix == a.prefix) return &a;
  }
  return nullptr;
}

}  // namespace

const std::vector<BenchGpuAlternative>& bench_gpu_alternatives() {
  static const std::vector<BenchGpuAlternative> all = {
      {"previous_default", "previous default", true},
      {"wmma", "wmma attention", true},
      {"cuda_core_attention", "CUDA-core decode attention", true},
      // (at 1-4 rows of RMSNorm models gate and up stay fused in the norm GEMV: RoPE and the
      // append apart only)
      {"unfused_launches", "no launch fusions", true},
      {"unfused_norm", "no RMSNorm in the GEMVs", true},
      {"pdl", "PDL-launched GEMVs", true},
      {"l2_prefetch", "L2 prefetch during attention", true},
      {"more_splits", "finer attention splits", true},
      {"rope_in_attention", "RoPE + append in decode attention", true},
      {"rope_and_splits", "RoPE in attention + finer splits", true},
      {"deep_gemv", "GEMVs, 4 vectors in flight", true},
      // Results of 2026-11-28 (the GEMVs' read-ahead, 0.81-0.88x on an H100, then removed):
      {"gemv_ahead", "GEMVs reading ahead", true},
      {"prefetch_ahead", "L2 prefetch + reading ahead", true},
      {"cublas", "cuBLAS GEMVs", false},
      // Results before the fused paths became the default (2026-11-27):
      {"fa2", "FlashAttention-2-style attention", true},
      {"launch_fused", "launch fusions", true},
      {"decode_kernel", "decode attention kernel", true},
      {"fused", "RMSNorm in the GEMVs", true},
      {"all_opt_ins", "every opt-in", true}};
  return all;
}

double relative_speed(const json& row, const std::string& prefix) {
  const std::string own = prefix + "_speedup", over = "speedup_over_" + prefix;
  if (row.contains(own) && row[own].is_number()) return row[own].get<double>();
  if (row.contains(over) && row[over].is_number() && row[over].get<double>() > 0) {
    return 1.0 / row[over].get<double>();
  }
  return 0;
}

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
  // `config`'s ratio: `key`'s, or where the row also has its ratio to the GEMM ceiling at the
  // fused gate|up shapes (`fused_` in place of `gemm_`), the lower of the two.
  const auto ratio_of = [&](const json& row, const std::string& k) {
    double ratio = number(row, k.c_str(), origin);
    const size_t at = k.rfind("gemm_ceiling");
    if (at != std::string::npos) {
      const std::string fused = k.substr(0, at) + "fused_" + k.substr(at);
      if (row.contains(fused)) ratio = std::min(ratio, number(row, fused.c_str(), origin));
    }
    return ratio;
  };
  // The default's ratio under `key`, then each same-run alternative's (`PREFIX_` + key).
  const auto add_all = [&](const char* target, const std::string& model, const json& row,
                           const std::string& key, double goal) {
    add(target, model, "default", ratio_of(row, key), goal);
    for (const auto& [k, v] : row.items()) {
      if (k.size() <= key.size() + 1 || k.compare(k.size() - key.size(), key.size(), key) != 0 ||
          k[k.size() - key.size() - 1] != '_' || !v.is_number()) {
        continue;
      }
      const BenchGpuAlternative* alt = alternative_of(k.substr(0, k.size() - key.size() - 1));
      if (alt == nullptr || !alt->target) continue;
      add(target, model, alt->name, ratio_of(row, k), goal);
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
