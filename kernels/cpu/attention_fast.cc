// Fast paged attention (see PagedAttention in ops.h): same contract as the reference in
// attention.cc, with the dot products and the weighted V sums done by sgemm in fp32
// (paged_attention_sgemm). paged_attention_fast sends calls of at most
// kDirectAttentionMaxQueries queries (decode) to attention_direct.cc instead.
//
// Per call:
// 1. Queries with no allowed key get zero rows. The others are ordered by position and the
//    union of their key ranges [lo_t, hi_t] is computed as disjoint segments; only those
//    slots (never one at or past n_ctx, never a block only a gap would use) are read, so a
//    free or NaN slot outside every query's range cannot poison the result through 0 * NaN.
// 2. Per KV head, the segments' K and V rows are gathered from the pool into contiguous
//    [n_keys, head_dim] scratch ("compact" key index, monotone in position).
// 3. The sorted queries are tiled (at most kMaxTileRows query-head rows and a ~64 MB score
//    tile). Per tile and KV head: S = scale * Q_g K^T over the tile's key range (one sgemm,
//    Q_g = the group's query rows gathered contiguous); per row, exp(s - max) over the row's
//    allowed range in fp32 (exp_lanes.h; masked entries set to 0, sum in double); O = P V (one
//    sgemm), divided by the row's sum and scattered into out. Sorting makes a causal prefill tile
//    skip keys that none of its queries sees.
//
// OpenBLAS threads the sgemms; nothing here starts threads.

#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/attention_args.h"
#include "kernels/cpu/exp_lanes.h"
#include "kernels/cpu/ops.h"

