#include "eval/bench_gpu.h"

#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemv.h"
#include "kernels/cuda/kv_restore.h"
#include "kernels/cuda/preset_fill.h"
#include "lib/core/error.h"
#include "lib/cuda_model/cuda_model.h"
#include "lib/device/cuda_runtime.h"
#include "lib/device/gpu_info.h"
#include "lib/device/host_buffer.h"
#include "lib/kv/kv_cache.h"
#include "lib/metrics/stats.h"
#include "lib/model/model_source.h"
#include "lib/model/tensor_specs.h"

namespace cb::eval {
namespace {

namespace kc = cb::kernels::cuda;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

kc::Storage storage_of(const std::string& s) {
  if (s == "f32") return kc::Storage::F32;
  if (s == "bf16") return kc::Storage::BF16;
  if (s == "f16") return kc::Storage::F16;
  throw make_error("--gpu-storage", "'" + s + "' is not f32, f16 or bf16");
}

// Seconds of one run of `fn`, which starts on `s` and ends there (work on other streams it
// starts must be joined back into `s`).
template <typename Fn>
double time_once(const device::Stream& s, Fn&& fn) {
  device::Event a, b;
  a.record(s);
  fn();
  b.record(s);
  b.synchronize();
  return device::Event::elapsed_ms(a, b) / 1e3;
}

// Median seconds of `fn` (enqueued on `s`) between two events, after one warm-up.
template <typename Fn>
double time_events(const device::Stream& s, int reps, Fn&& fn) {
  std::vector<double> t;
  for (int r = 0; r <= reps; ++r) {
    const double x = time_once(s, fn);
    if (r > 0) t.push_back(x);
  }
  return metrics::median(t);
}

/// Host memory the device copies from directly: cudaHostAlloc'ed. mlock'ed memory (the
/// fallback when that fails) is pageable to CUDA, whose copies from it are staged and
/// synchronous, so timings over it would not be of the link.
void require_cuda_pinned(const device::HostBuffer& host, const char* what) {
  if (host.kind() != device::HostMemoryKind::CudaPinned) {
    throw make_error("bench gpu",
                     std::string("host memory for ") + what + " could not be pinned by CUDA (" +
                         (host.lock_error().empty() ? "no reason given" : host.lock_error()) + ")",
                     "free host memory or raise RLIMIT_MEMLOCK (ulimit -l)");
  }
}

json copy_ceilings(const BenchGpuOptions& o, const device::Stream& s, double* d2d, double* h2d) {
  const uint64_t bytes = static_cast<uint64_t>(o.copy_mib) << 20;
  device::Arena arena = device::make_device_arena(2 * bytes, "copy ceilings");
  device::Arena::Block x = arena.allocate(bytes, "src");
  device::Arena::Block y = arena.allocate(bytes, "dst");
  device::HostBuffer host(bytes);
  require_cuda_pinned(host, "the copy ceilings");
  const double t_d2d = time_events(s, o.reps, [&] {
    CB_CUDA_CHECK(cudaMemcpyAsync(y.data(), x.data(), bytes, cudaMemcpyDeviceToDevice, s.get()));
  });
  const double t_h2d = time_events(s, o.reps, [&] {
    CB_CUDA_CHECK(cudaMemcpyAsync(x.data(), host.data(), bytes, cudaMemcpyHostToDevice, s.get()));
  });
  const double t_d2h = time_events(s, o.reps, [&] {
    CB_CUDA_CHECK(cudaMemcpyAsync(host.data(), x.data(), bytes, cudaMemcpyDeviceToHost, s.get()));
  });
  *d2d = 2.0 * static_cast<double>(bytes) / t_d2d / 1e9;  // read + write
  *h2d = static_cast<double>(bytes) / t_h2d / 1e9;
  return {{"bytes", bytes},
          {"d2d_gbs_read_plus_write", *d2d},
          {"h2d_pinned_gbs", *h2d},
          {"d2h_pinned_gbs", static_cast<double>(bytes) / t_d2h / 1e9}};
}

// The GEMMs of one CudaModel prefill of n tokens: fused QKV, output, MLP (gate and up as one
// GEMM with `fused_gate_up`, CudaKernelPaths::mlp_fusion); LM head on one row.
std::vector<std::vector<int64_t>> gpu_gemm_shapes(const model::ModelConfig& c, int64_t n,
                                                  bool fused_gate_up = false) {
  const int64_t H = c.hidden, q = c.q_dim(), kv = c.kv_dim(), F = c.ffn_hidden;
  const bool gate = c.arch != model::Arch::Falcon;
  std::vector<std::vector<int64_t>> s;
  for (int l = 0; l < c.n_layers; ++l) {
    s.push_back({n, H, q + 2 * kv});
    s.push_back({n, q, H});
    if (gate && fused_gate_up) {
      s.push_back({n, H, 2 * F});
    } else {
      s.push_back({n, H, F});
      if (gate) s.push_back({n, H, F});
    }
    s.push_back({n, F, H});
  }
  s.push_back({1, H, c.vocab_size});
  return s;
}

// Random values (not zeros, which cuBLAS runs faster on) in `n` elements of storage `st`.
void fill_random(void* p, uint64_t n, kc::Storage st, uint64_t key, const device::Stream& s) {
  kc::PresetFillParams f;
  f.out = p;
  f.rows = 1;
  f.cols = static_cast<int64_t>(n);
  f.key = key;
  f.scale = 1.0f;
  f.storage = st;
  CB_CUDA_CHECK(kc::launch_preset_fill(f, s.get()));
}

// cuBLAS on every GEMM shape of one prefill of n tokens, back to back: TFLOP/s.
double gemm_ceiling(const model::ModelConfig& c, int64_t n, kc::Storage st, const device::Stream& s,
                    const device::CublasHandle& h, int reps, bool fused_gate_up = false) {
  const std::vector<std::vector<int64_t>> shapes = gpu_gemm_shapes(c, n, fused_gate_up);
  uint64_t mx = 0, mw = 0, my = 0;
  double flop = 0;
  for (const auto& sh : shapes) {
    mx = std::max<uint64_t>(mx, static_cast<uint64_t>(sh[0] * sh[1]));
    mw = std::max<uint64_t>(mw, static_cast<uint64_t>(sh[1] * sh[2]));
    my = std::max<uint64_t>(my, static_cast<uint64_t>(sh[0] * sh[2]));
    flop +=
        2.0 * static_cast<double>(sh[0]) * static_cast<double>(sh[1]) * static_cast<double>(sh[2]);
  }
  const uint64_t e = kc::storage_bytes(st);
  device::Arena arena = device::make_device_arena((mx + mw + my) * e + 4096, "GEMM ceiling");
  device::Arena::Block x = arena.allocate(mx * e, "x"), w = arena.allocate(mw * e, "w"),
                       y = arena.allocate(my * e, "y");
  fill_random(x.data(), mx, st, 1, s);
  fill_random(w.data(), mw, st, 2, s);
  const double t = time_events(s, reps, [&] {
    for (const auto& sh : shapes) {
      kc::GemmWtParams p;
      p.x = x.data();
      p.w = w.data();
      p.y = y.data();
      p.n = sh[0];
      p.in = sh[1];
      p.out = sh[2];
      p.storage = st;
      const cublasStatus_t r = kc::gemm_wt(h.get(), p, s.get());
      if (r != CUBLAS_STATUS_SUCCESS) {
        throw make_error("bench gpu", std::string("cuBLAS GEMM failed: ") + cublasGetStatusName(r));
      }
    }
  });
  return flop / t / 1e12;
}

std::vector<int32_t> tokens(int64_t n, int vocab, uint64_t seed) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (auto& v : t) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    v = static_cast<int32_t>(x % static_cast<uint64_t>(vocab));
  }
  return t;
}

