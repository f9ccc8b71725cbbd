#pragma once
/// The CUDA backend's performance targets (docs/perf.md) read off a `bench gpu` result: prefill
/// of a 7B model at 2K tokens at 0.70 or more of the GEMM ceiling, decode at batch 1 at 0.80 or
/// more of the copy ceiling, KV restore at 0.90 or more of host-to-device; all ceilings
/// measured in the same run. Plain JSON, so a saved result is judged without a GPU.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace cb::eval {

constexpr double kPrefillTarget = 0.70;  ///< of the GEMM ceiling, 7B at 2K tokens, no prefix
constexpr double kDecodeTarget = 0.80;   ///< of the device-to-device copy ceiling, batch 1
constexpr double kRestoreTarget = 0.90;  ///< of the pinned host-to-device ceiling

/// A configuration `bench gpu` times beside the default in a row: its keys' prefix (`PREFIX_tok_s`
/// and the like), its name, and whether the targets list it (cuBLAS GEMVs are the GEMV kernel's
/// baseline, not a configuration the model offers).
struct BenchGpuAlternative {
  const char* prefix;
  const char* name;
  bool target;
};
/// Every one, those `bench gpu` times now first, then those of earlier results, in table order.
const std::vector<BenchGpuAlternative>& bench_gpu_alternatives();

/// The speed of `prefix`'s configuration relative to the default's in `row`: its
/// `PREFIX_speedup`, or for earlier results the inverse of `speedup_over_PREFIX` (the default's
/// speedup over a baseline); 0 when the row has neither.
double relative_speed(const nlohmann::json& row, const std::string& prefix);

/// One array entry per measured point that a target applies to, grouped by target:
/// {"target": "prefill"|"decode"|"restore", "model", "config" ("default", or the same-run
/// alternative a row's `PREFIX_ratio_to_...` key measured, by bench_gpu_alternatives' names:
/// "previous default", "wmma attention", ...; "one stream" or "pipelined" for restore), "ratio",
/// "goal", "met"}. Prefill: rows of 2,048 tokens and no prefix of 7B-class models (6-8 billion
/// `parameters`, as the result records them; a configuration measured against two GEMM
/// ceilings, the unfused shapes' and the fused gate|up ones', counts the lower ratio); decode:
/// batch-1 rows; restore: every KV row.
/// Rows or keys a run did not produce are left out; anything else malformed throws cb::Error
/// naming `origin`.
nlohmann::json bench_gpu_targets(const nlohmann::json& bench, const std::string& origin);

}  // namespace cb::eval
