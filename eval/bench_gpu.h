#pragma once
/// `cachebench bench gpu` (CUDA builds): the card's measured ceilings and the CUDA backend's
/// throughput against them, all in one run, medians over repetitions:
/// - ceilings: cuBLAS GEMM TFLOP/s at each model's prefill shapes, device-to-device copy
///   GB/s, pinned host-to-device and device-to-host GB/s;
/// - per model (presets generated on the device): prefill tokens/s and TFLOP/s over the GEMM
///   ceiling at each prompt length, alone and after a paged prefix; decode tokens/s and the
///   HBM bytes per second it implies (weights + KV read per step) over the copy ceiling;
/// - KV restore (pinned host staging -> device, rotated and scattered into paged blocks) GB/s
///   over the host-to-device ceiling, and KV capture (strided rows -> staging -> pinned host).

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace cb::eval {

struct BenchGpuOptions {
  std::vector<std::string> models = {"preset:llama-2-7b", "preset:llama-2-13b", "preset:mistral-7b",
                                     "preset:falcon-7b"};
  std::vector<int64_t> prompts = {512, 2048, 4096};
  int64_t prefix = 2048;  ///< paged prefix before the prompt (0: none)
  std::vector<int64_t> batches = {1, 16, 64};
  int64_t decode_context = 512;  ///< history of every decoding sequence
  int64_t decode_steps = 16;     ///< timed steps per repetition
  int64_t copy_mib = 1024;       ///< buffer of the copy ceilings
  int reps = 5;
  std::string storage = "f16";
  /// What a profiler started with --profile-from-start off sees: "decode" (the default
  /// variant's timed decode steps) or "prefill" (the default variant's last timed prefill).
  std::string profile_phase = "decode";
  /// Also time each fused path of the default turned off alone (the decode attention kernel,
  /// the launch fusions, RMSNorm in the decode GEMVs) and PDL-launched decode GEMVs, against
  /// the default in the same run. Off, only the default and its baselines run (the previous
  /// default's separate launches, the wmma prefill attention, cuBLAS GEMVs).
  bool opt_ins = true;
  int device = 0;
  uint64_t seed = 1;
};

/// A GPU's measured copy rates (the `bench gpu` ceilings), for `calibrate --backend cuda`.
struct GpuCopyRates {
  std::string device;  ///< the card's name
  double h2d_gbps = 0, d2h_gbps = 0;
  double d2d_gbps = 0;  ///< bytes read + written per second
  double memory_bytes = 0;
  double free_bytes = 0;  ///< free device memory after the measurement
};
/// Medians of `reps` copies of `mib` MiB: pinned host to device, device to pinned host, device
/// to device. Throws cb::Error when no GPU is usable.
GpuCopyRates measure_copy_rates(int device, int64_t mib, int reps);

/// Runs everything; progress lines go to stderr. Throws cb::Error when no GPU is usable or a
/// model does not fit the device.
nlohmann::json bench_gpu(const BenchGpuOptions& o);

}  // namespace cb::eval
