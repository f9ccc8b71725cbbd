#pragma once
/// Checksums of stored chunks and journal records (XXH3-64).

#include <cstddef>
#include <cstdint>

namespace cb::store {

/// XXH3-64 of `n` bytes with `seed`.
uint64_t checksum(const void* data, size_t n, uint64_t seed = 0);
/// Copies `n` bytes from `src` to `dst` and returns checksum(dst, n, seed), computed piece by
/// piece right after each piece is copied, while it is still in cache: a copy and then a
/// checksum of a chunk larger than the cache would read the bytes from memory twice.
uint64_t copy_checksum(void* dst, const void* src, size_t n, uint64_t seed);

}  // namespace cb::store
