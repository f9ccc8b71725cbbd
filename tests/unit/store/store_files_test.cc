// Store files that are not what the store wrote: a marker, journal or data file that is not a
// regular file (a FIFO) is refused and never opened to block; `store clear` checks every file
// before it removes any; files the user cannot read or write are named in the error, and a
// journal that cannot be read is never taken for an empty one; a new store never writes over
// a file named like its data files, and a scratch directory keeps what is not the store's.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "lib/core/error.h"
#include "lib/store/attention_store.h"
#include "lib/store/entry.h"
#include "lib/store/io_backend.h"
#include "lib/store/journal.h"
#include "lib/store/ssd_tier.h"
#include "lib/store/store_dir.h"
#include "tests/unit/store/store_test_util.h"

namespace cb::store {
namespace {

using testing::iota_positions;
using testing::save_entry;

constexpr uint64_t kChunk = 16 << 10;
const EntryShape kShape{4, 256};

StoreConfig ssd_cfg(const std::string& dir) {
  StoreConfig c;
  c.store_dir = dir;
  c.ssd_bytes = 256 * kChunk;
  c.chunk_bytes = kChunk;
  c.io_threads = 2;
  return c;
}

/// The message of the cb::Error `f` throws; "" (a failure) when it throws none.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    return e.what();
  }
  return std::string();
}

// A store file that is not a regular file (a FIFO) is refused, naming it, and never opened in
// a way that blocks: the marker when read, or when a store opens (with an SSD budget too,
// where a marker taken for none would be written into), the journal when opened for
// appending, and the journal's temporary file when a rewrite writes it (which leaves it).
TEST(StoreFiles, AStoreFileThatIsNotARegularFileIsRefusedNotOpened) {
  ::alarm(60);  // a blocked open ends as SIGALRM, which fails the test
  const std::string dir = testing::fresh_dir("fifo_files");
  {
    AttentionStore st(ssd_cfg(dir));
    ASSERT_TRUE(save_entry(st, 1, 1, kShape, iota_positions(64)));
  }
  const auto has = [](const std::string& m, const std::string& w) {
    return m.find(w) != std::string::npos;
  };
  const std::string marker = marker_path(dir), aside = dir + "/marker.aside";
  ASSERT_EQ(::rename(marker.c_str(), aside.c_str()), 0);
  ASSERT_EQ(::mkfifo(marker.c_str(), 0644), 0);
  const std::string not_regular = marker + ": the store's marker is not a regular file (a FIFO)";
  std::string e = error_of([&] { read_store_marker(dir); });
  EXPECT_TRUE(has(e, not_regular)) << e;
  e = error_of([&] { AttentionStore s(ssd_cfg(dir)); });
  EXPECT_TRUE(has(e, not_regular)) << e;
  StoreConfig as_is = ssd_cfg(dir);
  as_is.ssd_bytes = 0;  // open the store the marker describes
  e = error_of([&] { AttentionStore s(as_is); });
  EXPECT_TRUE(has(e, not_regular)) << e;
  e = error_of([&] { write_store_marker(dir, plan_store(256 * kChunk, kChunk)); });
  EXPECT_TRUE(has(e, not_regular)) << e;
  struct stat st {};
  EXPECT_TRUE(::stat(marker.c_str(), &st) == 0 && S_ISFIFO(st.st_mode));
  ASSERT_EQ(::unlink(marker.c_str()), 0);
  ASSERT_EQ(::rename(aside.c_str(), marker.c_str()), 0);

  const std::string tmp = journal_path(dir) + ".tmp";
  ASSERT_EQ(::mkfifo(tmp.c_str(), 0644), 0);
  e = error_of([&] { AttentionStore s(ssd_cfg(dir)); });  // opening rewrites the journal
  EXPECT_TRUE(has(e, journal_path(dir) + ": cannot rewrite journal: it is not a regular file"))
      << e;
  EXPECT_TRUE(::stat(tmp.c_str(), &st) == 0 && S_ISFIFO(st.st_mode));  // left, not removed
  ASSERT_EQ(::unlink(tmp.c_str()), 0);

  const std::string fifo = dir + "/a-fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  e = error_of([&] { Journal j(fifo); });
  EXPECT_TRUE(has(e, fifo + ": the store's journal is not a regular file (a FIFO)")) << e;
  EXPECT_THROW(Journal::replay(fifo), Error);
  EXPECT_THROW(Journal::begins_journal(fifo), Error);
  EXPECT_EQ(open_regular(fifo, O_WRONLY), kNotRegularFile);  // no reader: not a block either
  EXPECT_EQ(open_regular(dir, O_RDONLY), kNotRegularFile);
  ASSERT_EQ(::unlink(fifo.c_str()), 0);
  {
    AttentionStore again(ssd_cfg(dir));  // as it was
    EXPECT_EQ(again.sessions(), std::vector<SessionId>{1});
  }
  ::alarm(0);
  std::filesystem::remove_all(dir);
}

