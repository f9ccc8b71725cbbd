#pragma once
/// Numbers in messages.

#include <cstdio>
#include <string>

namespace cb {

/// `v` in printf's %g with `digits` significant digits ("1e+306", "0.5", "2.603e+10").
inline std::string format_g(double v, int digits = 6) {
  char b[40];
  std::snprintf(b, sizeof b, "%.*g", digits, v);
  return b;
}

/// `n` followed by `noun`, plural unless `n` is 1: "1 session", "3 sessions", "2 passes"
/// (-es after s, x, z, ch and sh).
inline std::string count_of(long long n, const std::string& noun) {
  std::string s = std::to_string(n) + " " + noun;
  if (n == 1) return s;
  const auto ends = [&](const char* e) {
    const std::string t = e;
    return noun.size() >= t.size() && noun.compare(noun.size() - t.size(), t.size(), t) == 0;
  };
  const bool es = ends("s") || ends("x") || ends("z") || ends("ch") || ends("sh");
  return s + (es ? "es" : "s");
}

}  // namespace cb
