// The SSD tier's I/O paths: io_uring and the forced pread fallback move the same bytes;
// O_DIRECT is used where the filesystem allows it (and recorded when it does not).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <utility>
#include <vector>

#include "lib/core/error.h"
#include "lib/store/attention_store.h"
#include "lib/store/io_backend.h"
#include "lib/store/preallocate.h"
#include "lib/store/store_dir.h"
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

// The io_uring backend's refusal paths, through its test hooks: each batch writes `n` blocks
// of distinct bytes or reads them back, and every op must report its whole length.
struct UringCase {
  static constexpr uint32_t kLen = 4096;
  std::string dir = testing::fresh_dir("uring_hook");
  int fd = ::open((dir + "/f").c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  std::vector<std::vector<char>> out;
  ~UringCase() {
    ::close(fd);
    std::filesystem::remove_all(dir);
  }
  // Writes n blocks through `io`; their bytes depend on `salt`.
  void write(IoBackend& io, size_t n, int salt) {
    out.assign(n, std::vector<char>(kLen));
    std::vector<IoOp> ops(n);
    for (size_t i = 0; i < n; ++i) {
      for (uint32_t b = 0; b < kLen; ++b) {
        out[i][b] = static_cast<char>(static_cast<int>(i * 31 + b * 7) + salt);
      }
      ops[i] = IoOp{fd, i * kLen, out[i].data(), kLen, true, 0};
    }
    io.submit(ops.data(), n);
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(ops[i].result, kLen) << "write " << i;
  }
  // Reads the blocks of the last write back through `io`.
  void read_check(IoBackend& io) {
    const size_t n = out.size();
    std::vector<std::vector<char>> in(n, std::vector<char>(kLen));
    std::vector<IoOp> ops(n);
    for (size_t i = 0; i < n; ++i) ops[i] = IoOp{fd, i * kLen, in[i].data(), kLen, false, 0};
    io.submit(ops.data(), n);
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(ops[i].result, kLen) << "read " << i;
      EXPECT_EQ(in[i], out[i]) << "block " << i;
    }
  }
};

UringHooks submit_hook(UringHooks::Hook h) {
  UringHooks hooks;
  hooks.submit = std::move(h);
  return hooks;
}

TEST(Io, UringRetriesSubmitsTheKernelRefusesForAWhile) {
  int calls = 0, real = 0;
  std::string why;
  auto io = make_uring_backend(4, &why, submit_hook([&](const std::function<int()>& submit) {
                                 ++calls;
                                 if (calls <= 4)
                                   return -EAGAIN;  // e.g. out of kernel memory for requests
                                 if (calls <= 8)
                                   return -EBUSY;            // e.g. the completion queue is full
                                 if (calls <= 10) return 0;  // took nothing
                                 ++real;
                                 return submit();
                               }));
  if (!io) GTEST_SKIP() << "io_uring unavailable: " << why;
  UringCase c;
  ASSERT_GE(c.fd, 0);
  c.write(*io, 10, 1);
  EXPECT_GE(real, 3);  // the same ring, once the refusals ended: 10 ops at depth 4
  EXPECT_EQ(calls, 10 + real);
  c.read_check(*io);
}

TEST(Io, UringRetiresARingThatRefusesEverySubmit) {
  bool refuse = true;
  int calls = 0;
  std::string why;
  auto io = make_uring_backend(4, &why, submit_hook([&](const std::function<int()>& submit) {
                                 ++calls;
                                 return refuse ? -EAGAIN : submit();
                               }));
  if (!io) GTEST_SKIP() << "io_uring unavailable: " << why;
  UringCase c;
  ASSERT_GE(c.fd, 0);
  c.write(*io, 6, 2);  // each batch gives up on its ring and finishes with pwrite/pread
  EXPECT_EQ(calls, 1000);
  c.read_check(*io);
  refuse = false;
  calls = 0;
  c.write(*io, 6, 3);  // a new ring
  c.read_check(*io);
  EXPECT_GE(calls, 4);  // 6 ops at depth 4, twice
}

