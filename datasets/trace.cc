#include "datasets/trace.h"

#include "datasets/length_trace.h"
#include "datasets/sharegpt.h"
#include "datasets/text_io.h"
#include "lib/core/error.h"

namespace cb::datasets {

int64_t Trace::turns() const {
  int64_t n = 0;
  for (const TraceSession& s : sessions) n += static_cast<int64_t>(s.turns.size());
  return n;
}

Trace load_trace(const std::string& path, const TokenizeFn& tokenize,
                 const TraceLoadOptions& opts) {
  const std::string bytes = maybe_gunzip(read_file_bytes(path), path);
  size_t i = 0;
  if (bytes.compare(0, 3, "\xEF\xBB\xBF") == 0) i = 3;  // UTF-8 byte order mark
  while (i < bytes.size() &&
         (bytes[i] == ' ' || bytes[i] == '\t' || bytes[i] == '\n' || bytes[i] == '\r')) {
    ++i;
  }
  if (i == bytes.size()) {
    throw make_error(path, "the file is empty",
                     "pass a ShareGPT JSON file or a trace written by `cachebench trace synth`");
  }
  if (bytes[i] == '[') return parse_sharegpt(bytes, path, tokenize, opts);
  if (bytes[i] == '{') return parse_length_trace(bytes, path, opts);
  // Throws with the position of the first bad byte, else names what the document is.
  const nlohmann::json j = parse_trace_json(bytes, path);
  throw make_error(path,
                   std::string("top level is a JSON ") + j.type_name() +
                       ", neither an array (ShareGPT) nor an object (length trace)",
                   "pass a ShareGPT JSON file or a trace written by `cachebench trace synth`");
}

}  // namespace cb::datasets
