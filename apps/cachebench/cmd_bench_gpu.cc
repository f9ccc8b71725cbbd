// cachebench bench gpu [--models preset:llama-2-7b,...] [--prompts 512,2048,4096] [--prefix 2048]
//   [--batches 1,16,64] [--reps 5] [--gpu-storage f16] [--no-opt-ins] [--out F.json]
//   (CUDA builds)
#include <cstdio>
#include <nlohmann/json.hpp>

#include "apps/cachebench/format.h"
#include "apps/cachebench/subcommands.h"
#include "apps/cachebench/validators.h"
#include "cachebench_version.h"
#include "lib/core/error.h"

#ifdef CB_HAVE_CUDA
#include "eval/bench_gpu.h"
#endif

namespace cb::app {

#ifdef CB_HAVE_CUDA
namespace {

struct BenchGpuArgs {
  eval::BenchGpuOptions o;
  std::string out;
};

void print(const nlohmann::json& j) {
  const auto& d = j["device"];
  const auto& c = j["ceilings"];
  std::printf("device          %s (cc %s, %.1f GiB), storage %s, median of %d\n",
              d["name"].get<std::string>().c_str(),
              d["compute_capability"].get<std::string>().c_str(),
              d["memory_bytes"].get<double>() / (1 << 30), j["storage"].get<std::string>().c_str(),
              j["reps"].get<int>());
  std::printf(
      "copy ceilings   D2D %.0f GB/s (read + write), H2D %.1f GB/s, D2H %.1f GB/s "
      "(pinned)\n",
      c["d2d_gbs_read_plus_write"].get<double>(), c["h2d_pinned_gbs"].get<double>(),
      c["d2h_pinned_gbs"].get<double>());
  std::printf(
      "\n| model | prompt | prefix | tokens/s | TFLOP/s | GEMM ceiling | ratio | wmma "
      "attention, same run: ratio (default's speedup; logits' max diff / max) | launch "
      "fusions, same run: ratio, to the fused shapes' ceiling (speedup) |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const auto& m : j["models"]) {
    for (const auto& p : m["prefill"]) {
      if (p.contains("skipped")) continue;
      char wmma[96] = "-";
      if (p.contains("speedup_over_wmma")) {
        std::snprintf(
            wmma, sizeof wmma, "%.2f (%.2fx; %.2g)", p["wmma_ratio_to_gemm_ceiling"].get<double>(),
            p["speedup_over_wmma"].get<double>(), p["wmma_logits_max_diff_over_max"].get<double>());
      }
      char fused[96] = "-";
      if (p.contains("launch_fused_speedup")) {
        std::snprintf(fused, sizeof fused, "%.2f, %.2f (%.2fx)",
                      p["launch_fused_ratio_to_gemm_ceiling"].get<double>(),
                      p["launch_fused_ratio_to_fused_gemm_ceiling"].get<double>(),
                      p["launch_fused_speedup"].get<double>());
      }
      std::printf("| %s | %lld | %lld | %.0f | %.1f | %.1f | %.2f | %s | %s |\n",
                  m["model"].get<std::string>().c_str(), p["prompt"].get<long long>(),
                  p["prefix"].get<long long>(), p["tok_s"].get<double>(), p["tflops"].get<double>(),
                  p["gemm_ceiling_tflops"].get<double>(), p["ratio_to_gemm_ceiling"].get<double>(),
                  wmma, fused);
    }
  }
  std::printf(
      "\n| model | batch | context | tokens/s | HBM GB/s | / copy ceiling | with cuBLAS GEMVs "
      "| with fused GEMVs | with PDL-launched GEMVs | with the decode attention kernel | with the "
      "launch fusions | with every opt-in (/ copy ceiling) |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const auto& m : j["models"]) {
    for (const auto& p : m["decode"]) {
      char base[64] = "-", fused[64] = "-", dk[64] = "-", lf[64] = "-", all[64] = "-",
           pdl[64] = "-";
      if (p.contains("pdl_tok_s")) {
        std::snprintf(pdl, sizeof pdl, "%.1f tok/s (%.2fx)", p["pdl_tok_s"].get<double>(),
                      p["pdl_speedup"].get<double>());
      }
      if (p.contains("launch_fused_tok_s")) {
        std::snprintf(lf, sizeof lf, "%.1f tok/s (%.2fx)", p["launch_fused_tok_s"].get<double>(),
                      p["launch_fused_speedup"].get<double>());
        std::snprintf(all, sizeof all, "%.1f tok/s (%.2fx; %.2f)",
                      p["all_opt_ins_tok_s"].get<double>(), p["all_opt_ins_speedup"].get<double>(),
                      p["all_opt_ins_ratio_to_copy_ceiling"].get<double>());
      }
      if (p.contains("cublas_tok_s")) {
        std::snprintf(base, sizeof base, "%.1f tok/s (%.2fx)", p["cublas_tok_s"].get<double>(),
                      p["speedup_over_cublas"].get<double>());
      }
      if (p.contains("fused_tok_s")) {
        std::snprintf(fused, sizeof fused, "%.1f tok/s (%.2fx)", p["fused_tok_s"].get<double>(),
                      p["fused_speedup"].get<double>());
      }
      if (p.contains("decode_kernel_tok_s")) {
        std::snprintf(dk, sizeof dk, "%.1f tok/s (%.2fx)", p["decode_kernel_tok_s"].get<double>(),
                      p["decode_kernel_speedup"].get<double>());
      }
      std::printf("| %s | %lld | %lld | %.1f | %.0f | %.2f | %s | %s | %s | %s | %s | %s |\n",
                  m["model"].get<std::string>().c_str(), p["batch"].get<long long>(),
                  p["context"].get<long long>(), p["tok_s"].get<double>(),
                  p["hbm_gbs"].get<double>(), p["ratio_to_copy_ceiling"].get<double>(), base, fused,
                  pdl, dk, lf, all);
    }
  }
  std::printf(
      "\n| model | tokens | KV restore GB/s, one stream (/ H2D) | pipelined (/ H2D) | one copy "
      "of the same bytes GB/s | pipelined / it | KV capture to host GB/s |\n"
      "|---|---:|---:|---:|---:|---:|---:|\n");
  for (const auto& k : j["kv"]) {
    std::printf("| %s | %lld | %.1f (%.2f) | %.1f (%.2f) | %.1f | %.2f | %.1f |\n",
                k["model"].get<std::string>().c_str(), k["tokens"].get<long long>(),
                k["restore_gbs"].get<double>(), k["restore_ratio_to_h2d"].get<double>(),
                k["restore_pipelined_gbs"].get<double>(),
                k["restore_pipelined_ratio_to_h2d"].get<double>(),
                k["h2d_same_bytes_gbs"].get<double>(),
                k["restore_pipelined_ratio_to_same_bytes_h2d"].get<double>(),
                k["capture_to_host_gbs"].get<double>());
  }
}

}  // namespace

void register_bench_gpu(CLI::App* bench) {
  auto a = std::make_shared<BenchGpuArgs>();
  CLI::App* sub = bench->add_subcommand(
      "gpu",
      "CUDA backend: GEMM and copy ceilings of this GPU, prefill/decode throughput of preset "
      "models against them, KV restore/capture bandwidth (docs/perf.md)");
  sub->add_option("--models", a->o.models, "models (presets are generated on the device)")
      ->delimiter(',')
      ->capture_default_str();
  sub->add_option("--prompts", a->o.prompts, "prompt lengths")
      ->delimiter(',')
      ->capture_default_str()
      ->check(in_range(1, 1 << 20));
  sub->add_option("--prefix", a->o.prefix, "paged prefix before each prompt (0: none)")
      ->capture_default_str()
      ->check(in_range(0, 1 << 20));
  sub->add_option("--batches", a->o.batches, "decode batch sizes")
      ->delimiter(',')
      ->capture_default_str()
      ->check(in_range(1, 4096));
  sub->add_option("--decode-context", a->o.decode_context, "history of every decoding sequence")
      ->capture_default_str()
      ->check(in_range(1, 1 << 20));
  sub->add_option("--decode-steps", a->o.decode_steps, "timed decode steps per repetition")
      ->capture_default_str()
      ->check(in_range(1, 10000));
  sub->add_option("--reps", a->o.reps, "timed repetitions (after one warm-up)")
      ->capture_default_str()
      ->check(in_range(1, 1000));
  sub->add_option("--gpu-storage", a->o.storage, "storage of weights, activations and KV")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}))
      ->capture_default_str();
  sub->add_option("--gpu", a->o.device, "device index")->capture_default_str();
  sub->add_option("--profile-phase", a->o.profile_phase,
                  "what a profiler run with --profile-from-start off sees: the default's timed "
                  "decode steps, or its last timed prefill")
      ->check(CLI::IsMember({"decode", "prefill"}))
      ->capture_default_str();
  sub->add_flag("!--no-opt-ins", a->o.opt_ins,
                "time only the default and its measured baselines, not the opt-in paths that "
                "have not yet run on a GPU");
  sub->add_option("--out", a->out, "also write the result as JSON to this file")
      ->check(output_file());
  set_action(sub, [a] {
    nlohmann::json j = eval::bench_gpu(a->o);
    j["bench"] = "gpu";
    j["git"] = CB_GIT_REVISION;
    j["mode"] = "real";
    print(j);
    if (!a->out.empty()) write_json(a->out, j);
    return 0;
  });
}
#else
// No CUDA backend in this build: `bench gpu` says so (and how to get one) instead of being
// an unknown subcommand.
void register_bench_gpu(CLI::App* bench) {
  CLI::App* sub = bench->add_subcommand(
      "gpu", "CUDA builds only: GEMM/copy ceilings and model throughput on this GPU");
  sub->allow_extras();
  set_action(sub, []() -> int {
    throw make_error("bench gpu",
                     "this build has no CUDA backend (built with CACHEBENCH_CUDA=OFF or without "
                     "nvcc)",
                     "rebuild on a machine with the CUDA toolkit (make setup && make build)");
  });
}
#endif

}  // namespace cb::app
