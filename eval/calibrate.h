#pragma once
/// `cachebench calibrate`: measures a hardware profile for sim mode on the machine at hand
/// by running the real kernels and the real store. Forward calls of the model over a grid
/// of shapes (prefill chunks after various contexts, decode batches) are timed (median over
/// interleaved passes of the whole grid) and fitted by non-negative weighted least squares to
/// t = step_overhead + sequences * seq_overhead + GEMM FLOPs / gemm_rate + attention FLOPs /
/// attn_rate (prefill and decode apart; the cost model's terms, lib/sim/cost_model.h); the store's
/// DRAM tier is timed saving and loading a model-shaped entry (the links of the CPU
/// backend), and its SSD tier likewise in a scratch directory.

#include <functional>
#include <string>
#include <vector>

#include "lib/model/model.h"
#include "lib/sim/profile.h"

namespace cb::eval {

struct CalibrateOptions {
  std::string ssd_dir = "/tmp";  ///< scratch directory for the SSD measurement ("" = skip)
  int reps = 5;                  ///< timed passes over the grid (median per shape)
  int64_t entry_tokens = 0;      ///< tokens of the store probe entry (0: the model's window)
};

/// One timed shape and how well the fit predicts it.
struct CalibrationPoint {
  int batch = 0;
  int64_t new_tokens = 0, context = 0;  ///< per sequence
  double measured_s = 0, predicted_s = 0;
};

struct Calibration {
  sim::HardwareProfile profile;
  std::vector<CalibrationPoint> points;
  double median_abs_error = 0;  ///< median |predicted / measured - 1| over the grid
};

/// Calibrates `model` (CPU backend). `log` receives progress lines.
Calibration calibrate_cpu(const model::Model& model, const CalibrateOptions& opts,
                          const std::function<void(const std::string&)>& log = {});

}  // namespace cb::eval
