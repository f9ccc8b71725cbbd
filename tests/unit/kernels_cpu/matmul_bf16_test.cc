// Linear layers with bfloat16 weights (matmul_wt_bf16 and its two paths) against a
// double-precision product of the same weights widened by definition (a bfloat16 is the top 16
// bits of an fp32), over shapes that exercise every tail: input widths below and between the
// vector lengths, 1-4 rows of x per pass and their remainders, enough output rows to be split
// over threads. Outputs start as NaN, so an unwritten element fails.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/ops.h"

namespace cb::kernels::cpu {
namespace {

float from_bits(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

struct Problem {
  int64_t n, in, out;
  std::vector<float> x;
  std::vector<uint16_t> w;
  std::vector<double> want;   // double-precision x . widen(w)^T
  std::vector<double> scale;  // sum |x| |w| per element: the size of its rounding error

  Problem(int64_t n_, int64_t in_, int64_t out_, uint64_t seed) : n(n_), in(in_), out(out_) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> d(-1.f, 1.f);
    x.resize(static_cast<size_t>(n * in));
    for (auto& v : x) v = d(rng);
    w.resize(static_cast<size_t>(out * in));
    // Any bit pattern of a finite bf16 in [-2, 2]: exponent below 128, random mantissa and sign.
    std::uniform_int_distribution<int> exp(100, 127), man(0, 127), sign(0, 1);
    for (auto& v : w) {
      v = static_cast<uint16_t>((sign(rng) << 15) | (exp(rng) << 7) | man(rng));
    }
    want.assign(static_cast<size_t>(n * out), 0.0);
    scale.assign(want.size(), 0.0);
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t o = 0; o < out; ++o) {
        double s = 0, a = 0;
        for (int64_t i = 0; i < in; ++i) {
          const double p = static_cast<double>(x[static_cast<size_t>(r * in + i)]) *
                           from_bits(w[static_cast<size_t>(o * in + i)]);
          s += p;
          a += std::fabs(p);
        }
        want[static_cast<size_t>(r * out + o)] = s;
        scale[static_cast<size_t>(r * out + o)] = a;
      }
    }
  }

  /// Every element within fp32 summation error of the exact product: |got - want| <=
  /// 4e-7 sqrt(in) sum |x w| (fp32 eps is 1.2e-7; rounding errors of a sum grow about as the
  /// square root of its length). A wrong weight, row or tail is off by a fraction of sum |x w|.
  void check(const std::vector<float>& got, const std::string& what) const {
    ASSERT_EQ(got.size(), want.size());
    const double tol = 4e-7 * std::sqrt(static_cast<double>(in));
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_TRUE(std::isfinite(got[i])) << what << ": element " << i << " not written";
      ASSERT_LE(std::fabs(got[i] - want[i]), tol * scale[i] + 1e-30)
          << what << ": element " << i << " (row " << i / static_cast<size_t>(out) << ") got "
          << got[i] << " want " << want[i];
    }
  }
};

std::vector<float> poisoned(const Problem& p) {
  return std::vector<float>(static_cast<size_t>(p.n * p.out),
                            std::numeric_limits<float>::quiet_NaN());
}

std::string shape(const Problem& p) {
  return "n " + std::to_string(p.n) + " in " + std::to_string(p.in) + " out " +
         std::to_string(p.out);
}

TEST(MatmulBf16, BothInstructionSetsAndTheBlockedPathMatchTheExactProduct) {
  if (bf16_best_isa() != Bf16Isa::Avx2Fma) {
    std::printf("[ note ] this CPU lacks AVX2/FMA: the Avx2Fma cases run the baseline path\n");
  }
  uint64_t seed = 1;
  for (int64_t n : {1, 2, 3, 4, 5, 7, 8, 9, 13}) {
    for (int64_t in : {1, 3, 4, 7, 8, 9, 15, 16, 17, 31, 64, 100, 257}) {
      for (int64_t out : {1, 2, 5, 7, 33}) {
        const Problem p(n, in, out, seed++);
        for (Bf16Isa isa : {Bf16Isa::Baseline, Bf16Isa::Avx2Fma}) {
          std::vector<float> y = poisoned(p);
          matmul_wt_bf16_gemv(p.x.data(), p.w.data(), y.data(), n, in, out, isa, 1);
          p.check(y, "gemv isa " + std::to_string(static_cast<int>(isa)) + " " + shape(p));
        }
        std::vector<float> y = poisoned(p);
        matmul_wt_bf16_blocked(p.x.data(), p.w.data(), y.data(), n, in, out);
        p.check(y, "blocked " + shape(p));
        std::vector<float> d = poisoned(p);
        matmul_wt_bf16(p.x.data(), p.w.data(), d.data(), n, in, out);
        p.check(d, "dispatch " + shape(p));
      }
    }
  }
}

