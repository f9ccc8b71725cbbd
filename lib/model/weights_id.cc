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

/// Every field of the config that changes what the model computes (not its name, nor
/// max_context, the window it was trained for). A field added to ModelConfig that changes the
/// numbers belongs here.
void put_config(std::vector<uint8_t>& out, const ModelConfig& c) {
  for (int v : {static_cast<int>(c.arch), c.n_layers, c.hidden, c.n_heads, c.n_kv_heads, c.head_dim,
                c.ffn_hidden, c.vocab_size, c.rope_dims, static_cast<int>(c.rope_style),
                c.sliding_window, static_cast<int>(c.norm), static_cast<int>(c.parallel_attention),
                static_cast<int>(c.separate_mlp_norm), static_cast<int>(c.tied_embeddings),
                static_cast<int>(c.qkv_layout), static_cast<int>(c.weight_dtype)})
    put_value(out, static_cast<int64_t>(v));
  put_value(out, c.rope_theta);
  put_value(out, c.norm_eps);
}

std::string hex16(uint64_t h) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

}  // namespace

std::string weights_identity(const ModelSource& src, uint64_t seed, int threads,
                             size_t block_bytes) {
  std::vector<uint8_t> desc;
  put_config(desc, src.config());
  if (src.kind() == SourceKind::Preset) {
    return src.location() + " seed " + std::to_string(seed) + " config " +
           hex16(XXH3_64bits(desc.data(), desc.size()));
  }
  const size_t block = block_bytes > 0 ? block_bytes : kBlock;
  std::vector<Unit> units;
  for (const auto& [name, t] : src.tensors()) {
    for (size_t off = 0; off < t.nbytes; off += block)
      units.push_back({t.data + off, std::min(block, t.nbytes - off)});
  }
  std::vector<uint64_t> unit_hash(units.size());
  for_each_piece(static_cast<int64_t>(units.size()), 1, threads > 0 ? threads : worker_threads(),
                 [&](int64_t b, int64_t n) {
                   for (int64_t i = b; i < b + n; ++i)
                     unit_hash[static_cast<size_t>(i)] = XXH3_64bits(
                         units[static_cast<size_t>(i)].data, units[static_cast<size_t>(i)].n);
                 });
  // The config, then the description of every tensor and its units' hashes, in order, hashed
  // once more.
  size_t u = 0;
  for (const auto& [name, t] : src.tensors()) {
    put_value(desc, static_cast<uint64_t>(name.size()));
    put(desc, name.data(), name.size());
    put_value(desc, static_cast<uint32_t>(t.dtype));
    put_value(desc, static_cast<uint64_t>(t.shape.size()));
    for (int64_t d : t.shape) put_value(desc, d);
    put_value(desc, static_cast<uint64_t>(t.nbytes));
    for (size_t off = 0; off < t.nbytes; off += block) put_value(desc, unit_hash[u++]);
  }
  return "xxh3:" + hex16(XXH3_64bits(desc.data(), desc.size()));
}

}  // namespace cb::model
