#pragma once
/// Option checks with messages a user can act on. CLI11 2.1's PositiveNumber and Range print
/// their bounds with %f (DBL_MAX as 309 digits) and let nan and inf through.

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace cb::app {

namespace detail {
inline std::string bound(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}
}  // namespace detail

/// A finite number in [lo, hi] (integers or decimals, as the option's type reads them).
inline CLI::Validator in_range(double lo, double hi) {
  const std::string desc = "in " + detail::bound(lo) + ".." + detail::bound(hi);
  return CLI::Validator(
      [lo, hi, desc](std::string& s) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        if (s.empty() || end == s.c_str() || *end != '\0') return "'" + s + "' is not a number";
        if (!std::isfinite(v) || v < lo || v > hi) return "must be " + desc + ", got " + s;
        return "";
      },
      desc);
}

/// A number in the open interval (lo, hi).
inline CLI::Validator in_open_range(double lo, double hi) {
  const std::string desc = "in (" + detail::bound(lo) + ", " + detail::bound(hi) + ")";
  return CLI::Validator(
      [lo, hi, desc](std::string& s) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        if (s.empty() || end == s.c_str() || *end != '\0') return "'" + s + "' is not a number";
        if (!(v > lo && v < hi)) return "must be " + desc + ", got " + s;
        return "";
      },
      desc);
}

/// A finite number >= lo.
inline CLI::Validator at_least(double lo) {
  const std::string desc = ">= " + detail::bound(lo);
  return CLI::Validator(
      [lo, desc](std::string& s) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        if (s.empty() || end == s.c_str() || *end != '\0') return "'" + s + "' is not a number";
        if (!std::isfinite(v) || v < lo) return "must be a finite number " + desc + ", got " + s;
        return "";
      },
      desc);
}

/// A finite number > lo.
inline CLI::Validator above(double lo) {
  const std::string desc = "> " + detail::bound(lo);
  return CLI::Validator(
      [lo, desc](std::string& s) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        if (s.empty() || end == s.c_str() || *end != '\0') return "'" + s + "' is not a number";
        if (!std::isfinite(v) || v <= lo) return "must be a finite number " + desc + ", got " + s;
        return "";
      },
      desc);
}

}  // namespace cb::app
