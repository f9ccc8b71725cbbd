// lib/device/cuda_runtime: checked calls, the device arena, streams and events. The error
// paths run on any machine with the CUDA runtime (no GPU needed); the rest skips without one.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "lib/core/error.h"
#include "lib/device/cuda_runtime.h"
#include "tests/unit/cuda/cuda_test_util.h"

namespace cb::device {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const cb::Error& e) {
    return e.what();
  }
  return "";
}

TEST(CudaRuntime, CheckNamesTheFailingCallFileAndLine) {
  const int line = __LINE__ + 1;
  const std::string e = error_of([] { CB_CUDA_CHECK(cudaErrorInvalidValue); });
  EXPECT_NE(e.find("tests/unit/cuda/runtime_test.cc:" + std::to_string(line)), std::string::npos)
      << e;
  EXPECT_NE(e.find("cudaErrorInvalidValue failed: cudaErrorInvalidValue"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  EXPECT_NE(error_of([] { CB_CUDA_CHECK(cudaErrorMemoryAllocation); }).find("--gpu-memory"),
            std::string::npos);
  EXPECT_NO_THROW(CB_CUDA_CHECK(cudaSuccess));
}

// Without a GPU this fails for want of a device, with one for want of memory: either way a
// one-line error naming the arena and the budget, and no pending CUDA error afterwards.
TEST(CudaRuntime, ArenaBeyondTheDeviceIsAClearError) {
  const uint64_t huge = uint64_t{1} << 50;  // 1 PiB
  const std::string e = error_of([&] { make_device_arena(huge, "weights"); });
  EXPECT_NE(e.find("arena weights: cannot reserve " + std::to_string(huge)), std::string::npos)
      << e;
  EXPECT_NE(e.find("--gpu-memory"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  int n = 0;
  if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0) {
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  }
}

// With a GPU the handle is created; without one the failure is a one-line cb::Error.
TEST(CudaRuntime, CublasHandleOrAClearError) {
  int n = 0;
  const bool gpu = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
  (void)cudaGetLastError();
  const std::string e = error_of([] {
    CublasHandle h;
    CublasHandle moved = std::move(h);
    EXPECT_EQ(h.get(), nullptr);
    EXPECT_NE(moved.get(), nullptr);
  });
  if (gpu) {
    EXPECT_EQ(e, "");
  } else {
    EXPECT_NE(e.find("cuBLAS: cublasCreate failed: CUBLAS_STATUS_"), std::string::npos) << e;
    EXPECT_NE(e.find("--backend cpu"), std::string::npos) << e;
  }
}

TEST(CudaRuntime, ArenaBlocksAreDeviceMemory) {
  SKIP_WITHOUT_GPU();
  Arena a = make_device_arena(64 << 20, "test");
  EXPECT_EQ(a.budget(), 64u << 20);
  const DeviceMemoryInfo info = device_memory_info();
  EXPECT_GT(info.total, 0u);
  EXPECT_LE(info.free, info.total);
  Arena::Block x = a.allocate(1000, "x");
  Arena::Block y = a.allocate(3000, "y");
  cudaPointerAttributes attr{};
  CB_CUDA_CHECK(cudaPointerGetAttributes(&attr, y.data()));
  EXPECT_EQ(attr.type, cudaMemoryTypeDevice);
  CB_CUDA_CHECK(cudaMemset(x.data(), 0x11, x.size()));
  CB_CUDA_CHECK(cudaMemset(y.data(), 0x22, y.size()));
  std::vector<unsigned char> hx(x.size());
  CB_CUDA_CHECK(cudaMemcpy(hx.data(), x.data(), x.size(), cudaMemcpyDeviceToHost));
  for (unsigned char c : hx) ASSERT_EQ(c, 0x11);  // y's memset did not reach x
  EXPECT_NE(error_of([&] { a.allocate(65 << 20, "too much"); }).find("too much"),
            std::string::npos);
}

// Stream b waits on an event recorded after a's write, then reads: it sees the write, and the
// event pair times it.
TEST(CudaRuntime, EventsOrderStreamsAndTime) {
  SKIP_WITHOUT_GPU();
  Arena a = make_device_arena(256 << 20, "streams");
  const size_t n = 128 << 20;
  Arena::Block buf = a.allocate(n, "buf");
  Stream s1(0);
  Stream s2(-100);  // clamped to the device's range
  Event start;
  Event written;
  Event end(true);
  start.record(s1);
  CB_CUDA_CHECK(cudaMemsetAsync(buf.data(), 0x5a, n, s1.get()));
  written.record(s1);
  written.wait_on(s2);
  std::vector<unsigned char> host(n);
  CB_CUDA_CHECK(cudaMemcpyAsync(host.data(), buf.data(), n, cudaMemcpyDeviceToHost, s2.get()));
  end.record(s2);
  end.synchronize();
  EXPECT_TRUE(end.done());
  EXPECT_TRUE(s1.idle());
  EXPECT_TRUE(s2.idle());
  EXPECT_EQ(host.front(), 0x5a);
  EXPECT_EQ(host[n / 2], 0x5a);
  EXPECT_EQ(host.back(), 0x5a);
  EXPECT_GT(Event::elapsed_ms(start, end), 0.0f);
  Stream moved = std::move(s1);
  EXPECT_EQ(s1.get(), nullptr);
  moved.synchronize();
}

}  // namespace
}  // namespace cb::device
