// See weights_id.h.
#include "lib/model/weights_id.h"

#include <xxhash.h>

#include <cstdio>
#include <vector>

#include "lib/core/parallel.h"

namespace cb::model {
namespace {

/// Bytes hashed as one unit: a large tensor is several units, hashed in parallel.
constexpr size_t kBlock = size_t{64} << 20;

struct Unit {
  const uint8_t* data;
  size_t n;
};

void put(std::vector<uint8_t>& out, const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  out.insert(out.end(), b, b + n);
}

template <typename T>
void put_value(std::vector<uint8_t>& out, T v) {
  put(out, &v, sizeof v);
}

}  // namespace

std::string weights_identity(const ModelSource& src, uint64_t seed, int threads) {
  if (src.kind() == SourceKind::Preset) return src.location() + " seed " + std::to_string(seed);
  std::vector<Unit> units;
  for (const auto& [name, t] : src.tensors()) {
    for (size_t off = 0; off < t.nbytes; off += kBlock)
      units.push_back({t.data + off, std::min(kBlock, t.nbytes - off)});
  }
  std::vector<uint64_t> unit_hash(units.size());
  for_each_piece(static_cast<int64_t>(units.size()), 1, threads > 0 ? threads : worker_threads(),
                 [&](int64_t b, int64_t n) {
                   for (int64_t i = b; i < b + n; ++i)
                     unit_hash[static_cast<size_t>(i)] = XXH3_64bits(
                         units[static_cast<size_t>(i)].data, units[static_cast<size_t>(i)].n);
                 });
  // The description of every tensor and its units' hashes, in order, hashed once more.
  std::vector<uint8_t> desc;
  size_t u = 0;
  for (const auto& [name, t] : src.tensors()) {
    put_value(desc, static_cast<uint64_t>(name.size()));
    put(desc, name.data(), name.size());
    put_value(desc, static_cast<uint32_t>(t.dtype));
    put_value(desc, static_cast<uint64_t>(t.shape.size()));
    for (int64_t d : t.shape) put_value(desc, d);
    put_value(desc, static_cast<uint64_t>(t.nbytes));
    for (size_t off = 0; off < t.nbytes; off += kBlock) put_value(desc, unit_hash[u++]);
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(XXH3_64bits(desc.data(), desc.size())));
  return std::string("xxh3:") + hex;
}

}  // namespace cb::model
