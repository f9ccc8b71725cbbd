// Files a user names that are not regular files are refused, naming them, and never opened
// in a way that blocks.

#include "lib/core/regular_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "lib/core/error.h"
#include "lib/core/mapped_file.h"
#include "tests/support/test_data.h"

namespace {

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const cb::Error& e) {
    return e.what();
  }
  return "";
}

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

/// A fresh path under the test directory (what was there removed).
std::string fresh(const std::string& name) {
  const std::string p = cb::test::tmp_dir() + "/" + name;
  std::remove(p.c_str());
  return p;
}

// open(2) of a FIFO for reading waits for a writer: MappedFile (GGUF, safetensors, an index)
// and read_regular_file (config.json, tokenizers) hung on one.
TEST(RegularFileTest, AFifoIsRefusedNotWaitedOn) {
  const std::string fifo = fresh("fifo.gguf");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  ::alarm(30);  // a blocked open ends as SIGALRM, which fails the test
  const std::string want = fifo + ": not a regular file (a FIFO)";
  std::string e = error_of([&] { cb::MappedFile f(fifo); });
  EXPECT_TRUE(has(e, want)) << e;
  e = error_of([&] { cb::read_regular_file(fifo, "pass config.json"); });
  EXPECT_TRUE(has(e, want + "; pass config.json")) << e;
  EXPECT_TRUE(cb::path_exists_checked(fifo));
  ::alarm(0);
}

TEST(RegularFileTest, ADirectoryOrALinkLoopIsNamedAsOne) {
  const std::string dir = cb::test::tmp_dir();
  std::string e = error_of([&] { cb::read_regular_file(dir, ""); });
  EXPECT_TRUE(has(e, dir + ": a directory, not a file")) << e;
  e = error_of([&] { cb::MappedFile f(dir); });
  EXPECT_TRUE(has(e, dir + ": a directory, not a file")) << e;

  const std::string loop = fresh("loop.json");
  ASSERT_EQ(::symlink("loop.json", loop.c_str()), 0);
  e = error_of([&] { cb::read_regular_file(loop, ""); });
  EXPECT_TRUE(has(e, loop + ": cannot open file: ")) << e;
  EXPECT_TRUE(has(e, "(a symbolic link loop)")) << e;
  e = error_of([&] { cb::path_exists_checked(loop); });
  EXPECT_TRUE(has(e, "(a symbolic link loop)")) << e;

  const std::string dangling = fresh("dangling.json");
  ASSERT_EQ(::symlink("no_such_target.json", dangling.c_str()), 0);
  e = error_of([&] { cb::path_exists_checked(dangling); });
  EXPECT_TRUE(has(e, dangling + ": a symbolic link to a file that does not exist")) << e;

  EXPECT_FALSE(cb::path_exists_checked(fresh("absent.json")));
  const std::string file = cb::test::write_tmp("present.json", "{}");
  EXPECT_FALSE(cb::path_exists_checked(file + "/config.json"));  // ENOTDIR: nothing there
  EXPECT_TRUE(cb::path_exists_checked(file));
  EXPECT_EQ(cb::read_regular_file(file, ""), "{}");
}

}  // namespace
