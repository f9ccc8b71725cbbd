#pragma once
/// The engine's per-turn KV buffer ([layer][cap][kv_dim] rows of K or V in the entry type):
/// where a load lands, what a restore reads and what a save writes from. For a device backend
/// it is page-locked (device::HostBuffer: cudaHostAlloc on CUDA builds), so the GPU copies a
/// loaded layer straight from it instead of through its own staging; for the CPU backend it is
/// plain memory.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "lib/core/error.h"
#include "lib/device/host_buffer.h"

namespace cb::engine {

class KvBuffer {
 public:
  /// The allocation a buffer of `bytes` gets: the next size of a geometric series with four
  /// sizes per doubling (multiples of 4 KiB; at most a quarter more than `bytes` from 16 KiB
  /// on). A conversation's buffers grow a little every turn; rounded up like this, a turn's
  /// spare buffers serve the next turns too instead of a new page-locked allocation (which
  /// costs page pinning and a device synchronization) every turn.
  static size_t size_class(size_t bytes) {
    constexpr size_t kPage = 4096;
    size_t top = 1;  // the highest power of two <= bytes
    while (top <= bytes / 2) top *= 2;
    const size_t step = std::max(kPage, top / 4);
    return (bytes + step - 1) / step * step;
  }

  KvBuffer() = default;
  /// `bytes` of zeroed memory, page-locked when `pinned` (plain if locking is refused).
  KvBuffer(size_t bytes, bool pinned) : size_(bytes) {
    if (pinned) {
      host_ = device::HostBuffer(bytes, 64);
    } else {
      plain_.resize(bytes);
    }
  }
  KvBuffer(KvBuffer&& o) noexcept
      : host_(std::move(o.host_)), plain_(std::move(o.plain_)), size_(std::exchange(o.size_, 0)) {}
  KvBuffer& operator=(KvBuffer&& o) noexcept {
    host_ = std::move(o.host_);
    plain_ = std::move(o.plain_);
    size_ = std::exchange(o.size_, 0);
    return *this;
  }
  uint8_t* data() {
    return host_.data() != nullptr ? static_cast<uint8_t*>(host_.data()) : plain_.data();
  }
  const uint8_t* data() const {
    return host_.data() != nullptr ? static_cast<const uint8_t*>(host_.data()) : plain_.data();
  }
  /// Bytes in use (at most capacity()).
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  /// Bytes allocated.
  size_t capacity() const { return host_.data() != nullptr ? host_.size() : plain_.size(); }
  /// True when the memory is page-locked.
  bool pinned() const { return host_.data() != nullptr && host_.pinned(); }
  /// Uses `bytes` of the allocation, which must hold them (contents are left as they are).
  void resize(size_t bytes) {
    if (bytes > capacity()) {
      throw make_error("KvBuffer", "resize beyond the allocation (internal error)");
    }
    size_ = bytes;
  }

 private:
  device::HostBuffer host_;
  std::vector<uint8_t> plain_;
  size_t size_ = 0;
};

}  // namespace cb::engine
