#pragma once
/// Numbers and text in messages.

#include <cstddef>
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
/// (-es after s, x, z, ch and sh), "2 entries" (-ies for a y after a consonant).
inline std::string count_of(long long n, const std::string& noun) {
  std::string s = std::to_string(n) + " " + noun;
  if (n == 1) return s;
  const auto ends = [&](const char* e) {
    const std::string t = e;
    return noun.size() >= t.size() && noun.compare(noun.size() - t.size(), t.size(), t) == 0;
  };
  if (noun.size() >= 2 && noun.back() == 'y' &&
      std::string("aeiou").find(noun[noun.size() - 2]) == std::string::npos) {
    s.pop_back();
    return s + "ies";
  }
  const bool es = ends("s") || ends("x") || ends("z") || ends("ch") || ends("sh");
  return s + (es ? "es" : "s");
}

/// `s` fit for one line of a terminal: valid UTF-8 kept, every control character (C0, DEL and
/// C1; newlines and tabs too) and every byte that is not part of valid UTF-8 written as \xNN.
/// Messages may quote a file's bytes (a damaged tensor name), which must neither garble the
/// terminal nor break a reader that decodes stderr as UTF-8.
inline std::string printable(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const auto escape = [&](unsigned char c) {
    char b[8];
    std::snprintf(b, sizeof b, "\\x%02X", c);
    out += b;
  };
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = byte(i);
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7F) {
        escape(c);
      } else {
        out += static_cast<char>(c);
      }
      ++i;
      continue;
    }
    // The length a lead byte announces, and the range its first continuation byte must fall
    // in (no overlong forms, no UTF-16 surrogates, nothing past U+10FFFF).
    size_t n = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    }
    bool ok = n > 0 && i + n <= s.size() && byte(i + 1) >= lo && byte(i + 1) <= hi;
    for (size_t k = 2; ok && k < n; ++k) ok = byte(i + k) >= 0x80 && byte(i + k) <= 0xBF;
    // U+0080..U+009F, the C1 controls (a terminal may read U+009B as an escape sequence).
    if (ok && c == 0xC2 && byte(i + 1) < 0xA0) ok = false;
    if (ok) {
      out.append(s, i, n);
      i += n;
    } else {
      escape(c);
      ++i;
    }
  }
  return out;
}

}  // namespace cb
