#include "lib/core/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <mutex>

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

// The temporary file being written, for the handler below: a fixed buffer and unlink are
// what a signal handler may use.
char g_tmp[4096];
volatile std::sig_atomic_t g_tmp_set = 0;
constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};

extern "C" void remove_tmp_and_die(int sig) {
  if (g_tmp_set != 0) ::unlink(g_tmp);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

// While the temporary file exists, a signal that would end the process (its default action)
// removes the file first, so an interrupted run leaves no .tmp.PID behind. A handler the
// program installed is left alone: it stops the run at its next check, after this write.
class TmpFileGuard {
 public:
  explicit TmpFileGuard(const std::string& tmp) {
    if (tmp.size() >= sizeof g_tmp) return;
    std::memcpy(g_tmp, tmp.c_str(), tmp.size() + 1);
    g_tmp_set = 1;
    for (size_t i = 0; i < std::size(kSignals); ++i) {
      struct sigaction cur {};
      if (::sigaction(kSignals[i], nullptr, &cur) != 0 || cur.sa_handler != SIG_DFL) continue;
      struct sigaction sa {};
      sa.sa_handler = remove_tmp_and_die;
      sigemptyset(&sa.sa_mask);
      if (::sigaction(kSignals[i], &sa, &saved_[i]) == 0) installed_[i] = true;
    }
  }
  TmpFileGuard(const TmpFileGuard&) = delete;
  TmpFileGuard& operator=(const TmpFileGuard&) = delete;
  ~TmpFileGuard() {
    for (size_t i = 0; i < std::size(kSignals); ++i) {
      if (installed_[i]) ::sigaction(kSignals[i], &saved_[i], nullptr);
    }
    g_tmp_set = 0;
  }

 private:
  struct sigaction saved_[std::size(kSignals)]{};
  bool installed_[std::size(kSignals)] = {};
};

/// Writes all of `bytes` to `fd`; 0 or the errno of the failure.
int write_all(int fd, std::string_view bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return w < 0 ? errno : EIO;
    done += static_cast<size_t>(w);
  }
  return 0;
}

/// Writes straight into what is not a regular file (a character device such as /dev/null or
/// /dev/stdout, a pipe): there is nothing to replace, and renaming over it would replace the
/// device itself with a file.
void write_to_special(const std::string& path, const std::string& target, std::string_view bytes,
                      const std::string& what) {
  const int fd = ::open(target.c_str(), O_WRONLY | O_CLOEXEC);
  int err = fd < 0 ? errno : write_all(fd, bytes);
  if (fd >= 0 && ::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) {
    throw make_error(path, "cannot write " + what + " (" + std::strerror(err) + ")", advice(err));
  }
}

/// The descriptor a path names when it is one of the process's own (/dev/stdout, /dev/stderr,
/// /dev/fd/N, /proc/self/fd/N); -1 otherwise. Written through the descriptor, output lands
/// where the shell sent it (a pipe, a terminal, a file opened for appending at its end).
int own_descriptor_number(const std::string& p) {
  if (p == "/dev/stdout") return 1;
  if (p == "/dev/stderr") return 2;
  for (const char* prefix : {"/dev/fd/", "/proc/self/fd/"}) {
    const std::string pre = prefix;
    if (p.size() > pre.size() && p.compare(0, pre.size(), pre) == 0 &&
        p.find_first_not_of("0123456789", pre.size()) == std::string::npos &&
        p.size() - pre.size() <= 6) {
      return std::stoi(p.substr(pre.size()));
    }
  }
  return -1;
}

/// Where results addressed to the standard output go (set_result_stdout).
int g_result_stdout = 1;

int own_descriptor(const std::string& p) {
  const int fd = own_descriptor_number(p);
  return fd == 1 ? g_result_stdout : fd;
}

}  // namespace

bool names_stdout(const std::string& path) {
  return own_descriptor_number(path) == 1;
}

void set_result_stdout(int fd) {
  g_result_stdout = fd;
}

void write_file_atomically(const std::string& link_or_path, std::string_view bytes,
                           const std::string& what) {
  if (const int fd = own_descriptor(link_or_path); fd >= 0) {
    const int err = write_all(fd, bytes);
    if (err != 0) {
      throw make_error(link_or_path, "cannot write " + what + " (" + std::strerror(err) + ")",
                       advice(err));
    }
    return;
  }
  // A symbolic link is followed: the file it names is replaced and the link stays.
  std::string path = link_or_path;
  struct stat st {};
  if (::lstat(link_or_path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    if (::stat(link_or_path.c_str(), &st) != 0) {
      const int err = errno;
      throw make_error(link_or_path,
                       "cannot write " + what +
                           (err == ENOENT ? std::string(": it is a symbolic link to nothing")
                                          : std::string(" through the symbolic link (") +
                                                std::strerror(err) + ")"),
                       err == ENOENT ? "point the link at a file, or remove it" : advice(err));
    }
    if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) {
      char* real = ::realpath(link_or_path.c_str(), nullptr);
      if (real == nullptr) {
        const int err = errno;
        throw make_error(link_or_path, "cannot write " + what + " (" + std::strerror(err) + ")",
                         advice(err));
      }
      path = real;
      std::free(real);
    }
  } else if (::stat(path.c_str(), &st) != 0) {
    st.st_mode = S_IFREG;  // a new file
  }
  // A character device (/dev/null, a terminal) or a pipe is written to: renaming over it would
  // replace the device with a file. A block device or a socket is refused: writing a result
  // onto a disk is never meant.
  if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) {
    write_to_special(link_or_path, path, bytes, what);
    return;
  }
  if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
    throw make_error(link_or_path,
                     "cannot write " + what + ": it is a block device or a socket, not a file",
                     "name a file");
  }
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  static std::mutex one_at_a_time;  // the guard's handler knows one temporary file
  const std::lock_guard<std::mutex> lock(one_at_a_time);
  const TmpFileGuard guard(tmp);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    throw make_error(path, "cannot write " + what + " (" + tmp + ": " + std::strerror(err) + ")",
                     advice(err));
  }
  int err = write_all(fd, bytes);
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && ::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    throw make_error(
        link_or_path,
        "cannot write " + what + " (" + std::strerror(err) + "); the file is left as it was",
        advice(err));
  }
  // The rename is durable once its directory is: a power loss must not bring the old file
  // back (a store's marker, for one). Best effort: some file systems refuse a directory fsync.
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace cb
