#pragma once
/// Per-turn records as CSV, one row per turn, for plots and spreadsheets.

#include <string>
#include <vector>

#include "lib/metrics/turn_record.h"

namespace cb::metrics {

/// The header row (no newline): session, turn, warmup, arrival_s, start_s, first_token_s,
/// finish_s, ttft_ms, history_tokens, new_tokens, output_tokens, reused_tokens,
/// recomputed_tokens, truncated_tokens, tier, bytes_loaded, bytes_saved, load_ms,
/// preload_stall_ms, save_stall_ms, done_s (when the engine was done with the turn: finish_s,
/// or later after a synchronous save), conversation. `session` is the dense index of the
/// conversation in the trace (file order, after skips); `conversation` is its id in the
/// source file (ShareGPT's "id"; empty for a length trace without names).
std::string turn_csv_header();

/// One row (no newline) for `r`: warmup as 0/1, ttft_ms = (first_token_s - arrival_s) *
/// 1000, times in the shortest decimal form that reads back to the same double, and
/// `conversation` quoted as CSV needs.
std::string turn_csv_row(const TurnRecord& r, const std::string& conversation = "");

/// Writes the header and one row per record (warmup turns included, flagged) to `path`:
/// whole or not at all (write_file_atomically), so a reader never sees half a file. A
/// cb::Error naming the path when it cannot be written. `conversations[session]` names each
/// record's conversation (empty names when the vector is shorter).
void write_turn_csv(const std::string& path, const std::vector<TurnRecord>& records,
                    const std::vector<std::string>& conversations = {});

}  // namespace cb::metrics
