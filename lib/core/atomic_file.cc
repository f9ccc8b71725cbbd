#include "lib/core/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "lib/core/error.h"

namespace cb {
namespace {

std::string advice(int err) {
  switch (err) {
    case ENOSPC:
    case EDQUOT: return "free disk space or write elsewhere";
    case EFBIG: return "the file is over the process's file size limit (ulimit -f)";
    case EACCES:
    case EPERM:
    case EROFS: return "check the directory is writable";
    case EISDIR: return "the path is a directory; name a file";
    default: return "check the path and its directory";
  }
}

}  // namespace

void write_file_atomically(const std::string& path, std::string_view bytes,
                           const std::string& what) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    throw make_error(path, "cannot write " + what + " (" + tmp + ": " + std::strerror(err) + ")",
                     advice(err));
  }
  size_t done = 0;
  int err = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      err = w < 0 ? errno : EIO;
      break;
    }
    done += static_cast<size_t>(w);
  }
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && ::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    throw make_error(
        path, "cannot write " + what + " (" + std::strerror(err) + "); the file is left as it was",
        advice(err));
  }
}

}  // namespace cb