// FLOPs of one prefill of n tokens after `prefix` cached ones: GEMMs + attention (QK^T and PV
// over the keys each row sees: causal, within the sliding window; 2 FLOPs per multiply-add).
double prefill_flop(const model::ModelConfig& c, int64_t n, int64_t prefix) {
  double f = 0;
  for (const auto& sh : gpu_gemm_shapes(c, n)) {
    f += 2.0 * static_cast<double>(sh[0]) * static_cast<double>(sh[1]) * static_cast<double>(sh[2]);
  }
  double keys = 0;
  for (int64_t t = 0; t < n; ++t) {
    const int64_t seen = prefix + t + 1;
    keys += static_cast<double>(c.sliding_window > 0 ? std::min<int64_t>(seen, c.sliding_window)
                                                     : seen);
  }
  return f + 4.0 * c.n_layers * c.n_heads * c.head_dim * keys;
}

// The largest difference between two runs' logits, over the largest magnitude of `ref`'s.
double max_diff_over_max(const std::vector<float>& got, const std::vector<float>& ref) {
  double diff = 0, mag = 0;
  for (size_t i = 0; i < ref.size() && i < got.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::fabs(got[i] - ref[i])));
    mag = std::max(mag, static_cast<double>(std::fabs(ref[i])));
  }
  return mag > 0 ? diff / mag : diff;
}

