#pragma once
/// ShareGPT conversations as a replay trace: a JSON array of {id, conversations: [{from,
/// value}, ...]} (also the raw dump's `items` in place of `conversations`), paired into
/// user/assistant turns and tokenized with the caller's tokenizer.

#include <string>
#include <string_view>

#include "datasets/trace.h"

namespace cb::datasets {

/// Reads `path` (plain or gzipped) and returns its tokenized trace (kind "sharegpt").
///
/// Roles "human"/"user" are the user, "gpt"/"chatgpt"/"assistant"/"bard"/"bing" the
/// assistant; other roles, messages with a missing, null or empty `value`, all but the last
/// of consecutive user messages, assistant messages with no question before them and a final
/// unanswered question are skipped and counted in skipped_messages (of kept conversations).
/// A conversation with no complete turn, or with a message longer than
/// opts.max_message_chars (never tokenized), is skipped and counted in
/// skipped_conversations with a note. input_ids = tokenize(question), output_tokens =
/// max(1, tokenize(answer).size()); a question that tokenizes to nothing drops its turn.
/// With opts.join_split, consecutive entries "BASE_K1", "BASE_K2", ... (K increasing: the
/// pieces FastChat's splitter writes for a long conversation, as in
/// ShareGPT_V3_unfiltered_cleaned_split.json) are read as one conversation named by its first
/// piece's id; Trace::joined_pieces counts the pieces appended.
/// Throws cb::Error naming the file (and the conversation or message index) for a missing
/// file, invalid JSON, a top level that is not an array, an entry that is not an object or
/// has no `conversations`/`items` array, a message that is not an object, `from`/`value` of
/// the wrong JSON type, and when no conversation has a complete turn.
Trace load_sharegpt(const std::string& path, const TokenizeFn& tokenize,
                    const TraceLoadOptions& opts = {});

/// load_sharegpt on bytes already read; `path` names them in errors and in Trace::path.
Trace parse_sharegpt(std::string_view bytes, const std::string& path, const TokenizeFn& tokenize,
                     const TraceLoadOptions& opts = {});

}  // namespace cb::datasets
