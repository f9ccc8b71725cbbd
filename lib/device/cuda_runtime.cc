#include "lib/device/cuda_runtime.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lib/core/error.h"
#include "lib/device/cuda_error.h"

namespace cb::device {

void check_cuda(cudaError_t e, const char* call, const char* file, int line) {
  if (e == cudaSuccess) return;
  (void)cudaGetLastError();
  std::string fix;
  if (e == cudaErrorMemoryAllocation) {
    fix = "lower the memory budget (--gpu-memory), the batch or the context";
  } else if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver) {
    fix = "run with --backend cpu on a machine without a usable GPU";
  }
  throw Error(
      cuda_error_message(call, file, line, cudaGetErrorName(e), cudaGetErrorString(e), fix));
}

GpuInfo use_gpu(int index, const std::string& where, const std::string& fix) {
  std::string why;
  const std::vector<GpuInfo> gpus = list_gpus(&why);
  if (index < 0 || index >= static_cast<int>(gpus.size())) {
    throw make_error(where,
                     gpus.empty() ? "no CUDA GPU: " + why
                                  : "GPU " + std::to_string(index) + " does not exist (" +
                                        std::to_string(gpus.size()) + " visible)",
                     fix);
  }
  CB_CUDA_CHECK(cudaSetDevice(index));
  return gpus[static_cast<size_t>(index)];
}

DeviceMemoryInfo device_memory_info() {
  size_t free = 0;
  size_t total = 0;
  CB_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return {free, total};
}

Arena make_device_arena(uint64_t bytes, const std::string& name, uint64_t alignment) {
  // The Arena rounds its size down to whole granules: a 384-byte arena of 256-byte granules
  // held no 384-byte block (preset:tiny-falcon-7b's QKV row map). A bad alignment is left for
  // the Arena to refuse.
  if (alignment != 0 && (alignment & (alignment - 1)) == 0 && bytes % alignment != 0)
    bytes += alignment - bytes % alignment;
  void* p = nullptr;
  if (bytes > 0) {
    const cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      size_t free = 0;
      size_t total = 0;
      std::string have = "device memory unknown";
      if (cudaMemGetInfo(&free, &total) == cudaSuccess) {
        have = std::to_string(free) + " of " + std::to_string(total) + " bytes free";
      } else {
        (void)cudaGetLastError();
      }
      throw make_error("arena " + name,
                       "cannot reserve " + std::to_string(bytes) + " bytes of device memory (" +
                           cudaGetErrorName(e) + ", " + have + ")",
                       "lower the budget (--gpu-memory) or free the GPU");
    }
  }
  std::shared_ptr<void> mem(p, [](void* q) {
    if (q != nullptr) (void)cudaFree(q);  // a destructor must not throw
  });
  return Arena(std::move(mem), bytes, name, alignment);
}

Stream::Stream(int priority) {
  int least = 0;
  int greatest = 0;
  CB_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  // greatest is the most urgent and numerically the smallest.
  const int p = std::clamp(priority, greatest, least);
  CB_CUDA_CHECK(cudaStreamCreateWithPriority(&s_, cudaStreamNonBlocking, p));
}

Stream::~Stream() {
  if (s_ != nullptr) (void)cudaStreamDestroy(s_);
}

Stream::Stream(Stream&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}

Stream& Stream::operator=(Stream&& o) noexcept {
  if (this != &o) {
    if (s_ != nullptr) (void)cudaStreamDestroy(s_);
    s_ = std::exchange(o.s_, nullptr);
  }
  return *this;
}

void Stream::synchronize() const {
  CB_CUDA_CHECK(cudaStreamSynchronize(s_));
}

bool Stream::idle() const {
  const cudaError_t e = cudaStreamQuery(s_);
  if (e == cudaErrorNotReady) return false;
  check_cuda(e, "cudaStreamQuery(s_)", __FILE__, __LINE__);
  return true;
}

Event::Event(bool timing) {
  CB_CUDA_CHECK(cudaEventCreateWithFlags(&e_, timing ? cudaEventDefault : cudaEventDisableTiming));
}

Event::~Event() {
  if (e_ != nullptr) (void)cudaEventDestroy(e_);
}

Event::Event(Event&& o) noexcept : e_(std::exchange(o.e_, nullptr)) {}

Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    if (e_ != nullptr) (void)cudaEventDestroy(e_);
    e_ = std::exchange(o.e_, nullptr);
  }
  return *this;
}

void Event::record(const Stream& s) {
  CB_CUDA_CHECK(cudaEventRecord(e_, s.get()));
}

void Event::wait_on(const Stream& s) const {
  CB_CUDA_CHECK(cudaStreamWaitEvent(s.get(), e_, 0));
}

void Event::synchronize() const {
  CB_CUDA_CHECK(cudaEventSynchronize(e_));
}

bool Event::done() const {
  const cudaError_t e = cudaEventQuery(e_);
  if (e == cudaErrorNotReady) return false;
  check_cuda(e, "cudaEventQuery(e_)", __FILE__, __LINE__);
  return true;
}

float Event::elapsed_ms(const Event& start, const Event& end) {
  float ms = 0;
  CB_CUDA_CHECK(cudaEventElapsedTime(&ms, start.e_, end.e_));
  return ms;
}

CublasHandle::CublasHandle() {
  const cublasStatus_t s = cublasCreate(&h_);
  if (s != CUBLAS_STATUS_SUCCESS) {
    h_ = nullptr;
    (void)cudaGetLastError();
    throw make_error("cuBLAS", std::string("cublasCreate failed: ") + cublasGetStatusName(s),
                     "check that a CUDA GPU is visible, or run with --backend cpu");
  }
}

CublasHandle::~CublasHandle() {
  if (h_ != nullptr) (void)cublasDestroy(h_);
}

CublasHandle::CublasHandle(CublasHandle&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}

CublasHandle& CublasHandle::operator=(CublasHandle&& o) noexcept {
  if (this != &o) {
    if (h_ != nullptr) (void)cublasDestroy(h_);
    h_ = std::exchange(o.h_, nullptr);
  }
  return *this;
}

}  // namespace cb::device
