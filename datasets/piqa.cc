#include "datasets/piqa.h"

#include <cstdio>
#include <string_view>

#include "datasets/json_lines.h"
#include "datasets/text_io.h"
#include "lib/core/error.h"

namespace cb::datasets {
namespace {

// A label as it stands in the file, every byte outside printable ASCII written as \xNN: a BOM
// or a zero-width space is valid UTF-8 that a terminal shows as nothing, leaving "label '0'".
std::string shown_label(std::string_view v) {
  std::string s;
  for (const char c : v.substr(0, 20)) {
    const auto b = static_cast<unsigned char>(c);
    if (b >= 0x20 && b < 0x7F) {
      s += c;
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02X", b);
      s += hex;
    }
  }
  return s;
}

}  // namespace

std::vector<PiqaExample> load_piqa(const std::string& jsonl_path, const std::string& labels_path) {
  const std::vector<std::string> fields = {"goal", "sol1", "sol2"};
  const std::string text = read_file_bytes(jsonl_path);
  std::vector<PiqaExample> out;
  for (JsonLineFields& row : read_json_line_fields(text, jsonl_path, fields)) {
    for (size_t f = 0; f < fields.size(); ++f) {
      if (!row.values[f]) {
        throw make_error(where(jsonl_path, row.line), "missing field \"" + fields[f] + "\"",
                         "PIQA rows need string fields goal, sol1 and sol2");
      }
    }
    out.push_back(
        {std::move(*row.values[0]), std::move(*row.values[1]), std::move(*row.values[2]), 0});
  }
  const std::string bytes = read_file_bytes(labels_path);
  // An editor's UTF-8 byte order mark, skipped as the JSON lines reader and MMLU's CSV do.
  std::string_view labels = bytes;
  if (labels.substr(0, 3) == "\xEF\xBB\xBF") labels.remove_prefix(3);
  size_t n = 0;
  for (const Line& l : split_lines(labels)) {
    const std::string_view v = trim(l.text);
    if (v.empty()) continue;
    if (v != "0" && v != "1") {
      throw make_error(where(labels_path, l.number), "label '" + shown_label(v) + "' is not 0 or 1",
                       "each line holds the index of the correct solution");
    }
    if (n < out.size()) out[n].label = v[0] - '0';
    ++n;
  }
  if (n != out.size()) {
    throw make_error(jsonl_path + " and " + labels_path,
                     std::to_string(out.size()) + " examples but " + std::to_string(n) + " labels",
                     "use the labels file of the same split");
  }
  if (out.empty()) {
    throw make_error(jsonl_path, "no examples", "pass the PIQA {goal, sol1, sol2} JSON lines");
  }
  return out;
}

std::vector<PiqaExample> load_piqa_dir(const std::string& dir, const std::string& split) {
  return load_piqa(dir + "/" + split + ".jsonl", dir + "/" + split + "-labels.lst");
}

}  // namespace cb::datasets
