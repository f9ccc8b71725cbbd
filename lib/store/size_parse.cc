#include "lib/store/size_parse.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "lib/core/error.h"

namespace cb::store {

uint64_t parse_size(const std::string& text, const std::string& what) {
  auto bad = [&](const std::string& why) {
    return make_error(what, "invalid size '" + text + "': " + why,
                      "write a number with an optional unit, e.g. 512MiB, 128GiB or 10TiB");
  };
  size_t i = 0;
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  size_t num_start = i;
  bool dot = false;
  while (i < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[i])) || (text[i] == '.' && !dot))) {
    if (text[i] == '.') dot = true;
    ++i;
  }
  if (i == num_start) throw bad(i < text.size() && text[i] == '-' ? "negative" : "no number");
  const std::string num = text.substr(num_start, i - num_start);
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  std::string unit;
  for (; i < text.size(); ++i) {
    if (std::isspace(static_cast<unsigned char>(text[i]))) break;
    unit += static_cast<char>(std::tolower(static_cast<unsigned char>(text[i])));
  }
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  if (i != text.size()) throw bad("trailing characters");
  double mult = 0;
  if (unit.empty() || unit == "b")
    mult = 1;
  else if (unit == "k" || unit == "kib")
    mult = 1024.0;
  else if (unit == "m" || unit == "mib")
    mult = 1024.0 * 1024;
  else if (unit == "g" || unit == "gib")
    mult = 1024.0 * 1024 * 1024;
  else if (unit == "t" || unit == "tib")
    mult = 1024.0 * 1024 * 1024 * 1024;
  else if (unit == "p" || unit == "pib")
    mult = 1024.0 * 1024 * 1024 * 1024 * 1024;
  else if (unit == "kb")
    mult = 1e3;
  else if (unit == "mb")
    mult = 1e6;
  else if (unit == "gb")
    mult = 1e9;
  else if (unit == "tb")
    mult = 1e12;
  else if (unit == "pb")
    mult = 1e15;
  else
    throw bad("unknown unit '" + unit + "'");
  const double v = std::strtod(num.c_str(), nullptr) * mult;
  if (!std::isfinite(v) || v >= 1.8e19) throw bad("too large");
  const double r = std::floor(v);
  if (r != v) throw bad("not a whole number of bytes");
  return static_cast<uint64_t>(r);
}

std::string format_size(uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 5) {
    v /= 1024.0;
    ++u;
  }
  char buf[48];
  if (u == 0 || v == std::floor(v))
    std::snprintf(buf, sizeof buf, "%.0f %s", v, units[u]);
  else
    std::snprintf(buf, sizeof buf, "%.3g %s", v, units[u]);
  return buf;
}

void check_tier_budget(const char* option, uint64_t bytes, uint64_t chunk_bytes) {
  if (bytes > 0 && bytes < chunk_bytes) {
    throw make_error(option,
                     format_size(bytes) + " is smaller than one chunk (" +
                         format_size(chunk_bytes) + "), so the tier could hold nothing",
                     "give at least one chunk, 0 for no such tier, or a smaller --chunk-size");
  }
}

}  // namespace cb::store
