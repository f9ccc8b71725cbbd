#pragma once
/// Belady's MIN, the offline bound: with the complete future access sequence in
/// LookAhead::queue, evict the entry whose next use is farthest (never used again first).
/// With equal-size entries and a single tier it maximizes hits; results use it as the
/// upper bound the online policies are measured against.

#include "lib/policy/eviction.h"

namespace cb::policy {

/// Farthest next use first; entries never used again first of all (ties: LRU, session id).
class Belady : public EvictionPolicy {
 public:
  /// "belady".
  std::string_view name() const override { return "belady"; }
  /// Yes: it ranks entries by their next use in the look-ahead.
  bool uses_lookahead() const override { return true; }
  /// Sorts by next use in the whole of ahead.queue, farthest first.
  std::vector<size_t> order(const std::vector<EntryMeta>& entries, std::vector<size_t> candidates,
                            const Capacity& capacity, const LookAhead& ahead) const override;
  /// LRU for the entries the queue never uses again, then the rest by next use: the whole queue
  /// is the window.
  OrderSpec order_spec(const Capacity&, uint64_t, size_t queue_len) const override {
    return {OrderSpec::Base::kLru, queue_len};
  }
};

}  // namespace cb::policy
