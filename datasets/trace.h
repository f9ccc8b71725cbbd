#pragma once
/// A replay trace: conversations (sessions) of turns, each a user message and the length of
/// the answer to decode. Tokenized traces (from ShareGPT) carry the message's token ids;
/// length traces (synthetic, `cachebench trace synth`) carry only lengths and replay feeds
/// random ids of those lengths, as vLLM's random dataset does.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace cb::datasets {

/// One turn: the user's message and the answer that follows it.
struct TraceTurn {
  int64_t input_tokens = 0;        ///< tokens of the user's message (== input_ids.size() when set)
  int64_t output_tokens = 0;       ///< tokens of the answer (decode steps to run, EOS ignored)
  std::vector<int32_t> input_ids;  ///< the message's token ids; empty in a length trace
};

/// One conversation.
struct TraceSession {
  uint64_t id = 0;   ///< dense id, 0..n-1 in file order (after skips)
  std::string name;  ///< the conversation's id in the source file ("" for synthetic)
  std::vector<TraceTurn> turns;
};

/// A whole trace plus what was skipped while reading it.
struct Trace {
  std::string path;  ///< source file ("" for a generated trace)
  std::string kind;  ///< "sharegpt" (tokenized) or "lengths"
  std::vector<TraceSession> sessions;
  int64_t skipped_conversations = 0;  ///< conversations left out (no complete turn, too long, ...)
  int64_t skipped_messages = 0;       ///< messages left out (other roles, unpaired)
  int64_t joined_pieces = 0;  ///< ShareGPT: split pieces appended to the conversation before them
  std::vector<std::string> notes;  ///< the first few skip reasons, for the log

  /// Total number of turns.
  int64_t turns() const;
  /// True when turns carry token ids.
  bool tokenized() const { return kind == "sharegpt"; }
};

/// Turns text into token ids (the model's tokenizer); datasets/ does not link tokenizers.
using TokenizeFn = std::function<std::vector<int32_t>(const std::string&)>;

/// Limits applied while reading untrusted traces.
struct TraceLoadOptions {
  int64_t limit = 0;                    ///< keep at most this many sessions (0 = all)
  int64_t max_message_chars = 1 << 20;  ///< a longer message skips its conversation (counted)
  /// ShareGPT: join the pieces FastChat's splitter wrote for one long conversation
  /// ("ID_0", "ID_11", ... one after another) back into one conversation.
  bool join_split = true;
  /// ShareGPT: a token id (the tokenizer's BOS, when it adds one) put before each
  /// conversation's first message, as a server (and chat) sends it; -1: none.
  int32_t bos = -1;
};

/// Reads a trace file of either kind (plain or gzipped), told apart by the first non-space
/// byte: '{' is a length trace (datasets/length_trace.h; "format": "cachebench-trace"), '['
/// a ShareGPT file (datasets/sharegpt.h), which needs `tokenize`. Throws cb::Error naming
/// the file for anything else, and for a ShareGPT file when `tokenize` is empty.
Trace load_trace(const std::string& path, const TokenizeFn& tokenize,
                 const TraceLoadOptions& opts = {});

}  // namespace cb::datasets
