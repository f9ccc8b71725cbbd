#pragma once
/// Reading dataset files: whole-file reads, transparent gzip, and line splitting with
/// 1-based line numbers, so every loader reports errors as "file:line: ...".

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cb::datasets {

/// The bytes of `path`; throws cb::Error naming the file when it cannot be read.
std::string read_file_bytes(const std::string& path);

/// True when `bytes` start with the gzip magic 1f 8b.
bool is_gzip(std::string_view bytes);

/// Inflates a gzip stream (concatenated members included). `where` names the source in
/// errors; a truncated or corrupt stream throws cb::Error, and so does one that inflates to
/// more than `max_bytes` (0: half of this machine's memory), since deflate expands up to a
/// thousandfold and a small file could otherwise exhaust memory.
std::string gunzip(std::string_view bytes, const std::string& where, uint64_t max_bytes = 0);

/// `bytes` inflated when they are gzip (within gunzip's default bound), else unchanged.
std::string maybe_gunzip(std::string bytes, const std::string& where);

/// One line of a text file: its 1-based number and its text without "\n" or "\r\n".
struct Line {
  int number = 0;         ///< 1-based
  std::string_view text;  ///< views into the buffer passed to split_lines
};

/// Splits on "\n" (dropping a "\r" before it); a final line without "\n" is kept, and a
/// trailing "\n" does not make an extra empty line (as Python's file iteration does).
std::vector<Line> split_lines(std::string_view text);

/// `s` without leading and trailing ASCII whitespace (space, \t, \r, \n, \v, \f).
std::string_view trim(std::string_view s);

/// "path:line" for error messages.
std::string where(const std::string& path, int line);

}  // namespace cb::datasets
