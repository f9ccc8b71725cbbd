#include "datasets/length_trace.h"

#include <cstdint>
#include <cstdio>

#include "datasets/text_io.h"
#include "lib/core/atomic_file.h"
#include "lib/core/error.h"
#include "lib/core/json_depth.h"
#include "lib/core/json_parse.h"

namespace cb::datasets {
namespace {

using nlohmann::json;

const char* const kFix = "regenerate the file with `cachebench trace synth` or fix it by hand";

// "FILE: session 3" (and ", turn 2") for error messages.
std::string at_session(const std::string& path, size_t session, size_t turn = SIZE_MAX) {
  std::string w = path + ": session " + std::to_string(session);
  if (turn != SIZE_MAX) w += ", turn " + std::to_string(turn);
  return w;
}

// One length of a turn: an integer in 1..kMaxTraceTokens.
int64_t length_value(const json& v, const std::string& where, const char* what) {
  const std::string shown = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (!v.is_number_integer()) {
    throw make_error(where, std::string(what) + " length " + shown + " is not an integer", kFix);
  }
  const bool too_big = v.is_number_unsigned()
                           ? v.get<uint64_t>() > static_cast<uint64_t>(kMaxTraceTokens)
                           : v.get<int64_t>() > kMaxTraceTokens;
  if (too_big || v.get<int64_t>() < 1) {
    throw make_error(where,
                     std::string(what) + " length " + shown + " is outside 1.." +
                         std::to_string(kMaxTraceTokens),
                     kFix);
  }
  return v.get<int64_t>();
}

void check_lengths(const Trace& t, const std::string& path) {
  for (size_t i = 0; i < t.sessions.size(); ++i) {
    const TraceSession& s = t.sessions[i];
    if (s.turns.empty()) {
      throw make_error(path, "session " + std::to_string(i) + " has no turns",
                       "drop empty sessions before writing");
    }
    for (size_t k = 0; k < s.turns.size(); ++k) {
      const TraceTurn& tt = s.turns[k];
      if (tt.input_tokens < 1 || tt.input_tokens > kMaxTraceTokens || tt.output_tokens < 1 ||
          tt.output_tokens > kMaxTraceTokens) {
        throw make_error(at_session(path, i, k),
                         "lengths " + std::to_string(tt.input_tokens) + "/" +
                             std::to_string(tt.output_tokens) + " are outside 1.." +
                             std::to_string(kMaxTraceTokens),
                         "this is a bug in the trace's producer");
      }
    }
  }
}

}  // namespace

json parse_trace_json(std::string_view bytes, const std::string& path) {
  // A binary file (a model, a tokenizer given in the trace's place) is said to be one, not
  // described by whatever its bytes happen to nest like.
  const size_t nul = bytes.find('\0');
  if (nul != std::string_view::npos) {
    throw make_error(path,
                     "is not a JSON trace: it holds a NUL byte at offset " + std::to_string(nul) +
                         " (a binary file?)",
                     "pass a ShareGPT JSON file or a trace written by `cachebench trace synth`, "
                     "and the model with --model");
  }
  // Rendering or copying a value recurses once per level, so a deeply nested value from the
  // file (thousands of '[') would overflow the stack in an error message; refuse it first, in
  // one pass (a parser callback would make the parse quadratic in the sessions).
  if (json_nesting_depth(bytes) > static_cast<size_t>(kMaxTraceJsonDepth)) {
    throw make_error(
        path,
        "invalid JSON: it nests more than " + std::to_string(kMaxTraceJsonDepth) + " levels deep",
        "a trace needs 5 (sessions, turns, lengths; ShareGPT: conversations, "
        "messages, fields); check the file is a trace");
  }
  try {
    return json::parse(bytes.begin(), bytes.end());
  } catch (const json::exception& e) {
    throw make_error(path, "invalid JSON (" + json_error_reason(e) + ")",
                     "the file must be one complete JSON document (check it was not truncated)");
  }
}

Trace load_length_trace(const std::string& path, const TraceLoadOptions& opts) {
  return parse_length_trace(maybe_gunzip(read_file_bytes(path), path), path, opts);
}

Trace parse_length_trace(std::string_view bytes, const std::string& path,
                         const TraceLoadOptions& opts) {
  const json j = parse_trace_json(bytes, path);
  const char* const not_trace_fix =
      "pass a ShareGPT JSON file (a top-level array) or a trace written by `cachebench trace "
      "synth`";
  if (!j.is_object()) {
    throw make_error(path, std::string("top level is a JSON ") + j.type_name() + ", not a trace",
                     not_trace_fix);
  }
  const auto fmt = j.find("format");
  if (fmt == j.end() || !fmt->is_string() || fmt->get<std::string>() != kTraceFormat) {
    throw make_error(path,
                     "is a JSON object but not a cachebench trace (no \"format\": \"" +
                         std::string(kTraceFormat) + "\")",
                     not_trace_fix);
  }
  const auto ver = j.find("version");
  if (ver == j.end() || !ver->is_number_integer() || ver->get<int64_t>() != kTraceVersion) {
    const std::string shown = ver == j.end() ? "missing" : ver->dump();
    throw make_error(path,
                     "trace version " + shown + " is not supported (this build reads version " +
                         std::to_string(kTraceVersion) + ")",
                     "regenerate the trace with this build's `cachebench trace synth`");
  }
  const auto kind = j.find("kind");
  if (kind == j.end() || !kind->is_string() || kind->get<std::string>() != "lengths") {
    const std::string shown = kind == j.end() ? "missing" : kind->dump();
    throw make_error(path, "trace kind " + shown + " is not supported (expected \"lengths\")",
                     kFix);
  }
  const auto sessions = j.find("sessions");
  if (sessions == j.end() || !sessions->is_array()) {
    throw make_error(path, "\"sessions\" is missing or not an array", kFix);
  }
  if (sessions->empty()) throw make_error(path, "the trace has no sessions", kFix);

  Trace t;
  t.path = path;
  t.kind = "lengths";
  for (size_t i = 0; i < sessions->size(); ++i) {
    if (opts.limit > 0 && static_cast<int64_t>(t.sessions.size()) >= opts.limit) break;
    const json& s = (*sessions)[i];
    const std::string where = at_session(path, i);
    if (!s.is_object()) {
      throw make_error(where, std::string("is a JSON ") + s.type_name() + ", not an object", kFix);
    }
    const auto id = s.find("id");
    if (id != s.end() && !id->is_number_unsigned()) {
      throw make_error(where, "\"id\" " + id->dump() + " is not a non-negative integer", kFix);
    }
    TraceSession out;
    out.id = t.sessions.size();
    const auto name = s.find("name");
    if (name != s.end()) {
      if (!name->is_string()) throw make_error(where, "\"name\" is not a string", kFix);
      out.name = name->get<std::string>();
    }
    const auto turns = s.find("turns");
    if (turns == s.end() || !turns->is_array()) {
      throw make_error(where, "\"turns\" is missing or not an array", kFix);
    }
    if (turns->empty()) throw make_error(where, "has an empty turns list", kFix);
    out.turns.reserve(turns->size());
    for (size_t k = 0; k < turns->size(); ++k) {
      const json& turn = (*turns)[k];
      const std::string tw = at_session(path, i, k);
      if (!turn.is_array() || turn.size() != 2) {
        throw make_error(tw,
                         "turn " + turn.dump(-1, ' ', false, json::error_handler_t::replace) +
                             " is not a pair [input_tokens, output_tokens]",
                         kFix);
      }
      TraceTurn tt;
      tt.input_tokens = length_value(turn[0], tw, "input");
      tt.output_tokens = length_value(turn[1], tw, "output");
      out.turns.push_back(tt);
    }
    t.sessions.push_back(std::move(out));
  }
  return t;
}

void write_length_trace(const Trace& t, const std::string& path, const json& generator) {
  if (t.sessions.empty()) {
    throw make_error(path, "refusing to write a trace with no sessions", "generate at least one");
  }
  check_lengths(t, path);
  const auto dump = [](const json& v) {
    return v.dump(-1, ' ', false, json::error_handler_t::replace);
  };
  std::string out = "{\n  \"format\": \"" + std::string(kTraceFormat) +
                    "\",\n  \"version\": " + std::to_string(kTraceVersion) +
                    ",\n  \"kind\": \"lengths\",\n";
  out += "  \"generator\": " + (generator.is_null() ? std::string("{}") : dump(generator)) + ",\n";
  if (!t.path.empty()) {
    const json source = {{"path", t.path},
                         {"kind", t.kind},
                         {"skipped_conversations", t.skipped_conversations},
                         {"skipped_messages", t.skipped_messages},
                         {"joined_pieces", t.joined_pieces}};
    out += "  \"source\": " + dump(source) + ",\n";
  }
  out += "  \"sessions\": [";
  for (size_t i = 0; i < t.sessions.size(); ++i) {
    const TraceSession& s = t.sessions[i];
    out += i == 0 ? "\n    {\"id\": " : ",\n    {\"id\": ";
    out += std::to_string(s.id);
    if (!s.name.empty()) out += ", \"name\": " + dump(json(s.name));
    out += ", \"turns\": [";
    for (size_t k = 0; k < s.turns.size(); ++k) {
      if (k > 0) out += ", ";
      out += "[" + std::to_string(s.turns[k].input_tokens) + ", " +
             std::to_string(s.turns[k].output_tokens) + "]";
    }
    out += "]}";
  }
  out += "\n  ]\n}\n";

  write_file_atomically(path, out, "the trace");
}

}  // namespace cb::datasets
