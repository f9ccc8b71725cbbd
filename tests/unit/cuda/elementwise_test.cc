// Parity of kernels/cuda norm, rope, activation and embedding against kernels/cpu on random
// inputs over shape sweeps, in fp32, fp16 and bf16 storage (inputs rounded to the storage
// type first, so both sides see the same values). Outputs are poisoned with NaN before every
// launch, so an element the kernel does not write fails. The launch geometry is checked on
// the host; the parity tests skip without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/ops.h"
#include "kernels/cuda/activation.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/storage.h"
#include "lib/core/dtype.h"
#include "tests/unit/cuda/cuda_test_util.h"

namespace {

namespace kc = cb::kernels::cuda;
using cb::cuda_test::DeviceArray;
using cb::cuda_test::DeviceTensor;
using cb::cuda_test::expect_close;
using cb::cuda_test::rel_tol;
using cb::cuda_test::round_to;
using cb::cuda_test::storage_name;
using kc::Storage;

std::vector<float> random_values(size_t n, uint32_t seed, float lo = -2.0f, float hi = 2.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

std::vector<float> rounded(Storage s, std::vector<float> v) {
  for (float& x : v) x = round_to(s, x);
  return v;
}

const Storage kStorages[] = {Storage::F32, Storage::F16, Storage::BF16};

TEST(CudaLaunchDims, ElementwiseCoversEveryElementWithinTheGridLimit) {
  EXPECT_EQ(kc::elementwise_dims(0).grid, 0u);
  for (size_t n :
       {size_t{1}, size_t{255}, size_t{256}, size_t{257}, size_t{1} << 20, size_t{1} << 34}) {
    const kc::LaunchDims d = kc::elementwise_dims(n, 1000);
    EXPECT_EQ(d.block, 256u);
    EXPECT_GE(d.grid, 1u);
    EXPECT_LE(d.grid, 1000u);
    // Without the cap, one pass covers n exactly; with it, the grid-stride loop does.
    if (d.grid < 1000u) {
      EXPECT_GE(static_cast<size_t>(d.grid) * d.block, n) << n;
      EXPECT_LT(static_cast<size_t>(d.grid - 1) * d.block, n) << n;
    }
  }
}

TEST(CudaLaunchDims, RowsGetAWarpMultipleUpToOneThousandTwentyFourThreads) {
  for (int64_t dim : {1, 31, 128, 129, 4096, 5120, 8192, 1 << 20}) {
    const kc::LaunchDims d = kc::row_dims(7, dim);
    EXPECT_EQ(d.grid, 7u);
    EXPECT_EQ(d.block % 32, 0u) << dim;
    EXPECT_GE(d.block, 32u);
    EXPECT_LE(d.block, 1024u);
    if (d.block < 1024u) {
      EXPECT_GE(static_cast<int64_t>(d.block) * 4, dim) << dim;
    }
  }
  EXPECT_EQ(kc::row_dims(0, 64).grid, 0u);
  EXPECT_EQ(kc::row_dims(3, 0).grid, 0u);
  EXPECT_EQ(kc::row_dims(int64_t{1} << 31, 64).grid, 0u);  // beyond the grid's x dimension
}

TEST(CudaKernels, BadParametersAreRejectedBeforeLaunch) {
  // No device memory needed: the launchers validate first (and need no GPU for that).
  EXPECT_EQ(kc::launch_rmsnorm({nullptr, nullptr, nullptr, 0, 64}, nullptr), cudaSuccess);
  EXPECT_EQ(kc::launch_rmsnorm({nullptr, nullptr, nullptr, 2, 64}, nullptr), cudaErrorInvalidValue);
  kc::RopeParams r;
  r.n = 1;
  EXPECT_EQ(kc::launch_rope(r, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(kc::launch_swiglu({nullptr, nullptr, nullptr, -1}, nullptr), cudaErrorInvalidValue);
  alignas(16) static char buf[64];
  // 2 rows of 3, gate|up halves of rows 6 apart, out elsewhere; each change below is refused.
  const kc::SwigluParams rows{buf, buf + 6, buf + 32, 6, Storage::F16, 3, 6};
  const auto with = [&](auto change) {
    kc::SwigluParams q = rows;
    change(q);
    return kc::launch_swiglu(q, nullptr);
  };
  EXPECT_EQ(with([](kc::SwigluParams& q) { q.n = 7; }), cudaErrorInvalidValue);  // not whole rows
  EXPECT_EQ(with([](kc::SwigluParams& q) { q.in_stride = 2; }), cudaErrorInvalidValue);  // overlap
  EXPECT_EQ(with([](kc::SwigluParams& q) { q.cols = -1; }), cudaErrorInvalidValue);
  // In place over rows 6 apart: one block's writes would land on rows others still read.
  EXPECT_EQ(with([](kc::SwigluParams& q) { q.out = buf; }), cudaErrorInvalidValue);
  EXPECT_EQ(kc::launch_embedding({}, nullptr), cudaSuccess);  // n == 0
}

TEST(CudaKernels, RmsNormAndLayerNormMatchTheCpuReference) {
  SKIP_WITHOUT_GPU();
  for (Storage s : kStorages) {
    for (int64_t dim : {1, 7, 64, 127, 1000, 4096, 5121}) {
      for (int64_t rows : {1, 3, 17}) {
        const std::string what = std::string(storage_name(s)) + " rows " + std::to_string(rows) +
                                 " dim " + std::to_string(dim);
        const size_t n = static_cast<size_t>(rows * dim);
        auto x = rounded(s, random_values(n, 1, -3.0f, 5.0f));  // a non-zero mean
        auto w = rounded(s, random_values(static_cast<size_t>(dim), 2));
        auto b = rounded(s, random_values(static_cast<size_t>(dim), 3));
        DeviceTensor dx(s, x), dw(s, w), db(s, b), dy(s, n);
        std::vector<float> want(n);
        cb::kernels::cpu::rmsnorm(x.data(), w.data(), want.data(), rows, dim, 1e-5f);
        dy.poison();
        ASSERT_EQ(kc::launch_rmsnorm({dx.get(), dw.get(), dy.get(), rows, dim, 1e-5f, s}, nullptr),
                  cudaSuccess);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        expect_close(dy.download(), rounded(s, want), rel_tol(s), 1e-3f, "rmsnorm " + what);
        // In place (y aliases x).
        ASSERT_EQ(kc::launch_rmsnorm({dx.get(), dw.get(), dx.get(), rows, dim, 1e-5f, s}, nullptr),
                  cudaSuccess);
        expect_close(dx.download(), rounded(s, want), rel_tol(s), 1e-3f,
                     "rmsnorm in place " + what);
        if (dim == 1) continue;  // LayerNorm of one element is b (variance 0): covered by CPU tests
        dx.upload(x);
        cb::kernels::cpu::layernorm(x.data(), w.data(), b.data(), want.data(), rows, dim, 1e-5f);
        dy.poison();
        kc::LayerNormParams lp{dx.get(), dw.get(), db.get(), dy.get(), rows, dim, 1e-5f, s};
        ASSERT_EQ(kc::launch_layernorm(lp, nullptr), cudaSuccess);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        // Floor 0.1: y = w * xhat + b with terms of order 1 can nearly cancel, and one ulp of
        // those terms (~4e-7 measured on an H100 in fp32) must not fail a result near zero.
        expect_close(dy.download(), rounded(s, want), rel_tol(s), 1e-1f, "layernorm " + what);
      }
    }
  }
}

TEST(CudaKernels, RopeMatchesTheCpuReferenceAtAnyPosition) {
  SKIP_WITHOUT_GPU();
  for (Storage s : kStorages) {
    for (auto style : {kc::RopeStyle::Interleaved, kc::RopeStyle::RotateHalf}) {
      for (int64_t head_dim : {64, 128}) {
        for (int64_t rope_dims : {head_dim, head_dim / 2}) {  // full and partial (Falcon/NeoX)
          const int64_t n = 13, heads = 8;
          const std::string what =
              std::string(storage_name(s)) +
              (style == kc::RopeStyle::Interleaved ? " interleaved" : " half") + " head_dim " +
              std::to_string(head_dim) + " rope_dims " + std::to_string(rope_dims);
          std::vector<int32_t> pos(n);
          std::mt19937 rng(9);
          for (auto& p : pos) p = static_cast<int32_t>(rng() % 1000000);  // restored, far apart
          pos[0] = 0;
          auto x = rounded(s, random_values(static_cast<size_t>(n * heads * head_dim), 4));
          std::vector<float> want = x;
          cb::kernels::cpu::rope(want.data(), pos.data(), n, heads, head_dim, rope_dims, 10000.0f,
                                 style == kc::RopeStyle::Interleaved
                                     ? cb::kernels::cpu::Rope::Interleaved
                                     : cb::kernels::cpu::Rope::RotateHalf);
          DeviceTensor dx(s, x);
          DeviceArray<int32_t> dpos(pos);
          kc::RopeParams p;
          p.x = dx.get();
          p.positions = dpos.get();
          p.n = n;
          p.heads = heads;
          p.head_dim = head_dim;
          p.rope_dims = rope_dims;
          p.style = style;
          p.storage = s;
          ASSERT_EQ(kc::launch_rope(p, nullptr), cudaSuccess);
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          expect_close(dx.download(), rounded(s, want), rel_tol(s), 1e-2f, "rope " + what);
        }
      }
    }
  }
}

TEST(CudaKernels, ActivationsAndResidualAddMatchTheCpuReference) {
  SKIP_WITHOUT_GPU();
  for (Storage s : kStorages) {
    for (int64_t n : {1, 255, 257, 11008 * 3 + 1}) {
      const std::string what = std::string(storage_name(s)) + " n " + std::to_string(n);
      auto g = rounded(s, random_values(static_cast<size_t>(n), 5, -6.0f, 6.0f));
      auto u = rounded(s, random_values(static_cast<size_t>(n), 6));
      DeviceTensor dg(s, g), du(s, u), dout(s, static_cast<size_t>(n));
      std::vector<float> want(static_cast<size_t>(n));
      cb::kernels::cpu::swiglu(g.data(), u.data(), want.data(), n);
      dout.poison();
      ASSERT_EQ(kc::launch_swiglu({dg.get(), du.get(), dout.get(), n, s}, nullptr), cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      expect_close(dout.download(), rounded(s, want), rel_tol(s), 1e-3f, "swiglu " + what);

      want = g;
      cb::kernels::cpu::gelu(want.data(), n);
      ASSERT_EQ(kc::launch_gelu({dg.get(), n, s}, nullptr), cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      expect_close(dg.download(), rounded(s, want), rel_tol(s), 1e-3f, "gelu " + what);

      want = g;
      cb::kernels::cpu::add_inplace(want.data(), u.data(), n);
      dg.upload(g);
      ASSERT_EQ(kc::launch_add({dg.get(), du.get(), n, s}, nullptr), cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      expect_close(dg.download(), rounded(s, want), rel_tol(s), 1e-3f, "add " + what);
    }
  }
}

// SwiGLU over the halves of a fused gate|up GEMM's output rows ([rows, 2 * cols] in, [rows,
// cols] out): one row of LLaMA-7B's width, a few odd ones, and more rows than the grid's 65,535
// y blocks.
TEST(CudaKernels, SwigluOverFusedGateUpRowsMatchesTheCpuReference) {
  SKIP_WITHOUT_GPU();
  for (Storage s : kStorages) {
    for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{1, 11008}, {7, 300}, {70000, 3}}) {
      const std::string what =
          std::string(storage_name(s)) + " " + std::to_string(rows) + "x" + std::to_string(cols);
      const auto gu =
          rounded(s, random_values(static_cast<size_t>(rows * 2 * cols), 7, -6.0f, 6.0f));
      std::vector<float> g(static_cast<size_t>(rows * cols)), u(g.size()), want(g.size());
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) {
          g[static_cast<size_t>(r * cols + c)] = gu[static_cast<size_t>(r * 2 * cols + c)];
          u[static_cast<size_t>(r * cols + c)] = gu[static_cast<size_t>(r * 2 * cols + cols + c)];
        }
      }
      cb::kernels::cpu::swiglu(g.data(), u.data(), want.data(), rows * cols);
      DeviceTensor dgu(s, gu), dout(s, g.size());
      dout.poison();
      kc::SwigluParams p;
      p.gate = dgu.get();
      p.up = static_cast<const char*>(dgu.get()) + static_cast<size_t>(cols) * kc::storage_bytes(s);
      p.out = dout.get();
      p.n = rows * cols;
      p.storage = s;
      p.cols = cols;
      p.in_stride = 2 * cols;
      ASSERT_EQ(kc::launch_swiglu(p, nullptr), cudaSuccess) << what;
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      expect_close(dout.download(), rounded(s, want), rel_tol(s), 1e-3f, "swiglu rows " + what);
    }
  }
}

TEST(CudaKernels, EmbeddingGathersRowsAndFlagsOutOfRangeIds) {
  SKIP_WITHOUT_GPU();
  for (Storage s : kStorages) {
    const int64_t rows = 512, dim = 288, n = 9;
    auto table = rounded(s, random_values(static_cast<size_t>(rows * dim), 7));
    std::vector<int32_t> ids = {0, 511, 3, 3, 100, 7, 0, 256, 42};
    std::vector<float> want(static_cast<size_t>(n * dim));
    cb::kernels::cpu::embedding(table.data(), ids.data(), want.data(), n, dim);
    DeviceTensor dt(s, table), dout(s, want.size());
    DeviceArray<int32_t> dids(ids), dbad(std::vector<int32_t>{0});
    dout.poison();
    kc::EmbeddingParams p{dt.get(), dids.get(), dout.get(), n, rows, dim, dbad.get(), s};
    ASSERT_EQ(kc::launch_embedding(p, nullptr), cudaSuccess);
    EXPECT_EQ(dbad.download()[0], 0);
    expect_close(dout.download(), want, 0.0f, 0.0f, std::string("embedding ") + storage_name(s));
    ids[4] = 512;  // out of range: a zero row and the flag
    dids.upload(ids);
    ASSERT_EQ(kc::launch_embedding(p, nullptr), cudaSuccess);
    EXPECT_EQ(dbad.download()[0], 1);
    const auto got = dout.download();
    for (int64_t j = 0; j < dim; ++j) EXPECT_EQ(got[static_cast<size_t>(4 * dim + j)], 0.0f);
  }
}

}  // namespace
