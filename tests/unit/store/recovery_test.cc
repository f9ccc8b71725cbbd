// Durability: reopening a store directory recovers every completed SSD entry (after
// erases and truncations), discards torn journal tails, and a SIGKILLed writer loses at
// most the entry it was writing.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <utility>

#include "lib/core/error.h"
#include "lib/store/attention_store.h"
#include "lib/store/entry.h"
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

StoreConfig ssd_cfg(const std::string& dir, uint64_t dram = 0) {
  StoreConfig c;
  c.store_dir = dir;
  c.ssd_bytes = 256 * kChunk;
  c.dram_bytes = dram;
  c.chunk_bytes = kChunk;
  c.io_threads = 2;
  return c;
}

/// Refuses every file of this process more bytes than the store's journal in `dir` has now
/// (RLIMIT_FSIZE; SIGXFSZ ignored, so a write fails with EFBIG): the journal cannot grow, as on
/// a full disk, while data files smaller than it are still written. For forked children.
void cap_file_size_at_journal(const std::string& dir) {
  ::signal(SIGXFSZ, SIG_IGN);
  const rlimit lim{static_cast<rlim_t>(std::filesystem::file_size(journal_path(dir))),
                   RLIM_INFINITY};
  ::setrlimit(RLIMIT_FSIZE, &lim);
}

/// Saves session 1 (seed 1) again and again, an erase and a commit each, until the journal in
/// `dir` is past `bytes`; false when a save fails.
bool grow_journal_past(AttentionStore& st, const std::string& dir, uint64_t bytes,
                       const std::vector<int64_t>& pos) {
  while (std::filesystem::file_size(journal_path(dir)) <= bytes) {
    if (!save_entry(st, 1, 1, kShape, pos)) return false;
  }
  return true;
}

TEST(Recovery, ReopenRecoversCompletedEntries) {
  const std::string dir = testing::fresh_dir("reopen");
  std::vector<int64_t> kept;
  {
    AttentionStore st(ssd_cfg(dir));
    for (SessionId s = 1; s <= 10; ++s) {
      ASSERT_TRUE(save_entry(st, s, s, kShape, iota_positions(static_cast<int64_t>(30 + 20 * s))));
    }
    EXPECT_TRUE(st.erase(3));
    ASSERT_TRUE(save_entry(st, 4, 400, kShape, iota_positions(90)));  // replaced
    ASSERT_TRUE(st.truncate(5, TruncateSpec{64, 0, 0}));              // aligned: metadata
    ASSERT_TRUE(st.truncate(6, TruncateSpec{10, 0, 3}));              // unaligned: rewrite
    auto pos6 = iota_positions(150);
    kept.assign(pos6.begin(), pos6.begin() + 3);
    kept.insert(kept.end(), pos6.begin() + 13, pos6.end());
    // An entry mid-save when the process "ends": never committed.
    SaveHandle h = st.begin_save(SaveRequest{99, testing::test_fp(), KeyEncoding::PreRope, kShape,
                                             testing::tokens_for(99, iota_positions(64))});
    ASSERT_TRUE(h.ok());
  }
  AttentionStore st(ssd_cfg(dir));
  EXPECT_EQ(st.stats().get(Counter::RecoveredEntries), 9u);
  EXPECT_EQ(st.sessions(), (std::vector<SessionId>{1, 2, 4, 5, 6, 7, 8, 9, 10}));
  for (SessionId s : {1, 2, 7, 8, 9, 10}) {
    auto pos = iota_positions(static_cast<int64_t>(30 + 20 * s));
    EXPECT_EQ(load_check(st, s, s, kShape, pos), static_cast<int64_t>(pos.size())) << s;
  }
  EXPECT_EQ(load_check(st, 4, 400, kShape, iota_positions(90)), 90);
  auto pos5 = iota_positions(130);
  std::vector<int64_t> kept5(pos5.begin() + 64, pos5.end());
  EXPECT_EQ(load_check(st, 5, 5, kShape, kept5), 66);
  EXPECT_EQ(load_check(st, 6, 6, kShape, kept), 140);
  // Another model (or key encoding) never loads these entries.
  EXPECT_EQ(load_check(st, 1, 1, kShape, iota_positions(50), KeyEncoding::PreRope,
                       testing::test_fp("llama-13b/40x40x128/f16")),
            -1);
  EXPECT_EQ(load_check(st, 1, 1, kShape, iota_positions(50), KeyEncoding::PostRope), -1);
  uint64_t chunks = 0;
  EXPECT_EQ(st.verify_all(&chunks), 0u);
  EXPECT_EQ(st.accounting_errors(), 0u);
  EXPECT_EQ(st.audit_slots(), "");
  std::filesystem::remove_all(dir);
}

