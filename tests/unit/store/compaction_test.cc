// Online journal compaction (Journal::compact_from, started by AttentionStore's commits): it
// runs off the store's lock, keeps the records appended while it ran, and gives way to a
// compaction from the index when the records are damaged or the journal was rewritten.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lib/store/attention_store.h"
#include "lib/store/journal.h"
#include "lib/store/store_dir.h"
#include "tests/unit/store/store_test_util.h"

namespace cb::store {
namespace {

using testing::iota_positions;
using testing::load_check;
using testing::save_entry;

constexpr uint64_t kChunk = 16 << 10;
const EntryShape kShape{4, 256};

std::string fd_path(int fd) {
  char buf[4096];
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = ::readlink(link.c_str(), buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

bool ends_with(const std::string& s, const std::string& end) {
  return s.size() >= end.size() && s.compare(s.size() - end.size(), end.size(), end) == 0;
}

// The journal's syncs: the online compaction's first sync of its new file can be held until
// released (10 s at most), and the next append's sync can be made to fail.
struct SyncGate {
  std::mutex mu;
  std::condition_variable cv;
  bool armed = false, entered = false, released = false, timed_out = false;
  std::atomic<int> fail_appends{0};
  std::atomic<bool> fail_compactions{false};
  std::atomic<int> fail_compaction_sync{0};  // fail this one (1: the first) of the syncs
  std::atomic<int> compaction_syncs{0};      // syncs of a compaction's new file

  int sync(int fd) {
    const std::string path = fd_path(fd);
    if (ends_with(path, ".compact")) {
      const int n = ++compaction_syncs;
      if (fail_compactions || n == fail_compaction_sync) return -EIO;
      std::unique_lock<std::mutex> l(mu);
      if (armed) {
        armed = false;
        entered = true;
        cv.notify_all();
        timed_out = !cv.wait_for(l, std::chrono::seconds(10), [&] { return released; });
      }
    } else if (ends_with(path, "/journal.cbj") && fail_appends.load() > 0) {
      --fail_appends;
      return -EIO;
    }
    return ::fdatasync(fd) == 0 ? 0 : -errno;
  }
  bool wait_entered() {
    std::unique_lock<std::mutex> l(mu);
    return cv.wait_for(l, std::chrono::seconds(10), [&] { return entered; });
  }
  void release() {
    std::lock_guard<std::mutex> l(mu);
    released = true;
    cv.notify_all();
  }
  bool held_to_the_end() {
    std::lock_guard<std::mutex> l(mu);
    return !timed_out;
  }
};

StoreConfig cfg(const std::string& dir, const std::shared_ptr<SyncGate>& gate) {
  StoreConfig c;
  c.store_dir = dir;
  c.ssd_bytes = 4096 * kChunk;
  c.chunk_bytes = kChunk;
  c.io_threads = 2;
  c.journal_compact_bytes = 8 << 10;  // a few records of 70 tokens each
  if (gate) c.journal_sync = [gate](int fd) { return gate->sync(fd); };
  return c;
}

const std::vector<int64_t>& pos() {
  static const std::vector<int64_t> p = iota_positions(70);
  return p;
}

// Sessions 1-20 but `erased`, then `added`: what the tests below leave in the store.
std::vector<SessionId> saved_then(SessionId erased, SessionId added) {
  std::vector<SessionId> out;
  for (SessionId s = 1; s <= 20; ++s) {
    if (s != erased) out.push_back(s);
  }
  out.push_back(added);
  return out;
}

// The store holds exactly `want`, each session's entry whole, its contents seeded `seed(s)`.
void expect_holds(
    AttentionStore& st, const std::vector<SessionId>& want,
    const std::function<uint64_t(SessionId)>& seed = [](SessionId s) { return s; }) {
  EXPECT_EQ(st.sessions(), want);
  for (SessionId s : want) EXPECT_EQ(load_check(st, s, seed(s), kShape, pos()), 70) << s;
}

bool compact_file_left(const std::string& dir) {
  return std::filesystem::exists(journal_path(dir) + ".compact");
}

// While the compaction waits on its sync, loads, saves and erases go on, and what they
// journal meanwhile (after the compaction's mark) is in the journal that replaces the old.
TEST(Compaction, SavesLoadsAndErasesGoOnWhileTheJournalIsCompacted) {
  const std::string dir = testing::fresh_dir("compact_online");
  auto gate = std::make_shared<SyncGate>();
  gate->armed = true;
  {
    AttentionStore st(cfg(dir, gate));
    for (SessionId s = 1; s <= 20; ++s) {
      ASSERT_TRUE(save_entry(st, s, s, kShape, pos()));
      // A load changes an entry's access time without a record: the compaction keeps it.
      // (Its threshold is crossed later: 8 KiB is more than a dozen of these records.)
      if (s == 3) {
        ASSERT_EQ(load_check(st, 1, 1, kShape, pos()), 70);
      }
    }
    ASSERT_TRUE(gate->wait_entered()) << "20 saves did not start a compaction";
    // The compaction is held: none of these may wait for it.
    EXPECT_EQ(load_check(st, 3, 3, kShape, pos()), 70);
    EXPECT_TRUE(save_entry(st, 100, 100, kShape, pos()));
    EXPECT_TRUE(st.erase(2));
    EXPECT_TRUE(save_entry(st, 5, 55, kShape, pos()));  // replaces session 5's entry
    EXPECT_TRUE(gate->held_to_the_end()) << "an operation waited for the compaction";
    gate->release();
    st.wait_idle();
    EXPECT_GE(st.stats().get(Counter::JournalCompactions), 1u);
    EXPECT_EQ(st.stats().get(Counter::JournalIndexCompactions), 0u);
    EXPECT_EQ(st.stats().get(Counter::IoErrors), 0u);
    EXPECT_FALSE(compact_file_left(dir));
    const ReplayResult r = Journal::replay(journal_path(dir));
    ASSERT_TRUE(r.entries.count(1) && r.entries.count(3));
    EXPECT_GT(r.entries.at(1).last_access, r.entries.at(3).last_access);
  }
  AttentionStore st(cfg(dir, nullptr));
  expect_holds(st, saved_then(2, 100), [](SessionId s) { return s == 5 ? uint64_t{55} : s; });
  EXPECT_EQ(st.stats().get(Counter::DiscardedRecords), 0u);
  EXPECT_EQ(st.stats().get(Counter::DiscardedEntries), 0u);
  std::filesystem::remove_all(dir);
}

// Records damaged on the disk after they were written: the online compaction cannot rebuild
// the live set from them, so the journal is compacted from the index, and nothing is lost.
TEST(Compaction, DamagedRecordsAreCompactedFromTheIndex) {
  const std::string dir = testing::fresh_dir("compact_damaged");
  {
    AttentionStore st(cfg(dir, nullptr));
    for (SessionId s = 1; s <= 5; ++s) ASSERT_TRUE(save_entry(st, s, s, kShape, pos()));
    const std::string j = journal_path(dir);
    const auto size = std::filesystem::file_size(j);
    {
      std::fstream f(j, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(static_cast<std::streamoff>(size / 2));
      const std::string junk(16, '\xab');
      f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
    }
    for (SessionId s = 6; s <= 25; ++s) ASSERT_TRUE(save_entry(st, s, s, kShape, pos()));
    st.wait_idle();
    EXPECT_GE(st.stats().get(Counter::JournalIndexCompactions), 1u);
    EXPECT_FALSE(compact_file_left(dir));
  }
  AttentionStore st(cfg(dir, nullptr));
  std::vector<SessionId> want;
  for (SessionId s = 1; s <= 25; ++s) want.push_back(s);
  expect_holds(st, want);
  EXPECT_EQ(st.stats().get(Counter::CorruptJournalBytes), 0u);
  std::filesystem::remove_all(dir);
}

// A failed append sync breaks the journal; the next commit rewrites it from the index while
// an online compaction is held. That compaction then gives way: it must not replace the
// rewritten journal with its older records.
TEST(Compaction, ARewriteFromTheIndexSupersedesTheOnlineCompaction) {
  const std::string dir = testing::fresh_dir("compact_superseded");
  auto gate = std::make_shared<SyncGate>();
  gate->armed = true;
  {
    AttentionStore st(cfg(dir, gate));
    for (SessionId s = 1; s <= 20; ++s) ASSERT_TRUE(save_entry(st, s, s, kShape, pos()));
    ASSERT_TRUE(gate->wait_entered());
    gate->fail_appends = 1;
    EXPECT_TRUE(save_entry(st, 30, 30, kShape, pos()));  // its commit is the rewrite
    EXPECT_EQ(gate->fail_appends.load(), 0);
    EXPECT_EQ(st.stats().get(Counter::JournalIndexCompactions), 1u);
    EXPECT_TRUE(st.erase(4));  // appended to the rewritten journal
    gate->release();
    st.wait_idle();
    EXPECT_EQ(st.stats().get(Counter::JournalIndexCompactions), 1u);
    EXPECT_EQ(st.stats().get(Counter::JournalCompactions), 1u);  // the online one gave way
    EXPECT_FALSE(compact_file_left(dir));
  }
  AttentionStore st(cfg(dir, nullptr));
  expect_holds(st, saved_then(4, 30));
  std::filesystem::remove_all(dir);
}

// A record the store did not write (here a newer version of session 3, written beside it):
// the records no longer hold what the index does, so the journal is compacted from the index,
// which drops it, rather than carried into the compacted journal.
TEST(Compaction, RecordsTheIndexDoesNotHoldAreCompactedFromTheIndex) {
  const std::string dir = testing::fresh_dir("compact_foreign");
  {
    AttentionStore st(cfg(dir, nullptr));
    for (SessionId s = 1; s <= 5; ++s) ASSERT_TRUE(save_entry(st, s, s, kShape, pos()));
    EntryMeta m;
    ASSERT_TRUE(st.entry_meta(3, &m));
    m.generation += 1000;
    m.tokens = testing::tokens_for(33, pos());
    m.hash_tokens();
    {
      Journal other(journal_path(dir));
      ASSERT_TRUE(other.commit(m, true));
    }
    for (SessionId s = 6; s <= 25; ++s) ASSERT_TRUE(save_entry(st, s, s, kShape, pos()));
    st.wait_idle();
    EXPECT_EQ(st.stats().get(Counter::JournalIndexCompactions), 1u);
  }
  AttentionStore st(cfg(dir, nullptr));
  EXPECT_EQ(st.sessions().size(), 25u);
  EXPECT_EQ(load_check(st, 3, 3, kShape, pos()), 70);
  std::filesystem::remove_all(dir);
}

// A compaction that cannot write its new file leaves the journal as it was, says why, and is
// not tried again at every commit (each try reads and writes the whole journal).
TEST(Compaction, AFailedCompactionKeepsTheJournalAndWaitsBeforeTheNextTry) {
  const std::string dir = testing::fresh_dir("compact_failed");
  auto gate = std::make_shared<SyncGate>();
  gate->fail_compactions = true;
  {
    AttentionStore st(cfg(dir, gate));
    for (SessionId s = 1; s <= 60; ++s) {
      ASSERT_TRUE(save_entry(st, s, s, kShape, pos()));
      st.wait_idle();  // each commit sees the last try's outcome
    }
    const int tries = gate->compaction_syncs.load();
    EXPECT_GE(tries, 2);
    EXPECT_LE(tries, 20) << "a try at almost every commit past the threshold";
    EXPECT_EQ(st.stats().get(Counter::JournalCompactions), 0u);
    EXPECT_EQ(st.stats().get(Counter::IoErrors), static_cast<uint64_t>(tries));
    EXPECT_NE(st.first_io_error().find(journal_path(dir) + ": cannot write the compacted journal " +
                                       journal_path(dir) + ".compact"),
              std::string::npos)
        << st.first_io_error();
    EXPECT_FALSE(compact_file_left(dir));
    gate->fail_compactions = false;
    for (SessionId s = 61; s <= 80; ++s) ASSERT_TRUE(save_entry(st, s, s, kShape, pos()));
    st.wait_idle();
    EXPECT_GE(st.stats().get(Counter::JournalCompactions), 1u);
  }
  AttentionStore st(cfg(dir, nullptr));
  EXPECT_EQ(st.sessions().size(), 80u);
  for (SessionId s : st.sessions()) EXPECT_EQ(load_check(st, s, s, kShape, pos()), 70) << s;
  std::filesystem::remove_all(dir);
}

// The records appended during the compaction cannot be made durable in its new file (its
// second sync fails): the new file goes, the journal stays as it was, and the failure names it.
TEST(Compaction, AFailedSyncOfTheRecordsAppendedMeanwhileKeepsTheJournal) {
  const std::string dir = testing::fresh_dir("compact_tail_sync");
  auto gate = std::make_shared<SyncGate>();
  gate->fail_compaction_sync = 2;
  {
    AttentionStore st(cfg(dir, gate));
    for (SessionId s = 1; s <= 20; ++s) {
      ASSERT_TRUE(save_entry(st, s, s, kShape, pos()));
      st.wait_idle();
    }
    EXPECT_GE(gate->compaction_syncs.load(), 2);
    EXPECT_EQ(st.stats().get(Counter::IoErrors), 1u);  // a later try (if any) succeeds
    EXPECT_NE(st.first_io_error().find("cannot append to " + journal_path(dir) + ".compact"),
              std::string::npos)
        << st.first_io_error();
    EXPECT_FALSE(compact_file_left(dir));
  }
  AttentionStore st(cfg(dir, nullptr));
  EXPECT_EQ(st.sessions().size(), 20u);
  for (SessionId s : st.sessions()) EXPECT_EQ(load_check(st, s, s, kShape, pos()), 70) << s;
  EXPECT_EQ(st.stats().get(Counter::DiscardedRecords), 0u);
  std::filesystem::remove_all(dir);
}

// A crash during an online compaction leaves its new file: the next open removes it, as does
// `store clear`.
TEST(Compaction, AFileLeftByACrashedCompactionIsRemoved) {
  const std::string dir = testing::fresh_dir("compact_leftover");
  const std::string left = journal_path(dir) + ".compact";
  const auto leave = [&] { std::ofstream(left) << "a compaction cut short"; };
  { AttentionStore st(cfg(dir, nullptr)); }
  leave();
  {
    AttentionStore st(cfg(dir, nullptr));
    EXPECT_FALSE(compact_file_left(dir));
  }
  leave();
  const std::vector<std::string> removed = clear_store_dir(dir);
  EXPECT_NE(std::find(removed.begin(), removed.end(), left), removed.end());
  EXPECT_FALSE(compact_file_left(dir));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cb::store
