#include "lib/store/chunk_allocator.h"

#include <cstddef>

namespace cb::store {

ChunkAllocator::ChunkAllocator(uint64_t capacity) : capacity_(capacity), used_(capacity, false) {}

bool ChunkAllocator::allocate(uint64_t n, std::vector<uint64_t>* out) {
  if (n > free()) return false;
  out->reserve(out->size() + n);
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t s;
    if (!free_.empty()) {
      s = free_.back();
      free_.pop_back();
    } else {
      while (used_[next_fresh_]) ++next_fresh_;  // skip slots claimed during recovery
      s = next_fresh_++;
    }
    used_[s] = true;
    out->push_back(s);
  }
  used_count_ += n;
  return true;
}

void ChunkAllocator::release(const std::vector<uint64_t>& slots) {
  for (uint64_t s : slots) {
    if (s >= capacity_ || !used_[s]) {
      ++double_frees_;
      continue;
    }
    used_[s] = false;
    --used_count_;
    if (s < next_fresh_) free_.push_back(s);
  }
}

bool ChunkAllocator::claim(uint64_t slot) {
  if (slot >= capacity_ || used_[slot]) return false;
  used_[slot] = true;
  ++used_count_;
  if (slot < next_fresh_) {
    for (size_t i = 0; i < free_.size(); ++i) {
      if (free_[i] == slot) {
        free_[i] = free_.back();
        free_.pop_back();
        break;
      }
    }
  }
  return true;
}

}  // namespace cb::store
