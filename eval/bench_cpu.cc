#include "eval/bench_cpu.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>
#include <utility>

#include "kernels/cpu/attention_args.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/parts.h"
#include "lib/core/dtype.h"
#include "lib/core/parallel.h"
#include "lib/kv/kv_cache.h"

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

/// Mean seconds of one call of `fn`, repeated until at least 20 ms have passed (one warm-up
/// call first).
template <typename Fn>
double time_repeated(Fn&& fn) {
  fn();
  int n = 0;
  const auto t0 = Clock::now();
  double t = 0;
  do {
    fn();
    ++n;
    t = secs_since(t0);
  } while (t < 0.02);
  return t / n;
}

/// Four floats in one SSE register (GCC/Clang vector extension).
using Float4 = float __attribute__((vector_size(16)));

Float4 load4(const float* p) {
  Float4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

/// Sum of x[0, n) with eight vector sums held in registers (enough independent chains that the
/// adds keep up with reads from cache); the empty asm keeps the compiler from assuming `x`
/// unchanged between calls.
float read_sum(const float* x, int64_t n) {
  asm volatile("" : : "r"(x) : "memory");
  Float4 a0{}, a1{}, a2{}, a3{}, a4{}, a5{}, a6{}, a7{};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 += load4(x + i);
    a1 += load4(x + i + 4);
    a2 += load4(x + i + 8);
    a3 += load4(x + i + 12);
    a4 += load4(x + i + 16);
    a5 += load4(x + i + 20);
    a6 += load4(x + i + 24);
    a7 += load4(x + i + 28);
  }
  const Float4 t = ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7));
  float r = (t[0] + t[1]) + (t[2] + t[3]);
  for (; i < n; ++i) {  // memcpy: the caller may pass other storage's bytes (bf16 weights)
    float v;
    std::memcpy(&v, x + i, sizeof v);
    r += v;
  }
  return r;
}

/// One decode step's attention (every layer, one query at the last position) by each CPU
/// kernel over `cache`'s sequence 0, and a plain read of the K and V slots those calls read
/// (the same bytes, block by block, on as many threads as the direct kernel takes: set in
/// `read_threads`); appends to the per-repetition vectors. The two kernels
/// run in the order `direct_first` says (alternated by the caller).
void time_decode_attention(const model::ModelConfig& c, const kv::KvCache& cache, int64_t ctx,
                           bool direct_first, std::vector<double>* sgemm_t,
                           std::vector<double>* direct_t, std::vector<double>* read_t,
                           double* kv_bytes, int64_t* read_threads) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> q(static_cast<size_t>(c.q_dim())), out(q.size());
  for (auto& x : q) x = d(rng);
  const int32_t pos = static_cast<int32_t>(ctx - 1);
  std::vector<kernels::cpu::PagedAttention> calls(static_cast<size_t>(c.n_layers));
  for (int l = 0; l < c.n_layers; ++l) {
    kernels::cpu::PagedAttention& p = calls[static_cast<size_t>(l)];
    p.q = q.data();
    p.out = out.data();
    p.q_pos = &pos;
    p.n_q = 1;
    p.n_heads = c.n_heads;
    p.n_kv_heads = c.n_kv_heads;
    p.head_dim = c.head_dim;
    p.k_pool = cache.k_pool(l);
    p.v_pool = cache.v_pool(l);
    p.block_table = cache.block_table(0).data();
    p.block_size = cache.config().block_size;
    p.n_ctx = ctx;
    p.window = c.sliding_window;
    p.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  }
  // The slots a query at ctx - 1 sees, as runs of consecutive slots in the pool (a block, or
  // blocks that follow each other there).
  const kernels::cpu::KeyRange keys = kernels::cpu::key_range(calls[0], ctx - 1);
  const int64_t lo = keys.lo, hi = keys.hi;
  const int64_t row = c.kv_dim();
  std::vector<std::pair<int64_t, int64_t>> runs;  // (element offset in a pool, elements)
  kernels::cpu::for_each_run(calls[0].block_table, calls[0].block_size, row, lo, hi,
                             [&](int64_t, int64_t n, int64_t off) {
                               if (!runs.empty() && runs.back().first + runs.back().second == off) {
                                 runs.back().second += n * row;  // contiguous: one read
                               } else {
                                 runs.emplace_back(off, n * row);
                               }
                             });
  *kv_bytes = 2.0 * static_cast<double>(hi - lo + 1) * static_cast<double>(row) * sizeof(float) *
              c.n_layers;
  const auto sgemm = [&] {
    sgemm_t->push_back(time_repeated([&] {
      for (const auto& p : calls) kernels::cpu::paged_attention_sgemm(p);
    }));
  };
  const auto direct = [&] {
    direct_t->push_back(time_repeated([&] {
      for (const auto& p : calls) kernels::cpu::paged_attention_direct(p);
    }));
  };
  if (direct_first) {
    direct();
    sgemm();
  } else {
    sgemm();
    direct();
  }
  // The read on as many threads as the direct kernel takes for a layer, each its share of
  // every run.
  const int64_t parts =
      kernels::cpu::direct_attention_parts(calls[0], kernels::cpu::kernel_threads());
  *read_threads = parts;
  std::vector<float> part_sum(static_cast<size_t>(parts));
  volatile float sink = 0;
  read_t->push_back(time_repeated([&] {
    for (const auto& p : calls) {
      kernels::cpu::run_parts(parts, [&](int64_t i) {
        float total = 0;
        for (const auto& [off, n] : runs) {
          const int64_t b = n * i / parts, e = n * (i + 1) / parts;
          total += read_sum(p.k_pool + off + b, e - b) + read_sum(p.v_pool + off + b, e - b);
        }
        part_sum[static_cast<size_t>(i)] = total;
      });
      for (float v : part_sum) sink = sink + v;
    }
  }));
}

