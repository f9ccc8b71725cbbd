#pragma once
/// Shared by the CUDA test files: the skip when no GPU is usable, a typed device array, and a
/// device tensor in a storage type (fp32, fp16, bf16) seen from the host as floats.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/storage.h"
#include "lib/core/dtype.h"

/// Skips the test, with the runtime's reason, when no CUDA GPU can be used.
#define SKIP_WITHOUT_GPU()                                                        \
  do {                                                                            \
    int n_ = 0;                                                                   \
    const cudaError_t e_ = cudaGetDeviceCount(&n_);                               \
    if (e_ != cudaSuccess || n_ == 0)                                             \
      GTEST_SKIP() << "no CUDA GPU: "                                             \
                   << (e_ != cudaSuccess ? cudaGetErrorString(e_) : "0 devices"); \
  } while (0)

namespace cb::cuda_test {

/// `n` elements of T in device memory; failures of the CUDA calls fail the test.
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t n) : n_(n) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T)), cudaSuccess);
    ptr_ = static_cast<T*>(p);
  }
  explicit DeviceArray(const std::vector<T>& v) : DeviceArray(v.size()) { upload(v); }
  ~DeviceArray() { cudaFree(ptr_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  void upload(const std::vector<T>& v) {
    EXPECT_EQ(cudaMemcpy(ptr_, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  std::vector<T> download() const {
    std::vector<T> v(n_);
    EXPECT_EQ(cudaMemcpy(v.data(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }
  /// All bits set: NaN for float, fp16 and bf16 elements.
  void poison() { EXPECT_EQ(cudaMemset(ptr_, 0xff, n_ * sizeof(T)), cudaSuccess); }
  T* get() const { return ptr_; }
  size_t size() const { return n_; }

 private:
  size_t n_;
  T* ptr_ = nullptr;
};

using kernels::cuda::storage_name;

/// Rounds to the storage type and back, so the CPU reference sees what the GPU sees.
inline float round_to(kernels::cuda::Storage s, float v) {
  using kernels::cuda::Storage;
  if (s == Storage::F16) return fp16_to_fp32(fp32_to_fp16(v));
  if (s == Storage::BF16) return bf16_to_fp32(fp32_to_bf16(v));
  return v;
}

/// A device tensor in a storage type, filled from and read back as floats.
class DeviceTensor {
 public:
  using Storage = kernels::cuda::Storage;
  DeviceTensor(Storage s, size_t n) : s_(s), n_(n) {
    EXPECT_EQ(cudaMalloc(&ptr_, std::max<size_t>(n, 1) * kernels::cuda::storage_bytes(s)),
              cudaSuccess);
  }
  DeviceTensor(Storage s, const std::vector<float>& v) : DeviceTensor(s, v.size()) { upload(v); }
  ~DeviceTensor() { cudaFree(ptr_); }
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;

  void upload(const std::vector<float>& v) {
    if (s_ == Storage::F32) {
      EXPECT_EQ(cudaMemcpy(ptr_, v.data(), v.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
      return;
    }
    std::vector<uint16_t> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      h[i] = s_ == Storage::F16 ? fp32_to_fp16(v[i]) : fp32_to_bf16(v[i]);
    }
    EXPECT_EQ(cudaMemcpy(ptr_, h.data(), h.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<float> download() const {
    std::vector<float> v(n_);
    if (s_ == Storage::F32) {
      EXPECT_EQ(cudaMemcpy(v.data(), ptr_, n_ * 4, cudaMemcpyDeviceToHost), cudaSuccess);
      return v;
    }
    std::vector<uint16_t> h(n_);
    EXPECT_EQ(cudaMemcpy(h.data(), ptr_, n_ * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    for (size_t i = 0; i < n_; ++i) {
      v[i] = s_ == Storage::F16 ? fp16_to_fp32(h[i]) : bf16_to_fp32(h[i]);
    }
    return v;
  }
  /// All bits set: NaN in every storage type.
  void poison() {
    EXPECT_EQ(cudaMemset(ptr_, 0xff, n_ * kernels::cuda::storage_bytes(s_)), cudaSuccess);
  }
  void* get() { return ptr_; }

 private:
  Storage s_;
  size_t n_;
  void* ptr_ = nullptr;
};

/// Relative tolerance of one rounding to the storage type (plus fp32 evaluation order).
inline float rel_tol(kernels::cuda::Storage s) {
  return s == kernels::cuda::Storage::F32   ? 2e-5f
         : s == kernels::cuda::Storage::F16 ? 2e-3f
                                            : 1.6e-2f;
}

/// |got - want| <= tol * (|want| + floor), element by element; NaN fails.
inline void expect_close(const std::vector<float>& got, const std::vector<float>& want, float tol,
                         float floor, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool ok = std::fabs(got[i] - want[i]) <= tol * (std::fabs(want[i]) + floor);
    if (!ok && reported++ < 5) {
      ADD_FAILURE() << what << ": element " << i << " got " << got[i] << " want " << want[i];
    }
  }
}

// The fused RMSNorm GEMV's reference (kernels/cuda norm_gemv computes it this way): the rows
// of x times the norm's weights g, not normalized or rounded ...
inline std::vector<float> norm_gemv_input(const std::vector<float>& x, const std::vector<float>& g,
                                          int64_t rows, int64_t in) {
  std::vector<float> h(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < in; ++k) {
      const size_t i = static_cast<size_t>(r * in + k);
      h[i] = x[i] * g[static_cast<size_t>(k)];
    }
  }
  return h;
}
// ... RMSNorm's scale of each row, 1 / sqrt(mean(x^2) + eps) ...
inline std::vector<float> rms_scales(const std::vector<float>& x, int64_t rows, int64_t in,
                                     float eps) {
  std::vector<float> inv(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t k = 0; k < in; ++k) {
      const double v = x[static_cast<size_t>(r * in + k)];
      ss += v * v;
    }
    inv[static_cast<size_t>(r)] =
        static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(in) + eps));
  }
  return inv;
}
// ... applied to each row of the products [rows, out], then rounded to the storage type.
inline void scale_rows(std::vector<float>* y, const std::vector<float>& inv, int64_t out,
                       kernels::cuda::Storage st) {
  for (size_t i = 0; i < y->size(); ++i) {
    (*y)[i] = round_to(st, (*y)[i] * inv[i / static_cast<size_t>(out)]);
  }
}

}  // namespace cb::cuda_test