// Wide inputs make the blocked path widen several blocks of at least 512 weight rows (2^22
// weights a block): each block's sgemm writes its own columns of y (ldc = out).
TEST(MatmulBf16, TheBlockedPathCoversEveryBlockOfAWideMatrix) {
  const Problem p(5, 8200, 1100, 77);  // blocks of 512, 512 and 76 rows
  std::vector<float> y = poisoned(p);
  matmul_wt_bf16_blocked(p.x.data(), p.w.data(), y.data(), p.n, p.in, p.out);
  p.check(y, "blocked " + shape(p));
}

TEST(MatmulBf16, TheDispatcherGivesThePathItPicksBitForBit) {
  for (int64_t n : {int64_t{1}, kBf16GemvMaxRows, kBf16GemvMaxRows + 1, int64_t{40}}) {
    const Problem p(n, 96, 70, 99 + static_cast<uint64_t>(n));
    std::vector<float> d = poisoned(p), e = poisoned(p);
    matmul_wt_bf16(p.x.data(), p.w.data(), d.data(), n, p.in, p.out);
    if (matmul_bf16_prefers_gemv(n)) {
      matmul_wt_bf16_gemv(p.x.data(), p.w.data(), e.data(), n, p.in, p.out, bf16_best_isa(), 1);
    } else {
      matmul_wt_bf16_blocked(p.x.data(), p.w.data(), e.data(), n, p.in, p.out);
    }
    EXPECT_EQ(0, std::memcmp(d.data(), e.data(), d.size() * sizeof(float))) << shape(p);
  }
  EXPECT_TRUE(matmul_bf16_prefers_gemv(1));
  EXPECT_FALSE(matmul_bf16_prefers_gemv(512));
}

TEST(MatmulBf16, ThreadsSplitOutputRowsWithoutChangingOneBit) {
  // 2^21 weights a thread at least: 2,200 x 2,048 gives up to two parts, 4,500 x 2,048 four
  // (1,125 rows each: parts that start inside a group of four output rows). One input row
  // takes the GEMV that reads four output rows at once, three rows the one that reads one.
  for (auto [n, out] : {std::pair<int64_t, int64_t>{3, 2200}, {3, 4500}, {1, 4500}}) {
    const Problem p(n, 2048, out, 5);
    std::vector<float> one = poisoned(p);
    matmul_wt_bf16_gemv(p.x.data(), p.w.data(), one.data(), p.n, p.in, p.out, bf16_best_isa(), 1);
    p.check(one, "1 thread " + shape(p));
    for (int threads : {2, 3, 4, 16}) {
      std::vector<float> many = poisoned(p);
      matmul_wt_bf16_gemv(p.x.data(), p.w.data(), many.data(), p.n, p.in, p.out, bf16_best_isa(),
                          threads);
      EXPECT_EQ(0, std::memcmp(one.data(), many.data(), one.size() * sizeof(float)))
          << threads << " threads, " << shape(p);
    }
  }
}

TEST(MatmulBf16, EmptyShapesWriteNothingOrZeros) {
  std::vector<float> y(6, 7.0f);
  const std::vector<float> x(6, 1.0f);
  const std::vector<uint16_t> w(6, 0x3f80);
  matmul_wt_bf16(x.data(), w.data(), y.data(), 0, 3, 2);  // no rows
  EXPECT_EQ(y[0], 7.0f);
  matmul_wt_bf16(x.data(), w.data(), y.data(), 2, 3, 0);  // no outputs
  EXPECT_EQ(y[0], 7.0f);
  for (int64_t n : {int64_t{2}, kBf16GemvMaxRows + 1}) {  // empty sums are zero on both paths
    std::vector<float> z(static_cast<size_t>(n * 2), 7.0f);
    std::vector<float> xn(static_cast<size_t>(n), 1.0f);
    matmul_wt_bf16(xn.data(), w.data(), z.data(), n, 0, 2);
    for (float v : z) EXPECT_EQ(v, 0.0f) << "n " << n;
  }
}

// The GEMV over fp32 weights (matmul_wt_f32_gemv, decode's path for fp32 weights): the bf16
// problems' weights are exact fp32 values, so the same exact product checks it.
std::vector<float> widened(const Problem& p) {
  std::vector<float> w(p.w.size());
  for (size_t i = 0; i < w.size(); ++i) w[i] = from_bits(p.w[i]);
  return w;
}

TEST(MatmulF32Gemv, BothInstructionSetsMatchTheExactProduct) {
  uint64_t seed = 500;
  for (int64_t n : {1, 2, 3, 4, 5, 9}) {
    for (int64_t in : {1, 3, 7, 8, 9, 15, 16, 17, 31, 100, 257}) {
      for (int64_t out : {1, 2, 7, 33}) {
        const Problem p(n, in, out, seed++);
        const std::vector<float> w = widened(p);
        for (Bf16Isa isa : {Bf16Isa::Baseline, Bf16Isa::Avx2Fma}) {
          std::vector<float> y = poisoned(p);
          matmul_wt_f32_gemv(p.x.data(), w.data(), y.data(), n, in, out, isa, 1);
          p.check(y, "f32 gemv isa " + std::to_string(static_cast<int>(isa)) + " " + shape(p));
        }
        std::vector<float> d = poisoned(p);
        matmul_wt_f32(p.x.data(), w.data(), d.data(), n, in, out);
        p.check(d, "f32 dispatch " + shape(p));
      }
    }
  }
}

