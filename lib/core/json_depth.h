#pragma once
/// The nesting depth of JSON text, found in one linear pass before parsing. Parsers refuse
/// deep nesting (rendering or copying a value recurses once per level, so thousands of '['
/// would overflow the stack); nlohmann's parser callbacks could check it while parsing, but
/// with a callback every object's end scans its parent, which is quadratic in a trace's
/// sessions.

#include <cstddef>
#include <string_view>

namespace cb {

/// The deepest nesting of '[' and '{' outside strings (0 for a scalar). Malformed text gets
/// a number too; the parser then reports what is malformed.
inline size_t json_nesting_depth(std::string_view text) {
  size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest) deepest = depth;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

}  // namespace cb
