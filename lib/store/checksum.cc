#include "lib/store/checksum.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "lib/store/types.h"

namespace cb::store {

uint64_t checksum(const void* data, size_t n, uint64_t seed) {
  return XXH3_64bits_withSeed(data, n, seed);
}

uint64_t copy_checksum(void* dst, const void* src, size_t n, uint64_t seed) {
  // Small enough to stay in L1/L2 between the copy and the hash, large enough that the
  // streaming state's per-call cost is nothing.
  constexpr size_t kPiece = size_t{64} << 10;
  if (n <= kPiece) {
    if (n > 0) std::memcpy(dst, src, n);
    return XXH3_64bits_withSeed(dst, n, seed);
  }
  XXH3_state_t st;
  // A state on the stack must be initialized: a reset for a seed the stale bytes already name
  // would keep their secret (xxhash.h, XXH3_INITSTATE).
  XXH3_INITSTATE(&st);
  XXH3_64bits_reset_withSeed(&st, seed);
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  for (size_t off = 0; off < n; off += kPiece) {
    const size_t len = std::min(kPiece, n - off);
    std::memcpy(d + off, s + off, len);
    XXH3_64bits_update(&st, d + off, len);
  }
  return XXH3_64bits_digest(&st);
}

ModelFingerprint ModelFingerprint::from_description(const std::string& description) {
  return ModelFingerprint{checksum(description.data(), description.size()), description};
}

const char* key_encoding_name(KeyEncoding e) {
  return e == KeyEncoding::PreRope ? "pre_rope" : "post_rope";
}

const char* tier_name(TierKind t) {
  switch (t) {
    case TierKind::Hbm: return "hbm";
    case TierKind::Dram: return "dram";
    case TierKind::Ssd: return "ssd";
  }
  return "unknown";
}

}  // namespace cb::store
