#pragma once
/// Dotted paths into JSON objects ("hit_rate.overall", "ttft_ms.mean"), as gates and
/// comparisons name the fields of a summary.

#include <nlohmann/json.hpp>
#include <string>

namespace cb::metrics {

/// The node at `dotted_path` under `root` (each '.'-separated part an object key), or nullptr
/// when a part is missing, a parent is not an object, or the path has an empty part.
const nlohmann::json* json_at(const nlohmann::json& root, const std::string& dotted_path);

}  // namespace cb::metrics
