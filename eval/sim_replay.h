#pragma once
/// The replay driver in sim mode: the same trace sessions, store options and summary as
/// run_replay, on a hardware profile's cost model and links (lib/sim) instead of a model
/// and a real store. Every summary carries "execution": "sim" and the profile's label (its file,
/// and its "name" where that differs: HardwareProfile::label).

#include <string>
#include <vector>

#include "eval/replay.h"
#include "lib/model/config.h"
#include "lib/sim/profile.h"

namespace cb::eval {

/// Sim-mode knobs beyond ReplayOptions.
struct SimOptions {
  sim::HardwareProfile profile;
};

/// Engine sessions of a trace with only lengths (ids are left zero: sim reads lengths).
std::vector<engine::SessionInput> sim_sessions(const datasets::Trace& trace,
                                               int64_t max_output_tokens = 0);

/// KV blocks that fit the profile's accelerators after the weights, 10% work space and the
/// store's HBM tier (0 when the profile gives no HBM size).
int64_t sim_kv_blocks(const model::ModelConfig& mc, const sim::HardwareProfile& p, int block_size,
                      uint64_t store_hbm_bytes);

/// Runs `sessions` in `mode` in sim mode, on the profile's "gpus" (tensor parallel, and the
/// GPUs charged: `opts.gpus` is not read; replay --gpus sets the profile's).
ReplayRun run_sim_replay(const model::ModelConfig& mc,
                         const std::vector<engine::SessionInput>& sessions, engine::Mode mode,
                         const ReplayOptions& opts, const SimOptions& sim,
                         const engine::ProgressFn& progress = {});

}  // namespace cb::eval
