#pragma once
/// Synthetic conversation traces with the shape of ShareGPT as the CachedAttention paper
/// (§2) reports it: 73% of conversations multi-turn, 5.75 turns on average, 30% longer than
/// 4K tokens in total. Deterministic for a seed on every platform (std::mt19937_64 and
/// explicit inverse-CDF / Box-Muller sampling, no std:: distributions).

#include <cstdint>
#include <nlohmann/json.hpp>

#include "datasets/trace.h"

namespace cb::datasets {

/// Generator parameters; the defaults meet the three published targets.
struct SynthOptions {
  int64_t sessions = 1000;  ///< conversations to generate
  uint64_t seed = 0;

  double single_turn_fraction = 0.27;  ///< conversations with exactly one turn
  double mean_turns = 5.75;            ///< mean turns over all conversations
  int64_t max_turns = 100;             ///< cap; multi-turn counts are 2 + geometric, clamped

  /// Per-turn lengths are log-normal: median * session_scale * exp(sigma * N(0,1)),
  /// rounded and clamped to 1..max. session_scale = exp(session_sigma * N(0,1)) is drawn
  /// once per conversation (some users write long prompts and get long answers throughout).
  double input_median = 120;
  double input_sigma = 1.2;
  int64_t input_max = 4096;
  double output_median = 275;
  double output_sigma = 0.7;
  int64_t output_max = 2048;
  double session_sigma = 0.5;
};

/// A length trace (kind "lengths") of opts.sessions conversations; the first k sessions do
/// not depend on opts.sessions. Throws cb::Error ("trace synth --OPTION: ...") for parameters
/// out of range.
Trace synth_trace(const SynthOptions& opts);

/// The parameters as JSON, for the "generator" record of a written trace.
nlohmann::json synth_options_json(const SynthOptions& opts);

/// Summary statistics of a trace, comparable with the published ShareGPT figures.
struct TraceStats {
  int64_t sessions = 0;
  int64_t turns = 0;
  double multi_turn_fraction = 0;  ///< sessions with more than one turn
  double mean_turns = 0;           ///< turns per session
  double long_fraction = 0;        ///< sessions whose inputs + outputs exceed the threshold
  double mean_input_tokens = 0;    ///< per turn
  double mean_output_tokens = 0;   ///< per turn
};

/// Statistics of `t`; a session is long when the sum of its input and output tokens over all
/// turns is greater than `long_threshold`.
TraceStats trace_stats(const Trace& t, int64_t long_threshold = 4096);

}  // namespace cb::datasets
