#pragma once
/// Result files written whole or not at all: a run that fails while writing (a full disk, a
/// file size limit) leaves the previous file as it was, never a truncated one.

#include <string>
#include <string_view>

namespace cb {

/// Writes `bytes` to `path` through a temporary file beside it (`path`.tmp.PID), flushed to
/// disk and renamed over `path`. Throws cb::Error naming `path`, `what` (e.g. "the JSON
/// result") and the system's reason, with the temporary file removed. A symbolic link is
/// followed (the file it names is replaced, the link stays); the process's own descriptors
/// (/dev/stdout, /dev/fd/N) are written through, character devices (/dev/null) and pipes are
/// written to directly, not replaced, and block devices and sockets are refused.
void write_file_atomically(const std::string& path, std::string_view bytes,
                           const std::string& what);

/// Whether `path` names the process's standard output (/dev/stdout, /dev/fd/1,
/// /proc/self/fd/1).
bool names_stdout(const std::string& path);

/// Results written to the standard output go to descriptor `fd` from now on: a duplicate of
/// the original standard output, once the program sends its own printing to stderr so that a
/// JSON result on stdout is the only thing there.
void set_result_stdout(int fd);

}  // namespace cb
