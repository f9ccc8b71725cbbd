#include "datasets/piqa.h"

#include "datasets/json_lines.h"
#include "datasets/text_io.h"
#include "lib/core/error.h"

namespace cb::datasets {

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
  const std::string labels = read_file_bytes(labels_path);
  size_t n = 0;
  for (const Line& l : split_lines(labels)) {
    const std::string_view v = trim(l.text);
    if (v.empty()) continue;
    if (v != "0" && v != "1") {
      std::string shown(v.substr(0, 20));
      throw make_error(where(labels_path, l.number), "label '" + shown + "' is not 0 or 1",
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
