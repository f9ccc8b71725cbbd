// Direct paged attention (see PagedAttention in ops.h): the contract of the reference in
// attention.cc, computed straight from the pool, for the calls where the sgemm kernel's fixed
// costs outweigh its arithmetic: decode, one query (or a few) per sequence, where the sgemm
// kernel gathers each KV head's keys into scratch and BLAS packs them again, all to multiply
// them by a handful of rows.
//
// Per query t (allowed keys [lo, hi]), every query head at once:
// 1. scores: one pass over the key slots in order, block run by block run, 16 keys at a time:
//    each query head's dot products with its KV head's part of those keys' rows, four keys
//    at a time (scale * q.k, fp32, eight partial sums each), stored key-major;
// 2. per head, exp(s - max) in fp32 (exp_lanes.h) and its sum in double, as the sgemm kernel
//    does;
// 3. P.V: one pass over the value slots in order, 16 at a time, each query head accumulating
//    its KV head's part of the slots' rows (four slots per pass over its fp32 output), which
//    is then divided by its sum.
// Only slots in [lo, hi] are read, so a free or NaN slot outside a query's range is never
// touched. Large calls split the query heads over threads (kernel_threads, parts.h), each
// head's output the same whatever the split.

#include <algorithm>
#include <limits>
#include <vector>

#include "kernels/cpu/attention_args.h"
#include "kernels/cpu/exp_lanes.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/parts.h"

