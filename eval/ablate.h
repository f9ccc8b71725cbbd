#pragma once
/// `cachebench ablate STUDY`: the CachedAttention paper's ablation studies (Figures 18-25),
/// each a grid of replays run on the real CPU backend or in sim mode (lib/sim) with the
/// same engine loop, scheduler, store policies and metrics as `cachebench replay`.
///
/// A study returns rows: one per (series, x) point, each holding the replay summary's
/// numbers the study reports. Real-mode rows are medians over repetitions (every metric
/// the median of its own samples); sim is deterministic and runs once.

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "datasets/trace.h"
#include "lib/engine/engine.h"
#include "lib/metrics/turn_record.h"
#include "lib/model/model.h"
#include "lib/sched/arrivals.h"
#include "lib/sim/profile.h"

namespace cb::eval {

/// The studies, in the paper's figure order.
const std::vector<std::string>& ablation_studies();
/// True for the studies that replay a trace (all but the three micro studies).
bool ablation_needs_trace(const std::string& study);
/// True when `study` runs on the real backend (the micro studies and truncation; the
/// others need paper-scale DRAM and SSD).
bool ablation_runs_real(const std::string& study);
/// Throws cb::Error for a study that is not one of ablation_studies(), or that does not run
/// in real mode when `sim` is false (run_ablation checks it too; a CLI checks it before it
/// loads a model, so the refusal does not wait for, or depend on, the weights).
void check_ablation_study(const std::string& study, bool sim);

struct AblateOptions {
  std::string study;
  bool sim = true;
  const model::ForwardModel* model = nullptr;  ///< real mode (either backend)
  model::ModelConfig config;                   ///< the model's shape (both modes)
  sim::HardwareProfile profile;                ///< sim mode
  int batch = 16;                              ///< micro studies: requests per batch
  int reps = 3;                                ///< real mode: repetitions per point (median)
  const datasets::Trace* trace = nullptr;      ///< trace studies
  uint64_t seed = 0;
  int max_batch = 16;      ///< trace studies: sequences per step
  double rate = 1.0;       ///< trace studies: new sessions per second
  sched::ThinkTime think;  ///< trace studies: between an answer and the session's next turn
  int64_t ctx = 0;         ///< context window (0: the model's)
  int64_t max_output_tokens = 0;
  bool native_kv_entries = false;               ///< real mode: entries in the backend's own KV type
  std::function<void(const std::string&)> log;  ///< one line per finished run
  /// Called as each run progresses (the replay's progress); may throw to stop the study (an
  /// interrupt), as `log` may between runs.
  engine::ProgressFn progress;
};

/// One point of a study.
struct AblateRow {
  std::string series;     ///< the line or bar group ("RE", "CA (preload)", "lru", ...)
  std::string label;      ///< the x value as printed ("500/500", "2TB", "0.4", ...)
  double x = 0;           ///< numeric x (lines) or the category index (bars)
  nlohmann::json values;  ///< metric key -> number
};

/// A metric a study reports: its key in AblateRow::values, the column title, digits.
struct AblateMetric {
  std::string key, title;
  int digits = 2;
  bool plot = false;  ///< drawn (one panel per plotted metric)
};

struct AblateResult {
  std::string study, title, figure;  ///< figure: the paper's, e.g. "Figure 18"
  std::string x_title;
  bool categorical = false;  ///< bars over labels rather than lines over x
  std::vector<AblateMetric> metrics;
  std::vector<AblateRow> rows;
  nlohmann::json config;           ///< what was run (model, profile, trace, fixed knobs)
  std::vector<std::string> notes;  ///< what differs from the paper's setup, and why
};

/// Runs one study. Throws cb::Error naming `ablate` for an unknown study, or for a study
/// that needs sim mode in real mode, or a trace study without a trace.
AblateResult run_ablation(const AblateOptions& opts);

/// A trace study's runs whose mean TTFT exceeds a minute (`ttft_mean_ms` above 60,000): sessions
/// arrived faster than the modelled GPUs served them and the queue grew through the run, so its
/// numbers describe a server that is always behind. Empty when none is; else a note saying how
/// many, the worst mean TTFT, and which options give an unsaturated server. run_ablation adds it
/// to a sim study's notes.
std::string saturation_note(const AblateResult& r);

/// Real mode: a note when a point's replays ran while the machine's hypervisor gave other
/// guests more than kNotableSteal of its CPU time (a row's `cpu_steal_max`: the largest
/// `cpu_steal` of its repetitions), saying how many and the largest share; empty when none
/// did. run_ablation adds it to a real study's notes.
std::string steal_note(const AblateResult& r);

/// The result as JSON (rows, metrics, config, notes).
nlohmann::json ablation_json(const AblateResult& r);
/// The result as a Markdown table (one row per point).
std::string ablation_table(const AblateResult& r);

/// Writes DIR/STUDY.dat and DIR/STUDY.gp (a gnuplot script drawing DIR/STUDY.svg, one
/// panel per plotted metric); returns the script's path.
std::string write_ablation_plot(const AblateResult& r, const std::string& dir);

/// Real mode: the DRAM tier a study's replay needs so that no entry it keeps is evicted: every
/// session of `sessions` (as the replay runs them: trace_sessions' token ids and answer
/// lengths) at its largest entry (all its turns' tokens, at most `window` when > 0), in whole
/// chunks of `chunk_bytes` per layer's K and per layer's V (rows of `row_bytes`, so
/// `chunk_bytes / row_bytes` tokens a chunk), plus one chunk each for an append save's tail
/// (written anew while the entry it extends still holds its own).
uint64_t ablation_dram_bytes(const std::vector<engine::SessionInput>& sessions, int64_t window,
                             int n_layers, uint64_t row_bytes, uint64_t chunk_bytes);

/// Sim mode: the DRAM tier of every study, and the SSD tier of the studies that do not set
/// their own (truncation, medium, arrival-rate: eviction's 2 TB / 10 TB grid and capacity's
/// shares of CCpUT are the studies' own): the profile's dram_bytes and ssd_bytes, or the
/// paper's 128 GB and 10 TB where the profile gives none (0, as calibrate writes).
uint64_t ablation_sim_dram_bytes(const sim::HardwareProfile& p);
uint64_t ablation_sim_ssd_bytes(const sim::HardwareProfile& p);
/// Whether sim mode's `study` has the SSD tier of ablation_sim_ssd_bytes.
bool ablation_uses_profile_ssd(const std::string& study);
/// Sim mode: the notes saying that `study` took the paper's size for a tier the profile gives
/// none of (empty when none did). run_ablation adds them to the study's notes; a CLI says them
/// on stderr before the studies run.
std::vector<std::string> ablation_profile_notes(const sim::HardwareProfile& p,
                                                const std::string& study);

/// Capacity a store needs to keep every conversation for `ttl` seconds after its last turn
/// (the CCpUT of the paper's Figure 23): the peak over the run of the summed store bytes of
/// the conversations whose last turn ended less than `ttl` ago, each at its size after that
/// turn: `tokens_per_chunk` tokens a chunk of `chunk_bytes`, whole chunks for each of
/// `n_layers` layers' K and V, as the store's tiers allocate them.
double ccput_bytes(const std::vector<metrics::TurnRecord>& records, double ttl, int n_layers,
                   int64_t tokens_per_chunk, uint64_t chunk_bytes);

}  // namespace cb::eval
