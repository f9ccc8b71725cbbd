// The CPU reference kernels against naive implementations written from the math definitions
// (double precision, no shared code with kernels/cpu), plus properties of RoPE and RMSNorm.
// Every output buffer starts as NaN so an element the kernel forgets to write fails.
#include "kernels/cpu/ops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdio>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace cb::kernels::cpu {
namespace {

constexpr double kTol = 1e-5;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

/// Largest relative error seen per op over the run, printed at exit for the record.
std::map<std::string, double>& max_errors() {
  static std::map<std::string, double> m;
  return m;
}

class ErrorReport : public ::testing::Environment {
 public:
  void TearDown() override {
    for (const auto& [name, err] : max_errors()) {
      std::printf("[ max error ] %-26s %.3g\n", name.c_str(), err);
    }
  }
};
[[maybe_unused]] ::testing::Environment* const kReport =
    ::testing::AddGlobalTestEnvironment(new ErrorReport);

/// Checks max_i |got_i - ref_i| / max(|ref_i|, floor_i) <= kTol and records it under `name`.
void expect_close(const std::string& name, const std::vector<float>& got,
                  const std::vector<double>& ref, const std::vector<double>& floor) {
  ASSERT_EQ(got.size(), ref.size());
  double worst = -1;
  size_t worst_i = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double den = std::max({std::abs(ref[i]), floor[i], 1e-300});
    double err = std::abs(static_cast<double>(got[i]) - ref[i]) / den;
    if (std::isnan(err)) err = std::numeric_limits<double>::infinity();
    if (err > worst) {
      worst = err;
      worst_i = i;
    }
  }
  if (got.empty()) return;
  double& rec = max_errors()[name];
  rec = std::max(rec, worst);
  EXPECT_LE(worst, kTol) << name << ": element " << worst_i << " got " << got[worst_i] << " want "
                         << ref[worst_i];
}

void expect_close(const std::string& name, const std::vector<float>& got,
                  const std::vector<double>& ref, double floor = 0) {
  expect_close(name, got, ref, std::vector<double>(ref.size(), floor));
}

std::vector<float> random_vec(std::mt19937& rng, size_t n, float lo = -1.f, float hi = 1.f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

std::vector<float> poisoned(size_t n) {
  return std::vector<float>(n, kNaN);
}

// ---- matmul ---------------------------------------------------------------------------

TEST(MatmulWtTest, MatchesDoubleTripleLoop) {
  std::mt19937 rng(1);
  const int64_t shapes[][3] = {{1, 1, 1},     {3, 5, 7},    {17, 64, 33},
                               {64, 128, 96}, {5, 1024, 3}, {129, 257, 130}};
  for (const auto& s : shapes) {
    const int64_t n = s[0], in = s[1], out = s[2];
    const auto x = random_vec(rng, static_cast<size_t>(n * in));
    const auto w = random_vec(rng, static_cast<size_t>(out * in));
    auto y = poisoned(static_cast<size_t>(n * out));
    matmul_wt(x.data(), w.data(), y.data(), n, in, out);
    std::vector<double> ref(y.size()), mag(y.size());
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < out; ++j) {
        double acc = 0, abs_acc = 0;
        for (int64_t k = 0; k < in; ++k) {
          const double p = static_cast<double>(x[i * in + k]) * w[j * in + k];
          acc += p;
          abs_acc += std::abs(p);
        }
        ref[i * out + j] = acc;
        mag[i * out + j] = abs_acc;  // the error bound of a sum scales with sum |terms|
      }
    }
    expect_close("matmul_wt", y, ref, mag);
  }
}

TEST(MatmulWtTest, DegenerateShapes) {
  std::vector<float> y(6, 7.0f);
  matmul_wt(nullptr, nullptr, y.data(), 0, 4, 3);  // no rows: nothing touched
  EXPECT_EQ(y, std::vector<float>(6, 7.0f));
  matmul_wt(nullptr, nullptr, y.data(), 2, 0, 3);  // empty inner dimension: zeros
  EXPECT_EQ(y, std::vector<float>(6, 0.0f));
}

