#pragma once
/// JSON lines (one object per line) reduced to the string fields a loader asks for, so
/// loaders get "file:line" errors without seeing the JSON library.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cb::datasets {

/// The requested fields of one non-blank line, in the order they were asked for.
struct JsonLineFields {
  int line = 0;                                    ///< 1-based
  std::vector<std::optional<std::string>> values;  ///< nullopt when the field is absent
};

/// Parses each non-blank line of `text` as a JSON object and picks `fields`. Throws
/// cb::Error with `path`, line (and column or field) for invalid JSON, a line that is not
/// an object, or a requested field that is present but not a string.
std::vector<JsonLineFields> read_json_line_fields(std::string_view text, const std::string& path,
                                                  const std::vector<std::string>& fields);

}  // namespace cb::datasets
