#pragma once
/// PIQA (physical commonsense): {goal, sol1, sol2} JSON lines plus a labels file with the
/// index (0 or 1) of the correct solution on each line, as the official release ships it.

#include <string>
#include <vector>

namespace cb::datasets {

/// One PIQA item; `label` picks sol1 (0) or sol2 (1).
struct PiqaExample {
  std::string goal;
  std::string sol1;
  std::string sol2;
  int label = 0;
};

/// Loads `jsonl_path` and `labels_path`; throws cb::Error with file and line for invalid
/// JSON, a missing or non-string goal/sol1/sol2, a label other than 0/1, and an error
/// naming both files when their counts differ.
std::vector<PiqaExample> load_piqa(const std::string& jsonl_path, const std::string& labels_path);

/// load_piqa(dir/<split>.jsonl, dir/<split>-labels.lst), e.g. split "valid".
std::vector<PiqaExample> load_piqa_dir(const std::string& dir, const std::string& split = "valid");

}  // namespace cb::datasets
