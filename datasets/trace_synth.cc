#include "datasets/trace_synth.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>

#include "datasets/length_trace.h"
#include "lib/core/error.h"
#include "lib/core/format.h"

namespace cb::datasets {
namespace {

// Uniform and normal variates from std::mt19937_64, whose output sequence the standard fixes,
// with sampling code of our own (std:: distributions differ between standard libraries).
class Sampler {
 public:
  explicit Sampler(uint64_t seed) : gen_(seed) {}
  /// Uniform in the open interval (0, 1).
  double uniform() { return (static_cast<double>(gen_() >> 11) + 0.5) * 0x1.0p-53; }
  /// Standard normal (Box-Muller, one variate per pair of uniforms).
  double normal() {
    const double u1 = uniform();
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  /// Failures before the first success with success probability p (inverse CDF).
  int64_t geometric(double p) {
    if (p >= 1.0) return 0;
    const double x = std::floor(std::log(uniform()) / std::log1p(-p));
    return x > 1e9 ? static_cast<int64_t>(1e9) : static_cast<int64_t>(x);
  }

 private:
  std::mt19937_64 gen_;
};

// E[min(2 + X, cap)] for X geometric with success probability p.
double capped_mean(double p, int64_t cap) {
  const double q = 1.0 - p;
  double mean = 0;
  double pk = p;  // P(X = k)
  for (int64_t k = 0; k + 2 < cap; ++k) {
    mean += static_cast<double>(2 + k) * pk;
    pk *= q;
  }
  return mean + static_cast<double>(cap) * std::pow(q, static_cast<double>(cap - 2));
}

// The p that gives multi-turn conversations the mean `target` (bisection; capped_mean falls
// as p grows).
double solve_geometric_p(double target, int64_t cap) {
  if (target <= 2.0) return 1.0;
  double lo = 1e-12;
  double hi = 1.0;
  for (int it = 0; it < 200; ++it) {
    const double mid = 0.5 * (lo + hi);
    if (capped_mean(mid, cap) > target) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return 0.5 * (lo + hi);
}

int64_t draw_length(Sampler& r, double median, double scale, double sigma, int64_t max) {
  const double v = median * scale * std::exp(sigma * r.normal());
  return std::clamp<int64_t>(std::llround(std::min(v, static_cast<double>(max))), 1, max);
}

// The fewest digits that read back as `v`: 6 would print the bounds of a fraction of
// 0.9999999999 as "[1, 1)", hiding that the range is not empty.
std::string round_trip(double v) {
  for (int digits = 6; digits < 17; ++digits) {
    const std::string s = format_g(v, digits);
    if (std::strtod(s.c_str(), nullptr) == v) return s;
  }
  return format_g(v, 17);
}

// Named as `trace synth`'s options, the only way users set these.
void check(bool ok, const std::string& option, const std::string& what, const std::string& fix) {
  if (!ok) throw make_usage_error("trace synth " + option, what, fix);
}

void validate(const SynthOptions& o) {
  check(o.sessions >= 1 && o.sessions <= 10000000, "--sessions", "must be in 1..10000000", "");
  check(o.max_turns >= 2 && o.max_turns <= 100000, "--max-turns", "must be in 2..100000", "");
  check(o.single_turn_fraction >= 0 && o.single_turn_fraction < 1, "--single-turn-fraction",
        "must be in [0, 1)", "");
  // Multi-turn conversations take 2 + a geometric number of turns, capped at --max-turns: their
  // mean is exactly 2 at p = 1 (so the least overall mean, lo, is reached), and approaches the
  // cap only as p -> 0 (so hi is not), but with --max-turns 2, where every one has 2 and lo == hi.
  const double lo = 2.0 - o.single_turn_fraction;
  const double hi =
      o.single_turn_fraction + (1.0 - o.single_turn_fraction) * static_cast<double>(o.max_turns);
  const std::string mean_fix =
      hi > lo ? "choose a mean in [" + round_trip(lo) + ", " + round_trip(hi) + ")"
              : "with --max-turns 2 every multi-turn conversation has exactly 2 turns, so the "
                "mean is " +
                    round_trip(lo) + "; raise --max-turns for another";
  const bool mean_ok = o.mean_turns == lo || (o.mean_turns > lo && o.mean_turns < hi);
  check(mean_ok, "--mean-turns",
        round_trip(o.mean_turns) + " cannot be reached with a single-turn fraction of " +
            round_trip(o.single_turn_fraction) + " and at most " + std::to_string(o.max_turns) +
            " turns",
        mean_fix);
  check(o.input_median > 0 && std::isfinite(o.input_median), "--input-median",
        "must be a finite number > 0, got " + format_g(o.input_median), "");
  check(o.output_median > 0 && std::isfinite(o.output_median), "--output-median",
        "must be a finite number > 0, got " + format_g(o.output_median), "");
  check(o.input_sigma >= 0 && o.input_sigma <= 10, "--input-sigma", "must be in 0..10", "");
  check(o.output_sigma >= 0 && o.output_sigma <= 10, "--output-sigma", "must be in 0..10", "");
  check(o.session_sigma >= 0 && o.session_sigma <= 10, "--session-sigma", "must be in 0..10", "");
  check(o.input_max >= 1 && o.input_max <= kMaxTraceTokens, "--input-max",
        "must be in 1.." + std::to_string(kMaxTraceTokens), "");
  check(o.output_max >= 1 && o.output_max <= kMaxTraceTokens, "--output-max",
        "must be in 1.." + std::to_string(kMaxTraceTokens), "");
}

}  // namespace

Trace synth_trace(const SynthOptions& o) {
  validate(o);
  const double multi_mean =
      (o.mean_turns - o.single_turn_fraction) / (1.0 - o.single_turn_fraction);
  const double p = solve_geometric_p(multi_mean, o.max_turns);
  Sampler r(o.seed);
  Trace t;
  t.kind = "lengths";
  t.sessions.resize(static_cast<size_t>(o.sessions));
  for (size_t i = 0; i < t.sessions.size(); ++i) {
    TraceSession& s = t.sessions[i];
    s.id = i;
    int64_t turns = 1;
    if (r.uniform() >= o.single_turn_fraction) {
      turns = std::min<int64_t>(2 + r.geometric(p), o.max_turns);
    }
    const double scale = std::exp(o.session_sigma * r.normal());
    s.turns.resize(static_cast<size_t>(turns));
    for (TraceTurn& turn : s.turns) {
      turn.input_tokens = draw_length(r, o.input_median, scale, o.input_sigma, o.input_max);
      turn.output_tokens = draw_length(r, o.output_median, scale, o.output_sigma, o.output_max);
    }
  }
  return t;
}

nlohmann::json synth_options_json(const SynthOptions& o) {
  return {{"name", "cachebench trace synth"},
          {"sessions", o.sessions},
          {"seed", o.seed},
          {"single_turn_fraction", o.single_turn_fraction},
          {"mean_turns", o.mean_turns},
          {"max_turns", o.max_turns},
          {"input_median", o.input_median},
          {"input_sigma", o.input_sigma},
          {"input_max", o.input_max},
          {"output_median", o.output_median},
          {"output_sigma", o.output_sigma},
          {"output_max", o.output_max},
          {"session_sigma", o.session_sigma}};
}

TraceStats trace_stats(const Trace& t, int64_t long_threshold) {
  TraceStats st;
  st.sessions = static_cast<int64_t>(t.sessions.size());
  int64_t multi = 0;
  int64_t long_sessions = 0;
  double in = 0;
  double out = 0;
  for (const TraceSession& s : t.sessions) {
    int64_t total = 0;
    for (const TraceTurn& turn : s.turns) {
      total += turn.input_tokens + turn.output_tokens;
      in += static_cast<double>(turn.input_tokens);
      out += static_cast<double>(turn.output_tokens);
    }
    st.turns += static_cast<int64_t>(s.turns.size());
    multi += s.turns.size() > 1 ? 1 : 0;
    long_sessions += total > long_threshold ? 1 : 0;
  }
  if (st.sessions > 0) {
    const double n = static_cast<double>(st.sessions);
    st.multi_turn_fraction = static_cast<double>(multi) / n;
    st.mean_turns = static_cast<double>(st.turns) / n;
    st.long_fraction = static_cast<double>(long_sessions) / n;
  }
  if (st.turns > 0) {
    st.mean_input_tokens = in / static_cast<double>(st.turns);
    st.mean_output_tokens = out / static_cast<double>(st.turns);
  }
  return st;
}

}  // namespace cb::datasets
