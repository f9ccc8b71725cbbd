// Linear layers with bfloat16 weights (the CPU backend's --cpu-weights bf16): half the bytes
// of fp32 weights, fp32 math. A bfloat16 is the top half of an fp32, so widening is a shift.
// And the same GEMV over fp32 weights, for decode's few rows.
//
// - Few rows (decode): a GEMV that streams the weight rows once per group of up to four input
//   rows, bf16 widened in registers (AVX2+FMA when the CPU has them, else SSE2; plain C++ off
//   x86), output rows split over threads when the matrix is large; with AVX2 four output rows
//   at a time for one input row, two for two (a core reads several streams faster than one).
//   Each output element is one thread's fixed-order sum, the same for any thread count and
//   any number of input rows. OpenBLAS's sgemm at one to four rows read the weights at about
//   half the GEMV's rate on the same two threads (docs/perf.md): fp32 weights take the GEMV
//   too, up to kF32GemvMaxRows rows.
// - Many rows (prefill): blocks of weight rows widened into an fp32 scratch, then sgemm.
// No BLAS has a bf16 GEMM here (OpenBLAS's sbgemm is a build option Debian's lacks).

#include <cblas.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CB_BF16_X86 1
#else
#define CB_BF16_X86 0
#endif

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/ops.h"
#include "kernels/cpu/parts.h"

namespace cb::kernels::cpu {
namespace {

inline float widen(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
inline float widen(float f) {
  return f;
}

// s plus the products of weights [from, in) of the row wr with the row xr: the scalar sum, and
// the vector loops' tail. W: uint16_t (bf16) or float. Always inlined, so each GEMV form's tail
// is compiled for that form's instruction set (GCC contracts a * b + c into an FMA under
// target("avx2,fma")): every form with the same ISA computes a tail the same way.
template <typename W>
__attribute__((always_inline)) inline float add_products(float s, const W* wr, const float* xr,
                                                         int64_t from, int64_t in) {
  for (int64_t j = from; j < in; ++j) s += widen(wr[j]) * xr[j];
  return s;
}

// y[r * ldy + o] for o in [o0, o1), r < R (R <= 4), in plain C++ (machines without SSE2).
template <typename W, int R>
void gemv_scalar(const float* x, int64_t ldx, const W* w, int64_t in, float* y, int64_t ldy,
                 int64_t o0, int64_t o1) {
  for (int64_t o = o0; o < o1; ++o) {
    const W* wr = w + o * in;
    for (int r = 0; r < R; ++r) y[r * ldy + o] = add_products(0.0f, wr, x + r * ldx, 0, in);
  }
}

#if CB_BF16_X86
// Eight weights from w as two vectors of four fp32.
inline void load8(const uint16_t* w, __m128* lo, __m128* hi) {
  const __m128i zero = _mm_setzero_si128();
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w));
  *lo = _mm_castsi128_ps(_mm_unpacklo_epi16(zero, v));
  *hi = _mm_castsi128_ps(_mm_unpackhi_epi16(zero, v));
}
inline void load8(const float* w, __m128* lo, __m128* hi) {
  *lo = _mm_loadu_ps(w);
  *hi = _mm_loadu_ps(w + 4);
}

// The same in the SSE2 instruction set, eight weights an iteration.
template <typename W, int R>
void gemv_sse2(const float* x, int64_t ldx, const W* w, int64_t in, float* y, int64_t ldy,
               int64_t o0, int64_t o1) {
  for (int64_t o = o0; o < o1; ++o) {
    const W* wr = w + o * in;
    __m128 a0[R], a1[R];
    for (int r = 0; r < R; ++r) a0[r] = a1[r] = _mm_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= in; i += 8) {
      __m128 lo, hi;
      load8(wr + i, &lo, &hi);
      for (int r = 0; r < R; ++r) {
        a0[r] = _mm_add_ps(a0[r], _mm_mul_ps(lo, _mm_loadu_ps(x + r * ldx + i)));
        a1[r] = _mm_add_ps(a1[r], _mm_mul_ps(hi, _mm_loadu_ps(x + r * ldx + i + 4)));
      }
    }
    for (int r = 0; r < R; ++r) {
      alignas(16) float lane[4];
      _mm_store_ps(lane, _mm_add_ps(a0[r], a1[r]));
      float s = (lane[0] + lane[1]) + (lane[2] + lane[3]);
      y[r * ldy + o] = add_products(s, wr, x + r * ldx, i, in);
    }
  }
}

// Sixteen weights from w as two vectors of eight fp32.
__attribute__((target("avx2,fma"))) inline void load16(const uint16_t* w, __m256* w0, __m256* w1) {
  const __m256i v0 = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w)));
  const __m256i v1 =
      _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 8)));
  *w0 = _mm256_castsi256_ps(_mm256_slli_epi32(v0, 16));
  *w1 = _mm256_castsi256_ps(_mm256_slli_epi32(v1, 16));
}
__attribute__((target("avx2,fma"))) inline void load16(const float* w, __m256* w0, __m256* w1) {
  *w0 = _mm256_loadu_ps(w);
  *w1 = _mm256_loadu_ps(w + 8);
}

