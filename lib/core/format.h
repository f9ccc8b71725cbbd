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

}  // namespace cb