// ---- norms ----------------------------------------------------------------------------

TEST(RmsNormTest, MatchesDouble) {
  std::mt19937 rng(2);
  for (int64_t dim : {1, 7, 64, 4096}) {
    for (float eps : {1e-5f, 1e-6f}) {
      const int64_t n = 5;
      const auto x = random_vec(rng, static_cast<size_t>(n * dim), -3.f, 3.f);
      const auto w = random_vec(rng, static_cast<size_t>(dim), -2.f, 2.f);
      auto y = poisoned(x.size());
      rmsnorm(x.data(), w.data(), y.data(), n, dim, eps);
      std::vector<double> ref(x.size());
      for (int64_t r = 0; r < n; ++r) {
        double ss = 0;
        for (int64_t i = 0; i < dim; ++i)
          ss += static_cast<double>(x[r * dim + i]) * x[r * dim + i];
        const double inv = 1.0 / std::sqrt(ss / dim + eps);
        for (int64_t i = 0; i < dim; ++i) ref[r * dim + i] = x[r * dim + i] * inv * w[i];
      }
      expect_close("rmsnorm", y, ref);
      auto in_place = x;
      rmsnorm(in_place.data(), w.data(), in_place.data(), n, dim, eps);
      EXPECT_EQ(in_place, y) << "aliased output differs";
    }
  }
}

TEST(RmsNormTest, OutputHasUnitRmsBeforeScaling) {
  std::mt19937 rng(3);
  const int64_t n = 4, dim = 512;
  const auto x = random_vec(rng, static_cast<size_t>(n * dim), -5.f, 5.f);
  const auto w = random_vec(rng, static_cast<size_t>(dim), 0.5f, 2.f);
  auto y = poisoned(x.size());
  rmsnorm(x.data(), w.data(), y.data(), n, dim, 0.0f);
  for (int64_t r = 0; r < n; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < dim; ++i) {
      const double u = y[r * dim + i] / static_cast<double>(w[i]);
      ss += u * u;
    }
    EXPECT_NEAR(std::sqrt(ss / dim), 1.0, kTol) << "row " << r;
  }
  // A constant weight c gives rms(y) == |c|.
  const std::vector<float> c(static_cast<size_t>(dim), -1.5f);
  rmsnorm(x.data(), c.data(), y.data(), n, dim, 0.0f);
  for (int64_t r = 0; r < n; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < dim; ++i) ss += static_cast<double>(y[r * dim + i]) * y[r * dim + i];
    EXPECT_NEAR(std::sqrt(ss / dim), 1.5, 1.5 * kTol) << "row " << r;
  }
}

TEST(LayerNormTest, MatchesDoubleIncludingLargeOffsets) {
  std::mt19937 rng(4);
  for (int64_t dim : {1, 9, 64, 4544}) {
    for (float offset : {0.f, 1000.f}) {
      const int64_t n = 3;
      auto x = random_vec(rng, static_cast<size_t>(n * dim), -2.f, 2.f);
      for (auto& v : x) v += offset;  // a large common offset must not cancel the variance
      const auto w = random_vec(rng, static_cast<size_t>(dim), -2.f, 2.f);
      const auto b = random_vec(rng, static_cast<size_t>(dim), -1.f, 1.f);
      auto y = poisoned(x.size());
      const float eps = 1e-5f;
      layernorm(x.data(), w.data(), b.data(), y.data(), n, dim, eps);
      std::vector<double> ref(x.size()), mag(x.size());
      for (int64_t r = 0; r < n; ++r) {
        double mean = 0;
        for (int64_t i = 0; i < dim; ++i) mean += x[r * dim + i];
        mean /= dim;
        double var = 0;
        for (int64_t i = 0; i < dim; ++i) var += (x[r * dim + i] - mean) * (x[r * dim + i] - mean);
        var /= dim;
        for (int64_t i = 0; i < dim; ++i) {
          const double scaled = (x[r * dim + i] - mean) / std::sqrt(var + eps) * w[i];
          ref[r * dim + i] = scaled + b[i];
          mag[r * dim + i] = std::abs(scaled) + std::abs(b[i]);  // y = scaled + b may cancel
        }
      }
      expect_close("layernorm", y, ref, mag);
      auto in_place = x;
      layernorm(in_place.data(), w.data(), b.data(), in_place.data(), n, dim, eps);
      EXPECT_EQ(in_place, y) << "aliased output differs";
    }
  }
}

