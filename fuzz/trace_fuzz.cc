// Fuzz target: load_trace on a fuzzed trace file (plain or gzipped; a ShareGPT JSON array
// or a cachebench length trace), with a byte tokenizer. A trace that loads must hold what
// the replay driver assumes, and its lengths must write out and load back unchanged.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "datasets/length_trace.h"
#include "datasets/trace.h"
#include "fuzz/fuzz_util.h"
#include "lib/core/error.h"

namespace {

std::vector<int32_t> byte_tokens(const std::string& text) {
  std::vector<int32_t> ids;
  for (char c : text) {
    if (c != ' ') ids.push_back(static_cast<unsigned char>(c));
  }
  return ids;
}

void check(const cb::datasets::Trace& t) {
  for (size_t i = 0; i < t.sessions.size(); ++i) {
    const cb::datasets::TraceSession& s = t.sessions[i];
    if (s.id != i || s.turns.empty()) std::abort();
    for (const cb::datasets::TraceTurn& turn : s.turns) {
      if (turn.input_tokens < 1 || turn.output_tokens < 1) std::abort();
      if (t.tokenized() && turn.input_tokens != static_cast<int64_t>(turn.input_ids.size())) {
        std::abort();
      }
    }
  }
}

void round_trip(const cb::datasets::Trace& t) {
  static const std::string path = cb::fuzz::scratch_dir("trace") + "/trace.json";
  try {
    cb::datasets::write_length_trace(t, path);
  } catch (const cb::Error&) {
    return;  // lengths past kMaxTraceTokens are refused, not written
  }
  const cb::datasets::Trace back = cb::datasets::load_length_trace(path);
  if (back.sessions.size() != t.sessions.size()) std::abort();
  for (size_t i = 0; i < t.sessions.size(); ++i) {
    const auto& a = t.sessions[i].turns;
    const auto& b = back.sessions[i].turns;
    if (a.size() != b.size()) std::abort();
    for (size_t k = 0; k < a.size(); ++k) {
      if (a[k].input_tokens != b[k].input_tokens || a[k].output_tokens != b[k].output_tokens) {
        std::abort();
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static cb::fuzz::MemFile file("trace.json");
  const std::string& path = file.write(data, size);
  cb::datasets::TraceLoadOptions small;
  small.limit = 3;
  small.max_message_chars = 64;
  small.join_split = false;
  bool first = true;
  for (const cb::datasets::TraceLoadOptions& opts : {cb::datasets::TraceLoadOptions{}, small}) {
    try {
      const cb::datasets::Trace t = cb::datasets::load_trace(path, byte_tokens, opts);
      check(t);
      if (first) round_trip(t);
    } catch (const cb::Error&) {
    }
    first = false;
  }
  return 0;
}