TEST(Io, UringHardErrorWaitsForTheOpsInFlightAndFinishesTheRest) {
  for (int err : {-EINVAL, -EIO, -ENOMEM}) {
    // Op 0 reads an empty pipe, so the kernel still holds it when the second submit fails:
    // the hook's second call writes the pipe's bytes, then fails. pread cannot redo a pipe
    // read (ESPIPE), so op 0 has its bytes only if the batch waited for the kernel's read.
    int pipefd[2];
    ASSERT_EQ(::pipe(pipefd), 0);
    const std::vector<char> msg(UringCase::kLen, static_cast<char>(0x5a + err));
    int calls = 0;
    std::string why;
    auto io = make_uring_backend(2, &why, submit_hook([&](const std::function<int()>& submit) {
                                   if (++calls == 1)
                                     return submit();  // ops 0 and 1 reach the kernel, no more
                                   if (calls == 2) {
                                     EXPECT_EQ(::write(pipefd[1], msg.data(), msg.size()), 4096);
                                   }
                                   return err;
                                 }));
    if (!io) GTEST_SKIP() << "io_uring unavailable: " << why;
    UringCase c;
    ASSERT_GE(c.fd, 0);
    std::vector<char> got(msg.size());
    std::vector<std::vector<char>> blocks(9, std::vector<char>(UringCase::kLen));
    std::vector<IoOp> ops(9);
    ops[0] = IoOp{pipefd[0], 0, got.data(), UringCase::kLen, false, 0};
    for (size_t i = 1; i < 9; ++i) {
      std::fill(blocks[i].begin(), blocks[i].end(), static_cast<char>(i - err));
      ops[i] = IoOp{c.fd, i * UringCase::kLen, blocks[i].data(), UringCase::kLen, true, 0};
    }
    io->submit(ops.data(), ops.size());
    EXPECT_EQ(calls, 2) << err;
    EXPECT_EQ(ops[0].result, UringCase::kLen) << err;
    EXPECT_EQ(got, msg) << err;
    for (size_t i = 1; i < 9; ++i) {
      EXPECT_EQ(ops[i].result, UringCase::kLen) << err << " write " << i;
      std::vector<char> back(UringCase::kLen);
      EXPECT_EQ(::pread(c.fd, back.data(), back.size(), static_cast<off_t>(i * UringCase::kLen)),
                4096);
      EXPECT_EQ(back, blocks[i]) << err << " block " << i;
    }
    ::close(pipefd[0]);
    ::close(pipefd[1]);
  }
}

TEST(Io, UringRetiresARingWhoseWaitFails) {
  // The first wait for completions fails (as io_uring_wait_cqe would on a broken ring): the
  // batch waits for its two ops in flight by polling the ring, finishes the rest with
  // pwrite, and the next batch opens a new ring, which works.
  int waits = 0;
  std::string why;
  UringHooks hooks;
  hooks.wait = [&](const std::function<int()>& wait) { return ++waits == 1 ? -EBADF : wait(); };
  auto io = make_uring_backend(2, &why, hooks);
  if (!io) GTEST_SKIP() << "io_uring unavailable: " << why;
  UringCase c;
  ASSERT_GE(c.fd, 0);
  c.write(*io, 7, 4);
  EXPECT_EQ(waits, 1);
  c.read_check(*io);  // 7 reads at depth 2: at least 4 waits on the new ring
  EXPECT_GE(waits, 1 + 4);
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
    // A tier running other than asked is listed among the degraded ones (replay --quiet
    // still prints it): O_DIRECT refused is, O_DIRECT turned off is not.
    EXPECT_EQ(st.describe(true).size(), d.find("refused") != std::string::npos ? 1u : 0u) << d;
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

// Where the file system has no fallocate (ext2, ext3), data files are preallocated by writing
// zeros into their holes: a file left sparse (ftruncate, as builds before 2026-12-06 made it
// there) would fill the disk in the middle of a run. Data already in the file stays.
TEST(Io, PreallocationWithoutFallocateFillsTheHolesAndKeepsTheData) {
  const std::string dir = testing::fresh_dir("prealloc");
  const std::string path = dir + "/data-0000.bin";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  const std::vector<char> data(4096, 'k');
  ASSERT_EQ(::pwrite(fd, data.data(), data.size(), 1 << 20), 4096);
  ASSERT_EQ(::ftruncate(fd, 4 << 20), 0);  // sparse around the data
  const uint64_t size = (6 << 20) + 100;   // grown too, to a size of no whole block
  EXPECT_EQ(preallocate_file(path, fd, size, false), 0);
  EXPECT_TRUE(looks_preallocated(fd, size));
  std::vector<char> back(size, 1);
  ASSERT_EQ(::pread(fd, back.data(), back.size(), 0), static_cast<ssize_t>(back.size()));
  EXPECT_TRUE(std::equal(data.begin(), data.end(), back.begin() + (1 << 20)));
  EXPECT_EQ(std::count(back.begin(), back.end(), 'k'), 4096);
  EXPECT_EQ(std::count(back.begin(), back.end(), 0), static_cast<long>(back.size()) - 4096);
  // With fallocate (where the file system has it), the same.
  EXPECT_EQ(preallocate_file(path, fd, 8 << 20), 0);
  EXPECT_TRUE(looks_preallocated(fd, 8 << 20));
  ::close(fd);
  std::filesystem::remove_all(dir);
}

// A file system that reports no size (ramfs, /proc) has no free space to check a new store's
// budget against: named as such, not as "0 B available", which reads like a full disk.
TEST(Io, AFileSystemWithoutASizeIsNamedSo) {
  try {
    check_free_space("/proc", 1);
    FAIL() << "a new store's budget checked against /proc";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("reports no size"), std::string::npos) << e.what();
  }
  const std::string dir = testing::fresh_dir("free_space");
  EXPECT_GT(check_free_space(dir, 1), 0u);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cb::store
