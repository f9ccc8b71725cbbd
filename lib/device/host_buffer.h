#pragma once
/// Page-locked host memory for the store's DRAM tier and for copy staging: cudaHostAlloc
/// on CUDA builds, mlock'ed aligned memory otherwise. When locking is refused (for example
/// RLIMIT_MEMLOCK) the buffer degrades to plain aligned memory and says so through
/// lock_failed(); it never throws for that reason.

#include <cstddef>
#include <string>

namespace cb::device {

/// How a HostBuffer's memory was obtained.
enum class HostMemoryKind {
  CudaPinned,  ///< cudaHostAlloc (page-locked, registered with the CUDA driver)
  Locked,      ///< aligned allocation locked with mlock
  Plain,       ///< aligned allocation that could not be locked (see lock_failed())
};

/// Name of a HostMemoryKind ("cuda_pinned", "locked", "plain").
const char* host_memory_kind_name(HostMemoryKind k);

/// An owned, aligned, preferably page-locked host allocation (move-only).
class HostBuffer {
 public:
  HostBuffer() = default;
  /// Allocates `bytes` (zero-filled) aligned to `alignment` (a power of two, >= 64).
  /// Throws cb::Error only when the memory itself cannot be allocated.
  explicit HostBuffer(size_t bytes, size_t alignment = 4096);
  ~HostBuffer();
  HostBuffer(HostBuffer&& o) noexcept;
  HostBuffer& operator=(HostBuffer&& o) noexcept;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  /// Start of the allocation (nullptr when empty).
  void* data() const { return data_; }
  /// Size in bytes as requested.
  size_t size() const { return size_; }
  /// How the memory was obtained.
  HostMemoryKind kind() const { return kind_; }
  /// True when the memory is page-locked (CudaPinned or Locked).
  bool pinned() const { return kind_ != HostMemoryKind::Plain; }
  /// True when page-locking was attempted and refused; `lock_error()` says why.
  bool lock_failed() const { return lock_failed_; }
  /// The reason locking failed ("" when it did not).
  const std::string& lock_error() const { return lock_error_; }

 private:
  void release();

  void* data_ = nullptr;
  size_t size_ = 0;
  HostMemoryKind kind_ = HostMemoryKind::Plain;
  size_t locked_ = 0;  ///< bytes mlock'ed (the allocation rounded up to its alignment)
  bool lock_failed_ = false;
  std::string lock_error_;
};

}  // namespace cb::device
