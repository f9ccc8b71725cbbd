// cuBLAS linear layers (kernels/cuda gemm): the row-major to column-major mapping is checked on
// the host with a naive column-major GEMM against kernels/cpu matmul_wt; the cuBLAS calls are
// compared with matmul_wt on the GPU in fp32, fp16 and bf16 (skipped without a GPU), as is the
// decode GEMV kernel (kernels/cuda gemv), whose dispatch rule is checked on the host.
#include "kernels/cuda/gemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cpu/ops.h"
#include "kernels/cuda/gemv.h"
#include "lib/core/dtype.h"
#include "lib/device/cuda_runtime.h"
#include "tests/unit/cuda/cuda_test_util.h"

namespace {

namespace kc = cb::kernels::cuda;
using cb::cuda_test::DeviceTensor;
using cb::cuda_test::round_to;
using cb::cuda_test::storage_name;

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

TEST(CudaGemv, AppliesToFewRowsOfHalfPrecisionWithWholeVectors) {
  alignas(16) static const char buf[64] = {};
  kc::GemmWtParams p;
  p.x = buf;
  p.w = buf;
  p.n = 1;
  p.in = 4096;
  p.out = 11008;
  p.storage = kc::Storage::F16;
  EXPECT_TRUE(kc::gemv_applies(p));
  p.storage = kc::Storage::BF16;
  EXPECT_TRUE(kc::gemv_applies(p));
  p.n = kc::kGemvMaxRows;
  EXPECT_TRUE(kc::gemv_applies(p));
  auto with = [&](auto change) {
    kc::GemmWtParams q = p;
    change(q);
    return kc::gemv_applies(q);
  };
  EXPECT_FALSE(with([](kc::GemmWtParams& q) { q.n = kc::kGemvMaxRows + 1; }));  // cuBLAS GEMM
  EXPECT_FALSE(with([](kc::GemmWtParams& q) { q.n = 0; }));
  EXPECT_FALSE(with([](kc::GemmWtParams& q) { q.storage = kc::Storage::F32; }));
  EXPECT_FALSE(with([](kc::GemmWtParams& q) { q.in = 4100; }));  // rows not whole vectors
  EXPECT_FALSE(with([](kc::GemmWtParams& q) { q.x = buf + 2; }));
  EXPECT_FALSE(with([](kc::GemmWtParams& q) { q.w = buf + 8; }));
  EXPECT_FALSE(with([](kc::GemmWtParams& q) { q.w = nullptr; }));
  EXPECT_FALSE(with([](kc::GemmWtParams& q) { q.out = int64_t{1} << 31; }));
  EXPECT_EQ(kc::gemv_blocks(1), 1u);
  EXPECT_EQ(kc::gemv_blocks(kc::kGemvWarps), 1u);
  EXPECT_EQ(kc::gemv_blocks(kc::kGemvWarps + 1), 2u);
  EXPECT_EQ(kc::gemv_blocks(32000), 32000u / kc::kGemvWarps);
  p.y = nullptr;  // the launcher refuses what the kernel cannot write, without a GPU too
  EXPECT_EQ(kc::launch_gemv_wt(p, nullptr), cudaErrorInvalidValue);
}

TEST(CudaKernels, GemmMatchesMatmulWt) {
  SKIP_WITHOUT_GPU();
  cb::device::CublasHandle handle;
  std::mt19937 rng(4);
  std::uniform_real_distribution<float> u(-1, 1);
  for (kc::Storage st : {kc::Storage::F32, kc::Storage::F16, kc::Storage::BF16}) {
    // The GEMV kernel's shapes (1-4 rows, whole 16-byte vectors) include a row shorter than a
    // warp's 32 vectors, lengths that leave a remainder after its 4-way unroll (136, 11008)
    // and an output count that is not a multiple of its 8 warps a block.
    for (const auto& [n, in, out] :
         std::vector<std::tuple<int64_t, int64_t, int64_t>>{{1, 4096, 4096},
                                                            {33, 1024, 2816},
                                                            {256, 5120, 640},
                                                            {7, 129, 31},
                                                            {1, 11008, 4096},
                                                            {2, 4096, 1003},
                                                            {3, 136, 37},
                                                            {4, 8, 5},
                                                            {4, 1032, 20}}) {
      for (bool acc : {false, true}) {
        const std::string what = std::to_string(n) + "x" + std::to_string(in) + "x" +
                                 std::to_string(out) + " " + storage_name(st) + (acc ? " +=" : "");
        std::vector<float> x(static_cast<size_t>(n * in)), w(static_cast<size_t>(out * in));
        std::vector<float> y0(static_cast<size_t>(n * out));
        for (float& v : x) v = round_to(st, u(rng));
        for (float& v : w) v = round_to(st, u(rng));
        for (float& v : y0) v = round_to(st, u(rng));
        std::vector<float> want(y0.size());
        cb::kernels::cpu::matmul_wt(x.data(), w.data(), want.data(), n, in, out);
        if (acc) {
          for (size_t i = 0; i < want.size(); ++i) want[i] += y0[i];
        }
        DeviceTensor dx(st, x), dw(st, w), dy(st, y0.size());
        if (acc) {
          dy.upload(y0);
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
        const std::vector<float> got = dy.download();
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
