// Fault injection through FaultyIo: ENOSPC, EIO, short reads, bit flips, failed syncs,
// and chunks corrupted on disk. Every fault is a miss or a failed save, counted, never
// wrong data and never a crash.
#include <gtest/gtest.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "lib/store/attention_store.h"
#include "lib/store/entry.h"
#include "lib/store/faulty_io.h"
#include "lib/store/store_dir.h"
#include "tests/unit/store/store_test_util.h"

namespace cb::store {
namespace {

using testing::iota_positions;
using testing::load_check;
using testing::save_entry;

constexpr uint64_t kChunk = 16 << 10;
const EntryShape kShape{4, 256};

struct Fixture {
  std::string dir;
  std::shared_ptr<FaultyIo> io;
  std::unique_ptr<AttentionStore> st;
  explicit Fixture(const std::string& name, uint64_t dram = 0, uint64_t reserve = 0) {
    dir = testing::fresh_dir(name);
    io = std::make_shared<FaultyIo>(make_pread_backend());
    StoreConfig c;
    c.store_dir = dir;
    c.ssd_bytes = 64 * kChunk;
    c.dram_bytes = dram;
    c.dram_reserve_bytes = reserve;
    c.chunk_bytes = kChunk;
    c.io_threads = 2;
    c.io_backend = io;
    st = std::make_unique<AttentionStore>(c);
  }
  ~Fixture() {
    st.reset();
    std::filesystem::remove_all(dir);
  }
};

TEST(Faults, WriteErrorsFailTheSaveAndFreeSpace) {
  Fixture f("enospc");
  auto pos = iota_positions(100);
  f.io->fail_writes(1, ENOSPC);
  EXPECT_FALSE(save_entry(*f.st, 1, 1, kShape, pos));
  EXPECT_FALSE(f.st->where(1, nullptr));
  EXPECT_EQ(f.st->used_bytes(TierKind::Ssd), 0u);
  f.io->fail_writes(1, EIO);
  EXPECT_FALSE(save_entry(*f.st, 1, 1, kShape, pos));
  f.io->fail_syncs(1);
  EXPECT_FALSE(save_entry(*f.st, 1, 1, kShape, pos));
  EXPECT_EQ(f.st->used_bytes(TierKind::Ssd), 0u);
  EXPECT_TRUE(save_entry(*f.st, 1, 1, kShape, pos));
  EXPECT_EQ(load_check(*f.st, 1, 1, kShape, pos), 100);
  auto s = f.st->stats();
  EXPECT_EQ(s.get(Counter::SaveFailures), 3u);
  EXPECT_GE(s.get(Counter::IoErrors), 3u);
  EXPECT_EQ(f.st->accounting_errors(), 0u);
  EXPECT_EQ(f.st->audit_slots(), "");
}

// A store whose I/O fails keeps the first error as a line a user can act on: the file, where
// in it, what failed and the system's reason; later errors do not replace it.
TEST(Faults, TheFirstIoErrorIsKeptNamingTheFileAndTheReason) {
  Fixture f("first_error");
  auto pos = iota_positions(100);
  EXPECT_EQ(f.st->first_io_error(), "");
  EXPECT_EQ(f.st->stats().to_json().find("first_io_error"), std::string::npos);
  f.io->fail_writes(1, ENOSPC);
  EXPECT_FALSE(save_entry(*f.st, 1, 1, kShape, pos));
  const std::string first = f.st->first_io_error();
  const std::regex want(
      std::regex_replace(data_file_path(f.dir, 0), std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)") +
      " at byte [0-9]+: cannot write a chunk: " + std::strerror(ENOSPC));
  EXPECT_TRUE(std::regex_match(first, want)) << first;
  f.io->fail_syncs(1);
  EXPECT_FALSE(save_entry(*f.st, 1, 1, kShape, pos));
  EXPECT_EQ(f.st->first_io_error(), first);  // the first one stays
  const StatsSnapshot s = f.st->stats();
  EXPECT_EQ(s.first_io_error, first);
  EXPECT_EQ(nlohmann::json::parse(s.to_json())["first_io_error"], first);
  // A failed sync of the data files names the file too.
  Fixture g("first_sync_error");
  g.io->fail_syncs(1);
  EXPECT_FALSE(save_entry(*g.st, 1, 1, kShape, pos));
  EXPECT_EQ(g.st->first_io_error(),
            data_file_path(g.dir, 0) + ": cannot sync written chunks: " + std::strerror(EIO));
}

// A chunk that fails verification on load is named in the line that reports the drop: its
// index, layer, K or V, token chunk, data file and byte offset, and what was wrong.
TEST(Faults, AChunkThatFailsVerificationIsNamedWithItsFileAndOffset) {
  Fixture f("named_chunk");
  auto pos = iota_positions(100);
  for (SessionId s = 1; s <= 2; ++s) ASSERT_TRUE(save_entry(*f.st, s, s, kShape, pos));
  const std::string file = data_file_path(f.dir, 0);
  const auto check = [&](SessionId s, const std::string& what) {
    EntryMeta m;
    ASSERT_TRUE(f.st->entry_meta(s, &m));
    ::testing::internal::CaptureStderr();
    EXPECT_EQ(load_check(*f.st, s, s, kShape, pos), -2);
    f.st->wait_idle();
    const std::string err = ::testing::internal::GetCapturedStderr();
    std::smatch g;
    const std::regex line(
        "cachebench store: session " + std::to_string(s) +
        R"( failed verification in ssd \(chunk ([0-9]+) \(layer ([0-9]+), ([KV]), token chunk )"
        R"(([0-9]+)\) at (.*) at byte ([0-9]+): (.*)\); dropped\n)");
    ASSERT_TRUE(std::regex_search(err, g, line)) << err;
    const uint64_t idx = std::stoull(g[1]), nt = m.n_token_chunks();
    EXPECT_EQ(idx, m.chunk_index(std::stoi(g[2]), g[3] == "V" ? 1 : 0, std::stoull(g[4])));
    EXPECT_EQ(g[5], file);
    ASSERT_LT(idx, m.slots.size());
    EXPECT_EQ(std::stoull(g[6]), m.slots[idx] * kChunk);  // one data file
    EXPECT_EQ(g[7], what);
    EXPECT_LT(std::stoull(g[4]), nt);
  };
  f.io->flip_bits(1);
  check(1, "checksum mismatch");
  f.io->fail_reads(1, EIO);
  check(2, std::string("cannot read it: ") + std::strerror(EIO));
}

TEST(Faults, ReadErrorsShortReadsAndBitFlipsAreMissesNeverWrongData) {
  Fixture f("reads");
  auto pos = iota_positions(100);
  for (SessionId s = 1; s <= 4; ++s) ASSERT_TRUE(save_entry(*f.st, s, s, kShape, pos));
  f.io->fail_reads(1, EIO);
  EXPECT_EQ(load_check(*f.st, 1, 1, kShape, pos), -2);
  f.io->short_reads(1);
  EXPECT_EQ(load_check(*f.st, 2, 2, kShape, pos), -2);
  f.io->flip_bits(1);
  EXPECT_EQ(load_check(*f.st, 3, 3, kShape, pos), -2);
  f.st->wait_idle();
  // The failed entries are gone (the caller recomputes); the others are intact.
  for (SessionId s = 1; s <= 3; ++s) EXPECT_EQ(load_check(*f.st, s, s, kShape, pos), -1) << s;
  EXPECT_EQ(load_check(*f.st, 4, 4, kShape, pos), 100);
  auto s = f.st->stats();
  EXPECT_EQ(s.get(Counter::ChecksumFailures), 1u);
  EXPECT_EQ(s.get(Counter::LoadFailures), 3u);
  EXPECT_EQ(s.get(TierKind::Ssd, TierCounter::Drops), 3u);
  EXPECT_EQ(f.st->used_bytes(TierKind::Ssd), 4u * 2 * 2 * kChunk);
}

// verify_all keeps an entry it could not read (an I/O error says nothing of its bytes) and
// lists it, where it drops one whose checksum fails. It used to drop both.
TEST(Faults, VerifyKeepsAnEntryItCouldNotRead) {
  Fixture f("verify_eio");
  auto pos = iota_positions(100);
  for (SessionId s = 1; s <= 3; ++s) ASSERT_TRUE(save_entry(*f.st, s, s, kShape, pos));
  f.io->fail_reads(1, EIO);
  std::vector<std::string> unreadable;
  uint64_t chunks = 0;
  EXPECT_EQ(f.st->verify_all(&chunks, &unreadable), 0u);
  ASSERT_EQ(unreadable.size(), 1u);
  EXPECT_NE(unreadable[0].find("Input/output error"), std::string::npos) << unreadable[0];
  EXPECT_EQ(f.st->sessions().size(), 3u);
  for (SessionId s = 1; s <= 3; ++s) EXPECT_EQ(load_check(*f.st, s, s, kShape, pos), 100) << s;
  f.io->flip_bits(1);  // a bad checksum is still dropped
  unreadable.clear();
  EXPECT_EQ(f.st->verify_all(&chunks, &unreadable), 1u);
  EXPECT_TRUE(unreadable.empty());
  EXPECT_EQ(f.st->sessions().size(), 2u);
}

TEST(Faults, FullDiskDuringDemotionDropsTheVictim) {
  Fixture f("demote", 16 * kChunk);
  auto pos = iota_positions(64);
  ASSERT_TRUE(save_entry(*f.st, 1, 1, kShape, pos));
  ASSERT_TRUE(save_entry(*f.st, 2, 2, kShape, pos));
  f.io->fail_all_writes(ENOSPC);
  ASSERT_TRUE(save_entry(*f.st, 3, 3, kShape, pos));  // DRAM save still works
  EXPECT_FALSE(f.st->where(1, nullptr));              // victim could not be demoted
  EXPECT_EQ(f.st->stats().get(TierKind::Dram, TierCounter::Drops), 1u);
  EXPECT_EQ(f.st->used_bytes(TierKind::Ssd), 0u);
  f.io->fail_all_writes(0);
  ASSERT_TRUE(save_entry(*f.st, 4, 4, kShape, pos));
  TierKind t;
  ASSERT_TRUE(f.st->where(2, &t));
  EXPECT_EQ(t, TierKind::Ssd);
  EXPECT_EQ(load_check(*f.st, 2, 2, kShape, pos), 64);
}

TEST(Faults, CorruptPrefetchIsDropped) {
  Fixture f("prefetch", 32 * kChunk, 8 * kChunk);
  auto pos = iota_positions(64);
  for (SessionId s = 1; s <= 5; ++s) ASSERT_TRUE(save_entry(*f.st, s, s, kShape, pos));
  TierKind t;
  ASSERT_TRUE(f.st->where(1, &t));
  ASSERT_EQ(t, TierKind::Ssd);
  f.io->flip_bits(1);
  EXPECT_EQ(f.st->prefetch({1}), 1u);
  f.st->wait_idle();
  EXPECT_FALSE(f.st->where(1, nullptr));
  auto s = f.st->stats();
  EXPECT_EQ(s.get(Counter::PrefetchFailures), 1u);
  EXPECT_EQ(s.get(Counter::ChecksumFailures), 1u);
  EXPECT_EQ(f.st->accounting_errors(), 0u);
  EXPECT_EQ(f.st->audit_slots(), "");
}

TEST(Faults, ChunkCorruptedOnDiskIsCaughtAfterRestart) {
  const std::string dir = testing::fresh_dir("ondisk");
  StoreConfig c;
  c.store_dir = dir;
  c.ssd_bytes = 64 * kChunk;
  c.chunk_bytes = kChunk;
  auto pos = iota_positions(100);
  {
    AttentionStore st(c);
    ASSERT_TRUE(save_entry(st, 1, 1, kShape, pos));
    ASSERT_TRUE(save_entry(st, 2, 2, kShape, pos));
  }
  {  // flip one byte in every slot of the first 2 chunks' worth... just slot 0
    std::fstream f(data_file_path(dir, 0), std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(100);
    char b = 0;
    f.get(b);
    f.seekp(100);
    f.put(static_cast<char>(b ^ 0x40));
  }
  AttentionStore st(c);
  EXPECT_EQ(st.sessions().size(), 2u);
  uint64_t chunks = 0;
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(st.verify_all(&chunks), 1u);
  const std::string err = ::testing::internal::GetCapturedStderr();
  // The line names the bad chunk: slot 0, the first chunk of the first data file.
  EXPECT_NE(err.find(") at " + data_file_path(dir, 0) + " at byte 0: checksum mismatch); dropped"),
            std::string::npos)
      << err;
  EXPECT_EQ(chunks, 2u * 16);
  EXPECT_EQ(st.sessions().size(), 1u);
  const SessionId good = st.sessions()[0];
  EXPECT_EQ(load_check(st, good, good, kShape, pos), 100);
  st.wait_idle();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cb::store
