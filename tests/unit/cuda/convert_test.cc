// Parity of kernels/cuda/convert against the host conversions in lib/core/dtype
// (themselves checked against the compiler's _Float16). Skips without a GPU.
#include "kernels/cuda/convert.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "lib/core/dtype.h"
#include "tests/unit/cuda/cuda_test_util.h"

namespace {

namespace kc = cb::kernels::cuda;

using cb::cuda_test::DeviceArray;

std::vector<float> test_values(size_t n) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<uint32_t> any;
  std::vector<float> v(n);
  for (auto& x : v) {
    const uint32_t u = any(rng);
    std::memcpy(&x, &u, 4);
    if (std::isnan(x)) x = 1.0f;
  }
  v[0] = 65520.0f;            // rounds to fp16 inf
  v[1] = 1.0f + 1.0f / 2048;  // tie
  return v;
}

void check_kind(kc::HalfKind kind) {
  const size_t n = (1u << 20) + 3;  // odd length, more than one grid-stride pass
  const auto host = test_values(n);
  DeviceArray<float> src(n), back(n);
  DeviceArray<uint16_t> dst(n);
  ASSERT_EQ(cudaMemcpy(src.get(), host.data(), n * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemset(dst.get(), 0xff, n * 2), cudaSuccess);  // poison: unwritten elements fail
  ASSERT_EQ(kc::launch_convert_to_half({src.get(), dst.get(), n, kind}, nullptr), cudaSuccess);
  ASSERT_EQ(kc::launch_convert_to_float({dst.get(), back.get(), n, kind}, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<uint16_t> got(n);
  std::vector<float> got_back(n);
  ASSERT_EQ(cudaMemcpy(got.data(), dst.get(), n * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(got_back.data(), back.get(), n * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  for (size_t i = 0; i < n; ++i) {
    const bool bf = kind == kc::HalfKind::BF16;
    const uint16_t want = bf ? cb::fp32_to_bf16(host[i]) : cb::fp32_to_fp16(host[i]);
    ASSERT_EQ(got[i], want) << "element " << i;
    const float wantf = bf ? cb::bf16_to_fp32(want) : cb::fp16_to_fp32(want);
    ASSERT_EQ(std::memcmp(&got_back[i], &wantf, 4), 0) << "element " << i;
  }
}

TEST(CudaConvertTest, Fp16MatchesHost) {
  SKIP_WITHOUT_GPU();
  check_kind(kc::HalfKind::F16);
}

TEST(CudaConvertTest, Bf16MatchesHost) {
  SKIP_WITHOUT_GPU();
  check_kind(kc::HalfKind::BF16);
}

TEST(CudaConvertTest, RejectsNullPointers) {
  SKIP_WITHOUT_GPU();
  EXPECT_EQ(kc::launch_convert_to_half({nullptr, nullptr, 4, kc::HalfKind::F16}, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(kc::launch_convert_to_half({nullptr, nullptr, 0, kc::HalfKind::F16}, nullptr),
            cudaSuccess);
}

}  // namespace
