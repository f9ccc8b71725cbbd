#pragma once
/// Checksums of stored chunks and journal records (XXH3-64).

#include <cstddef>
#include <cstdint>

namespace cb::store {

/// XXH3-64 of `n` bytes with `seed`.
uint64_t checksum(const void* data, size_t n, uint64_t seed = 0);

}  // namespace cb::store
