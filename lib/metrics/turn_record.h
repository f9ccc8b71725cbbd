#pragma once
/// What the serving engine records per conversation turn, and the run-wide totals the
/// summary needs. Times are seconds on the run's clock (0 = start of the replay).

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace cb::metrics {

/// One turn (one request) as served.
struct TurnRecord {
  uint64_t session = 0;
  int turn = 0;              ///< 0-based turn index within the session
  bool warmup = false;       ///< served during --warmup-turns (excluded from the summary)
  double arrival_s = 0;      ///< when the request arrived
  double start_s = 0;        ///< when it was admitted into a batch
  double first_token_s = 0;  ///< when its first output token was produced
  double finish_s = 0;       ///< when its last output token was produced
  double done_s = 0;  ///< when the engine was done with it: finish_s, or after the waits its save
                      ///< made on the engine's thread (a synchronous save, evictions)
  int64_t history_tokens = 0;     ///< context before this turn, after any truncation
  int64_t new_tokens = 0;         ///< prompt tokens fed this turn (message + carried token)
  int64_t output_tokens = 0;      ///< tokens decoded
  int64_t reused_tokens = 0;      ///< history tokens loaded from the store (not recomputed)
  int64_t recomputed_tokens = 0;  ///< history tokens recomputed (miss, RE, OF)
  int64_t truncated_tokens = 0;   ///< history tokens dropped by context overflow this turn
  /// "hbm", "dram", "ssd" (hit), "miss", or "none": no history to reuse (a first turn, or one
  /// whose window truncation dropped its whole history).
  std::string tier = "none";
  uint64_t bytes_loaded = 0;  ///< KV bytes read from the store
  uint64_t bytes_saved = 0;   ///< KV bytes written to the store after this turn
  /// Wall time of this turn's store load, from its start to its last layer. A read buffer
  /// starts the load before admission, and the layers past the buffer start at admission, so
  /// the span then includes the wait in the queue between the two.
  double load_s = 0;
  double preload_stall_s = 0;         ///< time compute waited for preloaded layers
  double save_stall_s = 0;            ///< time the critical path waited for saving (sync saves)
  std::vector<double> token_times_s;  ///< production time of every output token (first included)
};

/// Per-tier store activity over the run.
struct TierTotals {
  std::string name;             ///< "hbm", "dram", "ssd"
  bool present = false;         ///< configured
  uint64_t capacity_bytes = 0;  ///< budget
  uint64_t hits = 0;            ///< loads served from the tier
  uint64_t bytes_read = 0;
  uint64_t bytes_written = 0;
  double read_s = 0;   ///< time spent in reads
  double write_s = 0;  ///< time spent in writes
};

/// Run-wide totals.
struct RunTotals {
  double duration_s = 0;      ///< first arrival to the last turn done (measured turns; done_s)
  double gpu_time_s = 0;      ///< time the accelerator was held by steps (compute + stalls)
                              ///< of measured turns (step_share of a shared step)
  double prefill_time_s = 0;  ///< the same, of steps that carried prefill tokens
  int gpus = 1;               ///< accelerators held (cost)
  std::vector<TierTotals> tiers;
};

/// The share of a forward step's time that counts in gpu_time_s and prefill_time_s: its
/// measured (non-warmup) turns' tokens over all its tokens (a decode feeds one), so a step that
/// warm-up turns share counts in proportion, and the prefill throughput (measured tokens over
/// prefill_time_s) is the step's own rate. 0 for a step of warm-up turns alone.
inline double step_share(int64_t measured_tokens, int64_t tokens) {
  return tokens > 0 ? static_cast<double>(measured_tokens) / static_cast<double>(tokens) : 0.0;
}

/// First arrival to last finish over the measured (non-warmup) turns; 0 when there are none.
inline double measured_duration(const std::vector<TurnRecord>& records) {
  double first = 0, last = 0;
  bool any = false;
  for (const TurnRecord& r : records) {
    if (r.warmup) continue;
    first = any ? std::min(first, r.arrival_s) : r.arrival_s;
    const double end = std::max(r.finish_s, r.done_s);
    last = any ? std::max(last, end) : end;
    any = true;
  }
  return any ? last - first : 0;
}

/// Prices for cost_usd (defaults: the CachedAttention evaluation's).
struct Prices {
  double gpu_usd_per_hour = 5.0;
  double dram_usd_per_gb_hour = 0.0088;
  double ssd_usd_per_gb_hour = 0.000082;
};

}  // namespace cb::metrics
