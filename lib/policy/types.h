#pragma once
/// Vocabulary of the placement policies (DESIGN.md decision 4): what a policy sees
/// (entry metadata, tier capacities, the scheduler's look-ahead) and what it returns
/// (moves between tiers). Policies are pure: they never do I/O and never read a clock;
/// time enters only through the timestamps the caller stores in EntryMeta.

#include <cstdint>
#include <string_view>
#include <vector>

namespace cb::policy {

/// Where a session's KV-cache entry lives. An entry lives in exactly one tier.
/// kDrop is not a tier: as a move's destination it means "out of the store".
enum class Tier : uint8_t { kHbm, kDram, kSsd, kDrop };

/// "hbm", "dram", "ssd" or "drop".
std::string_view tier_name(Tier tier);

/// What a policy knows about one stored entry (one per conversation session).
struct EntryMeta {
  uint64_t session = 0;     ///< conversation session id, unique among entries
  Tier tier = Tier::kDram;  ///< current tier; kHbm entries are never counted nor moved
  uint64_t bytes = 0;       ///< size of the entry in its tier
  int64_t last_access = 0;  ///< caller's clock at the last read or write (LRU)
  int64_t inserted = 0;     ///< caller's clock when the entry entered the store (FIFO)
};

/// Capacities in bytes of the tiers the policies manage (host memory and disk).
/// HBM belongs to the paged KV pool (lib/kv) and is not managed here.
struct Capacity {
  uint64_t dram = 0;  ///< host-memory budget (Cmem)
  uint64_t ssd = 0;   ///< disk budget (Cdisk); 0 means "no disk tier": evictions drop
};

/// One decision: move `session`'s entry from `from` to `to` (kDrop: delete it).
struct Move {
  uint64_t session = 0;     ///< whose entry moves
  Tier from = Tier::kDram;  ///< its tier before the move
  Tier to = Tier::kSsd;     ///< its tier after the move, or kDrop
  uint64_t bytes = 0;       ///< its size, for accounting (bytes written / read / freed)

  /// Field-wise equality (plans are compared in tests and for determinism checks).
  friend bool operator==(const Move& a, const Move& b) {
    return a.session == b.session && a.from == b.from && a.to == b.to && a.bytes == b.bytes;
  }
  /// Negation of ==.
  friend bool operator!=(const Move& a, const Move& b) { return !(a == b); }
};

/// Result of make_room: whether the room can be made and, if so, the moves that make it.
/// When `ok` is false, `moves` is empty (nothing is evicted for nothing).
struct Plan {
  bool ok = true;           ///< false: the room cannot be made (too much pinned / too big)
  std::vector<Move> moves;  ///< apply in order; every prefix keeps each tier within capacity
};

/// What the scheduler knows about the future, handed to every decision.
struct LookAhead {
  /// Sessions of the waiting jobs, head first: queue[0] is the job about to run, whose entry
  /// is never moved by an eviction. Belady reads this as the complete future access sequence.
  std::vector<uint64_t> queue;
  /// Sessions whose entries must not move now (e.g. the running batch, an entry being saved).
  std::vector<uint64_t> pinned;
  /// Average KV-cache bytes of a session (Skv) sizing the windows; 0: the rounded-up mean of
  /// the DRAM and SSD entries' sizes.
  uint64_t skv = 0;
};

}  // namespace cb::policy
