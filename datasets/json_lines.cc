#include "datasets/json_lines.h"

#include <nlohmann/json.hpp>

#include "datasets/text_io.h"
#include "lib/core/error.h"

namespace cb::datasets {
namespace {

// nlohmann's message without its "[json.exception.parse_error.101] parse error at line 1,"
// prefix, which would contradict the file line we report (or without its
// "[json.exception.out_of_range.406] " tag, for messages with no position).
std::string short_reason(const std::string& what) {
  const size_t colon = what.find(": ");
  const size_t tag = what.find("] ");
  std::string s = colon != std::string::npos ? what.substr(colon + 2)
                  : tag != std::string::npos ? what.substr(tag + 2)
                                             : what;
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return s.size() > 160 ? s.substr(0, 160) + "..." : s;
}

}  // namespace

std::vector<JsonLineFields> read_json_line_fields(std::string_view text, const std::string& path,
                                                  const std::vector<std::string>& fields) {
  std::vector<JsonLineFields> rows;
  for (const Line& l : split_lines(text)) {
    if (trim(l.text).empty()) continue;
    const std::string at = where(path, l.number);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(l.text.begin(), l.text.end());
    } catch (const nlohmann::json::parse_error& e) {
      throw make_error(
          at, "invalid JSON at column " + std::to_string(e.byte) + ": " + short_reason(e.what()),
          "each line must hold one complete JSON object");
    } catch (const nlohmann::json::exception& e) {
      // A number too large for a double is an out_of_range error, not a parse_error.
      throw make_error(at, "invalid JSON: " + short_reason(e.what()),
                       "each line must hold one complete JSON object");
    }
    if (!j.is_object()) {
      throw make_error(at, std::string("expected a JSON object, found ") + j.type_name(),
                       "each line must hold one JSON object");
    }
    JsonLineFields row;
    row.line = l.number;
    row.values.reserve(fields.size());
    for (const std::string& f : fields) {
      auto it = j.find(f);
      if (it == j.end()) {
        row.values.emplace_back(std::nullopt);
      } else if (it->is_string()) {
        row.values.emplace_back(it->get<std::string>());
      } else {
        throw make_error(at, "field \"" + f + "\" is " + it->type_name() + ", expected a string",
                         "fix the row");
      }
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace cb::datasets
