#pragma once
/// The nesting depth of JSON text, found in one linear pass before parsing, and the check and
/// message clipping the parsers share. Parsers refuse
/// deep nesting (rendering or copying a value recurses once per level, so thousands of '['
/// would overflow the stack); nlohmann's parser callbacks could check it while parsing, but
/// with a callback every object's end scans its parent, which is quadratic in a trace's
/// sessions.

#include <cstddef>
#include <string>
#include <string_view>

#include "lib/core/error.h"

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

/// Throws cb::Error naming `where` ("nests JSON more than `max` levels deep", then `fix`) when
/// `text` nests deeper than `max`.
inline void check_json_depth(std::string_view text, size_t max, const std::string& where,
                             const std::string& fix) {
  if (json_nesting_depth(text) > max) {
    throw make_error(where, "nests JSON more than " + std::to_string(max) + " levels deep", fix);
  }
}

/// `rendered` (a JSON value's dump()) cut to `max` characters for an error message, "..." last.
inline std::string clip_for_message(std::string rendered, size_t max) {
  if (rendered.size() > max) rendered = rendered.substr(0, max - 3) + "...";
  return rendered;
}

}  // namespace cb