namespace cb::kernels::cpu {
namespace {

/// a . b over n floats (N when N > 0) with eight independent partial sums (vectorizable
/// without reordering a single sum; deterministic).
template <int64_t N>
inline float dot(const float* a, const float* b, int64_t n) {
  if constexpr (N > 0) n = N;
  float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t d = 0;
  for (; d + 8 <= n; d += 8) {
    for (int i = 0; i < 8; ++i) s[i] += a[d + i] * b[d + i];
  }
  float r = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  if constexpr (N <= 0 || N % 8 != 0) {
    for (; d < n; ++d) r += a[d] * b[d];
  }
  return r;
}

/// out[m] = a . b[m * stride ...] for four rows of b, each exactly as dot<N> computes it; the
/// four sums' 32 partial sums are independent, so the additions overlap instead of waiting on
/// each other (one dot is bound by its adds' latency).
template <int64_t N>
inline void dot4(const float* a, const float* b, int64_t stride, int64_t n, float* out) {
  if constexpr (N > 0) n = N;
  float s[4][8] = {};
  int64_t d = 0;
  for (; d + 8 <= n; d += 8) {
#pragma GCC unroll 4
    for (int m = 0; m < 4; ++m) {
      const float* bm = b + m * stride;
      for (int i = 0; i < 8; ++i) s[m][i] += a[d + i] * bm[d + i];
    }
  }
#pragma GCC unroll 4
  for (int m = 0; m < 4; ++m) {
    float r =
        ((s[m][0] + s[m][1]) + (s[m][2] + s[m][3])) + ((s[m][4] + s[m][5]) + (s[m][6] + s[m][7]));
    if constexpr (N <= 0 || N % 8 != 0) {
      const float* bm = b + m * stride;
      for (int64_t e = d; e < n; ++e) r += a[e] * bm[e];
    }
    out[m] = r;
  }
}

/// a[0, n) += w * v[0, n) (n = N when N > 0), eight elements at a time; a and v do not
/// overlap, so the eight vectorize.
template <int64_t N>
inline void axpy(float* __restrict a, float w, const float* __restrict v, int64_t n) {
  if constexpr (N > 0) n = N;
  int64_t d = 0;
  for (; d + 8 <= n; d += 8) {
    for (int i = 0; i < 8; ++i) a[d + i] += w * v[d + i];
  }
  if constexpr (N <= 0 || N % 8 != 0) {
    for (; d < n; ++d) a[d] += w * v[d];
  }
}

/// axpy<N> with w[m] and v + m * stride for m = 0..3 in turn, each element's four additions in
/// that order (the same bits as four axpy calls), a[] loaded and stored once instead of four
/// times.
template <int64_t N>
inline void axpy4(float* __restrict a, const float* w, const float* __restrict v, int64_t stride,
                  int64_t n) {
  if constexpr (N > 0) n = N;
  const float w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3];
  const float* __restrict v1 = v + stride;
  const float* __restrict v2 = v + 2 * stride;
  const float* __restrict v3 = v + 3 * stride;
  for (int64_t d = 0; d < n; ++d)
    a[d] = (((a[d] + w0 * v[d]) + w1 * v1[d]) + w2 * v2[d]) + w3 * v3[d];
}

/// The most keys of a run each query head takes in turn before the next keys: the chunk's rows
/// stay in cache from one head to the next (a KV head's query heads read the same parts).
constexpr int64_t kKeyChunk = 16;

/// fn(j, n, row) as for_each_run calls it, for each chunk of at most `chunk` keys of a run.
template <typename Fn>
auto chunks_of(int64_t chunk, int64_t row_stride, Fn fn) {
  return [=](int64_t j, int64_t n, int64_t row) {
    for (int64_t c = 0; c < n; c += chunk) fn(j + c, std::min(chunk, n - c), row + c * row_stride);
  };
}

/// The kernel for head_dim HD (0: p.head_dim at run time), query heads [r0, r1).
/// A constant HD gives the compiler loops of known length over a row, which it unrolls and
/// vectorizes at -O2 (a run-time length is taken eight elements at a time). Each pass walks the
/// slots in order, kKeyChunk at a time, each query head taking the chunk's keys four at a time
/// (its part of each slot's row). Every head's output is computed alone, each key's products
/// the same way whether with three others or alone, so the bits do not depend on [r0, r1), the
/// block size or where the runs and chunks end.
template <int64_t HD>
void run(const PagedAttention& p, int64_t r0, int64_t r1) {
  const int64_t hd = HD > 0 ? HD : p.head_dim;
  const int64_t q_row = p.n_heads * hd;
  const int64_t group = p.n_heads / p.n_kv_heads;
  const int64_t row_stride = p.n_kv_heads * hd;
  const int64_t rows = r1 - r0;  // one row of scores per query head
  std::vector<float> s, mx, acc(static_cast<size_t>(rows * hd));
  std::vector<double> sum;

  for (int64_t t = 0; t < p.n_q; ++t) {
    const KeyRange keys = key_range(p, p.q_pos[t]);
    const int64_t lo = keys.lo, hi = keys.hi;  // plain names: the lambdas below capture them
    float* out = p.out + t * q_row + r0 * hd;
    if (hi < lo) {
      std::fill(out, out + rows * hd, 0.0f);
      continue;
    }
    const int64_t nk = hi - lo + 1;
    s.resize(static_cast<size_t>(nk * rows));  // s[key * rows + row]: one key's scores together
    const float* q = p.q + t * q_row;
    for_each_run(p.block_table, p.block_size, row_stride, lo, hi,
                 chunks_of(kKeyChunk, row_stride, [&](int64_t j, int64_t n, int64_t row) {
                   float* sj = s.data() + (j - lo) * rows;
                   for (int64_t r = r0; r < r1; ++r) {  // four keys at a time, then the rest
                     const float* qr = q + r * hd;
                     const float* k = p.k_pool + row + (r / group) * hd;
                     float* sr = sj + (r - r0);
                     int64_t i = 0;
                     for (; i + 4 <= n; i += 4) {
                       float d4[4];
                       dot4<HD>(qr, k + i * row_stride, row_stride, hd, d4);
                       for (int m = 0; m < 4; ++m) sr[(i + m) * rows] = p.scale * d4[m];
                     }
                     for (; i < n; ++i)
                       sr[i * rows] = p.scale * dot<HD>(qr, k + i * row_stride, hd);
                   }
                 }));
    // Softmax of every row at once, keys outer: exp(s - max) in fp32, sums in double.
    mx.assign(static_cast<size_t>(rows), -std::numeric_limits<float>::infinity());
    sum.assign(static_cast<size_t>(rows), 0.0);
    for (int64_t j = 0; j < nk; ++j) {
      const float* sj = s.data() + j * rows;
      for (int64_t r = 0; r < rows; ++r)
        mx[static_cast<size_t>(r)] = std::max(mx[static_cast<size_t>(r)], sj[r]);
    }
    for (int64_t j = 0; j < nk; ++j) {
      float* sj = s.data() + j * rows;
      for (int64_t r = 0; r < rows; ++r) sj[r] -= mx[static_cast<size_t>(r)];
    }
    exp_lanes(s.data(), nk * rows);
    for (int64_t j = 0; j < nk; ++j) {
      const float* sj = s.data() + j * rows;
      for (int64_t r = 0; r < rows; ++r) sum[static_cast<size_t>(r)] += sj[r];
    }
    std::fill(acc.begin(), acc.end(), 0.0f);
    for_each_run(p.block_table, p.block_size, row_stride, lo, hi,
                 chunks_of(kKeyChunk, row_stride, [&](int64_t j, int64_t n, int64_t row) {
                   const float* pj = s.data() + (j - lo) * rows;
                   for (int64_t r = r0; r < r1; ++r) {  // four keys at a time, then the rest
                     float* a = acc.data() + (r - r0) * hd;
                     const float* v = p.v_pool + row + (r / group) * hd;
                     const float* pr = pj + (r - r0);
                     int64_t i = 0;
                     for (; i + 4 <= n; i += 4) {
                       const float w4[4] = {pr[i * rows], pr[(i + 1) * rows], pr[(i + 2) * rows],
                                            pr[(i + 3) * rows]};
                       axpy4<HD>(a, w4, v + i * row_stride, row_stride, hd);
                     }
                     for (; i < n; ++i) axpy<HD>(a, pr[i * rows], v + i * row_stride, hd);
                   }
                 }));
    for (int64_t r = 0; r < rows; ++r) {
      const double f = 1.0 / sum[static_cast<size_t>(r)];
      const float* a = acc.data() + r * hd;
      for (int64_t d = 0; d < hd; ++d) out[r * hd + d] = static_cast<float>(a[d] * f);
    }
  }
}

using RunFn = void (*)(const PagedAttention&, int64_t, int64_t);

RunFn pick(int64_t head_dim) {  // the kernel compiled for the head dim, or the run-time one
  switch (head_dim) {
    case 8: return run<8>;
    case 16: return run<16>;
    case 32: return run<32>;
    case 64: return run<64>;
    case 128: return run<128>;
    default: return run<0>;
  }
}

}  // namespace

