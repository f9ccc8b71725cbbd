#pragma once
/// One storage tier: a budget of fixed-size chunk slots and chunk transfers to and from
/// caller memory. The store serializes allocation; transfers on distinct slots may run
/// concurrently.

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "lib/store/checksum.h"
#include "lib/store/chunk_allocator.h"
#include "lib/store/types.h"

namespace cb::store {

/// One chunk transfer: `len` (<= slot_bytes) bytes between `buf` and `slot`.
/// `error` is 0 on success, an errno value on failure (EIO for a short transfer).
struct ChunkIo {
  uint64_t slot = 0;
  void* buf = nullptr;
  uint32_t len = 0;
  int error = 0;
  /// Byte offset into the slot (memory tiers only; an SSD tier refuses a non-zero offset).
  uint32_t offset = 0;
  /// When set, the transfer also stores here the checksum (seed `sum_seed`) of the `len` bytes
  /// it moved, as they arrived (meaningless when the op failed): memory tiers compute it as
  /// they copy (copy_checksum), the SSD tier as it copies through a bounce buffer, or once the
  /// I/O is done when the caller's memory moved in place. The tier's timed I/O then includes
  /// the hashing, as a load's latency does.
  uint64_t* sum = nullptr;
  uint64_t sum_seed = 0;
};

/// Copies op's `len` bytes from `src` to `dst`, taking op's checksum on the way when it asks
/// for one (ChunkIo::sum).
inline void copy_with_sum(const ChunkIo& op, void* dst, const void* src) {
  if (op.sum != nullptr) {
    *op.sum = copy_checksum(dst, src, op.len, op.sum_seed);
  } else {
    std::memcpy(dst, src, op.len);
  }
}

/// A tier of the store (HBM, DRAM or SSD).
class Tier {
 public:
  /// A tier of `capacity_slots` slots of `slot_bytes` each.
  Tier(TierKind kind, uint64_t slot_bytes, uint64_t capacity_slots)
      : kind_(kind), slot_bytes_(slot_bytes), alloc_(capacity_slots) {}
  virtual ~Tier() = default;
  Tier(const Tier&) = delete;
  Tier& operator=(const Tier&) = delete;

  /// Which tier this is.
  TierKind kind() const { return kind_; }
  /// Bytes per slot (the chunk size).
  uint64_t slot_bytes() const { return slot_bytes_; }
  /// The slot allocator (accounting); callers hold the store lock.
  ChunkAllocator& allocator() { return alloc_; }
  /// Read-only view of the allocator.
  const ChunkAllocator& allocator() const { return alloc_; }
  /// Budget in bytes (capacity_slots * slot_bytes).
  uint64_t capacity_bytes() const { return alloc_.capacity() * slot_bytes_; }

  /// Writes every op; returns true when all succeeded (per-op errors in `error`).
  virtual bool write(ChunkIo* ops, size_t n) = 0;
  /// Reads every op; returns true when all succeeded (per-op errors in `error`).
  virtual bool read(ChunkIo* ops, size_t n) = 0;
  /// Makes completed writes to `slots` durable; true on success (memory tiers: always). On
  /// failure `error`, when given, receives what failed, naming the file.
  virtual bool sync(const std::vector<uint64_t>& slots, std::string* error = nullptr) {
    return true;
  }
  /// Where `slot` is, for messages: "ssd file DIR/data_0.cbd at byte 65536", "dram slot 3".
  virtual std::string locate(uint64_t slot) const {
    return std::string(tier_name(kind_)) + " slot " + std::to_string(slot);
  }
  /// Human-readable notes on how the tier runs (memory kind, I/O backend, O_DIRECT).
  virtual std::string describe() const = 0;
  /// True when it runs other than it was asked to, as describe() says (memory that could not
  /// be page-locked, O_DIRECT refused by the file system).
  virtual bool degraded() const { return false; }

 private:
  TierKind kind_;
  uint64_t slot_bytes_;
  ChunkAllocator alloc_;
};

}  // namespace cb::store
