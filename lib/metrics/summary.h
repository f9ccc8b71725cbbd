#pragma once
/// The serving summary of a replay: vLLM benchmark_serving's field names (ttft_ms, tpot_ms,
/// itl_ms, e2el_ms, request/input/output_throughput) plus what only a KV-reuse system has
/// (prefill_throughput, gpu_time_s, hit rates per tier, bytes moved, stalls, cost_usd).
/// Every name carries its unit. This is the JSON that `cachebench gate` and plots consume.

#include <nlohmann/json.hpp>
#include <vector>

#include "lib/metrics/turn_record.h"

namespace cb::metrics {

/// Summarizes the measured (non-warmup) turns of `records` with the run-wide `totals`.
///
/// Latencies, in milliseconds, as {mean, median, p90, p99} (stats.h: numpy's linear
/// percentiles):
/// - `ttft_ms`: first_token_s - arrival_s (queueing included);
/// - `tpot_ms`: per request (finish_s - first_token_s) / (output_tokens - 1); requests with
///   fewer than 2 output tokens are left out, as vLLM does;
/// - `itl_ms`: every gap between consecutive token_times_s of every request;
/// - `e2el_ms`: finish_s - arrival_s.
///
/// Counts and rates: `completed` (turns), `total_input_tokens` (new_tokens summed),
/// `total_output_tokens`, `duration_s` (totals.duration_s), `request_throughput` (turns/s),
/// `input_throughput` and `output_throughput` (tokens/s over duration_s),
/// `prefill_throughput` ((history_tokens + new_tokens) summed / totals.prefill_time_s: tokens
/// made ready per second of prefill), `gpu_time_s`, `gpus`.
///
/// Reuse: `turns_with_history` (tier != "none": a turn whose truncation to the window left none
/// of its history has none to reuse and is not counted), `hit_rate` {overall, hbm, dram, ssd} (hits
/// over turns_with_history; a tier's rate is its hits over the same denominator, so the
/// three add up to overall; all 0 when no turn had a history, which replay's table shows as
/// n/a), `reused_tokens`, `recomputed_tokens`, `truncated_tokens`,
/// `bytes_loaded`, `bytes_saved`, `preload_stall_s` {total, mean_ms (per measured turn)},
/// `save_stall_s` and `load_s` (totals over the measured turns).
///
/// `tiers`: {NAME: {present, capacity_bytes, hits, bytes_read, bytes_written, read_gbps,
/// write_gbps}} for each of totals.tiers as the store counted it (GB/s = 1e9 bytes per second
/// of the tier's read_s / write_s).
///
/// `cost_usd` {gpu, dram, ssd, total}, the paper's accounting (GPU hours used, storage
/// provisioned for the run's duration):
///   gpu  = gpus * gpu_time_s / 3600 * prices.gpu_usd_per_hour
///   dram = dram capacity_bytes / 1e9 * duration_s / 3600 * prices.dram_usd_per_gb_hour
///   ssd  = ssd capacity_bytes / 1e9 * duration_s / 3600 * prices.ssd_usd_per_gb_hour
///   total = gpu + dram + ssd
/// where a tier's capacity counts only when it is present. `prices` echoes the prices used.
///
/// Empty input: every field stays a number; a rate or statistic whose denominator is zero
/// (no measured turns, zero duration, no turns with history, no prefill time, no tier time)
/// is 0, never null, so gates can always compare. A record whose tier is not one of "none",
/// "miss", "hbm", "dram", "ssd" is a cb::Error naming the session and turn.
nlohmann::json summarize(const std::vector<TurnRecord>& records, const RunTotals& totals,
                         const Prices& prices);

/// The ratios the CachedAttention paper reports for `current` (e.g. CA) against `base`
/// (e.g. RE), both summarize() objects:
///   ttft_reduction_pct   = (1 - current.ttft_ms.mean / base.ttft_ms.mean) * 100
///   prefill_throughput_x = current.prefill_throughput / base.prefill_throughput
///   gpu_time_x           = base.gpu_time_s / current.gpu_time_s (times less GPU time)
///   cost_saving_pct      = (1 - current.cost_usd.total / base.cost_usd.total) * 100
///   hit_rate             = {base: base.hit_rate.overall, current: current.hit_rate.overall}
/// A ratio whose denominator is 0 is null. A missing or non-numeric field is a cb::Error
/// naming the summary ("base" or "current") and the field.
nlohmann::json compare_summaries(const nlohmann::json& base, const nlohmann::json& current);

}  // namespace cb::metrics
