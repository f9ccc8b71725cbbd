// The SSD tier's I/O paths: io_uring and the forced pread fallback move the same bytes;
// O_DIRECT is used where the filesystem allows it (and recorded when it does not).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>

#include "lib/core/error.h"
#include "lib/store/attention_store.h"
#include "lib/store/io_backend.h"
#include "tests/unit/store/store_test_util.h"

namespace cb::store {
namespace {

TEST(Io, UringAndPreadBackendsAgree) {
  const EntryShape shape{2, 1000};  // unaligned token size: exercises bounce buffers
  for (IoMode mode : {IoMode::Auto, IoMode::Pread}) {
    const std::string dir = testing::fresh_dir(mode == IoMode::Pread ? "pread" : "uring");
    StoreConfig c;
    c.store_dir = dir;
    c.ssd_bytes = 64 << 20;
    c.chunk_bytes = 64 << 10;
    c.io_mode = mode;
    auto pos = testing::iota_positions(333);
    {
      AttentionStore st(c);
      const std::string d = st.describe().at(0);
      if (mode == IoMode::Pread) {
        EXPECT_NE(d.find("pread"), std::string::npos) << d;
      }
      EXPECT_TRUE(d.find("O_DIRECT") != std::string::npos ||
                  d.find("buffered") != std::string::npos)
          << d;
      ASSERT_TRUE(testing::save_entry(st, 5, 5, shape, pos));
      EXPECT_EQ(testing::load_check(st, 5, 5, shape, pos), 333);
    }
    c.io_mode = mode == IoMode::Pread ? IoMode::Auto : IoMode::Pread;  // reopen with the other
    AttentionStore st(c);
    EXPECT_EQ(testing::load_check(st, 5, 5, shape, pos), 333);
    std::filesystem::remove_all(dir);
  }
  EXPECT_EQ(parse_io_mode("pread"), IoMode::Pread);
  EXPECT_THROW(parse_io_mode("mmap"), Error);
}

TEST(Io, PreadBackendReportsShortReadsAndErrors) {
  const std::string dir = testing::fresh_dir("rawio");
  const std::string p = dir + "/f";
  FILE* f = std::fopen(p.c_str(), "w");
  std::fputs("hello", f);
  std::fclose(f);
  auto io = make_pread_backend();
  char buf[64];
  int fd = ::open(p.c_str(), O_RDONLY);
  IoOp ops[2];
  ops[0] = IoOp{fd, 0, buf, 64, false, 0};
  ops[1] = IoOp{-1, 0, buf, 8, false, 0};
  io->submit(ops, 2);
  EXPECT_EQ(ops[0].result, 5);  // short: EOF
  EXPECT_EQ(ops[1].result, -EBADF);
  ::close(fd);
  std::string why;
  auto uring = make_uring_backend(8, &why);
  if (uring) {
    fd = ::open(p.c_str(), O_RDONLY);
    ops[0] = IoOp{fd, 1, buf, 64, false, 0};
    uring->submit(ops, 1);
    EXPECT_EQ(ops[0].result, 4);
    EXPECT_EQ(std::string(buf, 4), "ello");
    ::close(fd);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cb::store

namespace cb::store {
namespace {

TEST(Io, TmpfsAndDisabledDirectIoWork) {
  // tmpfs refuses O_DIRECT on older kernels (EINVAL: the tier falls back to buffered I/O
  // and says so) and accepts it on newer ones; either way the data must round-trip.
  const std::string dir = "/dev/shm/cachebench_store_test_" + std::to_string(::getpid());
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) GTEST_SKIP() << "no /dev/shm here";
  const EntryShape shape{2, 512};
  for (bool direct : {true, false}) {
    StoreConfig c;
    c.store_dir = dir;
    c.ssd_bytes = 4 << 20;
    c.chunk_bytes = 64 << 10;
    c.direct_io = direct;
    AttentionStore st(c);
    const std::string d = st.describe().at(0);
    if (!direct) {
      EXPECT_NE(d.find("disabled by configuration"), std::string::npos) << d;
    } else {
      EXPECT_TRUE(d.find("O_DIRECT") != std::string::npos ||
                  d.find("refused by the filesystem") != std::string::npos)
          << d;
    }
    ASSERT_TRUE(testing::save_entry(st, 1, 1, shape, testing::iota_positions(200)));
    EXPECT_EQ(testing::load_check(st, 1, 1, shape, testing::iota_positions(200)), 200);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cb::store
