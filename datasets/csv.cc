#include "datasets/csv.h"

#include "datasets/text_io.h"
#include "lib/core/error.h"

namespace cb::datasets {

std::vector<CsvRecord> parse_csv(std::string_view text, const std::string& path) {
  std::vector<CsvRecord> records;
  size_t i = 0;
  const size_t n = text.size();
  if (text.substr(0, 3) == "\xEF\xBB\xBF") i = 3;
  int line = 1;
  // Consumes a record terminator at i (LF, CRLF or CR) and counts the line; false if none.
  auto end_of_record = [&]() {
    if (i < n && text[i] == '\r') {
      ++i;
      if (i < n && text[i] == '\n') ++i;
      ++line;
      return true;
    }
    if (i < n && text[i] == '\n') {
      ++i;
      ++line;
      return true;
    }
    return i >= n;
  };
  while (i < n) {
    if (text[i] == '\n' || text[i] == '\r') {  // blank line
      end_of_record();
      continue;
    }
    CsvRecord rec;
    rec.line = line;
    while (true) {
      std::string field;
      if (i < n && text[i] == '"') {
        const int quote_line = line;
        ++i;
        while (true) {
          if (i >= n) {
            throw make_error(where(path, quote_line),
                             "unterminated quoted field (field " +
                                 std::to_string(rec.fields.size() + 1) + " of the record)",
                             "close the quote; a quote inside a quoted field is written \"\"");
          }
          const char c = text[i];
          if (c == '"') {
            if (i + 1 < n && text[i + 1] == '"') {
              field.push_back('"');
              i += 2;
              continue;
            }
            ++i;
            break;
          }
          if (c == '\n' || (c == '\r' && !(i + 1 < n && text[i + 1] == '\n'))) ++line;
          field.push_back(c);
          ++i;
        }
        if (i < n && text[i] != ',' && text[i] != '\n' && text[i] != '\r') {
          throw make_error(where(path, line),
                           "unexpected character after the closing quote of field " +
                               std::to_string(rec.fields.size() + 1),
                           "quote the whole field and write inner quotes as \"\"");
        }
      } else {
        while (i < n && text[i] != ',' && text[i] != '\n' && text[i] != '\r') {
          field.push_back(text[i++]);
        }
      }
      rec.fields.push_back(std::move(field));
      if (i < n && text[i] == ',') {
        ++i;
        continue;
      }
      end_of_record();
      break;
    }
    records.push_back(std::move(rec));
  }
  return records;
}

}  // namespace cb::datasets
