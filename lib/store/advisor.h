#pragma once
/// The placement hook: the store asks an injected PlacementAdvisor which entries to move
/// out of a tier that needs room and which to prefetch from SSD given the scheduler's
/// look-ahead. Advisors are pure decision code (no I/O); lib/policy's scheduler-aware,
/// LRU, FIFO and Belady policies plug in through an adapter.

#include <cstdint>
#include <memory>
#include <vector>

#include "lib/store/types.h"

namespace cb::store {

/// What an advisor sees of one entry.
struct EntryInfo {
  SessionId session = 0;
  TierKind tier = TierKind::Dram;
  uint64_t bytes = 0;  ///< slot bytes the entry occupies in its tier
  int64_t tokens = 0;
  double created = 0;
  double last_access = 0;
  uint64_t accesses = 0;  ///< loads served
};

/// When the SSD needs room its entries' SSD copies (inclusive tiers) are ranked with its entries:
/// a copy is a candidate under its entry's id with this bit set, sized as the copy, with the
/// entry's access times and no place in the look-ahead: dropping it costs a rewrite when its
/// entry is demoted again, at a time no one knows, while evicting an entry that the look-ahead
/// holds costs a recompute. So the policies put copies with the entries nothing is known to
/// need (scheduler-aware: outside the window, least recently used first). (An entry whose own
/// id has this bit set has no copy candidate; the tag is read as one only where no SSD entry
/// has that id.)
constexpr SessionId kCopyCandidate = 1ull << 63;

/// One eviction decision: move `session` one tier down (DRAM->SSD, HBM->DRAM), or drop it
/// from the store when `drop` is set or there is no lower tier.
struct Victim {
  SessionId session = 0;
  bool drop = false;
};

/// Decides placement; called with the store's lock held, so it must not call the store.
class PlacementAdvisor {
 public:
  virtual ~PlacementAdvisor() = default;

  /// Entries of `tier` to move out, in order, until `bytes_needed` bytes are free.
  /// `candidates` are the tier's entries that may move (in-use entries are excluded);
  /// `lookahead` is the latest window of upcoming sessions (first = soonest). Returning
  /// too few makes the admission fail (the caller recomputes); unknown ids are ignored.
  virtual std::vector<Victim> choose_victims(TierKind tier, uint64_t bytes_needed,
                                             const std::vector<EntryInfo>& candidates,
                                             const std::vector<SessionId>& lookahead,
                                             double now) = 0;

  /// Sessions to fetch from SSD into DRAM, in priority order, given the look-ahead window,
  /// the entries on SSD and the DRAM bytes free (reserve included). The store fetches them
  /// in order while they fit.
  virtual std::vector<SessionId> choose_prefetch(const std::vector<SessionId>& lookahead,
                                                 const std::vector<EntryInfo>& on_ssd,
                                                 uint64_t dram_free_bytes, double now) = 0;
};

/// Least recently used eviction, except that sessions in the look-ahead window go last
/// (so a prefetched entry is not evicted straight back), and window-order prefetch of
/// whatever fits: the built-in default and the reference for tests.
class LruAdvisor final : public PlacementAdvisor {
 public:
  std::vector<Victim> choose_victims(TierKind tier, uint64_t bytes_needed,
                                     const std::vector<EntryInfo>& candidates,
                                     const std::vector<SessionId>& lookahead, double now) override;
  std::vector<SessionId> choose_prefetch(const std::vector<SessionId>& lookahead,
                                         const std::vector<EntryInfo>& on_ssd,
                                         uint64_t dram_free_bytes, double now) override;
};

}  // namespace cb::store
