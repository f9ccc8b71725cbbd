#pragma once
/// Byte sizes from the command line: "128GiB", "10TiB", "512MiB", "4096", "1.5GB".

#include <cstdint>
#include <string>

namespace cb::store {

/// Parses a size with an optional unit (B, KiB, MiB, GiB, TiB, PiB, KB, MB, GB, TB, PB; K/M/G/T/P
/// mean binary units). Throws cb::Error naming `what` when malformed or out of range.
uint64_t parse_size(const std::string& text, const std::string& what = "size");
/// 1073741824 -> "1 GiB", 1536 -> "1.5 KiB".
std::string format_size(uint64_t bytes);
/// Throws cb::Error naming `option` when a tier budget is above 0 (no such tier) but below one
/// chunk: a tier that could hold nothing would miss every turn, which is never what was meant.
void check_tier_budget(const char* option, uint64_t bytes, uint64_t chunk_bytes);

}  // namespace cb::store
