#pragma once
/// The CUDA backend's performance targets (docs/perf.md) read off a `bench gpu` result: prefill
/// of a 7B model at 2K tokens at 0.70 or more of the GEMM ceiling, decode at batch 1 at 0.80 or
/// more of the copy ceiling, KV restore at 0.90 or more of host-to-device; all ceilings
/// measured in the same run. Plain JSON, so a saved result is judged without a GPU.

#include <nlohmann/json.hpp>

namespace cb::eval {

constexpr double kPrefillTarget = 0.70;  ///< of the GEMM ceiling, 7B at 2K tokens, no prefix
constexpr double kDecodeTarget = 0.80;   ///< of the device-to-device copy ceiling, batch 1
constexpr double kRestoreTarget = 0.90;  ///< of the pinned host-to-device ceiling

/// One array entry per measured point that a target applies to, grouped by target:
/// {"target": "prefill"|"decode"|"restore", "model", "config" ("default", or the same-run
/// alternative a row's `PREFIX_ratio_to_...` key measured: "every opt-in", "launch fusions",
/// "wmma attention", ...; "one stream" or "pipelined" for restore), "ratio", "goal", "met"}.
/// Prefill: rows of 2,048 tokens and no prefix of 7B-class models (6-8 billion `parameters`,
/// as the result records them; launch fusions
/// against the lower of their two GEMM ceilings); decode: batch-1 rows; restore: every KV row.
/// Rows or keys a run did not produce are left out; anything else malformed throws cb::Error
/// naming `origin`.
nlohmann::json bench_gpu_targets(const nlohmann::json& bench, const std::string& origin);

}  // namespace cb::eval
