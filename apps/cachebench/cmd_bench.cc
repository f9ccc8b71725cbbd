// cachebench bench cpu --model MODEL [--layers N] [--prompt 512] [--decode 32] [--reps 5] [--out
// F.json]
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "apps/cachebench/format.h"
#include "apps/cachebench/model_args.h"
#include "apps/cachebench/revision.h"
#include "apps/cachebench/subcommands.h"
#include "apps/cachebench/validators.h"
#include "eval/bench_cpu.h"
#include "kernels/cpu/blas_core.h"
#include "lib/core/error.h"

namespace cb::app {
namespace {

struct BenchCpuArgs {
  ModelArgs m;
  int layers = 0;
  eval::BenchCpuOptions opt;
  std::string out;
};

}  // namespace

void register_bench(CLI::App& app) {
  CLI::App* bench = app.add_subcommand(
      "bench",
      "Benchmarks: medians over repetitions, ratios to a reference measured in the same run");
  bench->require_subcommand(1);
  auto a = std::make_shared<BenchCpuArgs>();
  CLI::App* cpu = bench->add_subcommand("cpu",
                                        "CPU backend: prefill and decode tokens/s against this "
                                        "machine's sgemm rate at the same shapes; decode "
                                        "attention by both CPU kernels against a plain read of "
                                        "its K/V");
  add_model_options(cpu, &a->m);
  cpu->add_option(
         "--layers", a->layers,
         "run only the first N layers (0: all), e.g. a 7B shape truncated to fit the benchmark")
      ->capture_default_str()
      ->check(at_least(0));
  cpu->add_option("--prompt", a->opt.prompt_tokens, "prompt tokens per prefill")
      ->capture_default_str()
      ->check(in_range(1, 1 << 16));
  cpu->add_option("--decode", a->opt.decode_tokens, "decode steps after each prefill")
      ->capture_default_str()
      ->check(in_range(0, 1 << 16));
  cpu->add_option("--reps", a->opt.reps, "timed repetitions (after one warm-up)")
      ->capture_default_str()
      ->check(in_range(1, 1000));
  cpu->add_option("--out", a->out, "also write the result as JSON to this file")
      ->check(output_file());
  set_action(cpu, [a, cpu] {
    refuse_given(*cpu, {"--tokenizer"}, "has no effect on bench cpu, which runs token ids",
                 "drop it");
    auto src = model::ModelSource::open(a->m.model);
    refuse_weights_seed_for_file(a->m, *src);
    model::ModelConfig cfg = src->config();
    if (a->layers > 0) {
      if (a->layers > cfg.n_layers)
        throw make_error("--layers",
                         "the model has only " + std::to_string(cfg.n_layers) + " layers",
                         "pass --layers " + std::to_string(cfg.n_layers) + " or fewer (0: all)");
      cfg.n_layers = a->layers;
    }
    if (a->opt.prompt_tokens + a->opt.decode_tokens > cfg.max_context) {
      throw make_error("--prompt",
                       std::to_string(a->opt.prompt_tokens) + " prompt + " +
                           std::to_string(a->opt.decode_tokens) +
                           " decode tokens exceed the context window of " +
                           std::to_string(cfg.max_context),
                       "make --prompt + --decode at most " + std::to_string(cfg.max_context));
    }
    std::fprintf(stderr, "bench cpu: loading %s (%d of %d layers)...\n", a->m.model.c_str(),
                 cfg.n_layers, src->config().n_layers);
    model::Model m(cfg, model::Weights::load(*src, cfg, a->m.seed, cpu_weight_storage(a->m)));
    const eval::BenchCpuResult r = eval::bench_cpu(m, a->opt);
    std::printf("model                %s, %d layers, backend cpu, %s weights\n", a->m.model.c_str(),
                cfg.n_layers, r.weights.c_str());
    const std::string blas = kernels::cpu::blas_summary(kernels::cpu::blas_info());
    std::printf("BLAS                 %s\n", blas.c_str());
    std::printf("prefill              %d tokens: median %.3f s = %.1f tokens/s, %.1f GFLOP/s\n",
                r.prompt_tokens, r.prefill_s, r.prefill_tok_s, r.prefill_gflops);
    std::printf("sgemm, same shapes   %.1f GFLOP/s (the prefill's GEMMs alone: %.3f s)\n",
                r.sgemm_gflops, r.gemm_only_s);
    std::printf("GEMM share           %.0f%% of prefill time\n", 100.0 * r.gemm_share);
    if (r.gemm_share > 1.0) {  // a part timed longer than the whole: a hiccup in a short run
      std::fprintf(stderr,
                   "bench cpu: note: the prefill's GEMMs alone took longer than the prefill "
                   "that holds them (%.0f%%): timing noise at this size; raise --reps (now %d) "
                   "or --prompt (now %d) for numbers to compare\n",
                   100.0 * r.gemm_share, a->opt.reps, a->opt.prompt_tokens);
    }
    std::printf("prefill / sgemm      %.2f\n", r.ratio_to_sgemm);
    if (r.decode_tokens > 0) {
      std::printf(
          "decode               median %.2f ms/token = %.1f tokens/s, %.2f GB/s of %s weights\n",
          1e3 * r.decode_s_per_token, r.decode_tok_s, r.decode_weight_gbs, r.weights.c_str());
      std::printf("sgemm, decode shapes %.1f GFLOP/s\n", r.decode_gemm_gflops);
    }
    std::printf(
        "decode attention     %lld tokens of context, all layers: sgemm kernel %.3f ms, direct "
        "kernel %.3f ms (%.2fx), %.2f GB/s of K/V = %.2f of a plain read's %.2f GB/s, %lld "
        "thread(s) each\n",
        static_cast<long long>(r.attn_ctx), 1e3 * r.attn_sgemm_s, 1e3 * r.attn_direct_s,
        r.attn_speedup, r.attn_direct_gbs, r.attn_to_read, r.read_gbs,
        static_cast<long long>(r.attn_threads));
    std::printf(
        "linear layers, 1 row one layer: f32 (GEMV) %.2f ms, bf16 (GEMV) %.2f ms (%.2fx), "
        "%.2f GB/s of bf16 = %.2f of a plain read's %.2f GB/s\n",
        1e3 * r.lin_decode_f32_s, 1e3 * r.lin_decode_bf16_s, r.lin_decode_speedup, r.lin_bf16_gbs,
        r.lin_bf16_to_read, r.lin_read_gbs);
    std::printf("linear layers, %d rows one layer: f32 %.1f ms, bf16 %.1f ms (f32/bf16 %.2f)\n",
                r.prompt_tokens, 1e3 * r.lin_prefill_f32_s, 1e3 * r.lin_prefill_bf16_s,
                r.lin_prefill_ratio);
    std::printf(
        "repetitions          %d (medians; each ratio is the median of the repetitions' own "
        "ratios, measured side by side, so it need not equal the ratio of the medians above; "
        "one warm-up run excluded)\n",
        r.reps);
    if (!a->out.empty()) {
      nlohmann::json j = {{"bench", "cpu"},
                          {"model", a->m.model},
                          {"layers", cfg.n_layers},
                          {"git", git_revision()},
                          {"mode", "real"},
                          {"backend", "cpu"},
                          {"weights", r.weights},
                          {"blas", blas},
                          {"prompt_tokens", r.prompt_tokens},
                          {"decode_tokens", r.decode_tokens},
                          {"reps", r.reps},
                          {"prefill_s", r.prefill_s},
                          {"prefill_tok_s", r.prefill_tok_s},
                          {"prefill_gflops", r.prefill_gflops},
                          {"sgemm_gflops", r.sgemm_gflops},
                          {"gemm_only_s", r.gemm_only_s},
                          {"gemm_share", r.gemm_share},
                          {"prefill_to_sgemm", r.ratio_to_sgemm},
                          {"linear_f32_vs_bf16",
                           {{"decode_f32_ms", 1e3 * r.lin_decode_f32_s},
                            {"decode_bf16_ms", 1e3 * r.lin_decode_bf16_s},
                            {"decode_speedup", r.lin_decode_speedup},
                            {"decode_bf16_gbs", r.lin_bf16_gbs},
                            {"read_gbs", r.lin_read_gbs},
                            {"decode_bf16_to_read", r.lin_bf16_to_read},
                            {"prefill_rows", r.prompt_tokens},
                            {"prefill_f32_ms", 1e3 * r.lin_prefill_f32_s},
                            {"prefill_bf16_ms", 1e3 * r.lin_prefill_bf16_s},
                            {"prefill_f32_over_bf16", r.lin_prefill_ratio}}},
                          {"decode_attention",
                           {{"ctx", r.attn_ctx},
                            {"kv_bytes", r.attn_kv_bytes},
                            {"sgemm_ms", 1e3 * r.attn_sgemm_s},
                            {"direct_ms", 1e3 * r.attn_direct_s},
                            {"direct_speedup", r.attn_speedup},
                            {"direct_kv_gbs", r.attn_direct_gbs},
                            {"read_gbs", r.read_gbs},
                            {"threads", r.attn_threads},
                            {"direct_to_read", r.attn_to_read}}}};
      // Measured only with decode steps (--decode 0 has none): absent, not 0 tokens/s.
      if (r.decode_tokens > 0) {
        j["decode_ms_per_token"] = 1e3 * r.decode_s_per_token;
        j["decode_tok_s"] = r.decode_tok_s;
        j["decode_weight_gbs"] = r.decode_weight_gbs;
        j["decode_weight_bytes"] = r.decode_weight_bytes;
        j["decode_sgemm_gflops"] = r.decode_gemm_gflops;
      }
      if (seeded_weights(a->m)) j["weights_seed"] = a->m.seed;  // gate compares it
      write_json(a->out, j);
    }
    return 0;
  });
  register_bench_store(bench);
  register_bench_gpu(bench);
}

}  // namespace cb::app
