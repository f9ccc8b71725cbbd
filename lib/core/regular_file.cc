#include "lib/core/regular_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "lib/core/error.h"

namespace cb {

namespace {

const char* const kFixOpen = "check the path and its permissions";

/// strerror's words, and for ELOOP what they mean here.
std::string reason(int err) {
  std::string r = std::strerror(err);
  if (err == ELOOP) r += " (a symbolic link loop)";
  return r;
}

}  // namespace

std::string file_type_name(unsigned mode) {
  const auto m = static_cast<mode_t>(mode);
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISDIR(m)) return "a directory";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISREG(m)) return "a regular file";
  return "not a file";
}

int open_regular_file(const std::string& path, const std::string& fix, unsigned long long* size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    throw make_error(path, "cannot open file: " + reason(errno), kFixOpen);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw make_error(path, "cannot stat file: " + reason(err), kFixOpen);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    if (S_ISDIR(st.st_mode)) throw make_error(path, "a directory, not a file", fix);
    throw make_error(path, "not a regular file (" + file_type_name(st.st_mode) + ")", fix);
  }
  const int fl = ::fcntl(fd, F_GETFL);
  if (fl >= 0) ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);  // a regular file's reads never wait
  *size = static_cast<unsigned long long>(st.st_size);
  return fd;
}

std::string read_regular_file(const std::string& path, const std::string& fix) {
  unsigned long long size = 0;
  struct Fd {
    int fd;
    ~Fd() { ::close(fd); }  // also when a reservation or an append throws
  } f{open_regular_file(path, fix, &size)};
  std::string out;
  out.reserve(static_cast<size_t>(size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t r = ::read(f.fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw make_error(path, "cannot read file: " + reason(errno), kFixOpen);
    if (r == 0) break;
    out.append(buf, static_cast<size_t>(r));
  }
  return out;
}

bool path_exists_checked(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) return true;
  const int err = errno;
  if (err == ENOENT && ::lstat(path.c_str(), &st) == 0) {
    throw make_error(path, "a symbolic link to a file that does not exist",
                     "restore the file it points to (an interrupted download?) or remove the link");
  }
  if (err == ENOENT || err == ENOTDIR) return false;
  throw make_error(path, "cannot open file: " + reason(err), kFixOpen);
}

}  // namespace cb
