// Fuzz target: the RFC 4180 CSV reader and the MMLU loader on top of it (both layouts).
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "datasets/csv.h"
#include "datasets/mmlu.h"
#include "lib/core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto records = cb::datasets::parse_csv(text, "fuzz.csv");
    int last = 0;
    for (const cb::datasets::CsvRecord& r : records) {
      if (r.line <= last || r.fields.empty()) std::abort();
      last = r.line;
    }
  } catch (const cb::Error&) {
  }
  try {
    const cb::datasets::MmluFile f = cb::datasets::parse_mmlu_csv(text, "dir/subject_test.csv");
    for (const cb::datasets::MmluQuestion& q : f.questions) {
      if (q.answer < 0 || q.answer > 3) std::abort();
    }
  } catch (const cb::Error&) {
  }
  return 0;
}
