#pragma once
/// Shared by the CUDA test files: the skip when no GPU is usable, and a typed device array.

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <vector>

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

}  // namespace cb::cuda_test
