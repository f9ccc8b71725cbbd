#include "lib/store/memory_tier.h"

#include <cstring>

#include "lib/store/size_parse.h"

namespace cb::store {

MemoryTier::MemoryTier(TierKind kind, uint64_t budget_bytes, uint64_t slot_bytes)
    : Tier(kind, slot_bytes, slot_bytes == 0 ? 0 : budget_bytes / slot_bytes),
      buf_(allocator().capacity() * slot_bytes, 4096) {}

void* MemoryTier::slot_ptr(uint64_t slot) const {
  return static_cast<char*>(buf_.data()) + slot * slot_bytes();
}

bool MemoryTier::write(ChunkIo* ops, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    copy_with_sum(ops[i], static_cast<char*>(slot_ptr(ops[i].slot)) + ops[i].offset, ops[i].buf);
    ops[i].error = 0;
  }
  return true;
}

bool MemoryTier::read(ChunkIo* ops, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    copy_with_sum(ops[i], ops[i].buf, static_cast<char*>(slot_ptr(ops[i].slot)) + ops[i].offset);
    ops[i].error = 0;
  }
  return true;
}

std::string MemoryTier::describe() const {
  std::string s = std::string(tier_name(kind())) + ": " + format_size(capacity_bytes()) + " in " +
                  std::to_string(allocator().capacity()) + " chunks, memory " +
                  device::host_memory_kind_name(buf_.kind());
  if (kind() == TierKind::Hbm) s += " (host-backed HBM budget)";
  if (buf_.lock_failed()) s += " [warning: " + buf_.lock_error() + "]";
  return s;
}

}  // namespace cb::store
