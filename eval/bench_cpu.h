#pragma once
/// `cachebench bench cpu`: prefill and decode throughput of the CPU backend, and, in the
/// same run, the sgemm rate of this machine at exactly the GEMM shapes the model runs:
/// the physical reference the model's throughput is reported against; decode attention by
/// both CPU kernels, against a plain read of the K/V slots they read.

#include <cstdint>
#include <string>
#include <vector>

#include "lib/model/model.h"

namespace cb::eval {

struct BenchCpuOptions {
  int prompt_tokens = 512;
  int decode_tokens = 32;
  int reps = 5;
  uint64_t seed = 1;
};

struct BenchCpuResult {
  int prompt_tokens = 0, decode_tokens = 0, reps = 0;
  double prefill_s = 0;  ///< median wall time of one prefill
  double prefill_tok_s = 0;
  double prefill_gflop = 0;       ///< model FLOPs of one prefill (GEMMs + attention)
  double prefill_gflops = 0;      ///< achieved GFLOP/s
  double gemm_only_s = 0;         ///< median time of the prefill's GEMMs run alone
  double sgemm_gflops = 0;        ///< sgemm rate at the prefill's shapes
  double gemm_share = 0;          ///< gemm_only_s / prefill_s
  double ratio_to_sgemm = 0;      ///< prefill_gflops / sgemm_gflops
  double decode_s_per_token = 0;  ///< median
  double decode_tok_s = 0;
  double decode_gemm_gflops = 0;  ///< sgemm rate at the decode shapes (n = 1)
  double decode_weight_gbs = 0;   ///< fp32 weight bytes read per second while decoding
  /// Decode attention at the end of the context (prompt + decode tokens), every layer once,
  /// the model's KV cache as the run left it: the two CPU kernels side by side (medians).
  int64_t attn_ctx = 0;
  double attn_sgemm_s = 0;     ///< paged_attention_sgemm, one decode step's calls
  double attn_direct_s = 0;    ///< paged_attention_direct, the same calls
  double attn_speedup = 0;     ///< sgemm time / direct time, per repetition, median
  double attn_kv_bytes = 0;    ///< K and V bytes those calls must read
  double attn_direct_gbs = 0;  ///< attn_kv_bytes / attn_direct_s
  double read_gbs = 0;         ///< a plain read of the same K/V slots (the ceiling)
  int64_t attn_threads = 1;    ///< threads of the direct kernel (a layer's call) and the read
  double attn_to_read = 0;     ///< attn_direct_gbs / read_gbs, per repetition, median
  /// The model's weight storage ("f32" or "bf16") and the bytes its decode reads per token
  /// from its linear layers and LM head.
  std::string weights = "f32";
  double decode_weight_bytes = 0;
  /// One layer's linear layers (random weights of the model's shapes) by both storages as the
  /// backend runs them (matmul_wt_f32, matmul_wt_bf16), the same inputs: at one row (decode)
  /// against a read of the bf16 bytes by as many threads as the GEMV uses; at the prompt's rows
  /// (prefill). Medians of per-repetition times and ratios.
  double lin_decode_f32_s = 0, lin_decode_bf16_s = 0;
  double lin_decode_speedup = 0;  ///< f32 time / bf16 time
  double lin_bf16_gbs = 0;        ///< bf16 bytes / lin_decode_bf16_s
  double lin_read_gbs = 0;        ///< the same bytes, read
  double lin_bf16_to_read = 0;    ///< lin_bf16_gbs / lin_read_gbs
  double lin_prefill_f32_s = 0, lin_prefill_bf16_s = 0;
  double lin_prefill_ratio = 0;  ///< f32 time / bf16 time (below 1: bf16 is slower)
};

/// Runs the benchmark; `progress` lines go to stderr.
BenchCpuResult bench_cpu(const model::Model& m, const BenchCpuOptions& opt);

/// The (n, in, out) GEMM shapes of one forward of n tokens, in execution order.
std::vector<std::vector<int64_t>> gemm_shapes(const model::ModelConfig& c, int64_t n);

}  // namespace cb::eval
