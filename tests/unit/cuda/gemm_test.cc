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
#include "kernels/cuda/norm_gemv.h"
#include "lib/core/dtype.h"
#include "lib/device/cuda_runtime.h"
#include "tests/unit/cuda/cuda_test_util.h"
#include "tests/unit/cuda/pdl_probe.h"

namespace {

namespace kc = cb::kernels::cuda;
using cb::cuda_test::DeviceArray;
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

// The GEMV launchers' parameters over device tensors (the flags left at their defaults).
kc::GemmWtParams gemv_params(const void* x, const void* w, void* y, int64_t n, int64_t in,
                             int64_t out, kc::Storage st) {
  kc::GemmWtParams p;
  p.x = x;
  p.w = w;
  p.y = y;
  p.n = n;
  p.in = in;
  p.out = out;
  p.storage = st;
  return p;
}

kc::NormGemvParams norm_gemv_params(const void* x, const void* norm_w, const void* w,
                                    const void* w2, void* y, int64_t n, int64_t in, int64_t out,
                                    kc::Storage st) {
  kc::NormGemvParams p;
  p.x = x;
  p.norm_w = norm_w;
  p.w = w;
  p.w2 = w2;
  p.y = y;
  p.n = n;
  p.in = in;
  p.out = out;
  p.storage = st;
  return p;
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

TEST(CudaGemv, SwigluFusionAppliesWhereThePlainGemvDoesWithoutAccumulating) {
  alignas(16) static const char buf[64] = {};
  alignas(16) static char y[64];
  kc::GemmWtParams p;
  p.x = buf;
  p.w = buf;
  p.y = y;
  p.n = 1;
  p.in = 4096;
  p.out = 11008;
  p.storage = kc::Storage::F16;
  EXPECT_TRUE(kc::gemv_swiglu_applies(p, buf));
  EXPECT_FALSE(kc::gemv_swiglu_applies(p, nullptr));
  EXPECT_FALSE(kc::gemv_swiglu_applies(p, buf + 8));  // up's rows not 16-byte aligned
  kc::GemmWtParams q = p;
  q.accumulate = true;
  EXPECT_FALSE(kc::gemv_swiglu_applies(q, buf));
  q = p;
  q.n = kc::kGemvMaxRows + 1;  // prefill: one GEMM over the fused matrix instead
  EXPECT_FALSE(kc::gemv_swiglu_applies(q, buf));
  q = p;
  q.storage = kc::Storage::F32;
  EXPECT_FALSE(kc::gemv_swiglu_applies(q, buf));
  q.storage = kc::Storage::F16;
  EXPECT_EQ(kc::launch_gemv_swiglu(q, buf + 8, nullptr), cudaErrorInvalidValue);  // no GPU needed
  q.y = nullptr;
  EXPECT_EQ(kc::launch_gemv_swiglu(q, buf, nullptr), cudaErrorInvalidValue);
}

// PDL is used only where the GEMV kernels were compiled for sm_90 or later: never without a GPU.
// GemmWtParams::deep only where its 4 blocks an SM still hold the launch in one wave.
TEST(CudaGemv, DeepLaunchBoundsOnlyWhereTheLaunchStaysOneWave) {
  EXPECT_TRUE(kc::gemv_deep_fits(4096, 132));   // llama-2-7b's output and down projections
  EXPECT_TRUE(kc::gemv_deep_fits(4224, 132));   // 528 blocks: 4 on each of 132 SMs
  EXPECT_FALSE(kc::gemv_deep_fits(4225, 132));  // a 529th block
  EXPECT_FALSE(kc::gemv_deep_fits(5120, 132));  // llama-2-13b's
  EXPECT_FALSE(kc::gemv_deep_fits(12288, 132));
  EXPECT_TRUE(kc::gemv_deep_fits(1, 1));
  EXPECT_FALSE(kc::gemv_deep_fits(33, 1));
  EXPECT_FALSE(kc::gemv_deep_fits(0, 132));
  EXPECT_FALSE(kc::gemv_deep_fits(4096, 0));
}

TEST(CudaGemv, ProgrammaticDependentLaunchNeedsSm90Kernels) {
  int n = 0;
  if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0) GTEST_SKIP() << "a GPU is present";
  (void)cudaGetLastError();
  EXPECT_FALSE(kc::gemv_pdl_supported());
}

TEST(CudaGemv, NormFusionAppliesWhereThePlainGemvDoesWithAnAlignedNorm) {
  alignas(16) static const char buf[64] = {};
  kc::NormGemvParams p;
  p.x = buf;
  p.norm_w = buf;
  p.w = buf;
  p.n = kc::kGemvMaxRows;
  p.in = 4096;
  p.out = 11008;
  p.storage = kc::Storage::F16;
  EXPECT_TRUE(kc::norm_gemv_applies(p));
  auto with = [&](auto change) {
    kc::NormGemvParams q = p;
    change(q);
    return kc::norm_gemv_applies(q);
  };
  EXPECT_TRUE(with([](kc::NormGemvParams& q) { q.w2 = buf; }));  // gate and up, SwiGLU
  EXPECT_FALSE(with([](kc::NormGemvParams& q) { q.norm_w = nullptr; }));
  EXPECT_FALSE(with([](kc::NormGemvParams& q) { q.norm_w = buf + 2; }));
  EXPECT_FALSE(with([](kc::NormGemvParams& q) { q.w2 = buf + 8; }));
  EXPECT_FALSE(with([](kc::NormGemvParams& q) { q.x = buf + 2; }));
  EXPECT_FALSE(with([](kc::NormGemvParams& q) { q.n = kc::kGemvMaxRows + 1; }));
  EXPECT_FALSE(with([](kc::NormGemvParams& q) { q.storage = kc::Storage::F32; }));
  EXPECT_FALSE(with([](kc::NormGemvParams& q) { q.in = 4100; }));
  // No shared memory: any row length the plain GEMV takes (65B/70B's 8,192 and beyond).
  EXPECT_TRUE(with([](kc::NormGemvParams& q) { q.in = 32768; }));
  p.y = nullptr;  // the launcher refuses what the kernel cannot write, without a GPU too
  EXPECT_EQ(kc::launch_norm_gemv(p, nullptr), cudaErrorInvalidValue);
  alignas(16) static char out[64] = {};
  p.y = out;
  p.norm_eps = -1.0f;
  EXPECT_EQ(kc::launch_norm_gemv(p, nullptr), cudaErrorInvalidValue);
}

// The decode MLP in one launch: h = x * g (not rounded), gate and up as h . w^T scaled by
// RMSNorm's 1 / rms(x) and rounded, then SwiGLU, against kernels/cpu's matmul_wt and swiglu
// computed that way (the kernel's arithmetic: the separate launches round the normalized row,
// which moves a product by up to sqrt(in) roundings of its terms); and the normalized QKV-style
// layer alone.
TEST(CudaKernels, FusedNormGemvAndSwigluMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  for (kc::Storage st : {kc::Storage::F16, kc::Storage::BF16}) {
    for (const auto& [n, in, out] :
         std::vector<std::tuple<int64_t, int64_t, int64_t>>{{1, 4096, 1000},
                                                            {2, 520, 37},
                                                            {4, 5120, 64},
                                                            // 65B/70B decode rows.
                                                            {3, 8192, 40},
                                                            {4, 8192, 64}}) {
      for (bool glu : {false, true}) {
        const std::string what = std::to_string(n) + "x" + std::to_string(in) + "x" +
                                 std::to_string(out) + " " + storage_name(st) +
                                 (glu ? " norm+swiglu" : " norm");
        std::vector<float> x(static_cast<size_t>(n * in)), g(static_cast<size_t>(in));
        std::vector<float> w(static_cast<size_t>(out * in)), w2(w.size());
        for (float& v : x) v = round_to(st, 3.0f * u(rng));
        for (float& v : g) v = round_to(st, 1.0f + 0.5f * u(rng));
        for (float& v : w) v = round_to(st, u(rng) / 16);
        for (float& v : w2) v = round_to(st, u(rng) / 16);
        std::vector<float> a(static_cast<size_t>(n * out)), b(a.size()), want;
        const std::vector<float> h = cb::cuda_test::norm_gemv_input(x, g, n, in);
        const std::vector<float> inv = cb::cuda_test::rms_scales(x, n, in, 1e-5f);
        cb::kernels::cpu::matmul_wt(h.data(), w.data(), a.data(), n, in, out);
        cb::cuda_test::scale_rows(&a, inv, out, st);
        want = a;
        if (glu) {
          cb::kernels::cpu::matmul_wt(h.data(), w2.data(), b.data(), n, in, out);
          cb::cuda_test::scale_rows(&b, inv, out, st);
          cb::kernels::cpu::swiglu(a.data(), b.data(), want.data(), n * out);
        }
        DeviceTensor dx(st, x), dg(st, g), dw(st, w), dw2(st, w2), dy(st, want.size());
        // At one row without SwiGLU also compiled for 4 blocks an SM (NormGemvParams::deep),
        // launched with programmatic dependent launch.
        for (bool deep : {false, true}) {
          if (deep && (n != 1 || glu)) continue;
          dy.poison();
          kc::NormGemvParams p = norm_gemv_params(
              dx.get(), dg.get(), dw.get(), glu ? dw2.get() : nullptr, dy.get(), n, in, out, st);
          p.pdl = glu || deep;  // the SwiGLU and deep forms with programmatic dependent launch
          p.deep = deep;
          ASSERT_EQ(kc::launch_norm_gemv(p, nullptr), cudaSuccess) << what;
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
          const std::vector<float> got = dy.download();
          // One rounding of the result, and the rare product rounded the other way by a
          // different summation order (a unit of the storage type).
          const float tol = st == kc::Storage::F16 ? 4e-3f : 3e-2f;
          for (size_t i = 0; i < got.size(); ++i) {
            ASSERT_LE(std::fabs(got[i] - want[i]), tol * (std::fabs(want[i]) + 0.1f))
                << what << (deep ? " deep" : "") << " at " << i << ": got " << got[i] << " want "
                << want[i];
          }
        }
      }
    }
  }
}

// The gate|up GEMV with its SwiGLU (one launch) on a fused [2 * out, in] matrix, gate's rows
// then up's, as the model holds it: kernels/cpu matmul_wt of each half, each product rounded,
// then swiglu.
TEST(CudaKernels, GemvSwigluMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  std::mt19937 rng(6);
  std::uniform_real_distribution<float> u(-1, 1);
  for (kc::Storage st : {kc::Storage::F16, kc::Storage::BF16}) {
    for (const auto& [n, in, out] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
             {1, 4096, 11008}, {2, 5120, 13824}, {3, 136, 37}, {4, 1032, 20}, {4, 8, 5}}) {
      const std::string what = std::to_string(n) + "x" + std::to_string(in) + "x" +
                               std::to_string(out) + " " + storage_name(st);
      std::vector<float> x(static_cast<size_t>(n * in)), w(static_cast<size_t>(2 * out * in));
      for (float& v : x) v = round_to(st, u(rng));
      for (float& v : w) v = round_to(st, u(rng) / 16);
      std::vector<float> a(static_cast<size_t>(n * out)), b(a.size()), want(a.size());
      cb::kernels::cpu::matmul_wt(x.data(), w.data(), a.data(), n, in, out);
      cb::kernels::cpu::matmul_wt(x.data(), w.data() + out * in, b.data(), n, in, out);
      for (float& v : a) v = round_to(st, v);
      for (float& v : b) v = round_to(st, v);
      cb::kernels::cpu::swiglu(a.data(), b.data(), want.data(), n * out);
      DeviceTensor dx(st, x), dw(st, w), dy(st, want.size());
      dy.poison();
      kc::GemmWtParams p = gemv_params(dx.get(), dw.get(), dy.get(), n, in, out, st);
      const void* up = static_cast<const char*>(dw.get()) +
                       static_cast<size_t>(out * in) * kc::storage_bytes(st);
      p.pdl = n % 2 == 0;  // half the shapes launched with programmatic dependent launch
      ASSERT_EQ(kc::launch_gemv_swiglu(p, up, nullptr), cudaSuccess) << what;
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
      const std::vector<float> got = dy.download();
      // One rounding of the result, and a product rounded the other way by a different
      // summation order (errors scale with a row's typical magnitude, sqrt(in) / 16).
      const float tol = st == kc::Storage::F16 ? 4e-3f : 3e-2f;
      const float mag = std::sqrt(static_cast<float>(in)) / 16 + 0.1f;
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_LE(std::fabs(got[i] - want[i]), tol * (std::fabs(want[i]) + mag))
            << what << " at " << i << ": got " << got[i] << " want " << want[i];
      }
    }
  }
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
        // At one row also compiled for 4 blocks an SM (GemmWtParams::deep), both ways.
        for (bool deep : {false, true}) {
          if (deep && n != 1) continue;
          if (acc) {
            dy.upload(y0);
          } else {
            dy.poison();
          }
          kc::GemmWtParams p = gemv_params(dx.get(), dw.get(), dy.get(), n, in, out, st);
          p.accumulate = acc;
          p.pdl = acc;  // the accumulating shapes launched with programmatic dependent launch
          p.deep = deep;
          ASSERT_EQ(kc::gemm_wt(handle.get(), p, nullptr), CUBLAS_STATUS_SUCCESS) << what;
          const std::vector<float> got = dy.download();
          // Errors scale with the row's typical magnitude (sqrt(in) for unit inputs).
          const float mag = std::sqrt(static_cast<float>(in)) + 1.0f;
          const float tol = st == kc::Storage::F32   ? 1e-4f
                            : st == kc::Storage::F16 ? 2e-3f
                                                     : 1.6e-2f;
          for (size_t i = 0; i < got.size(); ++i) {
            ASSERT_LE(std::fabs(got[i] - want[i]), tol * mag)
                << what << (deep ? " deep" : "") << " at " << i;
          }
        }
      }
    }
  }
}

}  // namespace

