#pragma once
/// AttentionStore's scheduler-aware placement (CachedAttention, USENIX ATC'24, section
/// 3.4). The scheduler's job queue is known ahead of time, so:
///  - fetching: the entries of the jobs in a prefetch window at the head of the queue
///    (Cmem / Skv jobs) are moved from SSD into host memory before those jobs run;
///  - eviction: entries whose jobs lie in a look-ahead eviction window ((Cmem + Cdisk) / Skv
///    jobs) will be used soon, so entries outside it are evicted first (least recently used
///    first among them); only when every candidate is inside the window are the entries whose
///    jobs come last in it (nearest its tail) evicted first.
/// Host memory evicts to SSD and SSD out of the store (EvictionPolicy::make_room).

#include <cstddef>
#include <cstdint>
#include <vector>

#include "lib/policy/eviction.h"

namespace cb::policy {

/// Lengths, in jobs, of the two windows over the head of the job queue.
struct Windows {
  size_t prefetch = 1;  ///< floor(Cmem / Skv), at least 1
  size_t eviction = 1;  ///< floor((Cmem + Cdisk) / Skv), at least 1 (the sum saturates)
};

/// The window lengths for `capacity` and average entry size `skv` (bytes). Rounded down:
/// a window holds only jobs whose entries fit entirely; at least 1 so the job about to run
/// is always covered. Throws cb::Error when skv is 0.
Windows window_lengths(const Capacity& capacity, uint64_t skv);

/// Skv used by the policies: ahead.skv when non-zero, else the rounded-up mean size of the
/// DRAM and SSD entries (rounding up never lengthens a window), else 1 when there are none.
uint64_t effective_skv(const std::vector<EntryMeta>& entries, const LookAhead& ahead);

/// effective_skv of entries that hold `bytes` bytes in `count` DRAM and SSD entries, with no
/// Skv given: the rounded-up mean, or 1 when either is 0.
uint64_t mean_skv(uint64_t bytes, uint64_t count);

/// Scheduler-aware eviction: outside the eviction window first (LRU among them), then
/// inside it from the tail (the job that runs last) towards the head.
class SchedulerAware : public EvictionPolicy {
 public:
  /// "scheduler-aware".
  std::string_view name() const override { return "scheduler-aware"; }
  /// Yes: it ranks entries by their next use in the look-ahead.
  bool uses_lookahead() const override { return true; }
  /// The order described above; the window is window_lengths(capacity, effective_skv).eviction.
  std::vector<size_t> order(const std::vector<EntryMeta>& entries, std::vector<size_t> candidates,
                            const Capacity& capacity, const LookAhead& ahead) const override;
  /// LRU outside the eviction window (window_lengths(capacity, skv).eviction).
  OrderSpec order_spec(const Capacity& capacity, uint64_t skv, size_t queue_len) const override;
};

/// Scheduler-aware fetching: the moves that bring the SSD entries of the jobs in the
/// prefetch window into host memory, visited in queue order (each session once). Room is
/// made with SchedulerAware::make_room, but never at the expense of a job that runs no
/// later than the one being fetched (their entries are pinned for that step), so a fetch
/// never displaces a more urgent entry; planning stops at the first entry that cannot be
/// made to fit that way, so a later job never overtakes an earlier one. Entries in
/// ahead.pinned are not fetched. For every fetch the returned list holds, in order, its SSD
/// drops, its DRAM evictions and then the fetch itself (SSD -> DRAM); the fetched entry's
/// SSD space counts as freed only after its move, so applying the list move by move never
/// exceeds a capacity. Throws cb::Error on malformed entries (see validate_entries).
std::vector<Move> plan_prefetch(const std::vector<EntryMeta>& entries, const Capacity& capacity,
                                const LookAhead& ahead);

}  // namespace cb::policy
