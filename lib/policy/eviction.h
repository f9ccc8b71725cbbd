#pragma once
/// The eviction interface shared by every policy, and the one planner that turns a
/// policy's eviction order into moves. A policy only says in which order entries should
/// leave a tier; make_room() decides how many leave and where they go, so the tier
/// cascade (host memory evicts to disk, disk evicts out of the store) is the same for
/// scheduler-aware eviction and for the LRU / FIFO / Belady baselines.

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "lib/policy/types.h"

namespace cb::policy {

/// The shape every policy's order() has, so that a caller holding its entries in a sorted
/// index can draw victims without ranking them all: the entries whose session is not in the
/// first `window` positions of the queue come first, in `base` order; then those whose session
/// is, the one whose first job there comes last first.
struct OrderSpec {
  enum class Base : uint8_t {
    kLru,   ///< lru_before
    kFifo,  ///< inserted, then session
  };
  Base base = Base::kLru;
  size_t window = 0;  ///< queue positions that rank above `base` (0: none)
};

/// An eviction policy: a pure ranking of entries from first-to-evict to last-to-evict.
class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;

  /// Short stable name ("scheduler-aware", "lru", "fifo", "belady") for configs and results.
  virtual std::string_view name() const = 0;

  /// Whether the policy reads the scheduler's look-ahead. Only such policies prefetch SSD
  /// entries of upcoming jobs into DRAM; LRU and FIFO are look-ahead-blind caches that load
  /// a hit from whichever tier holds it (a prefetch would also be their next victim: the
  /// fetched entry was used longest ago, or inserted first).
  virtual bool uses_lookahead() const { return false; }

  /// Returns `candidates` (indices into `entries`, possibly of different tiers) sorted so
  /// that the entry to evict first comes first. Must be a deterministic total order that
  /// depends on the entries' contents, not on their positions in `entries`.
  virtual std::vector<size_t> order(const std::vector<EntryMeta>& entries,
                                    std::vector<size_t> candidates, const Capacity& capacity,
                                    const LookAhead& ahead) const = 0;

  /// order() as an OrderSpec, for candidates whose effective Skv (effective_skv) is `skv` and a
  /// queue of `queue_len` sessions: order() equals that spec's order on any input.
  virtual OrderSpec order_spec(const Capacity& capacity, uint64_t skv, size_t queue_len) const = 0;

  /// Plans the moves that leave `bytes_needed` free in `tier` (kDram or kSsd) and keep
  /// every tier within `capacity`. Victims are taken in order() until enough is free.
  /// DRAM victims go to SSD; when SSD lacks room for them, SSD entries and the DRAM
  /// victims themselves are ranked together by order() and the first ones leave the store
  /// (a DRAM victim that ranks first is dropped directly instead of displacing a more
  /// valuable SSD entry). SSD victims are dropped. Never moved: the entry of ahead.queue[0]
  /// (the job about to run), the entries of ahead.pinned, and HBM entries. Moves come
  /// ordered so that applying them one by one never exceeds a capacity. Returns ok=false
  /// and no moves when the room cannot be made. Throws cb::Error on malformed input
  /// (tier not kDram/kSsd, duplicate sessions, an entry whose tier is kDrop).
  Plan make_room(const std::vector<EntryMeta>& entries, const Capacity& capacity, Tier tier,
                 uint64_t bytes_needed, const LookAhead& ahead) const;
};

/// Sum of the sizes of the entries in `tier`.
uint64_t used_bytes(const std::vector<EntryMeta>& entries, Tier tier);

/// Capacity of `tier` (kDram or kSsd); throws cb::Error for other tiers.
uint64_t capacity_of(const Capacity& capacity, Tier tier);

/// Applies `moves` in order: updates tiers and erases dropped entries. Throws cb::Error
/// when a move names a missing session or the wrong source tier (a planner/caller bug).
void apply_moves(std::vector<EntryMeta>& entries, const std::vector<Move>& moves);

/// Checks what every planner assumes: unique sessions, no entry in kDrop. Throws cb::Error.
void validate_entries(const std::vector<EntryMeta>& entries);

/// For each index in `candidates`: the position of its session's first job among the first
/// `limit` jobs of `queue`, or SIZE_MAX when it has none there. Result indexed like `entries`
/// (SIZE_MAX for non-candidates). O(limit log C + C log C) without a hash map of the queue:
/// the placement policies call it on every eviction decision with windows of thousands of jobs.
std::vector<size_t> next_uses(const std::vector<EntryMeta>& entries,
                              const std::vector<size_t>& candidates,
                              const std::vector<uint64_t>& queue, size_t limit);

/// Least-recently-used first: last_access, then inserted, then session id (a total order).
bool lru_before(const EntryMeta& a, const EntryMeta& b);

}  // namespace cb::policy
