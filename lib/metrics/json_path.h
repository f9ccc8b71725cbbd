#pragma once
/// Dotted paths into JSON objects ("hit_rate.overall", "ttft_ms.mean") and lists
/// ("results.0.ppl"), as gates and comparisons name the fields of a summary.

#include <nlohmann/json.hpp>
#include <string>

namespace cb::metrics {

/// The node at `dotted_path` under `root` (each '.'-separated part an object's key, or a list's
/// index in decimal), or nullptr when a part is missing or out of the list, a parent is neither
/// an object nor a list, or the path has an empty part.
const nlohmann::json* json_at(const nlohmann::json& root, const std::string& dotted_path);

}  // namespace cb::metrics
