// Reference CPU kernels: GEMM (OpenBLAS), norms, RoPE and element-wise ops.
//
// Accuracy choices (these are the oracle for the CUDA kernels):
// - rmsnorm / layernorm reduce in double (layernorm two-pass: mean, then centred variance),
//   so a large common offset does not cancel catastrophically.
// - rope computes every angle pos * theta^(-2i/rope_dims) and its sin/cos in double (exact
//   enough at positions of 10^5 and beyond) and rotates in double, rounding once to fp32.
// - gelu evaluates the documented erf form as 0.5 * x * erfc(-x / sqrt(2)) in double, which
//   is the same function without the cancellation of 1 + erf(...) for negative x.
// Preconditions are the caller's (lib/model checks shapes); nothing here throws or allocates
// per element.

#include "kernels/cpu/ops.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace cb::kernels::cpu {

void matmul_wt(const float* x, const float* w, float* y, int64_t n, int64_t in, int64_t out) {
  if (n <= 0 || out <= 0) return;
  if (in <= 0) {  // empty sum; BLAS would reject lda = 0
    std::fill(y, y + n * out, 0.0f);
    return;
  }
  // `in` and `out` must fit BLAS's integer type (they are model widths); rows are chunked so
  // any token count works.
  const int64_t max_rows = std::numeric_limits<blasint>::max();
  for (int64_t r = 0; r < n; r += max_rows) {
    const int64_t rows = std::min(max_rows, n - r);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(rows),
                static_cast<blasint>(out), static_cast<blasint>(in), 1.0f, x + r * in,
                static_cast<blasint>(in), w, static_cast<blasint>(in), 0.0f, y + r * out,
                static_cast<blasint>(out));
  }
}

namespace {

/// Sum of squares in double with four independent partial sums (deterministic, pipelined).
double sum_squares(const float* x, int64_t dim) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t i = 0;
  for (; i + 4 <= dim; i += 4) {
    const double a = x[i], b = x[i + 1], c = x[i + 2], d = x[i + 3];
    s0 += a * a;
    s1 += b * b;
    s2 += c * c;
    s3 += d * d;
  }
  for (; i < dim; ++i) s0 += static_cast<double>(x[i]) * x[i];
  return (s0 + s1) + (s2 + s3);
}

double sum(const float* x, int64_t dim) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t i = 0;
  for (; i + 4 <= dim; i += 4) {
    s0 += x[i];
    s1 += x[i + 1];
    s2 += x[i + 2];
    s3 += x[i + 3];
  }
  for (; i < dim; ++i) s0 += x[i];
  return (s0 + s1) + (s2 + s3);
}

double sum_centred_squares(const float* x, int64_t dim, double mean) {
  double s0 = 0, s1 = 0;
  int64_t i = 0;
  for (; i + 2 <= dim; i += 2) {
    const double a = x[i] - mean, b = x[i + 1] - mean;
    s0 += a * a;
    s1 += b * b;
  }
  for (; i < dim; ++i) {
    const double a = x[i] - mean;
    s0 += a * a;
  }
  return s0 + s1;
}

}  // namespace

void rmsnorm(const float* x, const float* w, float* y, int64_t n, int64_t dim, float eps) {
  if (dim <= 0) return;
  for (int64_t r = 0; r < n; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    const double ms = sum_squares(xr, dim) / static_cast<double>(dim);
    const float inv = static_cast<float>(1.0 / std::sqrt(ms + static_cast<double>(eps)));
    for (int64_t i = 0; i < dim; ++i) yr[i] = xr[i] * inv * w[i];
  }
}

void layernorm(const float* x, const float* w, const float* b, float* y, int64_t n, int64_t dim,
               float eps) {
  if (dim <= 0) return;
  for (int64_t r = 0; r < n; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    const double mean = sum(xr, dim) / static_cast<double>(dim);
    const double var = sum_centred_squares(xr, dim, mean) / static_cast<double>(dim);
    const double inv = 1.0 / std::sqrt(var + static_cast<double>(eps));
    for (int64_t i = 0; i < dim; ++i) {
      yr[i] = static_cast<float>((xr[i] - mean) * inv) * w[i] + b[i];
    }
  }
}

void rope(float* x, const int32_t* positions, int64_t n, int64_t heads, int64_t head_dim,
          int64_t rope_dims, float theta, Rope style) {
  // rope_dims must be even and <= head_dim; an odd trailing dimension is left untouched.
  const int64_t half = std::min(rope_dims, head_dim) / 2;
  if (half <= 0 || n <= 0 || heads <= 0) return;
  std::vector<double> inv_freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    inv_freq[static_cast<size_t>(i)] = std::pow(
        static_cast<double>(theta), -2.0 * static_cast<double>(i) / static_cast<double>(rope_dims));
  }
  std::vector<double> cs(static_cast<size_t>(2 * half));  // cos, sin interleaved per pair
  // Pair i of a head is (x[a * i], x[a * i + stride]).
  const int64_t a = style == Rope::Interleaved ? 2 : 1;
  const int64_t stride = style == Rope::Interleaved ? 1 : half;
  for (int64_t t = 0; t < n; ++t) {
    const double pos = positions[t];
    for (int64_t i = 0; i < half; ++i) {
      const double ang = pos * inv_freq[static_cast<size_t>(i)];
      cs[static_cast<size_t>(2 * i)] = std::cos(ang);
      cs[static_cast<size_t>(2 * i + 1)] = std::sin(ang);
    }
    for (int64_t h = 0; h < heads; ++h) {
      float* xh = x + (t * heads + h) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const double c = cs[static_cast<size_t>(2 * i)], s = cs[static_cast<size_t>(2 * i + 1)];
        float* p0 = xh + a * i;
        float* p1 = p0 + stride;
        const double x0 = *p0, x1 = *p1;
        *p0 = static_cast<float>(x0 * c - x1 * s);
        *p1 = static_cast<float>(x0 * s + x1 * c);
      }
    }
  }
}

void swiglu(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void gelu(float* x, int64_t n) {
  constexpr double kInvSqrt2 = 0.70710678118654752440;
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    x[i] = static_cast<float>(0.5 * v * std::erfc(-v * kInvSqrt2));
  }
}

void add_inplace(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void embedding(const float* table, const int32_t* ids, float* out, int64_t n, int64_t dim) {
  if (dim <= 0) return;
  for (int64_t t = 0; t < n; ++t) {
    std::memcpy(out + t * dim, table + static_cast<int64_t>(ids[t]) * dim,
                static_cast<size_t>(dim) * sizeof(float));
  }
}

}  // namespace cb::kernels::cpu
