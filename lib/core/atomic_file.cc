#include "lib/core/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
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

}  // namespace

void write_file_atomically(const std::string& path, std::string_view bytes,
                           const std::string& what) {
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