// `store clear` removes only regular files, as stat and verify tell the user, and checks every
// file it would remove before it removes any: a journal, marker or data file that is a FIFO
// or a directory is an error naming it, and the store is left whole (its data file too).
TEST(StoreFiles, ClearChecksEveryFileBeforeDeletingAny) {
  const std::string dir = testing::fresh_dir("clear_checks");
  const std::string cases[] = {journal_path(dir), marker_path(dir), data_file_path(dir, 0)};
  for (const std::string& victim : cases) {
    for (const bool as_dir : {true, false}) {
      {
        AttentionStore st(ssd_cfg(dir));
        ASSERT_TRUE(save_entry(st, 1, 1, kShape, iota_positions(64)));
      }
      const auto data_bytes = std::filesystem::file_size(data_file_path(dir, 0));
      ASSERT_EQ(::unlink(victim.c_str()), 0);
      ASSERT_EQ(as_dir ? ::mkdir(victim.c_str(), 0755) : ::mkfifo(victim.c_str(), 0644), 0);
      const std::string e = error_of([&] { clear_store_dir(dir); });
      EXPECT_NE(e.find(victim + ": a file of the store that is not a regular file (" +
                       (as_dir ? "a directory" : "a FIFO") + "), so nothing was deleted"),
                std::string::npos)
          << e;
      for (const std::string& p : cases) {
        EXPECT_TRUE(std::filesystem::exists(p)) << p << " deleted";
      }
      if (victim != data_file_path(dir, 0)) {
        EXPECT_EQ(std::filesystem::file_size(data_file_path(dir, 0)), data_bytes);
      }
      // Out of the way, the rest clears.
      std::filesystem::remove_all(victim);
      EXPECT_NO_THROW(clear_store_dir(dir));
      EXPECT_TRUE(std::filesystem::is_empty(dir)) << victim;
    }
  }
  std::filesystem::remove_all(dir);
}

// What clear takes for a store: a marker (even a malformed one), or a journal the store wrote,
// not files only named like a store's. A new store writes its journal before its data files,
// so one whose making stopped while it preallocated them is recognised too.
TEST(StoreFiles, HoldsStoreGoesByTheMarkerOrTheStoresJournal) {
  const std::string dir = testing::fresh_dir("holds_store");
  EXPECT_FALSE(holds_store(dir));
  std::ofstream(data_file_path(dir, 0)) << "someone's data\n";
  std::ofstream(journal_path(dir)) << "someone's notes\n";
  EXPECT_FALSE(holds_store(dir));
  std::filesystem::remove(journal_path(dir));
  Journal::rewrite(journal_path(dir), {});  // a store's, its marker not yet written
  EXPECT_TRUE(holds_store(dir));
  EXPECT_EQ(clear_store_dir(dir).size(), 2u);  // the journal and the data file
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  std::ofstream(marker_path(dir)) << "{";
  EXPECT_TRUE(holds_store(dir));
  std::filesystem::remove_all(dir);
}

// A data file this user may not write (the directory may be writable: only the file is
// read-only) is named in the fix, not the directory.
TEST(StoreFiles, AReadOnlyDataFileIsNamedInTheFix) {
  if (::geteuid() == 0) GTEST_SKIP() << "root ignores file permissions";
  const std::string dir = testing::fresh_dir("readonly_data");
  { AttentionStore st(ssd_cfg(dir)); }
  const std::string data = data_file_path(dir, 0);
  ASSERT_EQ(::chmod(data.c_str(), 0444), 0);
  const std::string e = error_of([&] { AttentionStore s(ssd_cfg(dir)); });
  EXPECT_NE(e.find(data + ": cannot open data file: "), std::string::npos) << e;
  EXPECT_NE(e.find("chmod u+rw " + data), std::string::npos) << e;
  EXPECT_EQ(e.find("make the store directory writable"), std::string::npos) << e;
  std::filesystem::remove_all(dir);
}

