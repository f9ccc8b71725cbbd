#include "eval/bench_cpu.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "kernels/cpu/ops.h"

namespace cb::eval {
namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double secs_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::vector<int32_t> random_tokens(int n, int vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> d(0, vocab - 1);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = d(rng);
  return t;
}

// Median time of running all `shapes` once, with random data, over `reps` repetitions.
double time_gemms(const std::vector<std::vector<int64_t>>& shapes, int reps, double* flop) {
  int64_t max_x = 0, max_w = 0, max_y = 0;
  *flop = 0;
  for (const auto& s : shapes) {
    max_x = std::max(max_x, s[0] * s[1]);
    max_w = std::max(max_w, s[1] * s[2]);
    max_y = std::max(max_y, s[0] * s[2]);
    *flop +=
        2.0 * static_cast<double>(s[0]) * static_cast<double>(s[1]) * static_cast<double>(s[2]);
  }
  std::vector<float> x(static_cast<size_t>(max_x), 0.5f), w(static_cast<size_t>(max_w), 0.25f),
      y(static_cast<size_t>(max_y));
  std::vector<double> t;
  for (int r = 0; r < reps + 1; ++r) {
    const auto t0 = Clock::now();
    for (const auto& s : shapes)
      kernels::cpu::matmul_wt(x.data(), w.data(), y.data(), s[0], s[1], s[2]);
    if (r > 0) t.push_back(secs_since(t0));  // first run is a warm-up
  }
  return median(t);
}

}  // namespace

std::vector<std::vector<int64_t>> gemm_shapes(const model::ModelConfig& c, int64_t n) {
  std::vector<std::vector<int64_t>> s;
  const int64_t H = c.hidden, q = c.q_dim(), kv = c.kv_dim(), F = c.ffn_hidden;
  for (int l = 0; l < c.n_layers; ++l) {
    if (c.arch == model::Arch::Falcon) {
      s.push_back({n, H, q + 2 * kv});
      s.push_back({n, q, H});
      s.push_back({n, H, F});
      s.push_back({n, F, H});
    } else {
      s.push_back({n, H, q});
      s.push_back({n, H, kv});
      s.push_back({n, H, kv});
      s.push_back({n, q, H});
      s.push_back({n, H, F});
      s.push_back({n, H, F});
      s.push_back({n, F, H});
    }
  }
  s.push_back({1, H, c.vocab_size});  // LM head on the last row only
  return s;
}

BenchCpuResult bench_cpu(const model::Model& m, const BenchCpuOptions& opt) {
  const model::ModelConfig& c = m.config();
  BenchCpuResult r;
  r.prompt_tokens = opt.prompt_tokens;
  r.decode_tokens = opt.decode_tokens;
  r.reps = opt.reps;
  const int total = opt.prompt_tokens + opt.decode_tokens;
  const auto prompt = random_tokens(opt.prompt_tokens, c.vocab_size, opt.seed);

  // The sgemm baseline runs inside every repetition, right after the prefill it is compared
  // with, so machine-load drift (shared cores) affects both alike; ratios are per repetition.
  const auto shapes = gemm_shapes(c, opt.prompt_tokens);
  std::vector<double> prefill_t, decode_t, gemm_t, ratio_t;
  double gemm_flop = 0;
  for (int rep = 0; rep < opt.reps + 1; ++rep) {
    kv::KvCache cache(m.kv_config(total / 16 + 2));
    cache.add_sequence(0);
    cache.reserve(0, total);
    auto t0 = Clock::now();
    auto logits = m.forward({{0, prompt, false}}, cache);
    const double tp = secs_since(t0);
    const double tg = time_gemms(shapes, 1, &gemm_flop);
    std::vector<double> steps;
    int32_t next = 0;
    for (int d = 0; d < opt.decode_tokens; ++d) {
      next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      t0 = Clock::now();
      logits = m.forward({{0, {next}, false}}, cache);
      steps.push_back(secs_since(t0));
    }
    if (rep == 0) continue;  // warm-up
    prefill_t.push_back(tp);
    gemm_t.push_back(tg);
    ratio_t.push_back(tg / tp);
    if (!steps.empty()) decode_t.push_back(median(steps));
    std::fprintf(stderr,
                 "  rep %d/%d: prefill %.3f s, its GEMMs alone %.3f s, decode %.2f ms/token\n", rep,
                 opt.reps, tp, tg, steps.empty() ? 0.0 : 1e3 * median(steps));
  }
  r.prefill_s = median(prefill_t);
  r.prefill_tok_s = opt.prompt_tokens / r.prefill_s;
  r.gemm_only_s = median(gemm_t);
  r.sgemm_gflops = gemm_flop / r.gemm_only_s / 1e9;
  // Attention: QK^T and PV over a causal triangle, 2 FLOPs per multiply-add.
  const double n = opt.prompt_tokens;
  const double attn_flop = 2.0 * 2.0 * c.n_layers * c.n_heads * c.head_dim * n * (n + 1) / 2.0;
  r.prefill_gflop = (gemm_flop + attn_flop) / 1e9;
  r.prefill_gflops = r.prefill_gflop / r.prefill_s;
  r.gemm_share = median(ratio_t);
  // Model FLOP rate over the sgemm rate measured in the same repetition, median over reps.
  std::vector<double> eff;
  for (size_t i = 0; i < prefill_t.size(); ++i) {
    eff.push_back((r.prefill_gflop / prefill_t[i]) / (gemm_flop / 1e9 / gemm_t[i]));
  }
  r.ratio_to_sgemm = median(eff);
  if (!decode_t.empty()) {
    r.decode_s_per_token = median(decode_t);
    r.decode_tok_s = 1.0 / r.decode_s_per_token;
    double dflop = 0;
    const double dg = time_gemms(gemm_shapes(c, 1), opt.reps, &dflop);
    r.decode_gemm_gflops = dflop / dg / 1e9;
    r.decode_weight_gbs = dflop / 2.0 * sizeof(float) / r.decode_s_per_token / 1e9;
  }
  return r;
}

}  // namespace cb::eval
