#include "lib/store/checksum.h"

#include <xxhash.h>

#include <string>

#include "lib/store/types.h"

namespace cb::store {

uint64_t checksum(const void* data, size_t n, uint64_t seed) {
  return XXH3_64bits_withSeed(data, n, seed);
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