json bench_model(const std::string& name, const BenchGpuOptions& o, kc::Storage st,
                 const device::Stream& s, const device::CublasHandle& h, double d2d) {
  auto src = model::ModelSource::open(name);
  const model::ModelConfig& c = src->config();
  std::fprintf(stderr, "bench gpu: %s: generating weights on the device...\n", name.c_str());
  model::CudaModel m(c, model::PresetWeights{o.seed}, {st, o.device});
  const model::CudaKernelPaths dflt = m.kernel_paths();
  // The default's baseline in every row: the separate launches (no fusion) and the CUDA-core
  // decode attention, the default until the fused paths ran on a GPU (2026-11-27).
  model::CudaKernelPaths previous = dflt;
  previous.decode_fusion = previous.mlp_fusion = previous.rope_append_fusion = false;
  previous.decode_attention = previous.decode_pdl = false;
  // dflt with one field changed.
  const auto but = [&](bool model::CudaKernelPaths::*field, bool on) {
    model::CudaKernelPaths p = dflt;
    p.*field = on;
    return p;
  };
  // fn() with `paths` in effect, then the defaults again.
  const auto with_paths = [&](const model::CudaKernelPaths& paths, const auto& fn) {
    m.set_kernel_paths(paths);
    const double t = fn();
    m.set_kernel_paths(dflt);
    return t;
  };
  json prefill = json::array();
  const int64_t max_prompt = *std::max_element(o.prompts.begin(), o.prompts.end());
  const int64_t bs = 16;
  // Slots a decoding sequence needs: its history plus o.decode_steps * (o.reps + 1) tokens;
  // each variant starts again from the history (time_steps truncates back to it).
  const int64_t decode_len = o.decode_context + o.decode_steps * (o.reps + 1);
  const bool decode_kernel_fits = c.head_dim == 64 || c.head_dim == 128;
  // The default runs gate and up as one GEMM (gpu_gemm_shapes' MLP, mlp_fusion): its prefill
  // also has a ceiling of its own at those shapes.
  const bool fused_shapes = c.arch != model::Arch::Falcon && dflt.mlp_fusion;
  int64_t blocks = (o.prefix + max_prompt) / bs + 1;
  for (int64_t b : o.batches) blocks = std::max(blocks, b * (decode_len / bs + 1));
  kv::KvConfig kvc = m.kv_config(static_cast<int>(blocks), static_cast<int>(bs));
  kvc.host_pools = false;
  kv::KvCache cache(kvc);
  for (int64_t prompt : o.prompts) {
    if (prompt > c.max_context) {
      prefill.push_back({{"prompt", prompt}, {"skipped", "longer than the context window"}});
      continue;
    }
    const double ceiling = gemm_ceiling(c, prompt, st, s, h, o.reps);
    const double fused_ceiling =
        fused_shapes ? gemm_ceiling(c, prompt, st, s, h, o.reps, true) : ceiling;
    std::vector<int64_t> prefixes = {0};
    if (o.prefix > 0) prefixes.push_back(o.prefix);
    for (int64_t prefix : prefixes) {
      if (prefix > 0 && prefix + prompt > c.max_context) {
        prefill.push_back({{"prompt", prompt},
                           {"prefix", prefix},
                           {"skipped", "prefix + prompt longer than the context window"}});
        continue;
      }
      const std::vector<int32_t> pre = tokens(std::max<int64_t>(prefix, 1), c.vocab_size, 3);
      const std::vector<int32_t> toks = tokens(prompt, c.vocab_size, 4);
      // Median seconds of the prompt's forward; `logits` gets the last one's.
      const auto time_prefill = [&](std::vector<float>* logits, bool profile) {
        std::vector<double> times;
        for (int r = 0; r <= o.reps; ++r) {  // r == 0 warms up
          if (cache.has_sequence(0)) cache.free_sequence(0);
          cache.add_sequence(0);
          if (!cache.reserve(0, prefix + prompt)) throw Error("bench gpu: KV pool too small");
          if (prefix > 0) {
            m.forward({{0, std::vector<int32_t>(pre.begin(), pre.begin() + prefix), false}}, cache);
          }
          const bool profiled = profile && r == o.reps;
          if (profiled) (void)cudaProfilerStart();
          const auto t0 = Clock::now();
          *logits = m.forward({{0, toks, false}}, cache);  // returns once they are on the host
          if (r > 0) times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
          if (profiled) (void)cudaProfilerStop();
        }
        return metrics::median(times);
      };
      std::vector<float> logits;
      const double tm = time_prefill(&logits, o.profile_phase == "prefill");
      const double flop = prefill_flop(c, prompt, prefix);
      const double tflops = flop / tm / 1e12;
      json row = {{"prompt", prompt},
                  {"prefix", prefix},
                  {"seconds", tm},
                  {"tok_s", static_cast<double>(prompt) / tm},
                  {"tflops", tflops},
                  {"gemm_ceiling_tflops", ceiling},
                  {"ratio_to_gemm_ceiling", tflops / ceiling}};
      char fused_note[64] = "";
      if (fused_shapes) {
        row["fused_gemm_ceiling_tflops"] = fused_ceiling;
        row["ratio_to_fused_gemm_ceiling"] = tflops / fused_ceiling;
        std::snprintf(fused_note, sizeof fused_note, " (%.0f%% at the fused gate|up shapes)",
                      100.0 * tflops / fused_ceiling);
      }
      std::fprintf(stderr,
                   "bench gpu: %s prefill %lld (+%lld prefix): %.0f tok/s, %.0f%% of GEMM%s\n",
                   name.c_str(), static_cast<long long>(prompt), static_cast<long long>(prefix),
                   static_cast<double>(prompt) / tm, 100.0 * tflops / ceiling, fused_note);
      // The same prefill with `paths`, as `key`_* keys of the row: its speed relative to the
      // default's, its share of the GEMM ceiling at the unfused shapes, and its last logits'
      // largest difference from the default's (a sanity check beside the parity tests).
      const auto alternative = [&](const char* key, const char* what,
                                   const model::CudaKernelPaths& paths) {
        std::vector<float> alt_logits;
        const double ta = with_paths(paths, [&] { return time_prefill(&alt_logits, false); });
        const double diff = max_diff_over_max(alt_logits, logits);
        const double alt_tflops = flop / ta / 1e12;
        const std::string k = key;
        row[k + "_seconds"] = ta;
        row[k + "_tok_s"] = static_cast<double>(prompt) / ta;
        row[k + "_speedup"] = tm / ta;
        row[k + "_ratio_to_gemm_ceiling"] = alt_tflops / ceiling;
        if (fused_shapes && paths.mlp_fusion) {
          row[k + "_ratio_to_fused_gemm_ceiling"] = alt_tflops / fused_ceiling;
        }
        row[k + "_logits_max_diff_over_max"] = diff;
        std::fprintf(stderr,
                     "bench gpu: %s prefill %lld (+%lld prefix) with %s: %.0f tok/s (%.2fx the "
                     "default's speed), %.0f%% of GEMM, logits differ by %.2g of their max\n",
                     name.c_str(), static_cast<long long>(prompt), static_cast<long long>(prefix),
                     what, static_cast<double>(prompt) / ta, tm / ta, 100.0 * alt_tflops / ceiling,
                     diff);
      };
      alternative("previous_default", "the previous default (separate launches)", previous);
      if (kc::attention_uses_mma(st, c.head_dim, prompt, 1)) {
        alternative("wmma", "the wmma attention kernel",
                    but(&model::CudaKernelPaths::prefill_fa2, false));
      }
      prefill.push_back(row);
    }
  }
  if (cache.has_sequence(0)) cache.free_sequence(0);
  json decode = json::array();
  // Bytes a decode step reads: every weight except an untied embedding table (gathered, a row
  // per token), plus each sequence's KV.
  const double embd = c.tied_embeddings ? 0.0
                                        : static_cast<double>(c.vocab_size) * c.hidden *
                                              static_cast<double>(kc::storage_bytes(st));
  const double weight_bytes = static_cast<double>(m.weight_bytes()) - embd;
  const double kv_token = static_cast<double>(c.kv_bytes_per_token()) *
                          static_cast<double>(kc::storage_bytes(st)) / 2.0;
  for (int64_t b : o.batches) {
    const auto id_of = [](int64_t i) { return static_cast<kv::SeqId>(100 + i); };
    for (int64_t i = 0; i < b; ++i) {
      cache.add_sequence(id_of(i));
      if (!cache.reserve(id_of(i), decode_len)) {
        throw Error("bench gpu: KV pool too small for decoding");
      }
      m.forward({{id_of(i), tokens(o.decode_context, c.vocab_size, 10 + static_cast<uint64_t>(i)),
                  false}},
                cache);
    }
    // Median seconds per step over o.reps repetitions of o.decode_steps steps (after one
    // warm-up), from the sequences' histories; they grow by o.decode_steps * (o.reps + 1)
    // tokens, then go back to their histories, so that every variant reads the same KV bytes.
    const auto time_steps = [&] {
      std::vector<double> step_t;
      for (int r = 0; r <= o.reps; ++r) {
        const auto t0 = Clock::now();
        for (int64_t k = 0; k < o.decode_steps; ++k) {
          std::vector<model::SeqInput> in;
          for (int64_t i = 0; i < b; ++i) {
            in.push_back({id_of(i), {static_cast<int32_t>((k * 31 + i) % c.vocab_size)}, false});
          }
          m.forward(in, cache);
        }
        if (r > 0) {
          step_t.push_back(std::chrono::duration<double>(Clock::now() - t0).count() /
                           static_cast<double>(o.decode_steps));
        }
      }
      for (int64_t i = 0; i < b; ++i) {
        cache.truncate(id_of(i), o.decode_context);
        if (!cache.reserve(id_of(i), decode_len)) throw Error("bench gpu: KV pool too small");
      }
      return metrics::median(step_t);
    };
    // A profiler started with --profile-from-start off (ncu, nsys) sees these decode steps
    // (with --profile-phase decode), or the default's last timed prefill (prefill).
    if (o.profile_phase == "decode") (void)cudaProfilerStart();
    const double t = time_steps();
    if (o.profile_phase == "decode") (void)cudaProfilerStop();
    // The mean context of the timed steps: the warm-up's o.decode_steps tokens, then half of
    // the o.reps timed repetitions' growth.
    const double ctx = static_cast<double>(o.decode_context) + o.decode_steps * (o.reps + 2) / 2.0;
    const double bytes = weight_bytes + static_cast<double>(b) * ctx * kv_token;
    json row = {{"batch", b},
                {"context", o.decode_context},
                {"seconds_per_step", t},
                {"tok_s", static_cast<double>(b) / t},
                {"hbm_gbs", bytes / t / 1e9},
                {"ratio_to_copy_ceiling", bytes / t / 1e9 / d2d}};
    std::fprintf(stderr,
                 "bench gpu: %s decode batch %lld: %.1f tok/s, %.0f GB/s (%.0f%% of copy)\n",
                 name.c_str(), static_cast<long long>(b), static_cast<double>(b) / t,
                 bytes / t / 1e9, 100.0 * bytes / t / 1e9 / d2d);
    // The same steps with `paths`, as `key`_* keys of the row: its speed relative to the
    // default's and its share of the copy ceiling (the same bytes a step).
    const auto alternative = [&](const char* key, const char* what,
                                 const model::CudaKernelPaths& paths) {
      const double tv = with_paths(paths, time_steps);
      const std::string k = key;
      row[k + "_seconds_per_step"] = tv;
      row[k + "_tok_s"] = static_cast<double>(b) / tv;
      row[k + "_speedup"] = t / tv;
      row[k + "_ratio_to_copy_ceiling"] = bytes / tv / 1e9 / d2d;
      std::fprintf(stderr,
                   "bench gpu: %s decode batch %lld with %s: %.1f tok/s (%.2fx the default's "
                   "speed, %.0f%% of copy)\n",
                   name.c_str(), static_cast<long long>(b), what, static_cast<double>(b) / tv,
                   t / tv, 100.0 * bytes / tv / 1e9 / d2d);
    };
    using P = model::CudaKernelPaths;
    // Whether decode's GEMVs take RMSNorm in (CudaKernelPaths::decode_fusion: 1-4 rows,
    // fp16/bf16, RMSNorm models but Falcon); the norm GEMV of gate and up then runs their
    // SwiGLU in the same launch whatever mlp_fusion says.
    const bool gemv_rows =
        b <= kc::kGemvMaxRows && (st == kc::Storage::F16 || st == kc::Storage::BF16);
    const bool norm_folds =
        gemv_rows && c.norm == model::NormType::RmsNorm && c.arch != model::Arch::Falcon;
    alternative("previous_default", "the previous default (separate launches, CUDA-core attention)",
                previous);
    if (o.opt_ins) {
      // Each fused path of the default turned off alone.
      if (decode_kernel_fits) {
        alternative("cuda_core_attention", "the CUDA-core attention kernel",
                    but(&P::decode_attention, false));
      }
      // Where the norm is folded in, this times RoPE and the append launched apart only.
      P unfused = dflt;
      unfused.mlp_fusion = unfused.rope_append_fusion = false;
      alternative("unfused_launches",
                  norm_folds && dflt.decode_fusion
                      ? "RoPE and the append launched apart (gate and up stay fused in "
                        "the norm GEMV)"
                      : "RoPE, append, gate and up launched apart",
                  unfused);
      // An opt-in: the decode attention's keys over finer splits.
      alternative("more_splits", "decode attention over finer key splits",
                  but(&P::decode_more_splits, true));
      if (decode_kernel_fits) {
        // An opt-in: RoPE and the append folded into the decode attention launch; and with
        // the finer splits too, as both would be adopted together.
        alternative("rope_in_attention", "RoPE and the append in the decode attention launch",
                    but(&P::decode_rope_fusion, true));
        P both = dflt;
        both.decode_rope_fusion = both.decode_more_splits = true;
        alternative("rope_and_splits", "RoPE in attention and finer splits", both);
      }
    }
    if (gemv_rows) {
      // cuBLAS for every linear layer: the GEMV kernel's baseline.
      alternative("cublas", "cuBLAS GEMVs", but(&P::decode_gemv, false));
      if (o.opt_ins && norm_folds) {
        alternative("unfused_norm", "RMSNorm and SwiGLU launched apart from the GEMVs",
                    but(&P::decode_fusion, false));
      }
      if (o.opt_ins && kc::gemv_pdl_supported()) {  // sm_90 kernels
        alternative("pdl", "PDL-launched GEMVs", but(&P::decode_pdl, true));
      }
      if (o.opt_ins) {
        alternative("l2_prefetch", "the weights after attention prefetched into L2",
                    but(&P::decode_l2_prefetch, true));
        if (b == 1) {  // (deep applies at one row only)
          alternative("deep_gemv", "GEMVs with four weight vectors in flight a lane",
                      but(&P::decode_gemv_deep, true));
        }
      }
    }
    decode.push_back(row);
    for (int64_t i = 0; i < b; ++i) cache.free_sequence(id_of(i));
  }
  return {{"model", name},
          {"layers", c.n_layers},
          {"parameters", model::parameter_count(c)},
          {"weight_bytes", m.weight_bytes()},
          {"prefill", prefill},
          {"decode", decode}};
}