// Output rows [o, o + B) for R input rows with 256-bit vectors and fused multiply-adds, 16
// weights an iteration. Each output's sum is the same whatever B: B rows at once only make B
// streams of weights (a core reads several streams faster than one) and share the loads of x.
template <typename W, int R, int B>
__attribute__((target("avx2,fma"))) inline void gemv_avx2_rows(const float* x, int64_t ldx,
                                                               const W* w, int64_t in, float* y,
                                                               int64_t ldy, int64_t o) {
  __m256 a0[B][R], a1[B][R];
#pragma GCC unroll 4
  for (int b = 0; b < B; ++b)
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) a0[b][r] = a1[b][r] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= in; i += 16) {
    __m256 w0[B], w1[B];
#pragma GCC unroll 4
    for (int b = 0; b < B; ++b) load16(w + (o + b) * in + i, &w0[b], &w1[b]);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m256 x0 = _mm256_loadu_ps(x + r * ldx + i);
      const __m256 x1 = _mm256_loadu_ps(x + r * ldx + i + 8);
#pragma GCC unroll 4
      for (int b = 0; b < B; ++b) {
        a0[b][r] = _mm256_fmadd_ps(w0[b], x0, a0[b][r]);
        a1[b][r] = _mm256_fmadd_ps(w1[b], x1, a1[b][r]);
      }
    }
  }
  for (int b = 0; b < B; ++b) {
    const W* wr = w + (o + b) * in;
    for (int r = 0; r < R; ++r) {
      alignas(32) float lane[8];
      _mm256_store_ps(lane, _mm256_add_ps(a0[b][r], a1[b][r]));
      float s =
          ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
      y[r * ldy + o + b] = add_products(s, wr, x + r * ldx, i, in);
    }
  }
}

// Output rows [o0, o1) for R input rows: kAvx2Block(R) output rows at a time (at most eight
// accumulators), the rest one at a time.
constexpr int kAvx2Block(int rows) {
  return rows == 1 ? 4 : rows == 2 ? 2 : 1;
}
template <typename W, int R>
__attribute__((target("avx2,fma"))) void gemv_avx2(const float* x, int64_t ldx, const W* w,
                                                   int64_t in, float* y, int64_t ldy, int64_t o0,
                                                   int64_t o1) {
  constexpr int B = kAvx2Block(R);
  int64_t o = o0;
  for (; o + B <= o1; o += B) gemv_avx2_rows<W, R, B>(x, ldx, w, in, y, ldy, o);
  for (; o < o1; ++o) gemv_avx2_rows<W, R, 1>(x, ldx, w, in, y, ldy, o);
}

#endif  // CB_BF16_X86

template <typename W>
using GemvFn = void (*)(const float*, int64_t, const W*, int64_t, float*, int64_t, int64_t,
                        int64_t);

template <typename W>
GemvFn<W> pick(Bf16Isa isa, int rows) {
#if CB_BF16_X86
  static const GemvFn<W> base[4] = {gemv_sse2<W, 1>, gemv_sse2<W, 2>, gemv_sse2<W, 3>,
                                    gemv_sse2<W, 4>};
  static const GemvFn<W> avx[4] = {gemv_avx2<W, 1>, gemv_avx2<W, 2>, gemv_avx2<W, 3>,
                                   gemv_avx2<W, 4>};
  return (isa == Bf16Isa::Avx2Fma ? avx : base)[rows - 1];
#else
  (void)isa;
  static const GemvFn<W> base[4] = {gemv_scalar<W, 1>, gemv_scalar<W, 2>, gemv_scalar<W, 3>,
                                    gemv_scalar<W, 4>};
  return base[rows - 1];
#endif
}

// Output rows [o0, o1) for every input row, in groups of four input rows.
template <typename W>
void gemv_part(Bf16Isa isa, const float* x, const W* w, float* y, int64_t n, int64_t in,
               int64_t out, int64_t o0, int64_t o1) {
  for (int64_t r = 0; r < n; r += 4) {
    const int rows = static_cast<int>(std::min<int64_t>(4, n - r));
    pick<W>(isa, rows)(x + r * in, in, w, in, y + r * out, out, o0, o1);
  }
}

// At least this many weights a thread: below it, starting a thread costs more than it saves.
constexpr int64_t kWeightsPerThread = int64_t{1} << 21;

int64_t gemv_parts(int64_t in, int64_t out, int threads) {
  const int64_t parts =
      std::min<int64_t>(threads, std::max<int64_t>(1, out * in / kWeightsPerThread));
  return std::min(parts, out);
}

