#include "lib/device/host_buffer.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "lib/core/error.h"

#ifdef CB_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace cb::device {

const char* host_memory_kind_name(HostMemoryKind k) {
  switch (k) {
    case HostMemoryKind::CudaPinned: return "cuda_pinned";
    case HostMemoryKind::Locked: return "locked";
    case HostMemoryKind::Plain: return "plain";
  }
  return "unknown";
}

HostBuffer::HostBuffer(size_t bytes, size_t alignment) : size_(bytes) {
  if (bytes == 0) return;
  if (alignment < 64 || (alignment & (alignment - 1)) != 0) {
    throw make_error("HostBuffer",
                     "alignment " + std::to_string(alignment) + " is not a power of two >= 64");
  }
#ifdef CB_HAVE_CUDA
  {
    void* p = nullptr;
    cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocPortable);
    if (e == cudaSuccess && p != nullptr &&
        (reinterpret_cast<uintptr_t>(p) & (alignment - 1)) == 0) {
      std::memset(p, 0, bytes);
      data_ = p;
      kind_ = HostMemoryKind::CudaPinned;
      return;
    }
    if (e == cudaSuccess && p != nullptr) cudaFreeHost(p);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      lock_error_ = std::string("cudaHostAlloc: ") + cudaGetErrorString(e) + "; ";
    }
  }
#endif
  const size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  void* p = std::aligned_alloc(alignment, rounded);
  if (p == nullptr) {
    throw make_error("HostBuffer",
                     "cannot allocate " + std::to_string(bytes) + " bytes of host memory",
                     "lower the DRAM budget");
  }
  std::memset(p, 0, rounded);
  data_ = p;
  if (::mlock(p, rounded) == 0) {
    kind_ = HostMemoryKind::Locked;
    locked_ = rounded;
  } else {
    kind_ = HostMemoryKind::Plain;
    lock_failed_ = true;
    lock_error_ += std::string("mlock: ") + std::strerror(errno) +
                   " (raise RLIMIT_MEMLOCK, e.g. ulimit -l unlimited, for page-locked memory)";
  }
}

HostBuffer::~HostBuffer() {
  release();
}

HostBuffer::HostBuffer(HostBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      kind_(o.kind_),
      locked_(std::exchange(o.locked_, 0)),
      lock_failed_(o.lock_failed_),
      lock_error_(std::move(o.lock_error_)) {}

HostBuffer& HostBuffer::operator=(HostBuffer&& o) noexcept {
  if (this != &o) {
    release();
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    kind_ = o.kind_;
    locked_ = std::exchange(o.locked_, 0);
    lock_failed_ = o.lock_failed_;
    lock_error_ = std::move(o.lock_error_);
  }
  return *this;
}

void HostBuffer::release() {
  if (data_ == nullptr) return;
#ifdef CB_HAVE_CUDA
  if (kind_ == HostMemoryKind::CudaPinned) {
    cudaFreeHost(data_);
    data_ = nullptr;
    return;
  }
#endif
  if (kind_ == HostMemoryKind::Locked) ::munlock(data_, locked_);  // what mlock locked
  std::free(data_);
  data_ = nullptr;
}

}  // namespace cb::device
