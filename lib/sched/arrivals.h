#pragma once
/// When requests arrive: new conversations as a seeded Poisson process, and each next turn
/// after the previous answer plus a think time drawn from a configurable distribution.
/// Random numbers come from our own inverse-CDF code over mt19937_64, so a seed gives the
/// same trace on every standard library.

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace cb::sched {

/// A uniform double in [0, 1) from 53 random bits.
double uniform01(std::mt19937_64& rng);
/// An exponential variate of the given mean (inverse CDF).
double exponential(std::mt19937_64& rng, double mean);

/// Think time between an answer and the session's next turn.
struct ThinkTime {
  /// Until: no think time as such; every next turn arrives at time `a` of the run, or right
  /// after its answer when that is later (a burst at `a`: the ablation's measured turns).
  enum class Kind { Zero, Const, Exp, Uniform, Until };
  Kind kind = Kind::Zero;
  double a = 0;  ///< Const: the value; Exp: the mean; Uniform: the low end; Until: the time
  double b = 0;  ///< Uniform: the high end

  /// Parses "0", "const:S", "exp:MEAN", "uniform:LO:HI", "until:T" (seconds); throws
  /// cb::Error naming the `--think-time` argument otherwise.
  static ThinkTime parse(const std::string& text);
  /// When the next turn arrives after an answer at `finish` (s).
  double next_arrival(double finish, std::mt19937_64& rng) const;
  /// One draw (Until: 0; next_arrival places its turns).
  double sample(std::mt19937_64& rng) const;
  /// The canonical text form (parse(describe()) gives the same distribution).
  std::string describe() const;
};

/// The longest span of arrivals a run may have (s): up to it, doubles in seconds resolve a
/// microsecond, so the millisecond metrics stay exact.
inline constexpr double kMaxVirtualSpanS = 1e9;
/// The largest think time (s) ThinkTime::parse accepts (11.6 days).
inline constexpr double kMaxThinkTimeS = 1e6;

/// Arrival times of `n` sessions: a Poisson process of `rate` sessions per second starting
/// at 0 (the first session arrives at 0). rate <= 0 or infinite: all at 0. A rate whose
/// sessions would arrive over more than kMaxVirtualSpanS ((n - 1) / rate) is a cb::Error
/// naming --rate.
std::vector<double> poisson_arrivals(size_t n, double rate, uint64_t seed);

}  // namespace cb::sched
