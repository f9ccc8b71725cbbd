// The SSD tier's I/O paths: io_uring and the forced pread fallback move the same bytes;
// O_DIRECT is used where the filesystem allows it (and recorded when it does not).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <vector>

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

// The io_uring backend's refusal paths, through its submit hook: each batch writes `n` blocks
// of distinct bytes and reads them back, and every op must report its whole length.
struct UringCase {
  std::string dir = testing::fresh_dir("uring_hook");
  int fd = -1;
  UringCase() { fd = ::open((dir + "/f").c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644); }
  ~UringCase() {
    ::close(fd);
    std::filesystem::remove_all(dir);
  }
  // Writes then reads n blocks of 4 KiB through `io`; the blocks' bytes depend on `salt`.
  void round_trip(IoBackend& io, size_t n, int salt) {
    const uint32_t len = 4096;
    std::vector<std::vector<char>> out(n, std::vector<char>(len)), in(n, std::vector<char>(len));
    std::vector<IoOp> ops(n);
    for (size_t i = 0; i < n; ++i) {
      for (uint32_t b = 0; b < len; ++b)
        out[i][b] = static_cast<char>(static_cast<int>(i * 31 + b * 7) + salt);
      ops[i] = IoOp{fd, i * len, out[i].data(), len, true, 0};
    }
    io.submit(ops.data(), n);
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(ops[i].result, len) << "write " << i;
      ops[i] = IoOp{fd, i * len, in[i].data(), len, false, 0};
    }
    io.submit(ops.data(), n);
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(ops[i].result, len) << "read " << i;
      EXPECT_EQ(in[i], out[i]) << "block " << i;
    }
  }
};

TEST(Io, UringRetriesSubmitsTheKernelRefusesForAWhile) {
  int calls = 0, real = 0;
  std::string why;
  auto io = make_uring_backend(4, &why, [&](const std::function<int()>& submit) {
    ++calls;
    if (calls <= 4) return -EAGAIN;  // e.g. out of kernel memory for requests
    if (calls <= 8) return -EBUSY;   // e.g. the completion queue is full
    if (calls <= 10) return 0;       // took nothing
    ++real;
    return submit();
  });
  if (!io) GTEST_SKIP() << "io_uring unavailable: " << why;
  UringCase c;
  c.round_trip(*io, 10, 1);
  EXPECT_GE(real, 2);  // the ring carried the ops once the refusals ended
  EXPECT_GT(calls, 10);
}

TEST(Io, UringRetiresARingThatRefusesEverySubmit) {
  bool refuse = true;
  int calls = 0;
  std::string why;
  auto io = make_uring_backend(4, &why, [&](const std::function<int()>& submit) {
    ++calls;
    return refuse ? -EAGAIN : submit();
  });
  if (!io) GTEST_SKIP() << "io_uring unavailable: " << why;
  UringCase c;
  c.round_trip(*io, 6, 2);  // each batch gives up on the ring and finishes with pwrite/pread
  EXPECT_GE(calls, 2 * 1000);
  refuse = false;
  calls = 0;
  c.round_trip(*io, 6, 3);  // a new ring
  EXPECT_GE(calls, 2);
}

TEST(Io, UringHardErrorWaitsForTheOpsInFlightAndFinishesTheRest) {
  for (int err : {-EINVAL, -EIO, -ENOMEM}) {
    int calls = 0;
    std::string why;
    auto io = make_uring_backend(2, &why, [&](const std::function<int()>& submit) {
      return ++calls == 1 ? submit() : err;  // the first two ops reach the kernel, no more
    });
    if (!io) GTEST_SKIP() << "io_uring unavailable: " << why;
    UringCase c;
    c.round_trip(*io, 9, err);
    EXPECT_GE(calls, 2) << err;
  }
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
