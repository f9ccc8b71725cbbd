#pragma once
/// HBM and DRAM tiers: an arena of chunk slots in one allocation.
///
/// DRAM: a page-locked HostBuffer (cudaHostAlloc or mlock; plain memory with
/// lock_failed() when RLIMIT_MEMLOCK refuses). HBM: host memory with exactly the
/// accounting of a device budget (it models capacity and placement; transfers are host
/// memcpy), on CPU and CUDA builds: no entry is kept in GPU memory between turns yet.

#include <string>

#include "lib/device/host_buffer.h"
#include "lib/store/tier.h"

namespace cb::store {

/// A memory-backed tier.
class MemoryTier final : public Tier {
 public:
  /// `budget_bytes / slot_bytes` slots (rounded down); throws cb::Error if the memory
  /// cannot be allocated.
  MemoryTier(TierKind kind, uint64_t budget_bytes, uint64_t slot_bytes);

  bool write(ChunkIo* ops, size_t n) override;
  bool read(ChunkIo* ops, size_t n) override;
  std::string describe() const override;
  bool degraded() const override { return lock_failed(); }

  /// Address of `slot` in the arena.
  void* slot_ptr(uint64_t slot) const;
  /// True when the arena could not be page-locked.
  bool lock_failed() const { return buf_.lock_failed(); }

 private:
  device::HostBuffer buf_;
};

}  // namespace cb::store
