// Direct paged attention (see PagedAttention in ops.h): the contract of the reference in
// attention.cc, computed straight from the pool, for the calls where the sgemm kernel's fixed
// costs outweigh its arithmetic: decode, one query (or a few) per sequence, where the sgemm
// kernel gathers each KV head's keys into scratch and BLAS packs them again, all to multiply
// them by a handful of rows.
//
// Per query t (allowed keys [lo, hi]), every query head at once:
// 1. scores: one pass over the key slots in order, block run by block run; each slot's row
//    (contiguous over the KV heads) dotted with the query heads of each KV head
//    (scale * q.k, fp32, eight partial sums), stored key-major;
// 2. per head, exp(s - max) in fp32 (exp_lanes.h) and its sum in double, as the sgemm kernel
//    does;
// 3. P.V: one pass over the value slots in order, each slot's row accumulated into the heads'
//    fp32 outputs, which are then divided by their sums.
// Only slots in [lo, hi] are read, so a free or NaN slot outside a query's range is never
// touched. Single-threaded: the engine calls it per sequence.

#include <limits>
#include <vector>

#include "kernels/cpu/attention_args.h"
#include "kernels/cpu/exp_lanes.h"
#include "kernels/cpu/ops.h"

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

/// The kernel for head_dim HD (0: p.head_dim at run time).
/// A constant HD gives the compiler loops of known length over a row, which it unrolls and
/// vectorizes at -O2 (a run-time length is taken eight elements at a time). Each pass walks the
/// slots in order and, per slot, the heads' parts of its row, so the pools are read front to back
/// (a slot's row is contiguous).
template <int64_t HD>
void run(const PagedAttention& p) {
  const int64_t hd = HD > 0 ? HD : p.head_dim;
  const int64_t q_row = p.n_heads * hd;
  const int64_t group = p.n_heads / p.n_kv_heads;
  const int64_t row_stride = p.n_kv_heads * hd;
  const int64_t rows = p.n_heads;  // one row of scores per query head
  std::vector<float> s, mx, acc(static_cast<size_t>(rows * hd));
  std::vector<double> sum;

  for (int64_t t = 0; t < p.n_q; ++t) {
    const KeyRange keys = key_range(p, p.q_pos[t]);
    const int64_t lo = keys.lo, hi = keys.hi;  // plain names: the lambdas below capture them
    float* out = p.out + t * q_row;
    if (hi < lo) {
      std::fill(out, out + rows * hd, 0.0f);
      continue;
    }
    const int64_t nk = hi - lo + 1;
    s.resize(static_cast<size_t>(nk * rows));  // s[key * rows + row]: one key's scores together
    const float* q = p.q + t * q_row;
    for_each_run(p.block_table, p.block_size, row_stride, lo, hi,
                 [&](int64_t j, int64_t n, int64_t row) {
                   const float* k = p.k_pool + row;
                   float* sj = s.data() + (j - lo) * rows;
                   for (int64_t i = 0; i < n; ++i, k += row_stride) {
                     for (int64_t g = 0, r = 0; g < p.n_kv_heads; ++g) {
                       for (int64_t e = 0; e < group; ++e, ++r)
                         *sj++ = p.scale * dot<HD>(q + r * hd, k + g * hd, hd);
                     }
                   }
                 });
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
                 [&](int64_t j, int64_t n, int64_t row) {
                   const float* v = p.v_pool + row;
                   const float* pj = s.data() + (j - lo) * rows;
                   for (int64_t i = 0; i < n; ++i, v += row_stride) {
                     for (int64_t g = 0, r = 0; g < p.n_kv_heads; ++g) {
                       for (int64_t e = 0; e < group; ++e, ++r)
                         axpy<HD>(acc.data() + r * hd, *pj++, v + g * hd, hd);
                     }
                   }
                 });
    for (int64_t r = 0; r < rows; ++r) {
      const double f = 1.0 / sum[static_cast<size_t>(r)];
      const float* a = acc.data() + r * hd;
      for (int64_t d = 0; d < hd; ++d) out[r * hd + d] = static_cast<float>(a[d] * f);
    }
  }
}

}  // namespace

bool attention_prefers_direct(const PagedAttention& p) {
  return p.n_q <= kDirectAttentionMaxQueries;
}

void paged_attention_direct(const PagedAttention& p) {
  if (attention_trivial(p)) return;
  switch (p.head_dim) {  // the kernel compiled for the head dim, or the run-time one
    case 8: return run<8>(p);
    case 16: return run<16>(p);
    case 32: return run<32>(p);
    case 64: return run<64>(p);
    case 128: return run<128>(p);
    default: return run<0>(p);
  }
}

}  // namespace cb::kernels::cpu
