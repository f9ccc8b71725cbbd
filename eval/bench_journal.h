#pragma once
/// `cachebench bench store`'s journal section: the AttentionStore journal's durable commit
/// against a bare append + fdatasync of the same bytes in the same directory (the device's
/// limit for a synced record), and a compaction of a journal of many entries, from the index
/// (Journal::compact, what the store does after a failed append, and did for every compaction
/// until 2026-12-06) and online (Journal::compact_from), each while another thread commits:
/// the longest of those commits is how long the compaction kept the journal's appends (and
/// so the store, whose commits hold its lock) waiting.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace cb::eval {

struct JournalBenchOptions {
  std::string dir;  ///< the bench works in a subdirectory of it, removed at the end
  /// Live entries of the compacted journal (the online compaction also keeps the small
  /// entries the committing thread added).
  size_t entries = 0;
  int n_layers = 32;  ///< the entries' shape, as the store bench's
  uint32_t token_bytes = 4096 * 2;
  uint64_t entry_bytes = 256ull << 20;
  uint64_t chunk_bytes = 1ull << 20;
  int reps = 5;                ///< timed repetitions of each compaction (after one warm-up)
  int commits = 200;           ///< commits timed for the commit latency
  std::function<void()> poll;  ///< called between rounds; may throw to stop
};

struct JournalBenchResult {
  size_t entries = 0;
  uint64_t record_bytes = 0;    ///< one entry's commit record
  uint64_t journal_bytes = 0;   ///< the compacted journal
  double append_sync_us = 0;    ///< bare append of record_bytes + fdatasync, median
  double commit_us = 0;         ///< Journal::commit, durable, median
  double commit_ratio = 0;      ///< append + fdatasync / commit, per pair, median (1: the limit)
  double index_compact_s = 0;   ///< Journal::compact of the entries, median
  double online_compact_s = 0;  ///< Journal::compact_from, median
  /// The longest commit made by another thread while a compaction ran, median over reps.
  double index_wait_ms = 0, online_wait_ms = 0;
  /// index_wait_ms / online_wait_ms per repetition, median (0 when no commit overlapped one)
  double wait_ratio = 0;
};

/// Runs the journal benchmark; progress lines on stderr. Throws cb::Error for an unusable
/// directory or a failed journal operation.
JournalBenchResult bench_journal(const JournalBenchOptions& opt);

}  // namespace cb::eval
