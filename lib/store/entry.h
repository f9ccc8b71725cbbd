#pragma once
/// The metadata of one stored entry (one conversation session): what produced it, which
/// tokens it covers, where its chunks are and their checksums. Layout is layer-major:
/// chunk (layer, kv, c) holds tokens [c*tpc, (c+1)*tpc) of layer's K (kv=0) or V (kv=1).

#include <cstdint>
#include <string>
#include <vector>

#include "lib/store/types.h"

namespace cb::store {

/// One entry's metadata; also the payload of a journal commit record.
struct EntryMeta {
  SessionId session = 0;
  uint64_t generation = 0;  ///< store-wide sequence number of the write that produced it
  ModelFingerprint fingerprint;
  KeyEncoding encoding = KeyEncoding::PreRope;
  EntryShape shape;
  uint32_t tokens_per_chunk = 0;
  std::vector<TokenId> tokens;         ///< the history the entry covers
  std::vector<uint64_t> token_hashes;  ///< per token chunk: XXH3 of its token ids
  /// When the session's entry first entered the store (FIFO's order): kept when a save or a
  /// truncation replaces the entry of the session.
  double created = 0;
  double last_access = 0;           ///< the last save or load (LRU's order)
  double ttl = 0;                   ///< seconds after last access; 0 = never expires
  std::vector<uint64_t> slots;      ///< per chunk, index chunk_index(layer, kv, c)
  std::vector<uint64_t> checksums;  ///< per chunk, XXH3 of its stored bytes

  /// Tokens in the entry.
  int64_t n_tokens() const { return static_cast<int64_t>(tokens.size()); }
  /// Token chunks per layer and K/V.
  uint64_t n_token_chunks() const { return chunks_for(n_tokens()); }
  /// Token chunks that hold `tokens` tokens.
  uint64_t chunks_for(int64_t n_tok) const {
    return (static_cast<uint64_t>(n_tok) + tokens_per_chunk - 1) / tokens_per_chunk;
  }
  /// Total chunks (2 * n_layers * n_token_chunks).
  uint64_t n_chunks() const {
    return 2ull * static_cast<uint64_t>(shape.n_layers) * n_token_chunks();
  }
  /// Index of chunk `c` of `layer`'s K (kv=0) or V (kv=1) in slots/checksums.
  uint64_t chunk_index(int layer, int kv, uint64_t c) const {
    return (static_cast<uint64_t>(layer) * 2 + static_cast<uint64_t>(kv)) * n_token_chunks() + c;
  }
  /// Tokens in token chunk `c`.
  uint32_t tokens_in_chunk(uint64_t c) const;
  /// Bytes stored in token chunk `c` (tokens_in_chunk * token_bytes).
  uint32_t chunk_len(uint64_t c) const { return tokens_in_chunk(c) * shape.token_bytes; }
  /// Bytes of K and V over all layers.
  uint64_t data_bytes() const {
    return 2ull * static_cast<uint64_t>(shape.n_layers) * static_cast<uint64_t>(n_tokens()) *
           shape.token_bytes;
  }
  /// Recomputes token_hashes from tokens.
  void hash_tokens();
  /// Tokens of `history` that agree with the entry, in whole chunks (plus the entry's last
  /// partial chunk when the history covers it exactly): the servable prefix.
  int64_t matching_prefix(const std::vector<TokenId>& history) const;
  /// Whether the metadata is self-consistent (sizes, tpc); `why` says what is wrong.
  bool valid(std::string* why) const;
};

/// Seed of a chunk's checksum (binds data to its session).
uint64_t chunk_seed(SessionId session);

/// Serializes `m` for the journal.
std::string encode_entry(const EntryMeta& m);
/// Parses a journal payload; false when malformed.
bool decode_entry(const std::string& bytes, EntryMeta* m);

}  // namespace cb::store
