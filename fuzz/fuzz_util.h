#pragma once
/// Helpers shared by the fuzz targets. Parsers that only take a path read the input from a
/// memory-backed file (memfd_create), rewritten for every input and named by
/// /proc/self/fd/N, so fuzzing writes nothing to disk.

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>

#include "lib/core/error.h"

namespace cb::fuzz {

/// Runs f(), ignoring the cb::Error a fuzzed input may rightly cause.
template <typename F>
void quietly(F&& f) {
  try {
    f();
  } catch (const cb::Error&) {
  }
}

/// What `open()` returns (a smart pointer), or an empty one when it throws cb::Error: the
/// parser refused the input.
template <typename F>
auto or_null(F&& open) -> decltype(open()) {
  try {
    return open();
  } catch (const cb::Error&) {
    return nullptr;
  }
}

/// A memory-backed file that holds the current input.
class MemFile {
 public:
  explicit MemFile(const char* name) : fd_(::memfd_create(name, MFD_CLOEXEC)) {
    if (fd_ < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;
  ~MemFile() { ::close(fd_); }

  /// Replaces the file's contents with `bytes` and returns its path.
  const std::string& write(std::string_view bytes) {
    if (::ftruncate(fd_, 0) != 0) std::abort();
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t w =
          ::pwrite(fd_, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
      if (w <= 0) std::abort();
      done += static_cast<size_t>(w);
    }
    return path_;
  }
  const std::string& write(const uint8_t* data, size_t size) {
    return write(std::string_view(reinterpret_cast<const char*>(data), size));
  }
  const std::string& path() const { return path_; }

 private:
  int fd_;
  std::string path_;
};

/// A scratch directory (under $TMPDIR, else /tmp) for parsers that read a fixed file name
/// inside a directory; each input rewrites the same files there.
inline std::string scratch_dir(const char* name) {
  const char* tmp = std::getenv("TMPDIR");
  std::string d = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/cb-fuzz-" + name +
                  "-" + std::to_string(::getpid());
  ::mkdir(d.c_str(), 0700);
  return d;
}

/// Splits the input at the first occurrence of `sep` (two files from one input); without
/// one, everything is the first part.
inline std::pair<std::string_view, std::string_view> split_input(std::string_view in,
                                                                 std::string_view sep) {
  const size_t at = in.find(sep);
  if (at == std::string_view::npos) return {in, {}};
  return {in.substr(0, at), in.substr(at + sep.size())};
}

/// Reads every byte of [p, p + n) so that ASan checks the range is valid memory.
inline void touch(const uint8_t* p, size_t n) {
  volatile uint8_t sink = 0;
  for (size_t i = 0; i < n; i += 4096) sink = static_cast<uint8_t>(sink ^ p[i]);
  if (n > 0) sink = static_cast<uint8_t>(sink ^ p[n - 1]);
  (void)sink;
}

}  // namespace cb::fuzz
