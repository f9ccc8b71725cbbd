#pragma once
/// Reference CPU implementations of every op the engine runs (fp32 math). They are the
/// oracle for the CUDA kernels and the CPU backend itself. Plain pointers and sizes; no
/// dependency beyond std and BLAS. All tensors are row-major and contiguous.

#include <cstdint>

namespace cb::kernels::cpu {

/// y[n, out] = x[n, in] . w[out, in]^T (a linear layer with PyTorch weight layout), via sgemm.
void matmul_wt(const float* x, const float* w, float* y, int64_t n, int64_t in, int64_t out);

/// matmul_wt with bfloat16 weights w[out, in] (fp32 math): matmul_wt_bf16_gemv for at most
/// kBf16GemvMaxRows rows of x (decode), with the best instruction set and as many threads as
/// OpenBLAS uses (OPENBLAS_NUM_THREADS, else one a core; at most 16); matmul_wt_bf16_blocked
/// otherwise (prefill).
void matmul_wt_bf16(const float* x, const uint16_t* w, float* y, int64_t n, int64_t in,
                    int64_t out);
/// The most rows of x that matmul_wt_bf16 hands to the GEMV (about where the blocked path
/// overtakes it on a 2-core AVX2 machine at LLaMA-2-7B shapes: docs/perf.md).
constexpr int64_t kBf16GemvMaxRows = 24;
bool matmul_bf16_prefers_gemv(int64_t n);
/// Baseline: SSE2 on x86 (which every x86-64 CPU has), plain C++ elsewhere.
enum class Bf16Isa : uint8_t { Baseline, Avx2Fma };
/// Avx2Fma when this CPU has AVX2 and FMA, else Baseline.
Bf16Isa bf16_best_isa();
/// How many parts (threads) matmul_wt_bf16 splits a [out, in] matrix's GEMV into on this
/// machine: one per 2^21 weights, at most as many as OpenBLAS's threads (up to 16).
int64_t bf16_gemv_parts(int64_t in, int64_t out);
/// Streams w once per group of four rows of x, widening in registers; output rows split over
/// up to `threads` threads when w is large (the result is the same for any thread count).
/// An `isa` this CPU lacks falls back to Baseline.
void matmul_wt_bf16_gemv(const float* x, const uint16_t* w, float* y, int64_t n, int64_t in,
                         int64_t out, Bf16Isa isa, int threads);
/// The most rows of x that matmul_wt_f32 hands to the GEMV rather than sgemm: at LLaMA-2-7B's
/// shapes on the 2-core machine the GEMV read 1.7-2.1x faster than sgemm at one to four rows
/// and about as fast at six and eight, where it streams w twice (docs/perf.md).
constexpr int64_t kF32GemvMaxRows = 4;
/// matmul_wt for the CPU backend's fp32 linear layers: matmul_wt_f32_gemv for at most
/// kF32GemvMaxRows rows of x (decode), with the best instruction set and matmul_wt_bf16's
/// threads; matmul_wt (sgemm) otherwise.
void matmul_wt_f32(const float* x, const float* w, float* y, int64_t n, int64_t in, int64_t out);
/// matmul_wt_bf16_gemv's GEMV over fp32 weights: w streamed once per group of four rows of x,
/// output rows split over up to `threads` threads (the same bits for any thread count).
void matmul_wt_f32_gemv(const float* x, const float* w, float* y, int64_t n, int64_t in,
                        int64_t out, Bf16Isa isa, int threads);
/// Blocks of rows of w widened to fp32 (about 16 MiB, at least 512 rows, at a time), each
/// multiplied by sgemm.
void matmul_wt_bf16_blocked(const float* x, const uint16_t* w, float* y, int64_t n, int64_t in,
                            int64_t out);
/// embedding() from a bfloat16 table.
void embedding_bf16(const uint16_t* table, const int32_t* ids, float* out, int64_t n, int64_t dim);

/// y = x / sqrt(mean(x^2) + eps) * w, per row of `dim`. y may alias x.
void rmsnorm(const float* x, const float* w, float* y, int64_t n, int64_t dim, float eps);
/// y = (x - mean) / sqrt(var + eps) * w + b, per row of `dim` (biased variance). y may alias x.
void layernorm(const float* x, const float* w, const float* b, float* y, int64_t n, int64_t dim,
               float eps);

enum class Rope : uint8_t {
  Interleaved,  ///< pairs (2i, 2i+1): GGUF llama
  RotateHalf,   ///< pairs (i, i + rope_dims/2): Hugging Face, Falcon ("NeoX")
};
/// Rotates, in place, the first `rope_dims` of every head of x[n, heads, head_dim]; token t
/// is at position positions[t]. Pair i uses angle pos * theta^(-2i/rope_dims), computed in
/// double (exact angles at any position). rope_dims must be even and <= head_dim.
void rope(float* x, const int32_t* positions, int64_t n, int64_t heads, int64_t head_dim,
          int64_t rope_dims, float theta, Rope style);

/// out[i] = silu(gate[i]) * up[i]. out may alias gate or up.
void swiglu(const float* gate, const float* up, float* out, int64_t n);
/// In place exact GELU: x * 0.5 * (1 + erf(x / sqrt(2))) (PyTorch nn.GELU default; Falcon).
void gelu(float* x, int64_t n);
/// y[i] += x[i].
void add_inplace(float* y, const float* x, int64_t n);
/// out[t, :] = table[ids[t], :]; ids must be in [0, rows) (checked by the caller).
void embedding(const float* table, const int32_t* ids, float* out, int64_t n, int64_t dim);

/// Attention of one sequence's new queries over its paged KV cache.
/// The cache holds, per block, block_size slots of [n_kv_heads, head_dim] for K and for V;
/// slot s of the sequence is slot s % block_size of block block_table[s / block_size], and
/// slot s holds the key of position s. Query t (at position q_pos[t]) attends to the keys at
/// positions j with j <= q_pos[t] and, when window > 0, j > q_pos[t] - window (Hugging Face's
/// sliding-window definition); j < n_ctx always. Query head h uses KV head h / (n_heads /
/// n_kv_heads) (GQA/MQA). fp32 inputs, double accumulation, softmax with max subtraction;
/// scale is usually 1/sqrt(head_dim). A query with no allowed key gets an all-zero output row.
struct PagedAttention {
  const float* q = nullptr;  ///< [n_q, n_heads, head_dim]
  float* out = nullptr;      ///< [n_q, n_heads, head_dim]
  const int32_t* q_pos = nullptr;
  int64_t n_q = 0;
  int64_t n_heads = 0, n_kv_heads = 0, head_dim = 0;
  const float* k_pool = nullptr;  ///< [num_blocks, block_size, n_kv_heads, head_dim]
  const float* v_pool = nullptr;  ///< same layout as k_pool
  const int32_t* block_table = nullptr;
  int64_t block_size = 16;
  int64_t n_ctx = 0;  ///< keys valid at positions [0, n_ctx)
  int64_t window = 0;
  float scale = 1.0f;
};
void paged_attention(const PagedAttention& p);
/// Same contract as paged_attention; fp32 accumulation via sgemm (per KV head: K and V of the
/// allowed key positions gathered contiguous, one sgemm for the scores of the whole query
/// group, fp32 softmax, one sgemm for P.V); agrees with it to ~1e-5 relative. Reads only slots
/// some query may attend to. For prefill: many queries per call.
void paged_attention_sgemm(const PagedAttention& p);
/// The CPU backend's attention: paged_attention_direct when attention_prefers_direct(p), else
/// paged_attention_sgemm.
void paged_attention_fast(const PagedAttention& p);
/// Same contract as paged_attention; per query, every head's scores and P.V taken straight
/// from the pool, slot by slot in order (no gather, no BLAS), fp32 with the softmax sums in
/// double; agrees with it to ~1e-5 relative (as the sgemm kernel, scores that overflow fp32
/// give NaN). For decode: a few queries, where the sgemm kernel's gathering and packing cost
/// more than the arithmetic (docs/perf.md).
/// Calls that compute at least 2 * kDirectAttentionWorkPerThread multiply-adds of scores split
/// their query heads over kernel_threads() threads (parts.h), whole groups of a KV head where
/// there are enough KV heads; every head's output has the same bits for any split.
void paged_attention_direct(const PagedAttention& p);
/// paged_attention_direct in exactly `parts` parts (clamped to [1, n_heads]), one thread each.
void paged_attention_direct_split(const PagedAttention& p, int64_t parts);
/// The multiply-adds of scores (keys seen, over the queries, x heads x head_dim) a thread of
/// paged_attention_direct takes at least: LLaMA-2-7B's layer (32 x 128) splits from 256 keys,
/// where two threads ran as fast as one on the 2-core machine, faster beyond (docs/perf.md).
constexpr int64_t kDirectAttentionWorkPerThread = int64_t{1} << 19;
/// How many parts paged_attention_direct splits `p` into with `threads` threads: 1 for an
/// invalid shape.
int64_t direct_attention_parts(const PagedAttention& p, int threads);
/// The most queries per call that paged_attention_fast hands to paged_attention_direct.
constexpr int64_t kDirectAttentionMaxQueries = 4;
/// True when paged_attention_fast runs `p` through paged_attention_direct.
bool attention_prefers_direct(const PagedAttention& p);

}  // namespace cb::kernels::cpu
