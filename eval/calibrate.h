#pragma once
/// `cachebench calibrate`: measures a hardware profile for sim mode on the machine at hand
/// by running the real kernels and the real store. Forward calls of the model over a grid
/// of shapes (prefill chunks after various contexts, decode batches) are timed (median over
/// interleaved passes of the whole grid) and fitted by non-negative weighted least squares to
/// t = step_overhead + sequences * seq_overhead + GEMM FLOPs / gemm_rate + attention FLOPs /
/// attn_rate (prefill and decode apart; the cost model's terms, lib/sim/cost_model.h); the store's
/// DRAM tier is timed saving and loading a model-shaped entry (the links of the CPU
/// backend; on the GPU the caller measures the pinned host<->device and device copies and
/// passes them as `links`), and its SSD tier likewise in a scratch directory.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "lib/model/model.h"
#include "lib/sim/profile.h"

namespace cb::eval {

/// An accelerator's links, measured by the caller (CUDA builds: pinned cudaMemcpyAsync).
struct DeviceLinks {
  std::string device;  ///< the card's name
  double h2d_gbps = 0, d2h_gbps = 0;
  double d2d_gbps = 0;  ///< device-to-device copy, bytes copied per second (half the traffic)
  std::string how;      ///< how they were measured (the profile's source text)
};

struct CalibrateOptions {
  std::string ssd_dir = "/tmp";  ///< scratch directory for the SSD measurement ("" = skip)
  int reps = 5;                  ///< timed passes over the grid (median per shape)
  int64_t entry_tokens = 0;      ///< tokens of the store probe entry (0: the grid's window)
  int64_t ctx = 0;               ///< the grid's window (0: the model's)
  /// Bytes the grid's KV pool may take (0: no limit): the window is halved until 16 full
  /// windows fit (the GPU's pool is allocated whole, next to the weights).
  uint64_t kv_budget_bytes = 0;
  std::string backend = "cpu";  ///< the model's backend, as named in the profile ("cuda f16")
  /// The replays to predict store entries in the model's native KV type (--kv-entries native),
  /// not fp32: the profile's kv_bytes_per_element and the store probe's rows follow.
  bool native_kv_entries = false;
  std::optional<DeviceLinks> links;  ///< a GPU's links; absent: the store's DRAM tier (CPU)
  /// Called before every timed pass and probe round; may throw (an interrupt) to stop the
  /// run, whose scratch store directory is then removed as the stack unwinds.
  std::function<void()> poll;
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

/// Calibrates `model` on its backend (CPU Model or CUDA CudaModel). `log` receives progress
/// lines.
Calibration calibrate(const model::ForwardModel& model, const CalibrateOptions& opts,
                      const std::function<void(const std::string&)>& log = {});

}  // namespace cb::eval