namespace {

constexpr uint64_t kLateNs = 2'000'000;  // how long the producer waits before writing

// A grid launched with programmatic dependent launch after a kernel that signals
// launch_dependents as it starts does start before that kernel ends: otherwise the ordering
// test below could not tell a GEMV that waits from one that does not. (Fails where launches are
// serialized: CUDA_LAUNCH_BLOCKING=1, compute-sanitizer, some profilers.)
TEST(CudaGemv, ProgrammaticDependentLaunchStartsBeforeTheKernelBeforeEnds) {
  SKIP_WITHOUT_GPU();
  if (!kc::gemv_pdl_supported()) GTEST_SKIP() << "PDL needs GEMV kernels compiled for sm_90";
  cb::device::Stream stream;
  DeviceArray<uint32_t> x(std::vector<uint32_t>{7, 7, 7, 7}),
      src(std::vector<uint32_t>{1, 1, 1, 1});
  DeviceArray<uint32_t> seen(1);
  seen.poison();
  ASSERT_EQ(cb::cuda_test::preload_pdl_probes(), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the copies above, before the stream's work
  ASSERT_EQ(cb::cuda_test::launch_late_copy(x.get(), src.get(), 16, nullptr, nullptr, 0,
                                            5 * kLateNs, stream.get()),
            cudaSuccess);
  ASSERT_EQ(cb::cuda_test::launch_pdl_peek(x.get(), seen.get(), stream.get()), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream.get()), cudaSuccess);
  EXPECT_EQ(seen.download()[0], 7u) << "the PDL reader ran only after the producer had written";
  EXPECT_EQ(x.download()[0], 1u);
}

// Each GEMV form launched with PDL right after a producer that lets it start at once but writes
// x (and an accumulating GEMV's y) 2 ms later writes the same bits as the same launch made
// after x and y were in place; so does a second PDL GEMV reading the first one's output (its
// wait covers the producer too, through the first one's). Poisoned outputs: a GEMV that read x
// or y early gives NaN or other bits.
TEST(CudaGemv, ProgrammaticDependentLaunchWaitsForTheKernelBefore) {
  SKIP_WITHOUT_GPU();
  if (!kc::gemv_pdl_supported()) GTEST_SKIP() << "PDL needs GEMV kernels compiled for sm_90";
  ASSERT_EQ(cb::cuda_test::preload_pdl_probes(), cudaSuccess);
  cb::device::Stream stream;
  cudaStream_t s = stream.get();
  std::mt19937 rng(8);
  std::uniform_real_distribution<float> u(-1, 1);
  const int64_t in = 4096, out = 1024;
  enum Form { kPlain, kAccumulate, kSwiglu, kNorm, kNormSwiglu, kChain };
  for (kc::Storage st : {kc::Storage::F16, kc::Storage::BF16}) {
    std::vector<float> w(static_cast<size_t>(2 * out * in)), w2(static_cast<size_t>(in * out));
    std::vector<float> g(static_cast<size_t>(in));
    for (float& v : w) v = round_to(st, u(rng) / 16);
    for (float& v : w2) v = round_to(st, u(rng) / 16);
    for (float& v : g) v = round_to(st, 1 + u(rng) / 4);
    DeviceTensor dw(st, w), dw2(st, w2), dg(st, g);
    const size_t esz = kc::storage_bytes(st);
    const void* up = static_cast<const char*>(dw.get()) + static_cast<size_t>(out * in) * esz;
    for (int64_t n : {int64_t{1}, int64_t{4}}) {
      std::vector<float> x(static_cast<size_t>(n * in)), y0(static_cast<size_t>(n * out));
      for (float& v : x) v = round_to(st, u(rng));
      for (float& v : y0) v = round_to(st, u(rng));
      DeviceTensor xsrc(st, x), ysrc(st, y0);
      for (Form f : {kPlain, kAccumulate, kSwiglu, kNorm, kNormSwiglu, kChain}) {
        const std::string what = std::string(storage_name(st)) + " n=" + std::to_string(n) +
                                 " form " + std::to_string(static_cast<int>(f));
        // pdl: the late producer, then PDL launches; else x and y copied first, plain launches.
        const auto run = [&](bool pdl) {
          DeviceTensor dx(st, x.size()), dy(st, y0.size()), dz(st, static_cast<size_t>(n * in));
          dx.poison();
          dy.poison();
          dz.poison();
          EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // before the (non-blocking) stream
          const bool acc = f == kAccumulate;
          const size_t xb = x.size() * esz, yb = acc ? y0.size() * esz : 0;
          if (pdl) {
            EXPECT_EQ(
                cb::cuda_test::launch_late_copy(dx.get(), xsrc.get(), xb, acc ? dy.get() : nullptr,
                                                ysrc.get(), yb, kLateNs, s),
                cudaSuccess);
          } else {
            EXPECT_EQ(cudaMemcpyAsync(dx.get(), xsrc.get(), xb, cudaMemcpyDeviceToDevice, s),
                      cudaSuccess);
            EXPECT_EQ(cudaMemcpyAsync(dy.get(), ysrc.get(), yb, cudaMemcpyDeviceToDevice, s),
                      cudaSuccess);
          }
          kc::GemmWtParams p = gemv_params(dx.get(), dw.get(), dy.get(), n, in, out, st);
          p.accumulate = acc;
          p.pdl = pdl;
          kc::NormGemvParams q =
              norm_gemv_params(dx.get(), dg.get(), dw.get(), f == kNormSwiglu ? up : nullptr,
                               dy.get(), n, in, out, st);
          q.pdl = pdl;
          if (f == kSwiglu) {
            EXPECT_EQ(kc::launch_gemv_swiglu(p, up, s), cudaSuccess) << what;
          } else if (f == kNorm || f == kNormSwiglu) {
            EXPECT_EQ(kc::launch_norm_gemv(q, s), cudaSuccess) << what;
          } else {
            EXPECT_EQ(kc::launch_gemv_wt(p, s), cudaSuccess) << what;
          }
          if (f == kChain) {  // z = y . w2^T, launched right after the first GEMV
            kc::GemmWtParams p2 = p;
            p2.x = dy.get();
            p2.w = dw2.get();
            p2.y = dz.get();
            p2.in = out;
            p2.out = in;
            EXPECT_EQ(kc::launch_gemv_wt(p2, s), cudaSuccess) << what;
          }
          EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess) << what;
          return f == kChain ? dz.download() : dy.download();
        };
        // The first PDL launch of a kernel may load it (lazy module loading), which can wait for
        // the producer and hide an early read: a launch to load each kernel, then the compared.
        (void)run(true);
        const std::vector<float> want = run(false), got = run(true);
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i) {
          ASSERT_FALSE(std::isnan(want[i])) << what << " at " << i;
          ASSERT_EQ(got[i], want[i]) << what << " at " << i;
        }
      }
    }
  }
}

}  // namespace
