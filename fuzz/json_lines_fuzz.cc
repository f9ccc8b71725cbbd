// Fuzz target: JSON lines (read_json_line_fields) and the PIQA loader, whose two files
// (questions as JSON lines, labels one per line) come from one input split at the first
// line "===".
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "datasets/json_lines.h"
#include "datasets/piqa.h"
#include "fuzz/fuzz_util.h"
#include "lib/core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static cb::fuzz::MemFile jsonl("valid.jsonl");
  static cb::fuzz::MemFile labels("valid-labels.lst");
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const auto [questions, answers] = cb::fuzz::split_input(in, "\n===\n");
  try {
    const auto rows =
        cb::datasets::read_json_line_fields(questions, "fuzz.jsonl", {"goal", "sol1", "sol2"});
    for (const auto& r : rows) {
      if (r.values.size() != 3) std::abort();
    }
  } catch (const cb::Error&) {
  }
  try {
    const std::string& qp = jsonl.write(questions);
    const std::string& lp = labels.write(answers);
    for (const cb::datasets::PiqaExample& e : cb::datasets::load_piqa(qp, lp)) {
      if (e.label != 0 && e.label != 1) std::abort();
    }
  } catch (const cb::Error&) {
  }
  return 0;
}
