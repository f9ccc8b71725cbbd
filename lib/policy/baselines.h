#pragma once
/// The classic baselines CachedAttention compares against: LRU and FIFO. Both ignore the
/// scheduler's look-ahead (except that make_room never moves the next job's entry).

#include "lib/policy/eviction.h"

namespace cb::policy {

/// Least recently used first (EntryMeta::last_access; ties: inserted, then session id).
class Lru : public EvictionPolicy {
 public:
  /// "lru".
  std::string_view name() const override { return "lru"; }
  /// Sorts by lru_before().
  std::vector<size_t> order(const std::vector<EntryMeta>& entries, std::vector<size_t> candidates,
                            const Capacity& capacity, const LookAhead& ahead) const override;
  /// LRU, no window.
  OrderSpec order_spec(const Capacity&, uint64_t, size_t) const override { return {}; }
};

/// First in, first out (EntryMeta::inserted; ties: session id), regardless of accesses.
class Fifo : public EvictionPolicy {
 public:
  /// "fifo".
  std::string_view name() const override { return "fifo"; }
  /// Sorts by insertion time.
  std::vector<size_t> order(const std::vector<EntryMeta>& entries, std::vector<size_t> candidates,
                            const Capacity& capacity, const LookAhead& ahead) const override;
  /// FIFO, no window.
  OrderSpec order_spec(const Capacity&, uint64_t, size_t) const override {
    return {OrderSpec::Base::kFifo, 0};
  }
};

}  // namespace cb::policy