bool attention_prefers_direct(const PagedAttention& p) {
  return p.n_q <= kDirectAttentionMaxQueries;
}

int64_t direct_attention_parts(const PagedAttention& p, int threads) {
  if (threads <= 1 || p.n_q <= 0 || p.n_heads <= 0 || p.head_dim <= 0 || !attention_admits_keys(p))
    return 1;
  int64_t keys = 0;  // keys the queries see, over all of them
  for (int64_t t = 0; t < p.n_q; ++t) {
    const KeyRange r = key_range(p, p.q_pos[t]);
    keys += std::max<int64_t>(0, r.hi - r.lo + 1);
  }
  const int64_t work = keys * p.n_heads * p.head_dim;  // multiply-adds of the scores
  return std::clamp<int64_t>(work / kDirectAttentionWorkPerThread, 1,
                             std::min<int64_t>(threads, p.n_heads));
}

void paged_attention_direct_split(const PagedAttention& p, int64_t parts) {
  if (attention_trivial(p)) return;
  const RunFn fn = pick(p.head_dim);
  parts = std::clamp<int64_t>(parts, 1, p.n_heads);
  // Whole groups of query heads a part where there are at least as many KV heads as parts, so
  // no KV head is read twice; else (MQA, few KV heads) the query heads split evenly.
  const int64_t units = p.n_kv_heads >= parts ? p.n_kv_heads : p.n_heads;
  const int64_t per_unit = p.n_heads / units;
  run_parts(parts, [&](int64_t i) {
    fn(p, units * i / parts * per_unit, units * (i + 1) / parts * per_unit);
  });
}

void paged_attention_direct(const PagedAttention& p) {
  paged_attention_direct_split(p, direct_attention_parts(p, kernel_threads()));
}

}  // namespace cb::kernels::cpu
