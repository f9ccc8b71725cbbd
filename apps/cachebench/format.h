#pragma once
/// Human-readable numbers for CLI tables.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace cb::app {

/// 6738415616 -> "6.74B", 262144 -> "262.1K".
std::string human_count(uint64_t n);
/// 524288 -> "512 KiB", 1.5e9 -> "1.40 GiB".
std::string human_bytes(uint64_t n);

/// Writes `j` (indented) to `path`; a cb::Error naming the path when it cannot be written.
void write_json(const std::string& path, const nlohmann::json& j);

/// The JSON document at `path` (a result another command wrote with --out): a cb::Error naming
/// the path when it is a directory, cannot be read, is not JSON or nests deeper than 64 levels.
nlohmann::json load_json_document(const std::string& path);

/// Prints tokenizer::stream_increment(text, shown, last) to stdout: a decoded text growing
/// token by token, an unfinished character held back until it is whole.
void stream_text(const std::string& text, std::string* shown, bool last = false);

}  // namespace cb::app