// The GEMV behind matmul_wt_bf16_gemv and matmul_wt_f32_gemv: nothing for no rows or outputs;
// an `isa` this CPU lacks falls back to Baseline.
template <typename W>
void gemv(Bf16Isa isa, const float* x, const W* w, float* y, int64_t n, int64_t in, int64_t out,
          int threads) {
  if (n <= 0 || out <= 0) return;
  if (isa == Bf16Isa::Avx2Fma && bf16_best_isa() != Bf16Isa::Avx2Fma) isa = Bf16Isa::Baseline;
  threads = std::max(1, threads);
  const int64_t parts = gemv_parts(in, out, threads);
  run_parts(parts, [&](int64_t p) {
    gemv_part(isa, x, w, y, n, in, out, out * p / parts, out * (p + 1) / parts);
  });
}

// dst[i] = widen(src[i]) for i < n, eight at a time with SSE2 where there is SSE2.
void widen_n(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
#if CB_BF16_X86
  const __m128i zero = _mm_setzero_si128();
  for (; i + 8 <= n; i += 8) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm_storeu_ps(dst + i, _mm_castsi128_ps(_mm_unpacklo_epi16(zero, v)));
    _mm_storeu_ps(dst + i + 4, _mm_castsi128_ps(_mm_unpackhi_epi16(zero, v)));
  }
#endif
  for (; i < n; ++i) dst[i] = widen(src[i]);
}

// Weight rows widened a block at a time (about 16 MiB of fp32, at least 512 rows: narrower
// blocks cost sgemm more than the scratch saves), each block one sgemm.
void widen_then_sgemm(const float* x, const uint16_t* w, float* y, int64_t n, int64_t in,
                      int64_t out) {
  const int64_t block = std::min(out, std::max<int64_t>(512, (int64_t{1} << 22) / in));
  std::vector<float> wf(static_cast<size_t>(block * in));
  const int64_t max_rows = std::numeric_limits<blasint>::max();
  for (int64_t o0 = 0; o0 < out; o0 += block) {
    const int64_t rows_w = std::min(block, out - o0);
    const uint16_t* src = w + o0 * in;
    widen_n(src, wf.data(), rows_w * in);
    for (int64_t r = 0; r < n; r += max_rows) {
      const int64_t rows = std::min(max_rows, n - r);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(rows),
                  static_cast<blasint>(rows_w), static_cast<blasint>(in), 1.0f, x + r * in,
                  static_cast<blasint>(in), wf.data(), static_cast<blasint>(in), 0.0f,
                  y + r * out + o0, static_cast<blasint>(out));
    }
  }
}

}  // namespace

Bf16Isa bf16_best_isa() {
#if CB_BF16_X86
  static const Bf16Isa best = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? Bf16Isa::Avx2Fma
                                                                           : Bf16Isa::Baseline;
  }();
  return best;
#else
  return Bf16Isa::Baseline;
#endif
}

int64_t bf16_gemv_parts(int64_t in, int64_t out) {
  return gemv_parts(in, out, kernel_threads());
}

bool matmul_bf16_prefers_gemv(int64_t n) {
  return n <= kBf16GemvMaxRows;
}

void matmul_wt_bf16_gemv(const float* x, const uint16_t* w, float* y, int64_t n, int64_t in,
                         int64_t out, Bf16Isa isa, int threads) {
  gemv(isa, x, w, y, n, in, out, threads);
}

void matmul_wt_f32_gemv(const float* x, const float* w, float* y, int64_t n, int64_t in,
                        int64_t out, Bf16Isa isa, int threads) {
  gemv(isa, x, w, y, n, in, out, threads);
}

void matmul_wt_f32(const float* x, const float* w, float* y, int64_t n, int64_t in, int64_t out) {
  if (n <= kF32GemvMaxRows) {
    matmul_wt_f32_gemv(x, w, y, n, in, out, bf16_best_isa(), kernel_threads());
  } else {
    matmul_wt(x, w, y, n, in, out);
  }
}

void matmul_wt_bf16_blocked(const float* x, const uint16_t* w, float* y, int64_t n, int64_t in,
                            int64_t out) {
  if (n <= 0 || out <= 0) return;
  if (in <= 0) {
    std::fill(y, y + n * out, 0.0f);
    return;
  }
  widen_then_sgemm(x, w, y, n, in, out);
}

void matmul_wt_bf16(const float* x, const uint16_t* w, float* y, int64_t n, int64_t in,
                    int64_t out) {
  if (matmul_bf16_prefers_gemv(n)) {
    matmul_wt_bf16_gemv(x, w, y, n, in, out, bf16_best_isa(), kernel_threads());
  } else {
    matmul_wt_bf16_blocked(x, w, y, n, in, out);
  }
}

void embedding_bf16(const uint16_t* table, const int32_t* ids, float* out, int64_t n, int64_t dim) {
  for (int64_t t = 0; t < n; ++t) {
    const uint16_t* row = table + static_cast<int64_t>(ids[t]) * dim;
    for (int64_t i = 0; i < dim; ++i) out[t * dim + i] = widen(row[i]);
  }
}

}  // namespace cb::kernels::cpu
