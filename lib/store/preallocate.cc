#include "lib/store/preallocate.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <vector>

namespace cb::store {

namespace {

constexpr uint64_t kPiece = 1 << 20;
constexpr size_t kBlock = 4096;

// Zeros into every 4 KiB block of [0, bytes) that reads as zeros, through a buffered
// descriptor.
int fill_zero_pieces(const std::string& path, uint64_t bytes) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return errno;
  int rc = 0;
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    rc = errno;
  } else if (static_cast<uint64_t>(st.st_size) < bytes &&
             ::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    rc = errno;
  }
  std::vector<char> buf(kPiece), zeros(kPiece, 0);
  const auto zero_block = [&](size_t from, size_t to) {
    return std::all_of(buf.begin() + static_cast<std::ptrdiff_t>(from),
                       buf.begin() + static_cast<std::ptrdiff_t>(to),
                       [](char c) { return c == 0; });
  };
  const auto write_zeros = [&](uint64_t at, size_t len) {
    for (size_t done = 0; done < len;) {
      const ssize_t w = ::pwrite(fd, zeros.data(), len - done, static_cast<off_t>(at + done));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return errno;
      done += static_cast<size_t>(w);
    }
    return 0;
  };
  for (uint64_t off = 0; rc == 0 && off < bytes; off += kPiece) {
    const size_t len = static_cast<size_t>(std::min(kPiece, bytes - off));
    const ssize_t got = ::pread(fd, buf.data(), len, static_cast<off_t>(off));
    if (got < 0) {
      rc = errno;
      break;
    }
    if (static_cast<size_t>(got) < len) std::fill(buf.begin() + got, buf.begin() + len, 0);
    // Runs of blocks that read as zeros (holes among them) are written; blocks with data are
    // left as they are.
    size_t run = 0;  // where the current run of zero blocks began
    for (size_t b = 0; rc == 0 && b < len; b += kBlock) {
      const size_t end = std::min(b + kBlock, len);
      if (zero_block(b, end)) continue;
      if (b > run) rc = write_zeros(off + run, b - run);
      run = end;
    }
    if (rc == 0 && len > run) rc = write_zeros(off + run, len - run);
  }
  if (rc == 0 && ::fdatasync(fd) != 0) rc = errno;
  ::close(fd);
  return rc;
}

}  // namespace

bool looks_preallocated(int fd, uint64_t bytes) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < bytes) return false;
  // Not lseek(SEEK_HOLE): ext4 reports fallocate's unwritten extents as holes, and ext2 and
  // ext3 report none at all.
  return static_cast<uint64_t>(st.st_blocks) * 512 >= bytes;
}

int preallocate_file(const std::string& path, int fd, uint64_t bytes, bool try_fallocate) {
  if (try_fallocate) {
    if (::fallocate(fd, 0, 0, static_cast<off_t>(bytes)) == 0) return 0;
    const int err = errno;
    if (err != EOPNOTSUPP && err != ENOSYS) return err;
  }
  return fill_zero_pieces(path, bytes);
}

}  // namespace cb::store
