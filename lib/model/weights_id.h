#pragma once
/// Which weights a model runs, as a short string: the AttentionStore's model fingerprint
/// includes it, so KV computed by one checkpoint is never served to another that has the same
/// name and shape (a fine-tune, another quantization, a re-export).

#include <cstdint>
#include <string>

#include "lib/model/model_source.h"

namespace cb::model {

/// "xxh3:" and 16 hex digits: XXH3-64 over every tensor of `src` in the order of tensors()
/// (canonical name, dtype, shape, and the XXH3-64 of each 64 MiB block of its bytes as stored
/// in the file, hashed over up to `threads` threads, 0: the machine's cores; the result does
/// not depend on the count). Presets, generated from a seed: "preset:NAME seed N".
std::string weights_identity(const ModelSource& src, uint64_t seed, int threads = 0);

}  // namespace cb::model
