#pragma once
/// The CUDA runtime as the backend uses it: every call checked (CB_CUDA_CHECK throws cb::Error
/// naming the call, file and line), device memory as a budgeted Arena, streams, events and the
/// cuBLAS handle.
/// CUDA builds only (CB_HAVE_CUDA); page-locked host memory is lib/device/host_buffer.h.

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "lib/device/arena.h"
#include "lib/device/gpu_info.h"

/// Runs a CUDA runtime call and throws cb::Error with the call's text, file and line when it
/// does not return cudaSuccess.
#define CB_CUDA_CHECK(call) ::cb::device::check_cuda((call), #call, __FILE__, __LINE__)

namespace cb::device {

/// Throws cb::Error (cuda_error_message) when `e` is not cudaSuccess; clears the runtime's
/// last-error state first so that a later, unrelated check does not report it again.
void check_cuda(cudaError_t e, const char* call, const char* file, int line);

/// Makes GPU `index` current and describes it. Throws cb::Error "WHERE: no CUDA GPU: REASON;
/// FIX" when none is usable, or names the index and the count when it does not exist.
GpuInfo use_gpu(int index, const std::string& where, const std::string& fix);

/// Free and total memory of the current device, in bytes.
struct DeviceMemoryInfo {
  uint64_t free = 0;
  uint64_t total = 0;
};
DeviceMemoryInfo device_memory_info();

/// Reserves `bytes` of device memory with one cudaMalloc and hands it out as an Arena named
/// `name`, `bytes` rounded up to whole `alignment` granules (so a block of `bytes` fits: the
/// Arena uses whole granules only). When the device cannot provide it, throws cb::Error with
/// the budget, the device's free and total memory and the fix, and leaves no CUDA error pending.
Arena make_device_arena(uint64_t bytes, const std::string& name, uint64_t alignment = 256);

/// An owned non-blocking CUDA stream (move-only). The backend runs three: compute, KV reads
/// (host to device) and KV writes (device to host).
class Stream {
 public:
  /// `priority`: lower is more urgent (cudaDeviceGetStreamPriorityRange); clamped to the range.
  explicit Stream(int priority = 0);
  ~Stream();
  Stream(Stream&& o) noexcept;
  Stream& operator=(Stream&& o) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  cudaStream_t get() const { return s_; }
  /// Blocks until the stream's work is done; throws cb::Error on a failure in that work.
  void synchronize() const;
  /// True when all work so far has finished.
  bool idle() const;

 private:
  cudaStream_t s_ = nullptr;
};

/// An owned CUDA event (move-only): ordering between streams and timing.
class Event {
 public:
  /// `timing`: false makes a lighter event that cannot be timed (cudaEventDisableTiming).
  explicit Event(bool timing = true);
  ~Event();
  Event(Event&& o) noexcept;
  Event& operator=(Event&& o) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  cudaEvent_t get() const { return e_; }
  /// Records the event at the current end of `s`.
  void record(const Stream& s);
  /// Makes `s` wait for this event's work without blocking the host.
  void wait_on(const Stream& s) const;
  /// Blocks the host until the event has completed.
  void synchronize() const;
  /// True when the recorded work has completed.
  bool done() const;
  /// Milliseconds between `start` and `end` (both recorded and completed, timing enabled).
  static float elapsed_ms(const Event& start, const Event& end);

 private:
  cudaEvent_t e_ = nullptr;
};

/// An owned cuBLAS handle (move-only); kernels/cuda gemm_wt takes its get().
class CublasHandle {
 public:
  /// Throws cb::Error naming the cuBLAS status when the handle cannot be created (no GPU).
  CublasHandle();
  ~CublasHandle();
  CublasHandle(CublasHandle&& o) noexcept;
  CublasHandle& operator=(CublasHandle&& o) noexcept;
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;

  cublasHandle_t get() const { return h_; }

 private:
  cublasHandle_t h_ = nullptr;
};

}  // namespace cb::device
