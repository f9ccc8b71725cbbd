#include "lib/store/stats.h"

#include <nlohmann/json.hpp>

namespace cb::store {

const char* counter_name(Counter c) {
  static const char* names[kNumCounters] = {"lookups",
                                            "misses",
                                            "miss_not_found",
                                            "miss_fingerprint",
                                            "miss_history",
                                            "miss_expired",
                                            "miss_corrupt",
                                            "saves",
                                            "save_failures",
                                            "append_saves",
                                            "ssd_copy_chunks_reused",
                                            "ssd_chunks_cleaned",
                                            "saves_admitted_below",
                                            "slow_demotions_dropped",
                                            "demotions_ahead",
                                            "loads",
                                            "load_failures",
                                            "prefetches",
                                            "prefetch_failures",
                                            "checksum_failures",
                                            "io_errors",
                                            "truncations",
                                            "truncation_rewrites",
                                            "erases",
                                            "expirations",
                                            "recovered_entries",
                                            "discarded_entries",
                                            "discarded_records",
                                            "corrupt_journal_bytes",
                                            "journal_lost",
                                            "journal_cut",
                                            "journal_compactions",
                                            "journal_index_compactions"};
  return names[static_cast<int>(c)];
}

const char* tier_counter_name(TierCounter c) {
  static const char* names[kNumTierCounters] = {
      "hits", "evictions", "drops", "bytes_read", "bytes_written", "read_ns", "write_ns"};
  return names[static_cast<int>(c)];
}

StatsSnapshot StoreStats::snapshot() const {
  StatsSnapshot s;
  for (int i = 0; i < kNumCounters; ++i) s.counters[i] = c_[i].load(std::memory_order_relaxed);
  for (int t = 0; t < kNumTiers; ++t) {
    for (int i = 0; i < kNumTierCounters; ++i) {
      s.tier_counters[t][i] = t_[t][i].load(std::memory_order_relaxed);
    }
  }
  return s;
}

double StatsSnapshot::gbps(TierKind t, bool write) const {
  const uint64_t bytes = get(t, write ? TierCounter::BytesWritten : TierCounter::BytesRead);
  const uint64_t ns = get(t, write ? TierCounter::WriteNs : TierCounter::ReadNs);
  return ns == 0 ? 0.0 : static_cast<double>(bytes) / static_cast<double>(ns);
}

std::string StatsSnapshot::to_json(int indent) const {
  nlohmann::json j;
  for (int i = 0; i < kNumCounters; ++i) j[counter_name(static_cast<Counter>(i))] = counters[i];
  uint64_t hits = 0;
  nlohmann::json tiers = nlohmann::json::object();
  for (int t = 0; t < kNumTiers; ++t) {
    if (!tier_present[t]) continue;
    const auto kind = static_cast<TierKind>(t);
    nlohmann::json jt;
    for (int i = 0; i < kNumTierCounters; ++i) {
      jt[tier_counter_name(static_cast<TierCounter>(i))] = tier_counters[t][i];
    }
    jt["read_gbps"] = gbps(kind, false);
    jt["write_gbps"] = gbps(kind, true);
    jt["used_bytes"] = used_bytes[t];
    jt["capacity_bytes"] = capacity_bytes[t];
    jt["entries"] = entries[t];
    hits += get(kind, TierCounter::Hits);
    tiers[tier_name(kind)] = jt;
  }
  j["hits"] = hits;
  const uint64_t lookups = hits + get(Counter::Misses);
  j["hit_rate"] = lookups == 0 ? 0.0 : static_cast<double>(hits) / static_cast<double>(lookups);
  j["tiers"] = tiers;
  if (!first_io_error.empty()) j["first_io_error"] = first_io_error;
  return j.dump(indent);
}

}  // namespace cb::store
