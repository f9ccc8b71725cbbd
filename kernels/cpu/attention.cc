// Reference paged attention (see PagedAttention in ops.h).
//
// Per query token and KV head, the heads of the GQA group are processed together so each
// key and value row is read once per group. Two passes over the allowed keys: scores (dot
// products in double) and their per-head maximum, then exp(score - max) weights and the
// weighted sum of V rows, accumulated in double and rounded to fp32 once. Inputs are fp32;
// the double accumulation makes this an oracle for fp32/fp16 GPU kernels at any context
// length.
//
// Edge cases, all defined and never reading outside [0, n_ctx):
// - n_q == 0: nothing is read or written.
// - A query with no allowed key (q_pos < 0, n_ctx == 0, or q_pos >= n_ctx + window - 1 with
//   a window) gets an all-zero output row.
// - q_pos >= n_ctx is a caller bug (the query's own key is missing); keys are still limited
//   to j < n_ctx as ops.h defines.
// - An invalid head split (n_kv_heads <= 0 or not dividing n_heads) or block_size <= 0 is a
//   caller bug; the output is zero-filled rather than computed from a guess.

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/attention_args.h"
#include "kernels/cpu/ops.h"

namespace cb::kernels::cpu {
namespace {

/// dot(q, k) with q already in double; four partial sums keep the loop pipelined.
double dot(const double* q, const float* k, int64_t n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t d = 0;
  for (; d + 4 <= n; d += 4) {
    s0 += q[d] * k[d];
    s1 += q[d + 1] * k[d + 1];
    s2 += q[d + 2] * k[d + 2];
    s3 += q[d + 3] * k[d + 3];
  }
  for (; d < n; ++d) s0 += q[d] * k[d];
  return (s0 + s1) + (s2 + s3);
}

/// Calls fn(j, row) for every key position j in [lo, hi], where row is the element offset of
/// slot j's [n_kv_heads, head_dim] row in the pools.
template <typename Fn>
void for_each_slot(const int32_t* block_table, int64_t block_size, int64_t row_stride, int64_t lo,
                   int64_t hi, Fn&& fn) {
  for (int64_t j = lo; j <= hi;) {
    const int64_t blk = j / block_size;
    const int64_t first = blk * block_size;
    const int64_t end = std::min(hi + 1, first + block_size);
    const int64_t base = static_cast<int64_t>(block_table[blk]) * block_size - first;
    for (; j < end; ++j) fn(j, (base + j) * row_stride);
  }
}

}  // namespace

void paged_attention(const PagedAttention& p) {
  if (attention_trivial(p)) return;
  const int64_t hd = p.head_dim;
  const int64_t q_row = p.n_heads * hd;
  const int64_t group = p.n_heads / p.n_kv_heads;
  const int64_t row_stride = p.n_kv_heads * hd;
  const double scale = p.scale;

  // Scratch sized once per call: the widest key range any query can see.
  int64_t max_keys = p.n_ctx;
  if (p.window > 0) max_keys = std::min(max_keys, p.window);
  max_keys = std::max<int64_t>(max_keys, 1);
  std::vector<double> scores(static_cast<size_t>(group * max_keys));
  std::vector<double> qd(static_cast<size_t>(group * hd));
  std::vector<double> acc(static_cast<size_t>(group * hd));
  std::vector<double> mx(static_cast<size_t>(group));
  std::vector<double> denom(static_cast<size_t>(group));

  for (int64_t t = 0; t < p.n_q; ++t) {
    const int64_t pos = p.q_pos[t];
    const int64_t hi = std::min(pos, p.n_ctx - 1);
    const int64_t lo = p.window > 0 ? std::max<int64_t>(0, pos - p.window + 1) : 0;
    const float* qt = p.q + t * q_row;
    float* ot = p.out + t * q_row;
    if (hi < lo) {
      std::fill(ot, ot + q_row, 0.0f);
      continue;
    }
    const int64_t n_keys = hi - lo + 1;

    for (int64_t g = 0; g < p.n_kv_heads; ++g) {
      const int64_t h0 = g * group;  // first query head of this KV head's group
      for (int64_t i = 0; i < group * hd; ++i) qd[static_cast<size_t>(i)] = qt[h0 * hd + i];
      std::fill(mx.begin(), mx.end(), -std::numeric_limits<double>::infinity());

      const float* k_head = p.k_pool + g * hd;
      for_each_slot(p.block_table, p.block_size, row_stride, lo, hi, [&](int64_t j, int64_t row) {
        const float* k = k_head + row;
        for (int64_t h = 0; h < group; ++h) {
          const double s = scale * dot(qd.data() + h * hd, k, hd);
          scores[static_cast<size_t>(h * n_keys + (j - lo))] = s;
          mx[static_cast<size_t>(h)] = std::max(mx[static_cast<size_t>(h)], s);
        }
      });

      std::fill(acc.begin(), acc.end(), 0.0);
      std::fill(denom.begin(), denom.end(), 0.0);
      const float* v_head = p.v_pool + g * hd;
      for_each_slot(p.block_table, p.block_size, row_stride, lo, hi, [&](int64_t j, int64_t row) {
        const float* v = v_head + row;
        for (int64_t h = 0; h < group; ++h) {
          const double w = std::exp(scores[static_cast<size_t>(h * n_keys + (j - lo))] -
                                    mx[static_cast<size_t>(h)]);
          denom[static_cast<size_t>(h)] += w;
          double* a = acc.data() + h * hd;
          for (int64_t d = 0; d < hd; ++d) a[d] += w * v[d];
        }
      });

      for (int64_t h = 0; h < group; ++h) {
        const double inv = 1.0 / denom[static_cast<size_t>(h)];
        const double* a = acc.data() + h * hd;
        float* o = ot + (h0 + h) * hd;
        for (int64_t d = 0; d < hd; ++d) o[d] = static_cast<float>(a[d] * inv);
      }
    }
  }
}

}  // namespace cb::kernels::cpu
