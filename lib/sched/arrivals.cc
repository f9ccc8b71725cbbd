// Seeded arrival processes with portable inverse-CDF sampling.
#include "lib/sched/arrivals.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "lib/core/error.h"

namespace cb::sched {

double uniform01(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * (1.0 / 9007199254740992.0);
}

double exponential(std::mt19937_64& rng, double mean) {
  return -mean * std::log1p(-uniform01(rng));
}

namespace {

/// The shortest of %.15g..%.17g that reads back as `v` ("4", not "4.0000000000000000").
std::string exact(double v) {
  char buf[40];
  for (int p = 15; p <= 17; ++p) {
    std::snprintf(buf, sizeof buf, "%.*g", p, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

// Seconds in 0..kMaxThinkTimeS into *out. False for text that is not a number; a number out of
// that range throws, naming it.
bool parse_seconds(const std::string& s, double* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || std::isnan(v)) return false;
  if (!(v >= 0 && v <= kMaxThinkTimeS)) {
    throw make_error("--think-time", "'" + s + "' seconds is outside 0..1e6",
                     "give a time from 0 to 1e6 seconds");
  }
  *out = v;
  return true;
}

}  // namespace

ThinkTime ThinkTime::parse(const std::string& text) {
  const auto bad = [&]() {
    return make_error(
        "--think-time", "cannot parse '" + text + "'",
        "use 0, const:SECONDS, exp:MEAN_SECONDS, uniform:LO:HI or until:TIME (seconds from 0 "
        "to 1e6)");
  };
  ThinkTime t;
  double v = 0;
  if (parse_seconds(text, &v)) {
    t.kind = v == 0 ? Kind::Zero : Kind::Const;
    t.a = v;
    return t;
  }
  const size_t c = text.find(':');
  if (c == std::string::npos) throw bad();
  const std::string kind = text.substr(0, c), rest = text.substr(c + 1);
  if (kind == "const" || kind == "exp") {
    if (!parse_seconds(rest, &t.a)) throw bad();
    t.kind = kind == "const" ? Kind::Const : Kind::Exp;
    if (t.a == 0) t.kind = Kind::Zero;
    return t;
  }
  if (kind == "until") {
    if (!parse_seconds(rest, &t.a)) throw bad();
    t.kind = Kind::Until;
    return t;
  }
  if (kind == "uniform") {
    const size_t c2 = rest.find(':');
    if (c2 == std::string::npos || !parse_seconds(rest.substr(0, c2), &t.a) ||
        !parse_seconds(rest.substr(c2 + 1), &t.b)) {
      throw bad();
    }
    if (t.b < t.a) {
      throw make_error("--think-time", "'" + text + "' has LO above HI",
                       "use uniform:" + exact(t.b) + ":" + exact(t.a));
    }
    t.kind = Kind::Uniform;
    return t;
  }
  throw bad();
}

double ThinkTime::sample(std::mt19937_64& rng) const {
  switch (kind) {
    case Kind::Zero: return 0;
    case Kind::Const: return a;
    case Kind::Exp: return exponential(rng, a);
    case Kind::Uniform: return a + (b - a) * uniform01(rng);
    case Kind::Until: return 0;
  }
  return 0;
}

double ThinkTime::next_arrival(double finish, std::mt19937_64& rng) const {
  return kind == Kind::Until ? std::max(finish, a) : finish + sample(rng);
}

std::string ThinkTime::describe() const {
  switch (kind) {
    case Kind::Zero: return "0";
    case Kind::Const: return "const:" + exact(a);
    case Kind::Exp: return "exp:" + exact(a);
    case Kind::Uniform: return "uniform:" + exact(a) + ":" + exact(b);
    case Kind::Until: return "until:" + exact(a);
  }
  return "0";
}

std::vector<double> poisson_arrivals(size_t n, double rate, uint64_t seed) {
  std::vector<double> t(n, 0.0);
  if (n <= 1 || !(rate > 0) || std::isinf(rate)) return t;
  // Times are doubles in seconds; past ~4.5e9 s their spacing exceeds a microsecond, and the
  // millisecond metrics (TTFT, TPOT) of a run would be rounding noise.
  const double span = static_cast<double>(n - 1) / rate;  // mean time to the last arrival
  if (span > kMaxVirtualSpanS) {
    char b[160];
    std::snprintf(b, sizeof b,
                  "at %g sessions per second, %zu sessions arrive over about %.3g s, beyond the "
                  "%.0g s the clock resolves to a microsecond",
                  rate, n, span, kMaxVirtualSpanS);
    throw make_error("--rate", b, "raise --rate (or 0: all at once)");
  }
  std::mt19937_64 rng(seed);
  for (size_t i = 1; i < n; ++i) t[i] = t[i - 1] + exponential(rng, 1.0 / rate);
  return t;
}

}  // namespace cb::sched
