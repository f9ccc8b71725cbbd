#pragma once
/// Fixed-size slot allocator with exact accounting: the unit of allocation of every tier.
/// Not thread-safe; the store serializes calls.

#include <cstdint>
#include <vector>

namespace cb::store {

/// Hands out slot numbers in [0, capacity); never more than capacity at once.
class ChunkAllocator {
 public:
  /// An allocator of `capacity` slots, all free.
  explicit ChunkAllocator(uint64_t capacity = 0);

  /// Appends `n` free slots to `out` and returns true, or changes nothing and returns false.
  bool allocate(uint64_t n, std::vector<uint64_t>* out);
  /// Returns slots to the free pool; freeing a free or out-of-range slot is ignored and
  /// counted in double_frees().
  void release(const std::vector<uint64_t>& slots);
  /// Marks `slot` used (recovery); false when it is out of range or already used.
  bool claim(uint64_t slot);

  /// Total slots.
  uint64_t capacity() const { return capacity_; }
  /// Slots in use.
  uint64_t used() const { return used_count_; }
  /// Slots free.
  uint64_t free() const { return capacity_ - used_count_; }
  /// Whether `slot` is currently allocated.
  bool is_used(uint64_t slot) const { return slot < capacity_ && used_[slot]; }
  /// Invalid releases seen (a bug indicator; tests assert 0).
  uint64_t double_frees() const { return double_frees_; }

 private:
  uint64_t capacity_ = 0;
  uint64_t used_count_ = 0;
  uint64_t next_fresh_ = 0;  // slots >= next_fresh_ were never handed out
  uint64_t double_frees_ = 0;
  std::vector<bool> used_;
  std::vector<uint64_t> free_;  // released slots below next_fresh_
};

}  // namespace cb::store