// ---- RoPE -----------------------------------------------------------------------------

/// RoPE from the definition: pair i, as the complex number (x_a + i x_b), times e^{i angle}.
std::vector<double> rope_reference(const std::vector<float>& x, const std::vector<int32_t>& pos,
                                   int64_t heads, int64_t head_dim, int64_t rope_dims, double theta,
                                   Rope style) {
  std::vector<double> y(x.begin(), x.end());
  for (size_t t = 0; t < pos.size(); ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t base = (static_cast<int64_t>(t) * heads + h) * head_dim;
      for (int64_t i = 0; i < rope_dims / 2; ++i) {
        const int64_t a = style == Rope::Interleaved ? 2 * i : i;
        const int64_t b = style == Rope::Interleaved ? 2 * i + 1 : i + rope_dims / 2;
        const double angle = pos[t] * std::pow(theta, -2.0 * i / rope_dims);
        const std::complex<double> z =
            std::complex<double>(x[base + a], x[base + b]) * std::polar(1.0, angle);
        y[base + a] = z.real();
        y[base + b] = z.imag();
      }
    }
  }
  return y;
}

TEST(RopeTest, MatchesComplexRotation) {
  std::mt19937 rng(5);
  const std::vector<int32_t> pos = {0, 1, 17, 4095, 32768, 100003, 1000000};
  for (Rope style : {Rope::Interleaved, Rope::RotateHalf}) {
    for (int64_t head_dim : {8, 64, 128}) {
      for (int64_t rope_dims : {head_dim, head_dim / 2, head_dim / 4}) {
        for (float theta : {10000.f, 1000000.f}) {
          const int64_t heads = 3;
          const auto x = random_vec(rng, pos.size() * heads * head_dim);
          auto y = x;
          rope(y.data(), pos.data(), static_cast<int64_t>(pos.size()), heads, head_dim, rope_dims,
               theta, style);
          const auto ref = rope_reference(x, pos, heads, head_dim, rope_dims, theta, style);
          expect_close("rope", y, ref, 1e-6);
          for (size_t e = 0; e < x.size(); ++e) {
            if (static_cast<int64_t>(e % head_dim) >= rope_dims) {
              ASSERT_EQ(y[e], x[e]) << "dimension past rope_dims changed";
            }
          }
        }
      }
    }
  }
}

