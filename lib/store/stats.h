#pragma once
/// Store statistics: hits and misses (by reason) per tier, prefetches, evictions, bytes
/// and achieved GB/s per tier, checksum failures, recovery counts; exported as JSON.

#include <atomic>
#include <cstdint>
#include <string>

#include "lib/store/types.h"

namespace cb::store {

/// Store-wide counters.
enum class Counter : int {
  Lookups,
  Misses,
  MissNotFound,
  MissFingerprint,
  MissHistory,
  MissExpired,
  MissCorrupt,
  Saves,
  SaveFailures,
  AppendSaves,
  SsdCopyChunksReused,
  SsdChunksCleaned,
  SavesAdmittedBelow,
  SlowDemotionsDropped,
  DemotionsAhead,  ///< HBM entries demoted to DRAM ahead of need (StoreConfig::demote_ahead_bytes)
  Loads,
  LoadFailures,
  Prefetches,
  PrefetchFailures,
  ChecksumFailures,
  IoErrors,
  Truncations,
  TruncationRewrites,
  Erases,
  Expirations,
  RecoveredEntries,
  DiscardedEntries,
  DiscardedRecords,
  CorruptJournalBytes,  ///< corrupt journal bytes, a damaged tail included (records lost)
  JournalLost,  ///< 1 when the journal was missing, emptied or cut short (its entries are lost)
  JournalCut,   ///< 1 when it was cut short inside the records its last rewrite wrote (journal_cut)
  JournalCompactions,  ///< every compaction of the journal (online ones and those below)
  /// Compactions from the index, holding the store's lock: after a failed append, or when the
  /// records did not hold what the index does (an online compaction found them damaged).
  JournalIndexCompactions,
  kCount
};
/// Per-tier counters.
enum class TierCounter : int {
  Hits,
  Evictions,
  Drops,
  BytesRead,
  BytesWritten,
  ReadNs,
  WriteNs,
  kCount
};

/// JSON name of a counter ("misses", "checksum_failures", ...).
const char* counter_name(Counter c);
/// JSON name of a per-tier counter.
const char* tier_counter_name(TierCounter c);

constexpr int kNumCounters = static_cast<int>(Counter::kCount);
constexpr int kNumTierCounters = static_cast<int>(TierCounter::kCount);

/// A consistent-enough copy of the counters plus tier occupancy.
struct StatsSnapshot {
  uint64_t counters[kNumCounters] = {};
  uint64_t tier_counters[kNumTiers][kNumTierCounters] = {};
  bool tier_present[kNumTiers] = {};
  uint64_t used_bytes[kNumTiers] = {};
  uint64_t capacity_bytes[kNumTiers] = {};
  uint64_t entries[kNumTiers] = {};
  /// AttentionStore::first_io_error(): "" when none (then left out of the JSON).
  std::string first_io_error;

  /// Value of `c`.
  uint64_t get(Counter c) const { return counters[static_cast<int>(c)]; }
  /// Value of `c` for tier `t`.
  uint64_t get(TierKind t, TierCounter c) const {
    return tier_counters[static_cast<int>(t)][static_cast<int>(c)];
  }
  /// Achieved read (or write) GB/s of tier `t` over the time spent in transfers.
  double gbps(TierKind t, bool write) const;
  /// JSON text with all counters, per-tier blocks and GB/s, and first_io_error when set.
  std::string to_json(int indent = 2) const;
};

/// Thread-safe counters.
class StoreStats {
 public:
  /// Adds `n` to `c`.
  void add(Counter c, uint64_t n = 1) {
    c_[static_cast<int>(c)].fetch_add(n, std::memory_order_relaxed);
  }
  /// Adds `n` to `c` of tier `t`.
  void add(TierKind t, TierCounter c, uint64_t n = 1) {
    t_[static_cast<int>(t)][static_cast<int>(c)].fetch_add(n, std::memory_order_relaxed);
  }
  /// Copies the counters (occupancy fields are left for the store to fill).
  StatsSnapshot snapshot() const;

 private:
  std::atomic<uint64_t> c_[kNumCounters] = {};
  std::atomic<uint64_t> t_[kNumTiers][kNumTierCounters] = {};
};

}  // namespace cb::store
