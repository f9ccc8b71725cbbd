#pragma once
/// The replay driver behind `cachebench replay`: turns a trace into engine sessions (random
/// token ids for length traces, seeded), builds a fresh AttentionStore with the chosen
/// placement policy for each mode, runs the engine, and summarizes the turn records with
/// vLLM's field names plus what only a KV store can report.

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "datasets/trace.h"
#include "lib/engine/engine.h"
#include "lib/metrics/turn_record.h"
#include "lib/model/model.h"

namespace cb::eval {

/// Store configuration of a replay (a fresh store per mode).
struct ReplayStoreOptions {
  uint64_t hbm_bytes = 0;
  uint64_t dram_bytes = 1ull << 30;
  uint64_t ssd_bytes = 0;
  std::string store_dir;  ///< parent of the fresh SSD directory ("" = no SSD tier)
  /// Keep that directory after the run, as STORE_DIR/cachebench-store-MODE-PID (a -N suffix
  /// when that exists; its SSD entries, journaled: `cachebench store stat|verify` read it),
  /// also after an interrupt or an error once its store opened; else removed. A run killed
  /// outright leaves it as cachebench-replay-MODE-PID with a keep marker, which the next replay
  /// under STORE_DIR renames so. A store that cannot be kept: ReplayRun::keep_error.
  bool keep = false;
  std::string policy = "sched";    ///< sched | lru | fifo | optimal
  uint64_t chunk_bytes = 1 << 20;  ///< store allocation unit
  size_t io_threads = 4;
  double ttl = 0;  ///< entries expire after this many seconds unused (0: never)
  /// StoreConfig::clean_ahead_bytes (0: off); < 0: auto, see clean_ahead_bytes().
  int64_t clean_ahead_bytes = -1;
  /// StoreConfig::demote_ahead_bytes (0: off); < 0: auto, see demote_ahead_bytes().
  int64_t demote_ahead_bytes = -1;
  /// StoreConfig::save_admission: an append save whose own DRAM entry the policy would evict
  /// first goes to the SSD instead of evicting others.
  bool save_admission = true;
  /// StoreConfig::drop_slow_demotions: a save's victim whose demotion to the SSD would take
  /// longer than recomputing it is dropped instead.
  bool drop_slow_demotions = true;
  double read_gbps[3] = {0, 0, 0};  ///< emulated bandwidth per tier (0 = hardware)
  double write_gbps[3] = {0, 0, 0};
};

struct ReplayOptions {
  engine::EngineConfig engine;
  ReplayStoreOptions store;
  metrics::Prices prices;
  int gpus = 1;
  uint64_t seed = 0;              ///< random token ids of length traces
  int64_t max_output_tokens = 0;  ///< caps every answer's length (0 = as in the trace)
};

/// One mode's run.
struct ReplayRun {
  engine::Mode mode = engine::Mode::CA;
  engine::RunResult result;
  nlohmann::json summary;                   ///< metrics::summarize plus run facts
  std::vector<std::string> store_lines;     ///< how each tier ran
  std::vector<std::string> store_warnings;  ///< those of tiers that ran other than asked
  /// With --keep-store: why the store could not be kept (its directory is left under its
  /// scratch name); "" when it was kept or not asked to be. A failure of the command.
  std::string keep_error;
};

/// "sched" -> "scheduler-aware", "optimal" -> "belady"; throws cb::Error naming --policy.
std::string policy_name(const std::string& cli_name);

/// Engine sessions of a trace: tokenized turns as they are, length-trace turns as random ids
/// in [3, vocab) drawn from `seed` per (session, turn).
/// Answers longer than `max_output_tokens` (> 0) are cut to it.
std::vector<engine::SessionInput> trace_sessions(const datasets::Trace& trace, int vocab,
                                                 uint64_t seed, int64_t max_output_tokens = 0);

/// Runs `sessions` in `mode` on `model`. `progress` gets (done, total) after every step.
ReplayRun run_replay(const model::ForwardModel& model,
                     const std::vector<engine::SessionInput>& sessions, engine::Mode mode,
                     const ReplayOptions& opts, const engine::ProgressFn& progress = {});

/// The write-back window a replay's store gets: clean_ahead_bytes when set, else (auto) a
/// sixteenth of the DRAM tier when there is an SSD tier below it, else 0.
uint64_t clean_ahead_bytes(const ReplayStoreOptions& o);

/// The HBM room a replay's store keeps free by demoting ahead of need: demote_ahead_bytes
/// when set, else (auto) a quarter of the HBM tier when there is a DRAM tier below it, else 0.
uint64_t demote_ahead_bytes(const ReplayStoreOptions& o);

/// The truncation granularity a replay's engine gets (EngineConfig::truncate_align): as set
/// when >= 0, else (auto) the store's tokens per chunk, `chunk_bytes / token_bytes` for
/// `token_bytes` bytes of one layer's K per token, in every mode (RE too: the modes compared
/// must see the same contexts).
int64_t truncate_align(const ReplayOptions& o, uint64_t token_bytes);

/// `line` with the paths under directory `from` (it followed by '/') named under `to` instead:
/// a message about a store's file once the store's directory was renamed (--keep-store).
std::string under_renamed_dir(const std::string& line, const std::string& from,
                              const std::string& to);

/// The effective configuration as JSON (recorded in every result file).
nlohmann::json replay_config_json(const ReplayOptions& opts);

}  // namespace cb::eval