double dot(const float* a, const float* b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

TEST(RopeTest, PreservesNorms) {
  std::mt19937 rng(6);
  for (Rope style : {Rope::Interleaved, Rope::RotateHalf}) {
    const int64_t heads = 4, head_dim = 128;
    const std::vector<int32_t> pos = {3, 999, 65535};
    const auto x = random_vec(rng, pos.size() * heads * head_dim);
    auto y = x;
    rope(y.data(), pos.data(), 3, heads, head_dim, head_dim, 10000.f, style);
    for (size_t r = 0; r < pos.size() * heads; ++r) {
      const double nx = dot(&x[r * head_dim], &x[r * head_dim], head_dim);
      const double ny = dot(&y[r * head_dim], &y[r * head_dim], head_dim);
      EXPECT_NEAR(std::sqrt(ny / nx), 1.0, kTol) << "row " << r;
    }
  }
}

// <rope(q, p + k), rope(key, s + k)> == <rope(q, p), rope(key, s)>: scores depend only on p - s.
TEST(RopeTest, ScoresDependOnlyOnRelativePosition) {
  std::mt19937 rng(7);
  for (Rope style : {Rope::Interleaved, Rope::RotateHalf}) {
    for (int64_t head_dim : {8, 64, 128}) {
      const auto q = random_vec(rng, static_cast<size_t>(head_dim));
      const auto k = random_vec(rng, static_cast<size_t>(head_dim));
      const double norms =
          std::sqrt(dot(q.data(), q.data(), head_dim) * dot(k.data(), k.data(), head_dim));
      auto rotated_dot = [&](int32_t p, int32_t s) {
        auto qr = q, kr = k;
        rope(qr.data(), &p, 1, 1, head_dim, head_dim, 10000.f, style);
        rope(kr.data(), &s, 1, 1, head_dim, head_dim, 10000.f, style);
        return dot(qr.data(), kr.data(), head_dim);
      };
      for (int32_t p : {5, 40}) {
        const int32_t s = 3;
        const double base = rotated_dot(p, s);
        for (int32_t shift : {1, 1000, 30000}) {
          const double err = std::abs(rotated_dot(p + shift, s + shift) - base) / norms;
          EXPECT_LE(err, kTol) << "p " << p << " shift " << shift;
          double& rec = max_errors()["rope relative position"];
          rec = std::max(rec, err);
        }
      }
    }
  }
}

// ---- element-wise ---------------------------------------------------------------------

TEST(ElementwiseTest, SwiGlu) {
  std::mt19937 rng(8);
  const int64_t n = 1001;
  const auto gate = random_vec(rng, n, -20.f, 20.f);
  const auto up = random_vec(rng, n, -3.f, 3.f);
  auto out = poisoned(n);
  swiglu(gate.data(), up.data(), out.data(), n);
  std::vector<double> ref(n);
  for (int64_t i = 0; i < n; ++i) ref[i] = gate[i] / (1.0 + std::exp(-double{gate[i]})) * up[i];
  expect_close("swiglu", out, ref);
  auto g = gate;
  swiglu(g.data(), up.data(), g.data(), n);  // out aliases gate
  EXPECT_EQ(g, out);
  auto u = up;
  swiglu(gate.data(), u.data(), u.data(), n);  // out aliases up
  EXPECT_EQ(u, out);
}

TEST(ElementwiseTest, GeluExactErf) {
  std::mt19937 rng(9);
  // The erf form in long double is exact enough down to x = -5; below, 1 + erf cancels, so the
  // tail is checked against tabulated values of the normal CDF, Phi(x) = 0.5 (1 + erf(x/sqrt2)).
  auto x = random_vec(rng, 2000, -5.f, 10.f);
  x.insert(x.end(), {0.f, 1.f, -1.f, 30.f});
  auto y = x;
  gelu(y.data(), static_cast<int64_t>(y.size()));
  std::vector<double> ref(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const long double v = x[i];
    ref[i] = static_cast<double>(v * 0.5L * (1.0L + std::erf(v / std::sqrt(2.0L))));
  }
  expect_close("gelu", y, ref);
  const size_t k = x.size() - 4;
  EXPECT_EQ(y[k], 0.f);
  EXPECT_NEAR(y[k + 1], 0.8413447460685429, 1e-7);
  EXPECT_NEAR(y[k + 2], -0.15865525393145707, 1e-7);
  EXPECT_EQ(y[k + 3], 30.f);

  std::vector<float> tail = {-6.f, -8.f, -10.f};
  gelu(tail.data(), 3);
  const std::vector<double> phi = {9.865876450376946e-10, 6.22096057427178e-16,
                                   7.619853024160526e-24};
  expect_close("gelu", tail, {-6 * phi[0], -8 * phi[1], -10 * phi[2]});
}

TEST(ElementwiseTest, AddAndEmbedding) {
  std::mt19937 rng(10);
  const auto a = random_vec(rng, 77), b = random_vec(rng, 77);
  auto y = a;
  add_inplace(y.data(), b.data(), 77);
  for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], a[i] + b[i]);

  const int64_t rows = 11, dim = 13;
  const auto table = random_vec(rng, rows * dim);
  const std::vector<int32_t> ids = {10, 0, 3, 3, 7};
  auto out = poisoned(ids.size() * dim);
  embedding(table.data(), ids.data(), out.data(), static_cast<int64_t>(ids.size()), dim);
  for (size_t t = 0; t < ids.size(); ++t) {
    for (int64_t d = 0; d < dim; ++d) ASSERT_EQ(out[t * dim + d], table[ids[t] * dim + d]);
  }
}

