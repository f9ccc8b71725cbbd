#pragma once
/// Preallocation of the SSD tier's data files, so that a disk too small for the store shows
/// when the store is made, not as failed writes in the middle of a run.

#include <cstdint>
#include <string>

namespace cb::store {

/// Makes the first `bytes` of the file at `path` (open as `fd`, perhaps with O_DIRECT)
/// allocated on the disk and at least that long, keeping what it holds. fallocate(2) where
/// the file system has it (`try_fallocate`); otherwise (ext2, ext3 and others refuse it)
/// zeros written through a buffered descriptor of its own into each 4 KiB block that reads
/// as zeros (holes read so; a block holding data is left alone), then fdatasync. glibc's
/// posix_fallocate emulation is not used: it writes single bytes, which an O_DIRECT
/// descriptor refuses. Returns 0 or an errno (ENOSPC when the disk is too small).
int preallocate_file(const std::string& path, int fd, uint64_t bytes, bool try_fallocate = true);

/// Whether the first `bytes` of the file open as `fd` look allocated: it is that long and its
/// allocated blocks cover that many bytes. Not handled: on a compressing file system without
/// fallocate the blocks never do, so such a store's files are read through for holes at
/// every open; and ext2's indirect blocks count too, so a fill cut short within about 0.1% of
/// the end passes.
bool looks_preallocated(int fd, uint64_t bytes);

}  // namespace cb::store
