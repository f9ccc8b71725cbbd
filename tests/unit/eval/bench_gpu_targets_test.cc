// The CUDA backend's targets read off a `bench gpu` result (eval/bench_gpu_targets.h): which
// rows count, every same-run alternative beside the default, and malformed results refused
// with the file named. Synthetic results: the function only selects and compares.
#include "eval/bench_gpu_targets.h"

#include <gtest/gtest.h>

#include <string>

#include "lib/core/error.h"

namespace cb::eval {
namespace {

using nlohmann::json;

json prefill_row(int prompt, int prefix, double ratio) {
  return {{"prompt", prompt}, {"prefix", prefix}, {"ratio_to_gemm_ceiling", ratio}};
}

json result() {
  json p7 = prefill_row(2048, 0, 0.69);
  p7["wmma_ratio_to_gemm_ceiling"] = 0.60;
  p7["launch_fused_ratio_to_gemm_ceiling"] = 0.74;
  p7["launch_fused_ratio_to_fused_gemm_ceiling"] = 0.71;  // the lower of the two counts
  p7["wmma_speedup"] = 2.0;                               // not a ratio: ignored
  p7["speedup_ratio_to_gemm_ceiling"] = 0.9;              // no configuration's: ignored
  json d1 = {{"batch", 1},
             {"ratio_to_copy_ceiling", 0.70},
             {"all_opt_ins_ratio_to_copy_ceiling", 0.85},
             {"cublas_ratio_to_copy_ceiling", 0.9}};  // a baseline, not a configuration
  json d16 = {{"batch", 16}, {"ratio_to_copy_ceiling", 0.99}};
  json llama7 = {
      {"model", "preset:llama-2-7b"},
      {"parameters", 6738415616.0},
      {"prefill",
       {prefill_row(512, 0, 0.9), p7, prefill_row(2048, 2048, 0.9), {{"skipped", "no"}}}},
      {"decode", {d1, d16}}};
  json llama13 = {{"model", "preset:llama-2-13b"},
                  {"parameters", 13015864320.0},
                  {"prefill", {prefill_row(2048, 0, 0.9)}},  // not a 7B model: no prefill target
                  {"decode", {{{"batch", 1}, {"ratio_to_copy_ceiling", 0.80}}}}};
  json tiny = {{"model", "preset:tiny-falcon-7b"},  // 7b in its name, 119K parameters
               {"parameters", 119168},
               {"prefill", {prefill_row(2048, 0, 0.9)}}};
  return {{"models", {llama7, llama13, tiny}},
          {"kv",
           {{{"model", "llama-2-7b"},
             {"restore_ratio_to_h2d", 0.89},
             {"restore_pipelined_ratio_to_h2d", 0.99}}}}};
}

const json* find(const json& t, const std::string& target, const std::string& model,
                 const std::string& config) {
  for (const json& e : t) {
    if (e["target"] == target && e["model"] == model && e["config"] == config) return &e;
  }
  return nullptr;
}

TEST(BenchGpuTargets, EveryMeasuredPointATargetAppliesTo) {
  const json t = bench_gpu_targets(result(), "r.json");
  ASSERT_EQ(t.size(), 8u) << t.dump(1);
  const json* p = find(t, "prefill", "preset:llama-2-7b", "default");
  ASSERT_NE(p, nullptr);
  EXPECT_DOUBLE_EQ((*p)["ratio"].get<double>(), 0.69);
  EXPECT_DOUBLE_EQ((*p)["goal"].get<double>(), 0.70);
  EXPECT_FALSE((*p)["met"].get<bool>());
  p = find(t, "prefill", "preset:llama-2-7b", "launch fusions");
  ASSERT_NE(p, nullptr);
  EXPECT_DOUBLE_EQ((*p)["ratio"].get<double>(), 0.71);
  EXPECT_TRUE((*p)["met"].get<bool>());
  ASSERT_NE(find(t, "prefill", "preset:llama-2-7b", "wmma attention"), nullptr);
  EXPECT_EQ(find(t, "prefill", "preset:llama-2-13b", "default"), nullptr);
  EXPECT_EQ(find(t, "prefill", "preset:tiny-falcon-7b", "default"), nullptr);
  p = find(t, "decode", "preset:llama-2-7b", "every opt-in");
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE((*p)["met"].get<bool>());
  p = find(t, "decode", "preset:llama-2-13b", "default");
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE((*p)["met"].get<bool>());  // at the goal is met
  EXPECT_FALSE((*find(t, "restore", "llama-2-7b", "one stream"))["met"].get<bool>());
  EXPECT_TRUE((*find(t, "restore", "llama-2-7b", "pipelined"))["met"].get<bool>());
  // Grouped by target: prefill, then decode, then restore.
  EXPECT_EQ(t[0]["target"], "prefill");
  EXPECT_EQ(t[3]["target"], "decode");
  EXPECT_EQ(t[6]["target"], "restore");
}

// The keys `bench gpu` writes since the fused paths became the default: the default's prefill
// against the GEMM ceiling at the fused gate|up shapes too (the lower ratio counts, for it and
// for an alternative that runs those shapes), each fused path turned off alone and the
// previous default as alternatives, cuBLAS GEMVs a baseline only.
TEST(BenchGpuTargets, TheDefaultsFusedShapesAndEachAlternative) {
  json p7 = prefill_row(2048, 0, 0.77);
  p7["ratio_to_fused_gemm_ceiling"] = 0.69;
  p7["previous_default_ratio_to_gemm_ceiling"] = 0.70;
  p7["wmma_ratio_to_gemm_ceiling"] = 0.65;
  p7["wmma_ratio_to_fused_gemm_ceiling"] = 0.63;
  json d1 = {{"batch", 1},
             {"ratio_to_copy_ceiling", 0.81},
             {"previous_default_ratio_to_copy_ceiling", 0.66},
             {"cuda_core_attention_ratio_to_copy_ceiling", 0.75},
             {"unfused_launches_ratio_to_copy_ceiling", 0.78},
             {"unfused_norm_ratio_to_copy_ceiling", 0.79},
             {"pdl_ratio_to_copy_ceiling", 0.82},
             {"cublas_ratio_to_copy_ceiling", 0.60}};
  const json r = {{"models",
                   {{{"model", "preset:mistral-7b"},
                     {"parameters", 7241732096.0},
                     {"prefill", {p7}},
                     {"decode", {d1}}}}}};
  const json t = bench_gpu_targets(r, "r.json");
  ASSERT_EQ(t.size(), 9u) << t.dump(1);
  const auto ratio = [&](const char* target, const char* config) {
    const json* e = find(t, target, "preset:mistral-7b", config);
    return e == nullptr ? -1.0 : (*e)["ratio"].get<double>();
  };
  EXPECT_DOUBLE_EQ(ratio("prefill", "default"), 0.69);
  EXPECT_FALSE((*find(t, "prefill", "preset:mistral-7b", "default"))["met"].get<bool>());
  EXPECT_DOUBLE_EQ(ratio("prefill", "previous default"), 0.70);
  EXPECT_DOUBLE_EQ(ratio("prefill", "wmma attention"), 0.63);
  EXPECT_DOUBLE_EQ(ratio("decode", "default"), 0.81);
  EXPECT_DOUBLE_EQ(ratio("decode", "previous default"), 0.66);
  EXPECT_DOUBLE_EQ(ratio("decode", "CUDA-core decode attention"), 0.75);
  EXPECT_DOUBLE_EQ(ratio("decode", "no launch fusions"), 0.78);
  EXPECT_DOUBLE_EQ(ratio("decode", "no RMSNorm in the GEMVs"), 0.79);
  EXPECT_DOUBLE_EQ(ratio("decode", "PDL-launched GEMVs"), 0.82);
  EXPECT_EQ(find(t, "decode", "preset:mistral-7b", "cuBLAS GEMVs"), nullptr);
}

// An alternative's speed relative to the default: its own `_speedup`, or the inverse of an
// earlier result's `speedup_over_` (the default's over a baseline).
TEST(BenchGpuTargets, RelativeSpeedReadsBothConventions) {
  const json row = {{"pdl_speedup", 1.25}, {"speedup_over_wmma", 2.0}, {"speedup_over_x", 0}};
  EXPECT_DOUBLE_EQ(relative_speed(row, "pdl"), 1.25);
  EXPECT_DOUBLE_EQ(relative_speed(row, "wmma"), 0.5);
  EXPECT_DOUBLE_EQ(relative_speed(row, "x"), 0.0);  // no division by zero
  EXPECT_DOUBLE_EQ(relative_speed(row, "cublas"), 0.0);
  for (const BenchGpuAlternative& a : bench_gpu_alternatives()) {  // prefixes distinct
    int same = 0;
    for (const BenchGpuAlternative& b : bench_gpu_alternatives()) {
      same += std::string(a.prefix) == b.prefix;
    }
    EXPECT_EQ(same, 1) << a.prefix;
  }
}

TEST(BenchGpuTargets, AResultWithoutRowsHasNoTargets) {
  EXPECT_TRUE(bench_gpu_targets(json::object(), "r.json").empty());
  EXPECT_TRUE(bench_gpu_targets({{"models", json::array()}}, "r.json").empty());
}

TEST(BenchGpuTargets, MalformedResultsNameTheFile) {
  const auto refused = [](const json& j) {
    try {
      bench_gpu_targets(j, "bad.json");
    } catch (const Error& e) {
      return std::string(e.what()).find("bad.json") != std::string::npos;
    }
    return false;
  };
  EXPECT_TRUE(refused(json::array()));
  EXPECT_TRUE(refused({{"models", 3}}));
  EXPECT_TRUE(refused({{"models", {{{"prefill", json::array()}}}}}));  // no model name
  EXPECT_TRUE(refused(
      {{"models", {{{"model", "m"}, {"parameters", 7e9}, {"prefill", {{{"prompt", 2048}}}}}}}}));
  EXPECT_TRUE(refused(
      {{"models",
        {{{"model", "m"}, {"decode", {{{"batch", 1}, {"ratio_to_copy_ceiling", "x"}}}}}}}}));
  EXPECT_TRUE(refused({{"kv", {{{"model", "m"}}}}}));
  EXPECT_TRUE(refused({{"kv", {{{"restore_ratio_to_h2d", 0.9}}}}}));
}

}  // namespace
}  // namespace cb::eval