// ---- paged attention ------------------------------------------------------------------

struct AttnCase {
  int64_t head_dim, n_heads, n_kv_heads, block_size, n_ctx, window;
  std::vector<int32_t> q_pos;
  float qk_scale = 1.0f;  // multiplies q and k, to push scores far from 0
};

std::string describe(const AttnCase& c) {
  return "hd " + std::to_string(c.head_dim) + " heads " + std::to_string(c.n_heads) + "/" +
         std::to_string(c.n_kv_heads) + " bs " + std::to_string(c.block_size) + " ctx " +
         std::to_string(c.n_ctx) + " win " + std::to_string(c.window) + " n_q " +
         std::to_string(c.q_pos.size());
}

/// Runs paged_attention on a shuffled, NaN-padded pool and compares it with dense attention
/// through an explicit mask; returns the kernel's output.
std::vector<float> check_attention(const AttnCase& c, std::mt19937& rng) {
  SCOPED_TRACE(describe(c));
  const int64_t hd = c.head_dim, nh = c.n_heads, nkv = c.n_kv_heads, bs = c.block_size;
  const int64_t n_q = static_cast<int64_t>(c.q_pos.size());
  const int64_t row = nkv * hd;
  auto q = random_vec(rng, n_q * nh * hd);
  auto k = random_vec(rng, c.n_ctx * row);  // dense [n_ctx, n_kv_heads, head_dim]
  const auto v = random_vec(rng, c.n_ctx * row);
  for (auto& x : q) x *= c.qk_scale;
  for (auto& x : k) x *= c.qk_scale;

  // Physical blocks in shuffled order plus spare ones; every slot not holding a key is NaN,
  // so reading a wrong block, a slot past n_ctx or a spare block poisons the result.
  const int64_t used = (c.n_ctx + bs - 1) / bs, num_blocks = used + 3;
  std::vector<int32_t> phys(num_blocks);
  std::iota(phys.begin(), phys.end(), 0);
  std::shuffle(phys.begin(), phys.end(), rng);
  const std::vector<int32_t> table(phys.begin(), phys.begin() + used);
  std::vector<float> k_pool = poisoned(num_blocks * bs * row), v_pool = k_pool;
  for (int64_t s = 0; s < c.n_ctx; ++s) {
    const int64_t dst = (table[s / bs] * bs + s % bs) * row;
    std::copy_n(&k[s * row], row, &k_pool[dst]);
    std::copy_n(&v[s * row], row, &v_pool[dst]);
  }

  auto out = poisoned(n_q * nh * hd);
  PagedAttention p;
  p.q = q.data();
  p.out = out.data();
  p.q_pos = c.q_pos.data();
  p.n_q = n_q;
  p.n_heads = nh;
  p.n_kv_heads = nkv;
  p.head_dim = hd;
  p.k_pool = k_pool.data();
  p.v_pool = v_pool.data();
  p.block_table = table.data();
  p.block_size = bs;
  p.n_ctx = c.n_ctx;
  p.window = c.window;
  p.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  paged_attention(p);

  // Dense reference: full score matrix, mask from the definition in ops.h, softmax in double.
  std::vector<double> ref(out.size());
  std::vector<double> scores(static_cast<size_t>(std::max<int64_t>(c.n_ctx, 1)));
  std::vector<char> allowed(scores.size());
  for (int64_t t = 0; t < n_q; ++t) {
    const int64_t qp = c.q_pos[t];
    for (int64_t h = 0; h < nh; ++h) {
      const int64_t kvh = h / (nh / nkv);
      const float* qv = &q[(t * nh + h) * hd];
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < c.n_ctx; ++j) {
        allowed[j] = j <= qp && (c.window <= 0 || j > qp - c.window);
        scores[j] = static_cast<double>(p.scale) * dot(qv, &k[j * row + kvh * hd], hd);
        if (allowed[j]) mx = std::max(mx, scores[j]);
      }
      double sum = 0;
      std::vector<double> acc(hd, 0.0);
      for (int64_t j = 0; j < c.n_ctx; ++j) {
        if (!allowed[j]) continue;
        const double e = std::exp(scores[j] - mx);
        sum += e;
        for (int64_t d = 0; d < hd; ++d) acc[d] += e * v[j * row + kvh * hd + d];
      }
      for (int64_t d = 0; d < hd; ++d) ref[(t * nh + h) * hd + d] = sum > 0 ? acc[d] / sum : 0.0;
    }
  }
  // Outputs are convex combinations of V rows in [-1, 1]; errors are relative to the element,
  // floored at 1e-4 of that range for outputs that average out close to zero.
  expect_close("paged_attention", out, ref, 1e-4);
  return out;
}