namespace cb::kernels::cpu {
namespace {

/// Most floats in one score tile (64 MB).
constexpr int64_t kScoreBudget = int64_t{16} << 20;
/// Most query-head rows per tile: small enough that a causal prefill skips most masked keys,
/// large enough for an efficient sgemm.
constexpr int64_t kMaxTileRows = 256;

/// A run of allowed key positions [lo, hi] stored at compact index `at` onwards.
struct Segment {
  int64_t lo, hi, at;
};

/// Copies head `g`'s rows of the segments' slots from `pool` into dst[n_keys, head_dim].
void gather_head(const PagedAttention& p, const float* pool, int64_t g,
                 const std::vector<Segment>& segs, float* dst) {
  const int64_t hd = p.head_dim;
  const int64_t row_stride = p.n_kv_heads * hd;
  const size_t bytes = static_cast<size_t>(hd) * sizeof(float);
  for (const Segment& s : segs) {
    for_each_run(p.block_table, p.block_size, row_stride, s.lo, s.hi,
                 [&](int64_t j, int64_t n, int64_t row) {
                   float* d = dst + (s.at + (j - s.lo)) * hd;
                   const float* src = pool + row + g * hd;
                   if (p.n_kv_heads == 1) {
                     std::memcpy(d, src, bytes * static_cast<size_t>(n));
                     return;
                   }
                   for (int64_t i = 0; i < n; ++i)
                     std::memcpy(d + i * hd, src + i * row_stride, bytes);
                 });
  }
}

/// In place exp(s - max) of s[0, n) restricted to [a, b] (entries outside it become 0);
/// returns 1 / sum, the normalization applied to the output row after P.V, which keeps the
/// weights' own rounding out of the sum.
double masked_exp(float* s, int64_t n, int64_t a, int64_t b) {
  std::fill(s, s + a, 0.0f);
  std::fill(s + b + 1, s + n, 0.0f);
  const float mx = max_lanes(s + a, b - a + 1);
  return 1.0 / exp_shifted_sum(s + a, b - a + 1, mx);
}

}  // namespace

void paged_attention_fast(const PagedAttention& p) {
  if (attention_prefers_direct(p)) {
    paged_attention_direct(p);
  } else {
    paged_attention_sgemm(p);
  }
}

void paged_attention_sgemm(const PagedAttention& p) {
  if (attention_trivial(p)) return;
  const int64_t hd = p.head_dim;
  const int64_t q_row = p.n_heads * hd;
  const int64_t group = p.n_heads / p.n_kv_heads;

  // Allowed key range per query; queries without one get zeros and take no further part.
  std::vector<int64_t> qlo(static_cast<size_t>(p.n_q)), qhi(static_cast<size_t>(p.n_q));
  std::vector<int64_t> order;
  order.reserve(static_cast<size_t>(p.n_q));
  for (int64_t t = 0; t < p.n_q; ++t) {
    const KeyRange keys = key_range(p, p.q_pos[t]);
    const int64_t lo = keys.lo, hi = keys.hi;
    if (hi < lo) {
      std::fill(p.out + t * q_row, p.out + (t + 1) * q_row, 0.0f);
      continue;
    }
    qlo[static_cast<size_t>(t)] = lo;
    qhi[static_cast<size_t>(t)] = hi;
    order.push_back(t);
  }
  if (order.empty()) return;
  // lo and hi are both non-decreasing in position, so sorting by position sorts both.
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return p.q_pos[a] < p.q_pos[b]; });

  // Union of the ranges as disjoint segments with compact indices; per query, its range in
  // compact indices (contiguous, as each range lies inside one segment).
  std::vector<Segment> segs;
  for (int64_t t : order) {
    const int64_t lo = qlo[static_cast<size_t>(t)], hi = qhi[static_cast<size_t>(t)];
    if (!segs.empty() && lo <= segs.back().hi + 1) {
      segs.back().hi = std::max(segs.back().hi, hi);
    } else {
      const int64_t at = segs.empty() ? 0 : segs.back().at + (segs.back().hi - segs.back().lo + 1);
      segs.push_back({lo, hi, at});
    }
    const Segment& s = segs.back();
    qlo[static_cast<size_t>(t)] = s.at + (lo - s.lo);
    qhi[static_cast<size_t>(t)] = s.at + (hi - s.lo);
  }
  const int64_t n_keys = segs.back().at + (segs.back().hi - segs.back().lo + 1);

  // Tile size in queries: bounded by rows and by the score budget at the widest tile.
  const int64_t n_valid = static_cast<int64_t>(order.size());
  const int64_t tile_q = std::max<int64_t>(
      1, std::min({n_valid, kMaxTileRows / group, kScoreBudget / (group * n_keys)}));

  std::vector<float> k_buf(static_cast<size_t>(n_keys * hd));
  std::vector<float> v_buf(static_cast<size_t>(n_keys * hd));
  std::vector<float> q_buf(static_cast<size_t>(tile_q * group * hd));
  std::vector<float> o_buf(static_cast<size_t>(tile_q * group * hd));
  std::vector<float> s_buf;
  std::vector<double> inv(static_cast<size_t>(tile_q * group));

  for (int64_t g = 0; g < p.n_kv_heads; ++g) {
    const int64_t h0 = g * group;  // first query head of this KV head's group
    gather_head(p, p.k_pool, g, segs, k_buf.data());
    gather_head(p, p.v_pool, g, segs, v_buf.data());

    for (int64_t i0 = 0; i0 < n_valid; i0 += tile_q) {
      const int64_t nt = std::min(tile_q, n_valid - i0);
      const int64_t rows = nt * group;
      // Sorted queries: the tile's key range runs from its first query's lo to its last's hi.
      const int64_t a0 = qlo[static_cast<size_t>(order[static_cast<size_t>(i0)])];
      const int64_t b0 = qhi[static_cast<size_t>(order[static_cast<size_t>(i0 + nt - 1)])];
      const int64_t nk = b0 - a0 + 1;

      for (int64_t i = 0; i < nt; ++i) {
        const int64_t t = order[static_cast<size_t>(i0 + i)];
        std::memcpy(q_buf.data() + i * group * hd, p.q + t * q_row + h0 * hd,
                    static_cast<size_t>(group * hd) * sizeof(float));
      }
      s_buf.resize(static_cast<size_t>(rows * nk));
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(rows),
                  static_cast<int>(nk), static_cast<int>(hd), p.scale, q_buf.data(),
                  static_cast<int>(hd), k_buf.data() + a0 * hd, static_cast<int>(hd), 0.0f,
                  s_buf.data(), static_cast<int>(nk));
      for (int64_t i = 0; i < nt; ++i) {
        const int64_t t = order[static_cast<size_t>(i0 + i)];
        const int64_t a = qlo[static_cast<size_t>(t)] - a0, b = qhi[static_cast<size_t>(t)] - a0;
        for (int64_t h = 0; h < group; ++h)
          inv[static_cast<size_t>(i * group + h)] =
              masked_exp(s_buf.data() + (i * group + h) * nk, nk, a, b);
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(rows),
                  static_cast<int>(hd), static_cast<int>(nk), 1.0f, s_buf.data(),
                  static_cast<int>(nk), v_buf.data() + a0 * hd, static_cast<int>(hd), 0.0f,
                  o_buf.data(), static_cast<int>(hd));
      for (int64_t i = 0; i < nt; ++i) {
        const int64_t t = order[static_cast<size_t>(i0 + i)];
        for (int64_t h = 0; h < group; ++h) {
          const double r = inv[static_cast<size_t>(i * group + h)];
          const float* o = o_buf.data() + (i * group + h) * hd;
          float* dst = p.out + t * q_row + (h0 + h) * hd;
          for (int64_t d = 0; d < hd; ++d) dst[d] = static_cast<float>(o[d] * r);
        }
      }
    }
  }
}

}  // namespace cb::kernels::cpu
