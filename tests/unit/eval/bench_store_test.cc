#include "eval/bench_store.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "eval/bench_journal.h"
#include "lib/core/error.h"
#include "tests/support/test_data.h"

namespace {

bool exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

size_t count_entries(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return 0;
  size_t n = 0;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") ++n;
  }
  ::closedir(d);
  return n;
}

cb::eval::BenchStoreOptions tiny(const std::string& dir) {
  cb::eval::BenchStoreOptions o;
  o.store_dir = dir;
  o.entry_bytes = 2ull << 20;    // 2 MiB: 32 layers x K,V x 4 tokens x 8 KiB
  o.traffic_bytes = 4ull << 20;  // two entries per round
  o.chunk_bytes = 64ull << 10;
  o.reps = 1;
  o.policy_entries = 500;
  o.policy_queue = 500;
  o.policy_dram_entries = 4;
  o.policy_calls = 1;
  return o;
}

TEST(BenchStoreTest, TinyRunGivesPositiveNumbersAndLeavesNothing) {
  const std::string dir = cb::test::tmp_dir() + "/bench_store_" + std::to_string(::getpid());
  const cb::eval::BenchStoreResult r = cb::eval::bench_store(tiny(dir));
  EXPECT_EQ(r.entries_per_rep, 2);
  EXPECT_EQ(r.tokens_per_entry, 4);
  EXPECT_GT(r.memcpy_gbs, 0);
  EXPECT_GT(r.xxh3_gbs, 0);
  EXPECT_GT(r.dram_save_gbs, 0);
  EXPECT_GT(r.dram_load_gbs, 0);
  EXPECT_GT(r.dram_save_ratio, 0);
  EXPECT_GT(r.ssd_write_gbs, 0);
  EXPECT_GT(r.ssd_read_gbs, 0);
  EXPECT_GT(r.plain_write_gbs, 0);
  EXPECT_GT(r.plain_read_gbs, 0);
  EXPECT_GT(r.ssd_read_ratio, 0);
  EXPECT_EQ(r.ref_depth, 32);
  EXPECT_EQ(r.ref_threads, 4);  // as many as the store's I/O threads
  EXPECT_TRUE(r.ref_engine == "io_uring" || r.ref_engine == "threads") << r.ref_engine;
  EXPECT_GT(r.parallel_write_gbs, 0);
  EXPECT_GT(r.parallel_read_gbs, 0);
  // The ceiling is the faster reference, so the store's ratio to it is the smaller one.
  EXPECT_NEAR(r.ssd_read_ceiling_ratio,
              std::min(r.ssd_read_ratio, r.ssd_read_gbs / r.parallel_read_gbs), 1e-12);
  EXPECT_NEAR(r.ssd_write_ceiling_ratio,
              std::min(r.ssd_write_ratio, r.ssd_write_gbs / r.parallel_write_gbs), 1e-12);
  EXPECT_FALSE(r.io_backend.empty());
  // Scheduler-aware (make_room, order, plan_prefetch) + 3 baselines (make_room, order).
  ASSERT_EQ(r.policy.size(), 9u);
  for (const auto& p : r.policy) EXPECT_GT(p.per_s, 0) << p.policy << " " << p.op;
  // The bench created `dir`, so it removes it together with everything it wrote.
  EXPECT_FALSE(exists(dir));
}

TEST(BenchStoreTest, ExistingDirectoryIsKeptAndLeftEmpty) {
  const std::string dir = cb::test::tmp_dir() + "/bench_store_keep_" + std::to_string(::getpid());
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  auto o = tiny(dir);
  o.run_dram = false;
  o.run_policy = false;
  const auto r = cb::eval::bench_store(o);
  EXPECT_GT(r.ssd_write_gbs, 0);
  EXPECT_TRUE(exists(dir));
  EXPECT_EQ(count_entries(dir), 0u);
  ::rmdir(dir.c_str());
}

TEST(BenchStoreTest, UnusableDirectoryOrTooMuchTrafficIsAClearError) {
  const std::string file = cb::test::write_tmp("bench_store_not_a_dir", "x");
  auto o = tiny(file);
  o.run_dram = o.run_policy = false;
  EXPECT_THROW(cb::eval::bench_store(o), cb::Error);
  ::unlink(file.c_str());

  const std::string dir = cb::test::tmp_dir() + "/bench_store_big_" + std::to_string(::getpid());
  o = tiny(dir);
  o.run_dram = o.run_policy = false;
  o.entry_bytes = 1ull << 30;
  o.traffic_bytes = 1ull << 50;  // 1 PiB: no filesystem here has that free
  try {
    cb::eval::bench_store(o);
    ADD_FAILURE() << "expected cb::Error";
  } catch (const cb::Error& e) {
    EXPECT_NE(std::string(e.what()).find("free"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(exists(dir));
}

TEST(BenchStoreTest, JournalRunGivesPositiveNumbersAndLeavesNothing) {
  const std::string dir = cb::test::tmp_dir() + "/bench_journal_" + std::to_string(::getpid());
  cb::eval::JournalBenchOptions o;
  o.dir = dir + "/made";  // a parent the bench makes, and removes
  o.entries = 300;
  o.entry_bytes = 2ull << 20;  // 4 tokens of 32 layers x 8 KiB, as tiny()
  o.chunk_bytes = 64ull << 10;
  o.reps = 1;
  o.commits = 5;
  const cb::eval::JournalBenchResult r = cb::eval::bench_journal(o);
  EXPECT_EQ(r.entries, 300u);
  EXPECT_GT(r.record_bytes, 64u * 16);  // 64 chunks' slots and checksums at least
  EXPECT_GT(r.journal_bytes, r.entries * r.record_bytes);  // and the start and end records
  EXPECT_GT(r.commit_us, 0);
  EXPECT_GT(r.append_sync_us, 0);
  EXPECT_GT(r.index_compact_s, 0);
  EXPECT_GT(r.online_compact_s, 0);
  // 0 when the committing thread made no commit while a compaction ran (a short one).
  EXPECT_GE(r.index_wait_ms, 0);
  EXPECT_GE(r.online_wait_ms, 0);
  EXPECT_GT(r.commit_ratio, 0);
  EXPECT_FALSE(exists(dir + "/made"));
  ::rmdir(dir.c_str());
}

}  // namespace
