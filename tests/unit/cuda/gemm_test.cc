// cuBLAS linear layers (kernels/cuda gemm): the row-major to column-major mapping is checked on
// the host with a naive column-major GEMM against kernels/cpu matmul_wt; the cuBLAS calls are
// compared with matmul_wt on the GPU in fp32, fp16 and bf16 (skipped without a GPU).
#include "kernels/cuda/gemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cpu/ops.h"
#include "lib/core/dtype.h"
#include "lib/device/cuda_runtime.h"
#include "tests/unit/cuda/cuda_test_util.h"

namespace {

namespace kc = cb::kernels::cuda;
using cb::cuda_test::DeviceArray;

// C = op(A) . op(B), column-major, as cublasGemmEx computes it (alpha 1, beta 0).
void colmajor_gemm(const kc::GemmShape& g, const float* a, const float* b, float* c) {
  for (int64_t j = 0; j < g.n; ++j) {
    for (int64_t i = 0; i < g.m; ++i) {
      double s = 0;
      for (int64_t l = 0; l < g.k; ++l) {
        const float av = g.trans_a ? a[i * g.lda + l] : a[l * g.lda + i];
        const float bv = g.trans_b ? b[l * g.ldb + j] : b[j * g.ldb + l];
        s += static_cast<double>(av) * bv;
      }
      c[j * g.ldc + i] = static_cast<float>(s);
    }
  }
}

TEST(CudaGemmShape, ColumnMajorCallComputesTheRowMajorProduct) {
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> u(-1, 1);
  for (const auto& [n, in, out] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {1, 7, 5}, {3, 16, 9}, {17, 33, 64}, {8, 1, 3}}) {
    std::vector<float> x(static_cast<size_t>(n * in)), w(static_cast<size_t>(out * in));
    for (float& v : x) v = u(rng);
    for (float& v : w) v = u(rng);
    std::vector<float> want(static_cast<size_t>(n * out)), got(want.size(), NAN);
    cb::kernels::cpu::matmul_wt(x.data(), w.data(), want.data(), n, in, out);
    const kc::GemmShape g = kc::gemm_wt_shape(n, in, out);
    colmajor_gemm(g, w.data(), x.data(), got.data());
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], 1e-5f * (std::fabs(want[i]) + 1))
          << n << "x" << in << "x" << out << " at " << i;
    }
  }
}

TEST(CudaGemmShape, RejectsBadParametersBeforeCallingCublas) {
  kc::GemmWtParams p;
  EXPECT_EQ(kc::gemm_wt(nullptr, p, nullptr), CUBLAS_STATUS_SUCCESS);  // n == 0
  p.n = 2;
  p.out = 3;
  p.in = 4;
  EXPECT_EQ(kc::gemm_wt(nullptr, p, nullptr), CUBLAS_STATUS_INVALID_VALUE);
}

float stored(float x, kc::Storage s) {
  if (s == kc::Storage::F16) return cb::fp16_to_fp32(cb::fp32_to_fp16(x));
  if (s == kc::Storage::BF16) return cb::bf16_to_fp32(cb::fp32_to_bf16(x));
  return x;
}

void upload_as(DeviceArray<uint8_t>& d, const std::vector<float>& h, kc::Storage s) {
  if (s == kc::Storage::F32) {
    ASSERT_EQ(cudaMemcpy(d.get(), h.data(), h.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    return;
  }
  std::vector<uint16_t> v(h.size());
  for (size_t i = 0; i < h.size(); ++i) {
    v[i] = s == kc::Storage::F16 ? cb::fp32_to_fp16(h[i]) : cb::fp32_to_bf16(h[i]);
  }
  ASSERT_EQ(cudaMemcpy(d.get(), v.data(), v.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
}

std::vector<float> download_as(const DeviceArray<uint8_t>& d, size_t n, kc::Storage s) {
  std::vector<float> out(n);
  if (s == kc::Storage::F32) {
    EXPECT_EQ(cudaMemcpy(out.data(), d.get(), n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }
  std::vector<uint16_t> v(n);
  EXPECT_EQ(cudaMemcpy(v.data(), d.get(), n * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  for (size_t i = 0; i < n; ++i) {
    out[i] = s == kc::Storage::F16 ? cb::fp16_to_fp32(v[i]) : cb::bf16_to_fp32(v[i]);
  }
  return out;
}

TEST(CudaKernels, GemmMatchesMatmulWt) {
  SKIP_WITHOUT_GPU();
  cb::device::CublasHandle handle;
  std::mt19937 rng(4);
  std::uniform_real_distribution<float> u(-1, 1);
  for (kc::Storage st : {kc::Storage::F32, kc::Storage::F16, kc::Storage::BF16}) {
    for (const auto& [n, in, out] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
             {1, 4096, 4096}, {33, 1024, 2816}, {256, 5120, 640}, {7, 129, 31}}) {
      for (bool acc : {false, true}) {
        const std::string what = std::to_string(n) + "x" + std::to_string(in) + "x" +
                                 std::to_string(out) + " storage " +
                                 std::to_string(static_cast<int>(st)) + (acc ? " +=" : "");
        std::vector<float> x(static_cast<size_t>(n * in)), w(static_cast<size_t>(out * in));
        std::vector<float> y0(static_cast<size_t>(n * out));
        for (float& v : x) v = stored(u(rng), st);
        for (float& v : w) v = stored(u(rng), st);
        for (float& v : y0) v = stored(u(rng), st);
        std::vector<float> want(y0.size());
        cb::kernels::cpu::matmul_wt(x.data(), w.data(), want.data(), n, in, out);
        if (acc) {
          for (size_t i = 0; i < want.size(); ++i) want[i] += y0[i];
        }
        const size_t esz = kc::storage_bytes(st);
        DeviceArray<uint8_t> dx(x.size() * esz), dw(w.size() * esz), dy(y0.size() * esz);
        upload_as(dx, x, st);
        upload_as(dw, w, st);
        if (acc) {
          upload_as(dy, y0, st);
        } else {
          dy.poison();
        }
        kc::GemmWtParams p;
        p.x = dx.get();
        p.w = dw.get();
        p.y = dy.get();
        p.n = n;
        p.in = in;
        p.out = out;
        p.storage = st;
        p.accumulate = acc;
        ASSERT_EQ(kc::gemm_wt(handle.get(), p, nullptr), CUBLAS_STATUS_SUCCESS) << what;
        const std::vector<float> got = download_as(dy, y0.size(), st);
        // Errors scale with the row's typical magnitude (sqrt(in) for unit inputs).
        const float mag = std::sqrt(static_cast<float>(in)) + 1.0f;
        const float tol = st == kc::Storage::F32 ? 1e-4f : st == kc::Storage::F16 ? 2e-3f : 1.6e-2f;
        for (size_t i = 0; i < got.size(); ++i) {
          ASSERT_LE(std::fabs(got[i] - want[i]), tol * mag) << what << " at " << i;
        }
      }
    }
  }
}

}  // namespace
