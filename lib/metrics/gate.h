#pragma once
/// Performance gates: compare a current summary against a committed baseline, metric by
/// metric, each with a bound on how much worse it may get. Pure: no files, no printing
/// beyond building strings (apps/cachebench/cmd_gate.cc does the I/O).

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace cb::metrics {

/// Which way a metric is better.
enum class Direction {
  HigherIsBetter,  ///< a drop beyond the bound is a regression, a rise an improvement
  LowerIsBetter,   ///< a rise beyond the bound is a regression, a drop an improvement
  Exact,           ///< any change beyond the bound, either way, is a regression
};

/// The direction of a metric from its dotted name. Each dotted component is split at '_' into
/// words; the first rule that any component meets wins:
/// 1. higher is better: a word throughput, reduction, saving, speedup, gbps, gbs, gflops,
///    tflops, mfu, acc, completed, reused or to (a ratio: prefill_to_sgemm,
///    ratio_to_copy_ceiling), the words hit rate, tok s or per s in a row, or a last word x
///    (gpu_time_x);
///    checked first so "gpu_time_x", "prefill_tok_s" and "ttft_reduction_pct" are not times;
/// 2. lower is better: a word ttft, tpot, itl, e2el, latency, stall, cost, recomputed,
///    duration, ms, us, ns, seconds, ppl, perplexity, nll, bpb, diff, errors or failures, the
///    words gpu
///    time or bits per byte in a row, or a last word s (prefill_s, load_s);
/// 3. anything else (bytes_loaded, bytes_saved, truncated_tokens, token totals...) is Exact.
/// A bound can name the direction instead (parse_bound).
Direction direction_of(const std::string& metric);

/// "higher", "lower" or "exact".
const char* direction_name(Direction d);

/// One gate: `metric` (a dotted path into the summary) may get at most
/// `max_regression_pct` percent worse than the baseline.
struct Bound {
  std::string metric;                      ///< e.g. "hit_rate.overall", "ttft_ms.mean"
  double max_regression_pct = 0;           ///< allowed relative worsening, in percent (>= 0)
  Direction direction = Direction::Exact;  ///< which way is worse
  bool direction_given = false;            ///< named in the bound, not read off the name
};

/// Parses "METRIC=PCT" or "METRIC=PCT:DIRECTION" (PCT a non-negative number, optionally
/// followed by '%'; DIRECTION higher, lower or exact, else direction_of(METRIC)); a cb::Error
/// naming `arg` when it is malformed.
Bound parse_bound(const std::string& arg);

/// The gates used when none is given: the fields a replay determines exactly (no timing),
/// each at 0%: hit_rate.overall, hit_rate.dram, hit_rate.ssd, reused_tokens,
/// recomputed_tokens, bytes_loaded, bytes_saved, completed.
std::vector<Bound> default_bounds();

/// The gates a run applies: default_bounds() (unless `no_defaults`), each replaced by a given
/// bound of the same metric, then the given bounds of other metrics, in their order. When
/// bounds are given, a default whose metric the baseline lacks (`baseline`, a summary; e.g. a
/// perplexity result has no hit rates) is left out; with none given every default applies, so
/// a missing one is an error. A metric given twice is a cb::Error naming it (which bound was
/// meant is unclear), as is an empty set.
std::vector<Bound> gate_bounds(const std::vector<Bound>& given, bool no_defaults,
                               const nlohmann::json& baseline);

/// How one gated metric fared.
enum class Verdict {
  Ok,          ///< within the bound
  Regression,  ///< worse than the bound allows
  Improved,    ///< better than the baseline (directional metrics only)
};

/// "OK", "REGRESSION" or "improved".
const char* verdict_name(Verdict v);

/// One row of the gate report.
struct GateCheck {
  std::string metric;
  double baseline = 0;
  double current = 0;
  /// The values as the summaries hold them when both are integers (int64 or uint64, exact),
  /// else null: a double rounds integers beyond 2^53, so 2^53 and 2^53 + 1 bytes would read as
  /// equal. The report shows and writes these where they are set.
  nlohmann::json baseline_integer;
  nlohmann::json current_integer;
  /// (current - baseline) / |baseline| * 100; 0 when both are 0, +-infinity when only the
  /// baseline is 0; of two integers from their exact difference, so it is 0 only when they
  /// are equal.
  double change_pct = 0;
  double bound_pct = 0;
  Direction direction = Direction::Exact;
  Verdict verdict = Verdict::Ok;
};

/// Every check, in the order of the bounds.
struct GateReport {
  std::vector<GateCheck> checks;
  int regressions = 0;  ///< checks whose verdict is Regression
};

/// The summary inside a parsed result document: `doc`["summary"] when that is an object (a
/// replay result), with the result's `comparison` and `baseline` (a `replay --compare` run's
/// ratios and its baseline mode's summary) beside its own metrics, so that
/// comparison.gpu_time_x is a metric too; else `doc` itself (a bare summary). A cb::Error
/// naming `name` when neither is an object.
nlohmann::json select_summary(const nlohmann::json& doc, const std::string& name);

/// Parses `text` (the contents of the file `name`); a cb::Error naming `name` when it is not
/// valid JSON.
nlohmann::json parse_document(const std::string& text, const std::string& name);
/// A JSON library error's reason without its "[json.exception.parse_error.101] " tag.
std::string json_reason(const std::exception& e);
/// parse_document, then its summary (select_summary).
nlohmann::json parse_summary(const std::string& text, const std::string& name);

/// Evaluates each bound. A change counts as worse only beyond the bound plus a billionth of
/// it (rounding in the percentage), so an exact bound (0) fails on any change, of integers too
/// beyond 2^53 (compared as the integers the JSON holds, not as doubles). A metric missing
/// from, or not a number in, either summary is a cb::Error naming that file (`baseline_name` /
/// `current_name`) and the metric.
GateReport run_gate(const nlohmann::json& baseline, const nlohmann::json& current,
                    const std::vector<Bound>& bounds, const std::string& baseline_name,
                    const std::string& current_name);

/// The report as a markdown table: | metric | baseline | current | change % | bound % |
/// better | verdict | (better: higher, lower or exact); integers with all their digits.
std::string gate_markdown(const GateReport& report);

/// The report as JSON: {"checks": [{metric, baseline, current (integers exactly), change_pct
/// (null when infinite), bound_pct, direction, verdict}], "regressions": N, "passed": bool}.
nlohmann::json gate_json(const GateReport& report);

}  // namespace cb::metrics