// KV restore from pinned host staging into paged blocks, and KV capture to pinned host, for
// `tokens` tokens of every layer of `c`. The restore runs two ways, interleaved rep by rep with
// one host-to-device copy of the same bytes (the ceiling next to it in time):
// - on one stream: each layer's copies, then its kernel, layer after layer;
// - pipelined, as a serving engine preloads (the design's read stream): the copies on a second
//   stream into two staging slots, so layer l+1's copy runs while layer l's kernel does; events
//   order each kernel after its copy and each slot's reuse after the kernel that read it.
json bench_kv(const model::ModelConfig& c, int64_t n, kc::Storage st, const device::Stream& s,
              int reps, double h2d) {
  const int64_t kvd = c.kv_dim(), bs = 16;
  const uint64_t e = kc::storage_bytes(st);
  const uint64_t layer_bytes = static_cast<uint64_t>(n * kvd) * e;  // K or V of one layer
  const uint64_t all_bytes = 2 * layer_bytes * static_cast<uint64_t>(c.n_layers);
  const int64_t blocks = (n + bs - 1) / bs;
  device::HostBuffer host(all_bytes);
  require_cuda_pinned(host, "KV restore and capture");
  const uint64_t pool = static_cast<uint64_t>(blocks * bs * kvd) * e;
  device::Arena arena = device::make_device_arena(
      2 * pool * static_cast<uint64_t>(c.n_layers) + all_bytes + 4 * layer_bytes + (4 << 20),
      "KV bench");
  std::vector<device::Arena::Block> kp, vp;
  for (int l = 0; l < c.n_layers; ++l) {
    kp.push_back(arena.allocate(pool, "k"));
    vp.push_back(arena.allocate(pool, "v"));
  }
  device::Arena::Block ks[2] = {arena.allocate(layer_bytes, "k staging"),
                                arena.allocate(layer_bytes, "k staging")};
  device::Arena::Block vs[2] = {arena.allocate(layer_bytes, "v staging"),
                                arena.allocate(layer_bytes, "v staging")};
  device::Arena::Block whole = arena.allocate(all_bytes, "one copy");
  device::Arena::Block table = arena.allocate(static_cast<uint64_t>(blocks) * 4, "table");
  std::vector<int32_t> t(static_cast<size_t>(blocks));
  for (int64_t b = 0; b < blocks; ++b)
    t[static_cast<size_t>(b)] = static_cast<int32_t>(blocks - 1 - b);
  CB_CUDA_CHECK(
      cudaMemcpyAsync(table.data(), t.data(), t.size() * 4, cudaMemcpyHostToDevice, s.get()));
  std::memset(host.data(), 0, host.size());
  char* hp = static_cast<char*>(host.data());

  auto copy_layer = [&](int l, int slot, const device::Stream& on) {
    CB_CUDA_CHECK(cudaMemcpyAsync(ks[slot].data(), hp + 2 * l * layer_bytes, layer_bytes,
                                  cudaMemcpyHostToDevice, on.get()));
    CB_CUDA_CHECK(cudaMemcpyAsync(vs[slot].data(), hp + (2 * l + 1) * layer_bytes, layer_bytes,
                                  cudaMemcpyHostToDevice, on.get()));
  };
  auto restore_layer = [&](int l, int slot) {
    kc::KvRestoreParams p;
    p.k_stage = ks[slot].data();
    p.v_stage = vs[slot].data();
    p.k_pool = kp[static_cast<size_t>(l)].data();
    p.v_pool = vp[static_cast<size_t>(l)].data();
    p.view = {static_cast<const int32_t*>(table.data()), bs, kvd};
    p.n = n;
    p.heads = c.n_kv_heads;
    p.head_dim = c.head_dim;
    p.rope_dims = c.rope_dims;
    p.theta = c.rope_theta;
    p.storage = st;
    CB_CUDA_CHECK(kc::launch_kv_restore(p, s.get()));
  };
  auto one_copy = [&] {
    CB_CUDA_CHECK(cudaMemcpyAsync(whole.data(), hp, all_bytes, cudaMemcpyHostToDevice, s.get()));
  };
  auto serial = [&] {
    for (int l = 0; l < c.n_layers; ++l) {
      copy_layer(l, 0, s);
      restore_layer(l, 0);
    }
  };
  device::Stream cs;
  device::Event begun(false);
  device::Event copied[2] = {device::Event(false), device::Event(false)};
  device::Event consumed[2] = {device::Event(false), device::Event(false)};
  auto pipelined = [&] {
    begun.record(s);
    begun.wait_on(cs);
    for (int l = 0; l < c.n_layers; ++l) {
      const int slot = l & 1;
      if (l >= 2) consumed[slot].wait_on(cs);  // layer l-2's kernel has read this slot
      copy_layer(l, slot, cs);
      copied[slot].record(cs);
      copied[slot].wait_on(s);
      restore_layer(l, slot);
      consumed[slot].record(s);
    }
    // The last kernel waited for the last copy, so `s` now ends after all of `cs`'s work.
  };
  std::vector<double> t_copy, t_serial, t_pipe;
  for (int r = 0; r <= reps; ++r) {  // round 0 warms up
    const double a = time_once(s, one_copy);
    const double b = time_once(s, serial);
    const double d = time_once(s, pipelined);
    if (r == 0) continue;
    t_copy.push_back(a);
    t_serial.push_back(b);
    t_pipe.push_back(d);
  }
  const double t_restore = metrics::median(t_serial);
  const double t_pipelined = metrics::median(t_pipe);
  const double h2d_here = static_cast<double>(all_bytes) / metrics::median(t_copy) / 1e9;

  const double t_capture = time_events(s, reps, [&] {
    for (int l = 0; l < c.n_layers; ++l) {
      kc::KvCaptureParams p;
      p.k_src = kp[static_cast<size_t>(l)].data();
      p.v_src = vp[static_cast<size_t>(l)].data();
      p.src_stride = kvd;
      p.k_stage = ks[0].data();
      p.v_stage = vs[0].data();
      p.n = n;
      p.kv_dim = kvd;
      p.storage = st;
      CB_CUDA_CHECK(kc::launch_kv_capture(p, s.get()));
      CB_CUDA_CHECK(cudaMemcpyAsync(hp + 2 * l * layer_bytes, ks[0].data(), layer_bytes,
                                    cudaMemcpyDeviceToHost, s.get()));
      CB_CUDA_CHECK(cudaMemcpyAsync(hp + (2 * l + 1) * layer_bytes, vs[0].data(), layer_bytes,
                                    cudaMemcpyDeviceToHost, s.get()));
    }
  });
  const double bytes = static_cast<double>(all_bytes);
  const double gbs = bytes / t_restore / 1e9, pipe_gbs = bytes / t_pipelined / 1e9;
  std::fprintf(stderr,
               "bench gpu: %s KV restore of %lld tokens: %.1f GB/s on one stream, %.1f GB/s "
               "pipelined; one copy of the same bytes %.1f GB/s\n",
               c.name.c_str(), static_cast<long long>(n), gbs, pipe_gbs, h2d_here);
  return {{"model", c.name},
          {"tokens", n},
          {"bytes", bytes},
          {"restore_gbs", gbs},
          {"restore_ratio_to_h2d", gbs / h2d},
          {"restore_pipelined_gbs", pipe_gbs},
          {"restore_pipelined_ratio_to_h2d", pipe_gbs / h2d},
          {"h2d_same_bytes_gbs", h2d_here},
          {"restore_pipelined_ratio_to_same_bytes_h2d", pipe_gbs / h2d_here},
          {"capture_to_host_gbs", bytes / t_capture / 1e9}};
}

}  // namespace

