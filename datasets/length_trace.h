#pragma once
/// The token-length trace file (what `cachebench trace synth` writes):
///   {"format": "cachebench-trace", "version": 1, "kind": "lengths", "generator": {...},
///    "sessions": [{"id": 0, "turns": [[input_tokens, output_tokens], ...]}, ...]}
/// One session per line, so the files diff and grep well.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "datasets/trace.h"

namespace cb::datasets {

/// The value of "format" that marks a cachebench trace file.
inline constexpr const char* kTraceFormat = "cachebench-trace";
/// The only version this build reads and writes.
inline constexpr int kTraceVersion = 1;
/// Largest input or output length accepted in a length trace.
inline constexpr int64_t kMaxTraceTokens = 1000000;

/// Deepest JSON nesting a trace file may have (a trace itself needs 5 levels).
inline constexpr int kMaxTraceJsonDepth = 64;

/// `bytes` parsed as one JSON document; throws cb::Error naming `path` with the line and
/// column of invalid JSON, or for nesting deeper than kMaxTraceJsonDepth (shared by the trace
/// readers).
nlohmann::json parse_trace_json(std::string_view bytes, const std::string& path);

/// Reads a length trace (plain or gzipped; kind "lengths", opts.limit sessions at most).
/// Throws cb::Error naming the file, and the session and turn where it applies, for invalid
/// JSON, a wrong format/version/kind, a session without turns, a turn that is not a pair of
/// integers, and lengths outside 1..kMaxTraceTokens.
Trace load_length_trace(const std::string& path, const TraceLoadOptions& opts = {});

/// load_length_trace on bytes already read; `path` names them in errors and Trace::path.
Trace parse_length_trace(std::string_view bytes, const std::string& path,
                         const TraceLoadOptions& opts = {});

/// Writes the lengths of `t` (a tokenized trace too) to `path`, with `generator` (the
/// parameters that made it) and, when `t` came from a file, a "source" record. Writes a
/// temporary file then renames it; throws cb::Error naming `path` when it cannot, or when a
/// length is outside 1..kMaxTraceTokens (the file would not load back).
void write_length_trace(const Trace& t, const std::string& path,
                        const nlohmann::json& generator = {});

}  // namespace cb::datasets