TEST(PagedAttentionTest, ShapeSweep) {
  std::mt19937 rng(11);
  const int64_t head_splits[][2] = {{4, 4}, {8, 2}, {16, 2}, {8, 1}};  // GQA 1, 4, 8 and MQA
  for (int64_t hd : {8, 64, 128}) {
    for (const auto& hs : head_splits) {
      for (int64_t bs : {1, 5, 16, 32, 64}) {
        for (int64_t window : {0, 19}) {
          // A prefill chunk at the end of an odd-length context, and a lone decode query.
          const int64_t n_ctx = 133;
          std::vector<int32_t> chunk;
          for (int32_t t = 126; t < 133; ++t) chunk.push_back(t);
          check_attention({hd, hs[0], hs[1], bs, n_ctx, window, chunk}, rng);
          check_attention({hd, hs[0], hs[1], bs, 37, window, {36}}, rng);
        }
      }
    }
  }
}

TEST(PagedAttentionTest, FullPrefillFromPositionZero) {
  std::mt19937 rng(12);
  std::vector<int32_t> all(71);
  std::iota(all.begin(), all.end(), 0);
  for (int64_t window : {0, 1, 8}) check_attention({64, 8, 2, 16, 71, window, all}, rng);
}

TEST(PagedAttentionTest, QueriesFarIntoALongContext) {
  std::mt19937 rng(13);
  // Unsorted positions, late ones and early ones, in one call.
  const std::vector<int32_t> pos = {4098, 4000, 2500, 4097, 3, 0, 1024};
  for (int64_t bs : {16, 64}) {
    for (int64_t window : {0, 1024, 4096, 1})
      check_attention({64, 8, 2, bs, 4099, window, pos}, rng);
  }
  check_attention({128, 4, 1, 32, 33001, 0, {33000, 32768}}, rng);
  check_attention({128, 4, 1, 32, 33001, 4096, {33000, 32768}}, rng);
}

TEST(PagedAttentionTest, LargeScoresNeedMaxSubtraction) {
  std::mt19937 rng(14);
  // q, k scaled by 40: scores reach the thousands, where exp() overflows even in double.
  const auto out = check_attention({64, 4, 2, 16, 50, 0, {49, 20, 0}, 40.f}, rng);
  for (float x : out) ASSERT_TRUE(std::isfinite(x));
}

TEST(PagedAttentionTest, QueriesPastContextNeverReadPastNCtx) {
  std::mt19937 rng(15);
  // Caller bugs by the API's definition, but still defined: keys limited to j < n_ctx (the
  // slots after n_ctx in the last block are NaN), and with a window that excludes all of
  // them, zeros. A query before position 0 also sees no key.
  const auto out = check_attention({16, 2, 1, 16, 21, 3, {21, 24, 25, -1}}, rng);
  for (size_t i = 2 * 2 * 16; i < out.size(); ++i) EXPECT_EQ(out[i], 0.f) << i;
  check_attention({16, 2, 1, 16, 21, 0, {21, 40}}, rng);
  check_attention({16, 2, 1, 16, 0, 0, {0, 5}}, rng);  // empty context: zeros
}

TEST(PagedAttentionTest, NoQueriesIsANoOp) {
  PagedAttention p;  // every pointer null
  p.n_heads = 4;
  p.n_kv_heads = 2;
  p.head_dim = 64;
  p.n_ctx = 10;
  paged_attention(p);
  SUCCEED();
}

}  // namespace
}  // namespace cb::kernels::cpu