GpuCopyRates measure_copy_rates(int device, int64_t mib, int reps) {
  const device::GpuInfo g = device::use_gpu(device, "--backend cuda", "use --backend cpu");
  BenchGpuOptions o;
  o.copy_mib = mib;
  o.reps = reps;
  device::Stream s;
  GpuCopyRates r;
  const json j = copy_ceilings(o, s, &r.d2d_gbps, &r.h2d_gbps);
  r.d2h_gbps = j.at("d2h_pinned_gbs").get<double>();
  r.device = g.name;
  r.memory_bytes = static_cast<double>(g.total_bytes);
  r.free_bytes = static_cast<double>(device::device_memory_info().free);
  return r;
}

json bench_gpu(const BenchGpuOptions& o) {
  const device::GpuInfo g = device::use_gpu(
      o.device, "bench gpu",
      "run it on a machine with an NVIDIA GPU (`bench cpu` measures the CPU backend)");
  const kc::Storage st = storage_of(o.storage);
  device::Stream s;
  device::CublasHandle h;
  double d2d = 0, h2d = 0;
  std::fprintf(stderr, "bench gpu: %s, copy ceilings...\n", g.name.c_str());
  json out;
  out["device"] = {
      {"name", g.name},
      {"compute_capability", std::to_string(g.cc_major) + "." + std::to_string(g.cc_minor)},
      {"memory_bytes", g.total_bytes},
      {"cuda_runtime", device::cuda_runtime_version()}};
  out["storage"] = o.storage;
  out["reps"] = o.reps;
  out["ceilings"] = copy_ceilings(o, s, &d2d, &h2d);
  json models = json::array();
  json kv = json::array();
  for (const std::string& name : o.models) {
    models.push_back(bench_model(name, o, st, s, h, d2d));
    auto src = model::ModelSource::open(name);
    kv.push_back(bench_kv(src->config(), std::min<int64_t>(2048, src->config().max_context), st, s,
                          o.reps, h2d));
  }
  out["models"] = models;
  out["kv"] = kv;
  return out;
}

}  // namespace cb::eval
