#pragma once
/// A hardware profile: the numbers the simulator's cost model and links run on. Built-in
/// profiles (A100-80GB, H100-80GB, H200) come from published figures, each field with its
/// source; `cachebench calibrate` measures one on the machine at hand. Profiles are JSON:
///   {"name": ..., "description": ..., "<field>": value, ..., "sources": {"<field>": text}}

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace cb::sim {

/// The text that starts a field's source when `cachebench calibrate` did not measure it and
/// wrote a stand-in value instead (the SSD rates with --ssd-dir "", which measures no SSD).
inline constexpr const char* kNotMeasured = "not measured";
/// The highest compute rate a profile may give, TFLOP/s per accelerator (~100x an H100's 989).
inline constexpr double kMaxProfileTflops = 1e5;

/// The most accelerators a profile's "gpus" (and replay's and ablate's --gpus) may give. A
/// tensor-parallel group gives each GPU whole attention heads, and no model has more than a few
/// hundred (LLaMA-3-405B: 128), so any larger group is refused by the run anyway; 4096 is what
/// --gpus always allowed, and the profile's former 65536 only let it be refused later.
inline constexpr int kMaxGpus = 4096;

struct HardwareProfile {
  std::string name;
  std::string description;
  /// Where the profile came from (the file, or the built-in's name), for messages; not JSON.
  std::string loaded_from;
  // Compute, per accelerator. A step's time is the cost model's (cost_model.h).
  double gemm_tflops = 0;         ///< achieved dense GEMM rate (TFLOP/s)
  double attn_tflops = 0;         ///< achieved attention rate (TFLOP/s of QK^T and PV), prefill
  double decode_attn_tflops = 0;  ///< the same for one-token (decode) queries
  double hbm_gbps = 0;            ///< memory bandwidth for the roofline bound (0: no memory term)
  double hbm_bytes = 0;           ///< accelerator memory (0: the KV pool is sized by the engine)
  double step_overhead_s = 0;     ///< fixed cost of one forward call (launches, sampling)
  double layer_overhead_s = 0;    ///< fixed cost per layer per call
  double seq_overhead_s = 0;      ///< fixed cost per sequence per call (per-sequence kernels)
  double nvlink_gbps = 0;         ///< all-reduce bandwidth between tensor-parallel ranks
  int gpus = 1;                   ///< accelerators serving one model replica (tensor parallel)
  // Links of the store's tiers.
  double d2d_gbps = 0;        ///< HBM tier -> KV pool copies
  double h2d_gbps = 0;        ///< pinned host -> accelerator (DRAM tier loads), per GPU
  double d2h_gbps = 0;        ///< accelerator -> pinned host (saves), per GPU
  double pcie_latency_s = 0;  ///< per transfer
  double ssd_read_gbps = 0;
  double ssd_write_gbps = 0;
  double ssd_latency_s = 0;  ///< per transfer
  // Capacities of the host (defaults for the store's tiers when none are given).
  double dram_bytes = 0;
  double ssd_bytes = 0;
  int kv_bytes_per_element = 2;  ///< KV storage dtype (2: fp16; 4: the CPU backend's fp32)
  double gpu_usd_per_hour = 5.0;
  /// Where each field's value comes from (field name -> citation or measurement).
  std::map<std::string, std::string> sources;

  nlohmann::json to_json() const;
  /// Throws cb::Error naming `origin` and the field on a missing, mistyped or out-of-range
  /// field (each field has its own physically sensible range, given in the message: rates
  /// from 1e-6 up to an absurd value, overheads and latencies from 0 to seconds, capacities up
  /// to 2^62 bytes, gpus from 1).
  static HardwareProfile from_json(const nlohmann::json& j, const std::string& origin);
  /// Checks the ranges from_json checks; throws cb::Error naming `origin`.
  void validate(const std::string& origin) const;
  /// Whether `field`'s source says calibrate did not measure it (its value a stand-in).
  bool unmeasured(const std::string& field) const;
  /// How messages name the profile: its file (or built-in name), and its "name" when that
  /// differs ("/tmp/p.json (profile 'a100-80gb')").
  std::string label() const;
};

/// Names of the built-in profiles ("a100-80gb", "h100-80gb", "h200").
std::vector<std::string> builtin_profile_names();
/// A built-in profile; throws cb::Error, named after `option`, listing the names for an
/// unknown one.
HardwareProfile builtin_profile(const std::string& name, const std::string& option = "--profile");
/// A built-in name, or a JSON file written by `cachebench calibrate` (or by hand); `option`
/// names the argument it came from in errors.
HardwareProfile load_profile(const std::string& name_or_path,
                             const std::string& option = "--profile");
/// Writes `p` as pretty JSON to `path`; throws cb::Error naming the file on failure.
void save_profile(const HardwareProfile& p, const std::string& path);

}  // namespace cb::sim
