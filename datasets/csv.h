#pragma once
/// An RFC 4180 CSV reader: quoted fields may hold commas, doubled quotes ("") and line
/// breaks; records end at LF, CRLF or CR. Each record keeps the line it starts on, so
/// loaders can point at the exact place of a malformed row.

#include <string>
#include <string_view>
#include <vector>

namespace cb::datasets {

/// One CSV record.
struct CsvRecord {
  int line = 0;                     ///< 1-based line the record starts on
  std::vector<std::string> fields;  ///< unquoted field values, bytes kept as they are
};

/// Parses all records of `text`. A UTF-8 BOM at the start is skipped and blank lines are
/// skipped (as Python's csv and pandas do). Line breaks inside quoted fields are kept as
/// they are (CRLF stays CRLF). A quote inside an unquoted field is taken literally.
/// Throws cb::Error naming `path` and the line for an unterminated quoted field or for
/// text after a closing quote that is not a comma or the end of the record.
std::vector<CsvRecord> parse_csv(std::string_view text, const std::string& path);

}  // namespace cb::datasets