TEST(Recovery, TornJournalTailAndDramEntriesAreNotRecovered) {
  const std::string dir = testing::fresh_dir("torn");
  {
    AttentionStore st(ssd_cfg(dir, 16 * kChunk));
    for (SessionId s = 1; s <= 4; ++s)
      ASSERT_TRUE(save_entry(st, s, s, kShape, iota_positions(64)));
  }
  {
    std::ofstream j(journal_path(dir), std::ios::app | std::ios::binary);
    j << "CBJ1 this is a torn record";
  }
  AttentionStore st(ssd_cfg(dir, 16 * kChunk));
  // Entries 1 and 2 were demoted to SSD; 3 and 4 lived in DRAM only.
  EXPECT_EQ(st.sessions(), (std::vector<SessionId>{1, 2}));
  EXPECT_EQ(st.stats().get(Counter::DiscardedRecords), 1u);
  for (SessionId s = 1; s <= 2; ++s)
    EXPECT_EQ(load_check(st, s, s, kShape, iota_positions(64)), 64);
  std::filesystem::remove_all(dir);
}

// A store's journal begins with its start record from creation on, so a journal deleted or
// emptied is reported lost (the entries it indexed are gone), not taken for a store that never
// saved. A store made before the start record (marker version 1) cannot tell; it is marked
// version 2 once opened, when its journal has been rewritten with one.
TEST(Recovery, AnEmptiedOrMissingJournalIsReportedLost) {
  const std::string dir = testing::fresh_dir("lost");
  {
    AttentionStore st(ssd_cfg(dir));
    EXPECT_EQ(st.stats().get(Counter::JournalLost), 0u);  // a new store
    for (SessionId s = 1; s <= 3; ++s)
      ASSERT_TRUE(save_entry(st, s, s, kShape, iota_positions(64)));
  }
  EXPECT_EQ(read_store_marker(dir).version, kStoreVersion);
  {
    AttentionStore st(ssd_cfg(dir));
    EXPECT_EQ(st.stats().get(Counter::JournalLost), 0u);
    EXPECT_EQ(st.sessions().size(), 3u);
  }
  {  // a damaged start record is corruption, not loss: the records after it are read
    std::fstream f(journal_path(dir), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(24);
    f.put('#');
  }
  {
    AttentionStore st(ssd_cfg(dir));
    EXPECT_EQ(st.stats().get(Counter::JournalLost), 0u);
    EXPECT_GT(st.stats().get(Counter::CorruptJournalBytes), 0u);
    EXPECT_EQ(st.sessions().size(), 3u);
  }
  std::filesystem::resize_file(journal_path(dir), 0);
  {
    AttentionStore st(ssd_cfg(dir));
    EXPECT_EQ(st.stats().get(Counter::JournalLost), 1u);
    EXPECT_TRUE(st.sessions().empty());
    ASSERT_TRUE(save_entry(st, 4, 4, kShape, iota_positions(64)));
  }
  std::filesystem::remove(journal_path(dir));
  {
    AttentionStore st(ssd_cfg(dir));
    EXPECT_EQ(st.stats().get(Counter::JournalLost), 1u);
  }
  {
    AttentionStore st(ssd_cfg(dir));  // the last open wrote a journal with its start record
    EXPECT_EQ(st.stats().get(Counter::JournalLost), 0u);
  }
  // Version 1: an emptied journal cannot be told from a store that never saved.
  StoreDirInfo info = read_store_marker(dir);
  info.version = 1;
  write_store_marker(dir, info);
  std::filesystem::resize_file(journal_path(dir), 0);
  {
    AttentionStore st(ssd_cfg(dir));
    EXPECT_EQ(st.stats().get(Counter::JournalLost), 0u);
  }
  EXPECT_EQ(read_store_marker(dir).version, kStoreVersion);
  std::filesystem::resize_file(journal_path(dir), 0);
  {
    AttentionStore st(ssd_cfg(dir));
    EXPECT_EQ(st.stats().get(Counter::JournalLost), 1u);
  }
  std::filesystem::remove_all(dir);
}

std::string read_journal(const std::string& dir) {
  std::ifstream f(journal_path(dir), std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// Opening a store rewrites its journal atomically (temporary file, rename): a start record,
// one commit per entry, an end record. No crash tears those, so a journal that ends inside
// them, torn mid-record or cut on a record boundary, lost committed entries: reported as
// `journal_cut` (store verify: corruption), the entries before the cut kept.
TEST(Recovery, AJournalCutInsideItsRewrittenRecordsIsReported) {
  const std::string dir = testing::fresh_dir("cut");
  {
    AttentionStore st(ssd_cfg(dir));
    for (SessionId s = 1; s <= 6; ++s)
      ASSERT_TRUE(save_entry(st, s, s, kShape, iota_positions(64)));
  }
  { AttentionStore st(ssd_cfg(dir)); }  // rewritten: start, six commits, end; nothing appended
  const std::string whole = read_journal(dir);
  for (const size_t cut : {whole.size() / 2, whole.size() - 28 /* the end record */}) {
    {
      std::ofstream f(journal_path(dir), std::ios::binary | std::ios::trunc);
      f << whole.substr(0, cut);
    }
    const ReplayResult r = Journal::replay(journal_path(dir));
    EXPECT_TRUE(r.started);
    EXPECT_FALSE(r.sealed);
    EXPECT_TRUE(journal_cut(r, kStoreVersion)) << cut;
    {
      AttentionStore st(ssd_cfg(dir));
      EXPECT_EQ(st.stats().get(Counter::JournalCut), 1u) << cut;
      EXPECT_EQ(st.stats().get(Counter::JournalLost), 0u);
      EXPECT_EQ(st.stats().get(Counter::CorruptJournalBytes), 0u);  // no damaged bytes
      const size_t kept = st.sessions().size();
      EXPECT_EQ(kept, cut == whole.size() / 2 ? r.entries.size() : 6u) << cut;
      if (cut == whole.size() / 2) {
        EXPECT_LT(kept, 6u);
      }
      for (SessionId s : st.sessions())
        EXPECT_EQ(load_check(st, s, s, kShape, iota_positions(64)), 64);
    }
    {
      AttentionStore st(ssd_cfg(dir));  // rewritten whole by the last open
      EXPECT_EQ(st.stats().get(Counter::JournalCut), 0u);
    }
    std::ofstream f(journal_path(dir), std::ios::binary | std::ios::trunc);
    f << whole;
  }
  // A store of marker version 2 was written without end records: it cannot tell, reads the
  // journal as it is, and is marked version 3 once its journal is rewritten.
  {
    std::ofstream f(journal_path(dir), std::ios::binary | std::ios::trunc);
    f << whole.substr(0, whole.size() - 28);
  }
  StoreDirInfo info = read_store_marker(dir);
  info.version = 2;
  write_store_marker(dir, info);
  {
    AttentionStore st(ssd_cfg(dir));
    EXPECT_EQ(st.stats().get(Counter::JournalCut), 0u);
    EXPECT_EQ(st.sessions().size(), 6u);
  }
  EXPECT_EQ(read_store_marker(dir).version, kStoreVersion);
  EXPECT_TRUE(Journal::replay(journal_path(dir)).sealed);
  std::filesystem::remove_all(dir);
}

// The records appended after the rewrite's end record are what a crash can tear: a torn last
// record there is an interrupted append, discarded without loss of anything committed, and
// not a cut (a journal cut there cannot be told from one: nothing is left of what followed).
TEST(Recovery, ATornLastAppendIsNotACut) {
  const std::string dir = testing::fresh_dir("torn_append");
  { AttentionStore st(ssd_cfg(dir)); }
  {
    AttentionStore st(ssd_cfg(dir));
    for (SessionId s = 1; s <= 4; ++s)
      ASSERT_TRUE(save_entry(st, s, s, kShape, iota_positions(64)));
  }
  const std::string whole = read_journal(dir);
  {
    std::ofstream f(journal_path(dir), std::ios::binary | std::ios::trunc);
    f << whole.substr(0, whole.size() - 100);  // inside the last commit
  }
  const ReplayResult r = Journal::replay(journal_path(dir));
  EXPECT_TRUE(r.sealed);
  EXPECT_FALSE(journal_cut(r, kStoreVersion));
  AttentionStore st(ssd_cfg(dir));
  EXPECT_EQ(st.stats().get(Counter::JournalCut), 0u);
  EXPECT_EQ(st.stats().get(Counter::JournalLost), 0u);
  EXPECT_EQ(st.stats().get(Counter::CorruptJournalBytes), 0u);
  EXPECT_EQ(st.stats().get(Counter::DiscardedRecords), 1u);
  EXPECT_EQ(st.sessions().size(), 3u);  // the torn commit's entry only
  std::filesystem::remove_all(dir);
}

// A corrupt record inside the journal (not its tail) loses that record only: the replay
// resumes at the next intact record, and the journal as found is kept before compaction.
TEST(Recovery, ACorruptRecordMidJournalLosesOnlyItsOwnEntry) {
  const std::string dir = testing::fresh_dir("midcorrupt");
  {
    AttentionStore st(ssd_cfg(dir));
    for (SessionId s = 1; s <= 5; ++s) {
      ASSERT_TRUE(save_entry(st, s, s, kShape, iota_positions(64)));
    }
  }
  std::string j;
  {
    std::ifstream f(journal_path(dir), std::ios::binary);
    j.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  // Records: a 20-byte header (magic, type, length, checksum), then the payload. The new
  // store's rewrite wrote a start and an end record; flip a byte in the payload of the first
  // commit appended after them.
  uint32_t len0 = 0, len_end = 0, len1 = 0;
  std::memcpy(&len0, &j[8], 4);
  std::memcpy(&len_end, &j[20 + len0 + 8], 4);
  const size_t second = 20 + len0 + 20 + len_end;
  std::memcpy(&len1, &j[second + 8], 4);
  ASSERT_LT(second + 20 + len1, j.size());
  j[second + 20 + len1 / 2] ^= 0x40;
  {
    std::ofstream f(journal_path(dir), std::ios::binary | std::ios::trunc);
    f << j;
  }
  {
    AttentionStore st(ssd_cfg(dir));
    const std::vector<SessionId> s = st.sessions();
    EXPECT_EQ(s.size(), 4u);  // which session the second record held depends on commit order
    EXPECT_EQ(st.stats().get(Counter::CorruptJournalBytes), 20u + len1);
    for (SessionId id : s) EXPECT_EQ(load_check(st, id, id, kShape, iota_positions(64)), 64);
    std::ifstream kept(journal_path(dir) + ".corrupt-1", std::ios::binary);
    const std::string k((std::istreambuf_iterator<char>(kept)), std::istreambuf_iterator<char>());
    EXPECT_EQ(k, j);
  }
  {
    AttentionStore st(ssd_cfg(dir));  // compacted: nothing corrupt any more
    EXPECT_EQ(st.sessions().size(), 4u);
    EXPECT_EQ(st.stats().get(Counter::CorruptJournalBytes), 0u);
  }
  const auto removed = clear_store_dir(dir);
  EXPECT_NE(std::find(removed.begin(), removed.end(), journal_path(dir) + ".corrupt-1"),
            removed.end());
  EXPECT_FALSE(std::filesystem::exists(journal_path(dir) + ".corrupt-1"));
  std::filesystem::remove_all(dir);
}

// A store whose data file went missing is damaged: reopening it is an error naming the file
// (it was made anew, full of zeros, and every entry failed its checksums), and clearing it
// works, as it does when the marker itself is malformed.
TEST(Recovery, AMissingDataFileIsAnErrorAndClearStartsOver) {
  const std::string dir = testing::fresh_dir("missing_data");
  {
    AttentionStore st(ssd_cfg(dir));
    ASSERT_TRUE(save_entry(st, 1, 1, kShape, iota_positions(64)));
  }
  ASSERT_EQ(::unlink(data_file_path(dir, 0).c_str()), 0);
  try {
    AttentionStore st(ssd_cfg(dir));
    ADD_FAILURE() << "opened a store without its data file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("data-0000.bin"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(data_file_path(dir, 0)));  // not made anew
  EXPECT_EQ(clear_store_dir(dir).size(), 2u);                     // journal, marker
  {
    AttentionStore st(ssd_cfg(dir));  // a fresh store, then a malformed marker
  }
  {
    std::ofstream m(dir + "/cachebench_store.json", std::ios::trunc);
    m << "{\"format\": \"cache";
  }
  auto removed = clear_store_dir(dir);
  EXPECT_EQ(removed.size(), 3u);  // data file, journal, marker
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  {
    AttentionStore st(ssd_cfg(dir));  // a fresh store, then its marker deleted
  }
  ASSERT_EQ(::unlink(marker_path(dir).c_str()), 0);
  removed = clear_store_dir(dir);
  EXPECT_EQ(removed.size(), 2u);  // data file, journal
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  EXPECT_THROW(clear_store_dir(dir), Error);  // nothing of a store: not one
  // Files only named like a store's (no marker, and a journal.cbj the store did not write)
  // are not a store: nothing is deleted.
  for (const std::string& p : {data_file_path(dir, 0), data_file_path(dir, 1), journal_path(dir)}) {
    std::ofstream(p) << "someone's notes\n";
  }
  EXPECT_THROW(clear_store_dir(dir), Error);
  EXPECT_TRUE(std::filesystem::exists(data_file_path(dir, 0)));
  EXPECT_TRUE(std::filesystem::exists(data_file_path(dir, 1)));
  EXPECT_TRUE(std::filesystem::exists(journal_path(dir)));
  std::filesystem::remove_all(dir);
}

// Writes `body` as the store marker of `dir` and returns read_store_marker's error, which
// must call the marker malformed (a failure, and "", when the body is accepted).
std::string marker_read_error(const std::string& dir, const std::string& body) {
  {
    std::ofstream m(marker_path(dir), std::ios::trunc);
    m << body;
  }
  try {
    read_store_marker(dir);
    ADD_FAILURE() << "accepted " << body;
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(marker_path(dir) + ": malformed store marker: "), std::string::npos) << m;
    return m;
  }
  return std::string();
}

// A marker that is not one of ours (no "format", another format, not an object) says so in
// words, not in the JSON library's.
TEST(Recovery, AMarkerOfAnotherFormatIsNamedSo) {
  const std::string dir = testing::fresh_dir("other_marker");
  const std::pair<const char*, const char*> cases[] = {
      {"{}", "no \"format\" field"},
      {"[1, 2]", "no \"format\" field"},
      {R"({"format": 3})", "no \"format\" field"},
      {R"({"format": "other-tool"})", R"("format" is "other-tool", not "cachebench-store")"}};
  for (const auto& [body, want] : cases) {
    const std::string m = marker_read_error(dir, body);
    EXPECT_NE(m.find(marker_path(dir) + ": malformed store marker: " + want), std::string::npos)
        << m;
    EXPECT_EQ(m.find("json.exception"), std::string::npos) << m;
  }
  std::filesystem::remove_all(dir);
}

// The marker's geometry sizes what opening the store allocates (a bit per slot) and how many
// data files `store clear` visits, so only what plan_store writes is accepted: a float (whose
// conversion was undefined behaviour), 2^50 slots (a 128 TiB allocation) or 2^62 files are
// malformed, said in one line naming the marker; `store clear` still removes such a marker.
TEST(Recovery, MarkerGeometryIsCheckedBeforeUse) {
  const std::string dir = testing::fresh_dir("bad_marker");
  const auto marker_error = [&](const std::string& chunk, const std::string& ssd,
                                const std::string& per_file, const std::string& files) {
    return marker_read_error(
        dir, R"({"format": "cachebench-store", "version": 1, "chunk_bytes": )" + chunk +
                 R"(, "ssd_bytes": )" + ssd + R"(, "slots_per_file": )" + per_file +
                 R"(, "n_files": )" + files + "}");
  };
  write_store_marker(dir, plan_store(64 << 20, 1 << 20));
  EXPECT_EQ(read_store_marker(dir).n_slots(), 64u);
  const auto has = [](const std::string& m, const std::string& w) {
    return m.find(w) != std::string::npos;
  };
  std::string e = marker_error("1e30", "4096", "1", "1");
  EXPECT_TRUE(has(e, "\"chunk_bytes\" is a JSON number, not a non-negative integer")) << e;
  e = marker_error("4096", "-1.5", "1", "1");
  EXPECT_TRUE(has(e, "\"ssd_bytes\" is a JSON number, not a non-negative integer")) << e;
  e = marker_error("4096", "4096", "[1]", "1");
  EXPECT_TRUE(has(e, "\"slots_per_file\" is a JSON array")) << e;
  e = marker_error("4096", "4611686018427387904", "1125899906842624", "1");  // 2^50 slots
  EXPECT_TRUE(has(e, "inconsistent geometry")) << e;
  e = marker_error("4096", "4096", "1", "4611686018427387904");  // 2^62 data files
  EXPECT_TRUE(has(e, "inconsistent geometry")) << e;
  e = marker_error("4096", "8192", "18446744073709551615", "0");  // no file for the slots
  EXPECT_TRUE(has(e, "inconsistent geometry")) << e;
  e = marker_error("4096", "6000", "2", "1");  // not whole slots
  EXPECT_TRUE(has(e, "inconsistent geometry")) << e;
  EXPECT_EQ(clear_store_dir(dir).size(), 1u);  // the marker
  std::filesystem::remove_all(dir);
}

// Store creation preallocates the data files before it writes the marker, so a short data
// file is damage: reopening is an error naming the file, and the file is not grown back with
// zeros. A marker claiming more slots than its files hold (here 2^32 slots, whose slot map is
// 512 MiB) is refused by the same check, before the SSD tier sizes anything from it.
TEST(Recovery, DataFilesMustHoldTheMarkersSlots) {
  const std::string dir = testing::fresh_dir("short_data");
  {
    AttentionStore st(ssd_cfg(dir));
    ASSERT_TRUE(save_entry(st, 1, 1, kShape, iota_positions(64)));
  }
  const std::string data = data_file_path(dir, 0);
  const auto full = std::filesystem::file_size(data);
  std::filesystem::resize_file(data, full / 2);
  const auto open_error = [&](const StoreConfig& cfg) {
    try {
      AttentionStore st(cfg);
      ADD_FAILURE() << "opened a store whose data file is short";
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  std::string e = open_error(ssd_cfg(dir));
  EXPECT_NE(e.find(data + ": data file of the store holds " + std::to_string(full / 2) +
                   " bytes where its marker gives it " + std::to_string(full)),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("store clear"), std::string::npos) << e;
  EXPECT_EQ(std::filesystem::file_size(data), full / 2);  // not grown back

  StoreDirInfo huge;  // what plan_store would write for 2^32 slots of 4 KiB
  huge.chunk_bytes = 4096;
  huge.ssd_bytes = kMaxStoreSlots * 4096;
  huge.slots_per_file = kMaxStoreSlots / 64;
  huge.n_files = 64;
  write_store_marker(dir, huge);
  StoreConfig as_is = ssd_cfg(dir);
  as_is.ssd_bytes = 0;  // open the store the marker describes
  e = open_error(as_is);
  EXPECT_NE(e.find(data + ": data file of the store holds"), std::string::npos) << e;
  EXPECT_EQ(clear_store_dir(dir).size(), 3u);  // data file, journal, marker
  std::filesystem::remove_all(dir);
}

// Reads "committed N" lines from the writer until `want` commits were reported.
std::set<SessionId> run_and_kill(const std::string& dir, SessionId first, int want) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::close(fds[0]);
    const std::string id = std::to_string(first);
    ::execl(::cb::test::crash_writer(), ::cb::test::crash_writer(), dir.c_str(), id.c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(fds[1]);
  FILE* in = ::fdopen(fds[0], "r");
  std::set<SessionId> committed;
  char line[128];
  while (static_cast<int>(committed.size()) < want && std::fgets(line, sizeof line, in)) {
    unsigned long long id = 0;
    if (std::sscanf(line, "committed %llu", &id) == 1) committed.insert(id);
  }
  ::kill(pid, SIGKILL);  // mid-save: the writer saves continuously
  int status = 0;
  ::waitpid(pid, &status, 0);
  std::fclose(in);
  EXPECT_TRUE(WIFSIGNALED(status)) << "writer exited early with status " << status;
  return committed;
}

TEST(Recovery, SigkillMidSaveLosesOnlyThePartialEntry) {
  const std::string dir = testing::fresh_dir("crash");
  std::set<SessionId> committed;
  SessionId next = 1;
  for (int round = 0; round < 3; ++round) {
    auto got = run_and_kill(dir, next, 8 + 7 * round);
    ASSERT_FALSE(got.empty());
    committed.insert(got.begin(), got.end());
    const SessionId last = *got.rbegin();
    // The writer keeps committing between our read of its last wanted line and the kill (more
    // entries when the machine is loaded); ids of this round are never reused.
    next = last + 100000;
    StoreConfig c;
    c.store_dir = dir;  // adopt the store the writer created
    c.io_threads = 2;
    AttentionStore st(c);
    std::set<SessionId> present;
    for (SessionId s : st.sessions()) present.insert(s);
    for (SessionId s : committed) EXPECT_TRUE(present.count(s)) << "lost committed entry " << s;
    // A kill mid-append tears at most the last record, after the rewrite's end record: that
    // is no cut, and nothing is corrupt.
    EXPECT_EQ(st.stats().get(Counter::JournalCut), 0u);
    EXPECT_EQ(st.stats().get(Counter::CorruptJournalBytes), 0u);
    for (SessionId s : present) {
      // Anything recovered is complete and verified (it may be one the writer committed
      // but was killed before reporting).
      const auto pos = iota_positions(static_cast<int64_t>(40 + s % 150));
      EXPECT_EQ(load_check(st, s, s, kShape, pos), static_cast<int64_t>(pos.size())) << s;
      EXPECT_TRUE(committed.count(s) || (s > last && s < next)) << "unexpected entry " << s;
    }
    uint64_t chunks = 0;
    EXPECT_EQ(st.verify_all(&chunks), 0u);
    EXPECT_EQ(st.accounting_errors(), 0u);
    EXPECT_EQ(st.audit_slots(), "");
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cb::store

namespace cb::store {
namespace {

TEST(Recovery, OnlineJournalCompactionKeepsEveryLiveEntry) {
  const std::string dir = testing::fresh_dir("compact");
  StoreConfig c = ssd_cfg(dir);
  c.journal_compact_bytes = 8 << 10;
  {
    AttentionStore st(c);
    for (int round = 0; round < 6; ++round) {
      for (SessionId s = 1; s <= 8; ++s) {
        ASSERT_TRUE(save_entry(st, s, s * 10 + round, kShape, iota_positions(70)));
      }
      st.erase(static_cast<SessionId>(1 + round));
    }
    EXPECT_GT(st.stats().get(Counter::JournalCompactions), 0u);
  }
  EXPECT_LT(std::filesystem::file_size(journal_path(dir)), 64u << 10);
  AttentionStore st(c);
  // The last round saved all eight and then erased session 6.
  EXPECT_EQ(st.sessions(), (std::vector<SessionId>{1, 2, 3, 4, 5, 7, 8}));
  for (SessionId s : st.sessions()) {
    EXPECT_EQ(load_check(st, s, s * 10 + 5, kShape, iota_positions(70)), 70) << s;
  }
  std::filesystem::remove_all(dir);
}

// Opening a store rewrites its journal and allocates its slots: a second process (or store)
// on it would lose the first one's records. The second open is refused while the first lives.
TEST(Recovery, AStoreInUseCannotBeOpenedAgain) {
  const std::string dir = testing::fresh_dir("locked");
  {
    AttentionStore st(ssd_cfg(dir));
    ASSERT_TRUE(save_entry(st, 1, 1, kShape, iota_positions(40)));
    try {
      AttentionStore again(ssd_cfg(dir));
      ADD_FAILURE() << "a second open of a store in use succeeded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("the store is in use by another process"),
                std::string::npos)
          << e.what();
    }
    EXPECT_THROW(StoreDirLock{dir}, Error);  // `store clear`
  }
  {
    const StoreDirLock clearing(dir);  // free again once the store is closed
    EXPECT_THROW(AttentionStore{ssd_cfg(dir)}, Error);
  }
  EXPECT_NO_THROW(AttentionStore{ssd_cfg(dir)});
  std::filesystem::remove_all(dir);
}

// An erase whose journal record cannot be appended (the file system refuses the journal more
// bytes) compacts the journal from the index instead: the erased entry does not come back.
TEST(Recovery, AnEraseTheJournalCannotAppendIsStillDurable) {
  const std::string dir = testing::fresh_dir("erase_full");
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int rc = 0;
    {
      AttentionStore st(ssd_cfg(dir));
      if (!save_entry(st, 1, 1, kShape, iota_positions(40)) ||
          !save_entry(st, 2, 2, kShape, iota_positions(40))) {
        rc = 3;
      } else {
        cap_file_size_at_journal(dir);  // no file may grow past the journal's size now
        if (!st.erase(1)) rc = 4;
      }
    }
    ::_exit(rc);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  AttentionStore st(ssd_cfg(dir));
  EXPECT_EQ(st.sessions(), (std::vector<SessionId>{2}));
  EXPECT_EQ(load_check(st, 2, 2, kShape, iota_positions(40)), 40);
  std::filesystem::remove_all(dir);
}

// A full disk: an erase record the journal cannot take, and no room to rewrite the journal
// either. The journal still names the erased entry, so the next open brings it back: its slots
// are held back from reuse until a rewrite succeeds, or a save would write another entry's
// bytes under it (it would then fail its checksums, and verify would report corruption).
TEST(Recovery, SlotsOfAnEraseTheJournalLacksAreNotReused) {
  const std::string dir = testing::fresh_dir("erase_unjournaled");
  StoreConfig c = ssd_cfg(dir);
  c.chunk_bytes = 4096;
  c.ssd_bytes = 16 * c.chunk_bytes;  // entries 1 and 2 fill it
  auto fail_sync = std::make_shared<std::atomic<bool>>(false);
  c.journal_sync = [fail_sync](int fd) {
    if (fail_sync->load()) return -ENOSPC;
    return ::fdatasync(fd) == 0 ? 0 : -errno;
  };
  const auto pos = iota_positions(16);  // one chunk per layer and K/V: 8 chunks
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int rc = 0;
    {
      AttentionStore st(c);
      // A journal grown past the data file, so that a file-size limit at its size refuses the
      // journal's appends while the data file is still written.
      if (!grow_journal_past(st, dir, 2 * c.ssd_bytes, pos)) rc = 3;
      if (rc == 0 && !save_entry(st, 2, 2, kShape, pos)) rc = 4;
      if (rc == 0) {
        cap_file_size_at_journal(dir);
        fail_sync->store(true);  // and no journal rewrite can be made durable
        st.erase(1);
        save_entry(st, 3, 3, kShape, pos);  // room only in the erased entry's slots
        if (st.audit_slots().find("held back until the journal") == std::string::npos) rc = 5;
      }
    }
    ::_exit(rc);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  AttentionStore st(c);
  // Whatever the journal brings back holds its own bytes.
  const std::vector<SessionId> back = st.sessions();
  EXPECT_FALSE(back.empty());
  for (SessionId id : back) {
    EXPECT_EQ(load_check(st, id, id, kShape, pos), 16) << "session " << id;
  }
  std::filesystem::remove_all(dir);
}

// A commit whose journal sync fails is a failed save whose slots are freed: its record must
// not bring the entry back at the next open. The journal, broken until rewritten, is
// rewritten from the index before those slots are freed (a record in doubt must not name
// reused slots), and the next commits append; the failure is kept naming the journal.
TEST(Recovery, ACommitWhoseJournalSyncFailsDoesNotComeBack) {
  const std::string dir = testing::fresh_dir("journal_sync_fail");
  auto fail = std::make_shared<std::atomic<int>>(0);
  StoreConfig c = ssd_cfg(dir);
  c.journal_sync = [fail](int fd) {
    if (fail->load() > 0) {
      --*fail;
      return -EIO;
    }
    return ::fdatasync(fd) == 0 ? 0 : -errno;
  };
  const auto pos = iota_positions(40);
  {
    AttentionStore st(c);
    ASSERT_TRUE(save_entry(st, 1, 1, kShape, pos));
    const uint64_t one = st.used_bytes(TierKind::Ssd);
    const uint64_t compactions = st.stats().get(Counter::JournalCompactions);
    *fail = 2;  // the commit's sync, and the compaction that retries it at once
    EXPECT_FALSE(save_entry(st, 2, 2, kShape, pos));
    EXPECT_EQ(fail->load(), 0);
    *fail = 0;
    EXPECT_FALSE(st.where(2, nullptr));
    EXPECT_EQ(st.used_bytes(TierKind::Ssd), one);  // its slots are free for the next save
    EXPECT_EQ(st.first_io_error(),
              journal_path(dir) + ": cannot sync a record: " + std::strerror(EIO));
    // Rewritten once the two failed tries were spent: before the save's slots were freed.
    EXPECT_EQ(st.stats().get(Counter::JournalCompactions), compactions + 1);
    ASSERT_TRUE(save_entry(st, 3, 3, kShape, pos));  // appends again
    ASSERT_TRUE(save_entry(st, 4, 4, kShape, pos));
    EXPECT_EQ(st.stats().get(Counter::JournalCompactions), compactions + 1);
    EXPECT_EQ(st.audit_slots(), "");
  }
  AttentionStore st(ssd_cfg(dir));
  EXPECT_EQ(st.sessions(), (std::vector<SessionId>{1, 3, 4}));
  const StatsSnapshot s = st.stats();
  EXPECT_EQ(s.get(Counter::DiscardedEntries), 0u);
  EXPECT_EQ(s.get(Counter::DiscardedRecords), 0u);
  for (SessionId id : {1, 3, 4}) EXPECT_EQ(load_check(st, id, id, kShape, pos), 40) << id;
  std::filesystem::remove_all(dir);
}

// An erase record is synced before the entry's slots are freed: a save may write them at once,
// and a record a power loss took would bring the erased entry back over another's bytes.
TEST(Recovery, AnEraseIsDurableBeforeItsSlotsAreFreed) {
  const std::string dir = testing::fresh_dir("erase_sync");
  auto syncs = std::make_shared<std::atomic<int>>(0);
  StoreConfig c = ssd_cfg(dir);
  c.journal_sync = [syncs](int fd) {
    ++*syncs;
    return ::fdatasync(fd) == 0 ? 0 : -errno;
  };
  const auto pos = iota_positions(40);
  {
    AttentionStore st(c);
    ASSERT_TRUE(save_entry(st, 1, 1, kShape, pos));
    const int before = syncs->load();
    ASSERT_TRUE(st.erase(1));
    EXPECT_EQ(syncs->load(), before + 1);
  }
  AttentionStore st(ssd_cfg(dir));
  EXPECT_TRUE(st.sessions().empty());
  std::filesystem::remove_all(dir);
}

// A journal the file system refuses to grow (here a file-size limit; a full disk alike): the
// save fails, and the store keeps the error naming the journal and the system's reason.
TEST(Recovery, AJournalThatCannotGrowIsNamedAsTheFirstIoError) {
  const std::string dir = testing::fresh_dir("journal_full");
  // Small data files, and a journal grown past them: a file-size limit at the journal's size
  // then refuses the journal more bytes while the data files are still written.
  StoreConfig c = ssd_cfg(dir);
  c.chunk_bytes = 4096;
  c.ssd_bytes = 16 * c.chunk_bytes;
  const auto pos = iota_positions(16);  // one chunk per layer and K/V: 8 chunks
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int rc = 0;
    {
      AttentionStore st(c);
      if (!grow_journal_past(st, dir, 2 * c.ssd_bytes, pos)) rc = 3;
      if (rc == 0) {
        cap_file_size_at_journal(dir);
        const std::string want =
            journal_path(dir) + ": cannot append a record: " + std::strerror(EFBIG);
        if (save_entry(st, 2, 2, kShape, pos)) {
          rc = 4;
        } else if (st.first_io_error() != want) {
          std::fprintf(stderr, "first_io_error: '%s'\n", st.first_io_error().c_str());
          rc = 5;
        } else if (st.stats().first_io_error != want ||
                   st.stats().to_json().find("\"first_io_error\"") == std::string::npos) {
          rc = 6;
        } else if (st.stats().get(Counter::IoErrors) == 0) {
          rc = 7;
        }
      }
    }
    ::_exit(rc);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  AttentionStore st(c);
  EXPECT_EQ(st.sessions(), (std::vector<SessionId>{1}));
  std::filesystem::remove_all(dir);
}

// The journal's times are the writing process's clock: recovery moves them onto the new one
// (the newest access now), so a TTL runs on from where it was and the LRU order holds,
// instead of the entries living on for the old process's uptime.
TEST(Recovery, RecoveredTimesContinueOnTheNewProcesssClock) {
  const std::string dir = testing::fresh_dir("clock");
  double t = 1000;
  StoreConfig c = ssd_cfg(dir);
  c.clock = [&t] { return t; };
  {
    AttentionStore st(c);
    ASSERT_TRUE(save_entry(st, 1, 1, kShape, iota_positions(40), KeyEncoding::PreRope,
                           testing::test_fp(), /*ttl=*/60));
    t = 1040;
    ASSERT_TRUE(save_entry(st, 3, 3, kShape, iota_positions(40)));
    t = 1050;
    ASSERT_TRUE(save_entry(st, 2, 2, kShape, iota_positions(40), KeyEncoding::PreRope,
                           testing::test_fp(), /*ttl=*/60));
  }
  t = 0;  // a new process's clock starts again
  AttentionStore st(c);
  ASSERT_EQ(st.sessions(), (std::vector<SessionId>{1, 2, 3}));
  // Times before the new clock's start are negative: an unaligned truncation's rewrite still
  // keeps the entry's insertion time (FIFO's order), a negative one too.
  EntryMeta m;
  ASSERT_TRUE(st.entry_meta(3, &m));
  EXPECT_EQ(m.created, -10);
  ASSERT_TRUE(st.truncate(3, TruncateSpec{3, 0, 0}));
  ASSERT_TRUE(st.entry_meta(3, &m));
  EXPECT_EQ(m.n_tokens(), 37);
  EXPECT_EQ(m.created, -10);
  t = 11;  // session 1 was last used 50 s before session 2, 61 s ago now: expired
  EXPECT_EQ(load_check(st, 1, 1, kShape, iota_positions(40)), -1);
  EXPECT_EQ(load_check(st, 2, 2, kShape, iota_positions(40)), 40);
  std::filesystem::remove_all(dir);
}

// A journal or data file without the marker is a store whose marker was lost: creating a
// store over it would wipe its index. Refused; `store clear` starts over, removing the
// marker's temporary files of any process too.
TEST(Recovery, AStoreWithoutItsMarkerIsNotCreatedOver) {
  const std::string dir = testing::fresh_dir("nomarker");
  {
    AttentionStore st(ssd_cfg(dir));
    ASSERT_TRUE(save_entry(st, 1, 1, kShape, iota_positions(40)));
  }
  ASSERT_EQ(::unlink(marker_path(dir).c_str()), 0);
  try {
    AttentionStore st(ssd_cfg(dir));
    ADD_FAILURE() << "a store was created over a journal";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("but no marker"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(std::filesystem::exists(journal_path(dir)));
  const std::string tmp = marker_path(dir) + ".tmp.4242";
  std::ofstream(tmp) << "{";
  const std::vector<std::string> removed = clear_store_dir(dir);
  EXPECT_NE(std::find(removed.begin(), removed.end(), tmp), removed.end());
  EXPECT_FALSE(std::filesystem::exists(tmp));
  EXPECT_NO_THROW(AttentionStore{ssd_cfg(dir)});
  std::filesystem::remove_all(dir);
}

TEST(Recovery, ReadOnlyStoreDirectoryIsAStartupError) {
  if (::geteuid() == 0) GTEST_SKIP() << "root ignores directory permissions";
  const std::string dir = testing::fresh_dir("readonly");
  ::chmod(dir.c_str(), 0555);
  EXPECT_THROW(AttentionStore{ssd_cfg(dir)}, Error);
  ::chmod(dir.c_str(), 0755);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cb::store