/// read_sum over x[0, n) split into `parts` pieces, one thread each (the caller's the first).
float parallel_read(const float* x, int64_t n, int64_t parts) {
  std::vector<float> part(static_cast<size_t>(parts), 0.0f);
  std::atomic<size_t> next{0};
  for_each_piece(n, std::max<int64_t>(1, n / parts), static_cast<int>(parts),
                 [&](int64_t b, int64_t c) { part[next++] = read_sum(x + b, c); });
  float s = 0;
  for (float v : part) s += v;
  return s;
}

/// One layer's linear layers, random weights of the model's shapes held both ways.
struct LayerLinears {
  std::vector<std::vector<int64_t>> shapes;  // (n, in, out), n set per call
  std::vector<std::vector<float>> f32;
  std::vector<std::vector<uint16_t>> bf16;  // f32 rounded to nearest even
  double bf16_bytes = 0;

  explicit LayerLinears(const model::ModelConfig& c) {
    model::ModelConfig one = c;
    one.n_layers = 1;
    shapes = gemm_shapes(one, 1);
    shapes.pop_back();  // the LM head is not a layer's
    std::mt19937_64 rng(11);
    std::uniform_real_distribution<float> d(-0.05f, 0.05f);
    for (const auto& s : shapes) {
      std::vector<float> w(static_cast<size_t>(s[1] * s[2]));
      std::vector<uint16_t> b(w.size());
      for (size_t i = 0; i < w.size(); ++i) {
        w[i] = d(rng);
        b[i] = fp32_to_bf16(w[i]);
      }
      bf16_bytes += 2.0 * static_cast<double>(w.size());
      f32.push_back(std::move(w));
      bf16.push_back(std::move(b));
    }
  }

