#pragma once
/// Vocabulary of the AttentionStore: session ids, model fingerprints, key encodings,
/// entry shapes and tiers.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace cb::store {

/// A conversation session. Numeric on purpose: ids never become file names.
using SessionId = uint64_t;
/// A token id of the conversation history an entry covers.
using TokenId = int32_t;
/// Seconds on the store's injected clock.
using Clock = std::function<double()>;

/// Whether stored keys are captured before RoPE (CachedAttention) or after it (NKVT).
enum class KeyEncoding : uint8_t { PreRope = 0, PostRope = 1 };
/// "pre_rope" / "post_rope".
const char* key_encoding_name(KeyEncoding e);

/// The storage tiers, fastest first.
enum class TierKind : uint8_t { Hbm = 0, Dram = 1, Ssd = 2 };
/// Number of TierKind values.
constexpr int kNumTiers = 3;
/// "hbm" / "dram" / "ssd".
const char* tier_name(TierKind t);

/// Identifies the model, dimensions and dtype that produced an entry. `description` is
/// opaque to the store (e.g. "llama-7b/32x32x128/f16"); `hash` decides compatibility.
struct ModelFingerprint {
  uint64_t hash = 0;
  std::string description;

  /// A fingerprint whose hash is XXH3 of `description`.
  static ModelFingerprint from_description(const std::string& description);
  bool operator==(const ModelFingerprint& o) const { return hash == o.hash; }
  bool operator!=(const ModelFingerprint& o) const { return hash != o.hash; }
};

/// The per-layer geometry of an entry: `n_layers` layers, each holding K and V of
/// `token_bytes` bytes per token (K and V have the same size).
struct EntryShape {
  int n_layers = 0;
  uint32_t token_bytes = 0;
  bool operator==(const EntryShape& o) const {
    return n_layers == o.n_layers && token_bytes == o.token_bytes;
  }
};

/// What to drop from an entry: `drop_tokens` oldest tokens after the first `sink_tokens`
/// (when drop_tokens is 0, `drop_ratio` of the tokens is dropped, rounded down).
struct TruncateSpec {
  int64_t drop_tokens = 0;
  double drop_ratio = 0.0;
  int64_t sink_tokens = 0;
};

/// Where one layer of a load lands (each `tokens * token_bytes` bytes).
struct LayerTarget {
  void* k = nullptr;
  void* v = nullptr;
};

/// Where one layer of a save comes from (each `tokens * token_bytes` bytes).
struct LayerSource {
  const void* k = nullptr;
  const void* v = nullptr;
};

}  // namespace cb::store