TEST(StoreFiles, AJournalThatCannotBeReadIsAnErrorNotAnEmptyJournal) {
  if (::geteuid() == 0) GTEST_SKIP() << "root ignores file permissions";
  const std::string dir = testing::fresh_dir("unreadable_journal");
  {
    AttentionStore st(ssd_cfg(dir));
    ASSERT_TRUE(save_entry(st, 1, 1, kShape, iota_positions(64)));
  }
  const std::string journal = journal_path(dir);
  const auto bytes = std::filesystem::file_size(journal);
  ASSERT_EQ(::chmod(journal.c_str(), 0200), 0);  // writable, not readable
  const std::string e = error_of([&] { AttentionStore s(ssd_cfg(dir)); });
  EXPECT_NE(e.find(journal + ": cannot read the store's journal: "), std::string::npos) << e;
  ASSERT_EQ(::chmod(journal.c_str(), 0644), 0);
  // The journal is as it was, and the entry is still there.
  EXPECT_EQ(std::filesystem::file_size(journal), bytes);
  AttentionStore st(ssd_cfg(dir));
  EXPECT_EQ(st.sessions(), (std::vector<SessionId>{1}));
  std::filesystem::remove_all(dir);
}

// A new store makes its data files exclusively: a file already named like one (here the
// second of three) is refused by name, left as it was, and the files the store had made before
// it are removed, not left half a store.
TEST(StoreFiles, ANewStoreNeverWritesOverNorRemovesAFileNamedLikeItsDataFile) {
  const std::string dir = testing::fresh_dir("existing_data");
  StoreDirInfo info;
  info.chunk_bytes = kChunk;
  info.slots_per_file = 4;
  info.ssd_bytes = 12 * kChunk;
  info.n_files = 3;
  const std::string theirs = data_file_path(dir, 1);
  std::ofstream(theirs) << "not the store's";
  const std::string e = error_of([&] { SsdTier t(dir, info, make_pread_backend(), true, true); });
  EXPECT_NE(e.find(theirs + ": exists already, and a new store does not write over it"),
            std::string::npos)
      << e;
  std::ifstream in(theirs);
  std::string kept((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(kept, "not the store's");
  EXPECT_FALSE(std::filesystem::exists(data_file_path(dir, 0)));
  EXPECT_FALSE(std::filesystem::exists(data_file_path(dir, 2)));
  // Without it, the same store is made whole.
  ASSERT_EQ(::unlink(theirs.c_str()), 0);
  { SsdTier t(dir, info, make_pread_backend(), true, true); }
  for (uint64_t i = 0; i < info.n_files; ++i) {
    EXPECT_EQ(std::filesystem::file_size(data_file_path(dir, i)), 4 * kChunk) << i;
  }
  std::filesystem::remove_all(dir);
}

// A scratch directory is removed by store clear's rules: the store's files and the caller's
// own, then the directory, which a file of anyone else's keeps, with that file.
TEST(StoreFiles, AScratchDirectoryKeepsWhatIsNotTheStores) {
  const std::string parent = testing::fresh_dir("scratch_parent");
  for (const bool other : {false, true}) {
    const std::string dir = make_scratch_dir(parent, "s-", "");
    const std::string again = make_scratch_dir(parent, "s-", "");
    EXPECT_NE(dir, again);  // fresh each time
    ASSERT_EQ(::rmdir(again.c_str()), 0);
    { AttentionStore st(ssd_cfg(dir)); }
    std::ofstream(dir + "/own") << "the caller's";
    if (other) std::ofstream(dir + "/notes") << "someone's";
    EXPECT_EQ(remove_scratch_dir(dir, "a test's", {dir + "/own"}), !other);
    if (other) {
      EXPECT_EQ(std::filesystem::directory_iterator(dir)->path().filename(), "notes");
      EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 1);
    } else {
      EXPECT_FALSE(std::filesystem::exists(dir));
    }
  }
  std::filesystem::remove_all(parent);
}

}  // namespace
}  // namespace cb::store