TEST(MatmulF32Gemv, TheDispatcherGivesThePathItPicksBitForBit) {
  for (int64_t n : {int64_t{1}, kF32GemvMaxRows, kF32GemvMaxRows + 1, int64_t{40}}) {
    const Problem p(n, 96, 70, 700 + static_cast<uint64_t>(n));
    const std::vector<float> w = widened(p);
    std::vector<float> d = poisoned(p), e = poisoned(p);
    matmul_wt_f32(p.x.data(), w.data(), d.data(), n, p.in, p.out);
    if (n <= kF32GemvMaxRows) {
      matmul_wt_f32_gemv(p.x.data(), w.data(), e.data(), n, p.in, p.out, bf16_best_isa(), 1);
    } else {
      matmul_wt(p.x.data(), w.data(), e.data(), n, p.in, p.out);
    }
    EXPECT_EQ(0, std::memcmp(d.data(), e.data(), d.size() * sizeof(float))) << shape(p);
  }
}

TEST(MatmulF32Gemv, ThreadsSplitOutputRowsWithoutChangingOneBit) {
  for (int64_t n : {1, 2}) {  // four output rows at once, two
    const Problem p(n, 2048, 4500, 9);
    const std::vector<float> w = widened(p);
    std::vector<float> one = poisoned(p);
    matmul_wt_f32_gemv(p.x.data(), w.data(), one.data(), p.n, p.in, p.out, bf16_best_isa(), 1);
    p.check(one, "f32 1 thread " + shape(p));
    for (int threads : {2, 3, 16}) {
      std::vector<float> many = poisoned(p);
      matmul_wt_f32_gemv(p.x.data(), w.data(), many.data(), p.n, p.in, p.out, bf16_best_isa(),
                         threads);
      EXPECT_EQ(0, std::memcmp(one.data(), many.data(), one.size() * sizeof(float)))
          << threads << " threads, " << shape(p);
    }
  }
}

// Each output is one fixed-order sum whatever the group of rows of x it is computed in (one to
// four rows at a time, four or two weight rows at a time with AVX2): a row of x gets the bits
// it gets alone.
TEST(MatmulGemv, EachRowOfXGetsTheBitsItGetsAlone) {
  for (int64_t n : {2, 3, 4, 5, 9}) {
    const Problem p(n, 100, 37, 900 + static_cast<uint64_t>(n));
    const std::vector<float> w = widened(p);
    for (Bf16Isa isa : {Bf16Isa::Baseline, Bf16Isa::Avx2Fma}) {
      std::vector<float> all_b = poisoned(p), all_f = poisoned(p);
      matmul_wt_bf16_gemv(p.x.data(), p.w.data(), all_b.data(), n, p.in, p.out, isa, 1);
      matmul_wt_f32_gemv(p.x.data(), w.data(), all_f.data(), n, p.in, p.out, isa, 1);
      for (int64_t r = 0; r < n; ++r) {
        std::vector<float> one_b(static_cast<size_t>(p.out)), one_f(one_b.size());
        const float* xr = p.x.data() + r * p.in;
        matmul_wt_bf16_gemv(xr, p.w.data(), one_b.data(), 1, p.in, p.out, isa, 1);
        matmul_wt_f32_gemv(xr, w.data(), one_f.data(), 1, p.in, p.out, isa, 1);
        const size_t bytes = one_b.size() * sizeof(float);
        EXPECT_EQ(0, std::memcmp(one_b.data(), all_b.data() + r * p.out, bytes))
            << "bf16 row " << r << " isa " << static_cast<int>(isa) << " " << shape(p);
        EXPECT_EQ(0, std::memcmp(one_f.data(), all_f.data() + r * p.out, bytes))
            << "f32 row " << r << " isa " << static_cast<int>(isa) << " " << shape(p);
      }
    }
  }
}

TEST(MatmulBf16, EmbeddingWidensTheRowsExactly) {
  // Rows of 3: 1.0, -2.0, the smallest normal; 0.5, +inf, the largest finite bf16.
  const std::vector<uint16_t> table = {0x3f80, 0xc000, 0x0080, 0x3f00, 0x7f80, 0x7f7f};
  const int32_t ids[3] = {1, 0, 1};
  std::vector<float> out(9, std::numeric_limits<float>::quiet_NaN());
  embedding_bf16(table.data(), ids, out.data(), 3, 3);
  const float want[9] = {0.5f,           std::numeric_limits<float>::infinity(),
                         3.38953139e38f, 1.0f,
                         -2.0f,          std::numeric_limits<float>::min(),
                         0.5f,           std::numeric_limits<float>::infinity(),
                         3.38953139e38f};
  for (int i = 0; i < 9; ++i) EXPECT_EQ(out[static_cast<size_t>(i)], want[i]) << i;
}

}  // namespace
}  // namespace cb::kernels::cpu
