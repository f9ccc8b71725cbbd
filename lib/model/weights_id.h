#pragma once
/// Which model this is, as a short string: its weights and the config fields that change what it
/// computes. The AttentionStore's model fingerprint includes it, so KV computed by one
/// checkpoint is never served to another that has the same name and shape (a fine-tune, another
/// quantization, a re-export with another rope_theta or norm epsilon).

#include <cstddef>
#include <cstdint>
#include <string>

#include "lib/model/model_source.h"

namespace cb::model {

/// "xxh3:" and 16 hex digits: XXH3-64 over the config's numeric fields (all but the name and
/// max_context) and every tensor of `src` in the order of tensors() (canonical name, dtype,
/// shape, and the XXH3-64 of each `block_bytes` block of its bytes as stored in the file, 0:
/// 64 MiB, hashed over up to `threads` threads, 0: the machine's cores; the result does not
/// depend on the count). Presets, generated from a seed: "preset:NAME seed N config HASH".
/// Reads every byte of the weights (a load reads them anyway; from the page cache then): XXH3
/// ran at 4.3 GB/s on one core of the 2-vCPU development VM, about 1.5 s for 13 GB on both.
std::string weights_identity(const ModelSource& src, uint64_t seed, int threads = 0,
                             size_t block_bytes = 0);

}  // namespace cb::model
