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
