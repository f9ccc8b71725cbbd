#include "lib/core/atomic_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "lib/core/error.h"
#include "tests/support/test_data.h"

namespace {

std::string read_all(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

TEST(AtomicFile, ReplacesTheFileWhole) {
  const std::string p = cb::test::write_tmp("atomic.json", "old");
  cb::write_file_atomically(p, "new contents", "the test result");
  EXPECT_EQ(read_all(p), "new contents");
  for (const auto& e : std::filesystem::directory_iterator(cb::test::tmp_dir())) {
    EXPECT_EQ(e.path().filename().string().find("atomic.json.tmp"), std::string::npos);
  }
}

// A failed write names the file and leaves the old one as it was.
TEST(AtomicFile, AFailedWriteLeavesTheOldFile) {
  const std::string dir = cb::test::tmp_dir() + "/atomic_dir";
  std::filesystem::create_directories(dir);
  try {
    cb::write_file_atomically(dir, "x", "the test result");  // a directory: rename fails
    ADD_FAILURE() << "renamed a file over a directory";
  } catch (const cb::Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir + ": cannot write the test result"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("left as it was"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(std::filesystem::is_directory(dir));
  std::filesystem::remove_all(dir);
}

// A symbolic link is followed: its target gets the bytes and the link stays a link. A device
// is written to, not replaced by a file (as root, `--out /dev/null` replaced /dev/null).
TEST(AtomicFile, LinksAreFollowedAndDevicesWrittenNotReplaced) {
  namespace fs = std::filesystem;
  const std::string dir = cb::test::tmp_dir() + "/atomic_links";
  fs::remove_all(dir);
  fs::create_directories(dir + "/sub");
  const std::string target = cb::test::write_tmp("atomic_links/sub/target.json", "old");
  fs::create_symlink("sub/target.json", dir + "/link.json");
  cb::write_file_atomically(dir + "/link.json", "via the link", "the test result");
  EXPECT_TRUE(fs::is_symlink(dir + "/link.json"));
  EXPECT_EQ(read_all(target), "via the link");
  fs::create_symlink("sub/none.json", dir + "/dangling.json");
  try {
    cb::write_file_atomically(dir + "/dangling.json", "x", "the test result");
    ADD_FAILURE() << "wrote through a dangling link";
  } catch (const cb::Error& e) {
    EXPECT_NE(std::string(e.what()).find("dangling.json: cannot write the test result: it is a "
                                         "symbolic link to nothing"),
              std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(fs::is_symlink(dir + "/dangling.json"));
  // A FIFO stands in for a device (never /dev/null itself: a regression here would replace it):
  // its reader, open before the write, gets the bytes, and it is still a FIFO after. The
  // reader opens without blocking, so a regression fails instead of hanging.
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  const int rd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(rd, 0);
  cb::write_file_atomically(fifo, "through the pipe", "the test result");
  char buf[64] = {};
  const ssize_t n = ::read(rd, buf, sizeof buf);
  ::close(rd);
  EXPECT_EQ(std::string(buf, n > 0 ? static_cast<size_t>(n) : 0), "through the pipe");
  EXPECT_TRUE(fs::is_fifo(fifo));
  // The process's own descriptor: written through it, where it points (here a file opened for
  // appending, which keeps what it held).
  const std::string out = dir + "/out.txt";
  const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "before;", 7), 7);
  cb::write_file_atomically("/dev/fd/" + std::to_string(fd), "after", "the test result");
  ::close(fd);
  EXPECT_EQ(read_all(out), "before;after");
  fs::remove_all(dir);
}

// A signal that ends the process while the temporary file is being written removes it: an
// interrupted run leaves neither a truncated result nor a .tmp.PID file.
TEST(AtomicFile, ASignalMidWriteLeavesNoTemporaryFile) {
  const std::string dir = cb::test::tmp_dir() + "/atomic_signal";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string p = dir + "/big.json";
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::signal(SIGTERM, SIG_DFL);
    const std::string big(size_t{256} << 20, 'x');
    for (;;) cb::write_file_atomically(p, big, "the test result");  // until the signal
  }
  // Wait for the temporary file, then end the child while it writes.
  const std::string tmp = p + ".tmp." + std::to_string(pid);
  const auto t0 = std::chrono::steady_clock::now();
  while (!std::filesystem::exists(tmp) &&
         std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60)) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  const bool seen = std::filesystem::exists(tmp);
  ::kill(pid, SIGTERM);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(seen) << "the child never wrote its temporary file";
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status;
  EXPECT_FALSE(std::filesystem::exists(tmp));
  if (std::filesystem::exists(p)) {  // an earlier round's whole file
    EXPECT_EQ(std::filesystem::file_size(p), size_t{256} << 20);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
