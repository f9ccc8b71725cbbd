#pragma once
/// Opening the files a user names (models, configs, tokenizers) without blocking on what is
/// not a regular file: open(2) of a FIFO for reading waits for a writer, forever, and a
/// std::ifstream on a directory fails only at its first read, with the library's words.

#include <string>

namespace cb {

/// What a file of mode `mode` (st_mode) is, for messages: "a FIFO", "a directory", "a socket",
/// "a character device", "a block device", "a regular file".
std::string file_type_name(unsigned mode);

/// Opens `path` read-only when it is a regular file (or a link to one): with O_NONBLOCK, then
/// fstat, so a FIFO is refused without waiting for a writer; O_NONBLOCK is cleared again.
/// Returns the descriptor (O_CLOEXEC) and its size in `*size`. Throws cb::Error naming `path`:
/// "a directory, not a file", "not a regular file (a FIFO)" (both with `fix`), or "cannot open
/// file: REASON" (a symbolic link loop said to be one).
int open_regular_file(const std::string& path, const std::string& fix, unsigned long long* size);

/// The whole of the regular file `path` (refused as open_regular_file refuses it; a read error
/// names the file).
std::string read_regular_file(const std::string& path, const std::string& fix);

/// Whether something is at `path` (stat(2) succeeds). False when nothing is (ENOENT, ENOTDIR);
/// throws cb::Error naming `path` when it cannot tell (a symbolic link loop, a link to nothing,
/// a directory it may not search), which "missing" would misreport.
bool path_exists_checked(const std::string& path);

}  // namespace cb