  /// Times the layer's linear layers in bf16 and in f32 at `n` rows, and with `read`, first a
  /// read of the bf16 bytes split as the GEMV splits them; appends the seconds of one pass.
  /// With `repeat` each is time_repeated's mean (small matrices take microseconds), else one
  /// pass. The f32 products (matmul_wt_f32: sgemm from five rows on) run last, after a pause:
  /// OpenBLAS's worker threads spin for a while after an sgemm, and on a machine with few cores
  /// they would take them from what ran next.
  void time(int64_t n, bool repeat, std::vector<double>* f32_t, std::vector<double>* bf16_t,
            std::vector<double>* read_t) const {
    int64_t max_x = 0, max_y = 0;
    for (const auto& s : shapes) {
      max_x = std::max(max_x, n * s[1]);
      max_y = std::max(max_y, n * s[2]);
    }
    std::vector<float> x(static_cast<size_t>(max_x), 0.5f), y(static_cast<size_t>(max_y));
    const auto timed = [repeat](auto&& fn) {
      if (repeat) return time_repeated(fn);
      const auto t0 = Clock::now();
      fn();
      return secs_since(t0);
    };
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    if (read_t != nullptr) {
      volatile float sink = 0;
      read_t->push_back(timed([&] {
        for (size_t i = 0; i < shapes.size(); ++i) {
          // The bf16 bytes as floats: the same bytes, half as many elements.
          sink = sink + parallel_read(reinterpret_cast<const float*>(bf16[i].data()),
                                      static_cast<int64_t>(bf16[i].size() / 2),
                                      kernels::cpu::bf16_gemv_parts(shapes[i][1], shapes[i][2]));
        }
      }));
    }
    bf16_t->push_back(timed([&] {
      for (size_t i = 0; i < shapes.size(); ++i) {
        kernels::cpu::matmul_wt_bf16(x.data(), bf16[i].data(), y.data(), n, shapes[i][1],
                                     shapes[i][2]);
      }
    }));
    f32_t->push_back(timed([&] {
      for (size_t i = 0; i < shapes.size(); ++i) {
        kernels::cpu::matmul_wt_f32(x.data(), f32[i].data(), y.data(), n, shapes[i][1],
                                    shapes[i][2]);
      }
    }));
  }
};

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
  r.weights = model::weight_storage_name(m.weight_storage());
  r.prompt_tokens = opt.prompt_tokens;
  r.decode_tokens = opt.decode_tokens;
  r.reps = opt.reps;
  const int total = opt.prompt_tokens + opt.decode_tokens;
  const auto prompt = random_tokens(opt.prompt_tokens, c.vocab_size, opt.seed);

  // The sgemm baseline runs inside every repetition, right after the prefill it is compared
  // with, so machine-load drift (shared cores) affects both alike; ratios are per repetition.
  const auto shapes = gemm_shapes(c, opt.prompt_tokens);
  std::vector<double> prefill_t, decode_t, gemm_t, ratio_t, attn_sgemm_t, attn_direct_t, read_t;
  double kv_bytes = 0;
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
    time_decode_attention(c, cache, total, rep % 2 == 1, &attn_sgemm_t, &attn_direct_t, &read_t,
                          &kv_bytes, &r.attn_threads);
    char decode[64] = "";
    if (!steps.empty()) {
      std::snprintf(decode, sizeof decode, "decode %.2f ms/token, ", 1e3 * median(steps));
    }
    std::fprintf(stderr,
                 "  rep %d/%d: prefill %.3f s, its GEMMs alone %.3f s, %sdecode attention %.3f ms "
                 "(sgemm) / %.3f ms (direct)\n",
                 rep, opt.reps, tp, tg, decode, 1e3 * attn_sgemm_t.back(),
                 1e3 * attn_direct_t.back());
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
  r.attn_ctx = total;
  r.attn_sgemm_s = median(attn_sgemm_t);
  r.attn_direct_s = median(attn_direct_t);
  r.attn_kv_bytes = kv_bytes;
  r.attn_direct_gbs = kv_bytes / r.attn_direct_s / 1e9;
  r.read_gbs = kv_bytes / median(read_t) / 1e9;
  std::vector<double> speedup, to_read;
  for (size_t i = 0; i < attn_direct_t.size(); ++i) {
    speedup.push_back(attn_sgemm_t[i] / attn_direct_t[i]);
    to_read.push_back(read_t[i] / attn_direct_t[i]);
  }
  r.attn_speedup = median(speedup);
  r.attn_to_read = median(to_read);
  if (!decode_t.empty()) {
    r.decode_s_per_token = median(decode_t);
    r.decode_tok_s = 1.0 / r.decode_s_per_token;
    double dflop = 0;
    const double dg = time_gemms(gemm_shapes(c, 1), opt.reps, &dflop);
    r.decode_gemm_gflops = dflop / dg / 1e9;
    r.decode_weight_bytes =
        dflop / 2.0 * (m.weight_storage() == model::WeightStorage::BF16 ? 2.0 : 4.0);
    r.decode_weight_gbs = r.decode_weight_bytes / r.decode_s_per_token / 1e9;
  }
  // fp32 and bf16 weights side by side, one layer's linear layers, the same inputs.
  std::fprintf(stderr, "  linear layers, f32 and bf16 weights (one layer's shapes)...\n");
  const LayerLinears lin(c);
  std::vector<double> df, db, dr, pf, pb;
  for (int rep = 0; rep < opt.reps + 1; ++rep) {
    lin.time(1, true, &df, &db, &dr);
    lin.time(opt.prompt_tokens, false, &pf, &pb, nullptr);
  }
  // The first repetition is a warm-up.
  for (auto* v : {&df, &db, &dr, &pf, &pb}) v->erase(v->begin());
  std::vector<double> dspeed, dto_read, pratio;
  for (size_t i = 0; i < db.size(); ++i) {
    dspeed.push_back(df[i] / db[i]);
    dto_read.push_back(dr[i] / db[i]);
    pratio.push_back(pf[i] / pb[i]);
  }
  r.lin_decode_f32_s = median(df);
  r.lin_decode_bf16_s = median(db);
  r.lin_decode_speedup = median(dspeed);
  r.lin_bf16_gbs = lin.bf16_bytes / r.lin_decode_bf16_s / 1e9;
  r.lin_read_gbs = lin.bf16_bytes / median(dr) / 1e9;
  r.lin_bf16_to_read = median(dto_read);
  r.lin_prefill_f32_s = median(pf);
  r.lin_prefill_bf16_s = median(pb);
  r.lin_prefill_ratio = median(pratio);
  return r;
}

}  // namespace cb::eval
