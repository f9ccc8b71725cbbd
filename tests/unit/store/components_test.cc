// Size parsing, the chunk allocator, pinned host buffers, the journal, entry metadata,
// checksums taken as chunks move.
#include <gtest/gtest.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <random>

#include "lib/core/error.h"
#include "lib/device/host_buffer.h"
#include "lib/store/checksum.h"
#include "lib/store/chunk_allocator.h"
#include "lib/store/entry.h"
#include "lib/store/journal.h"
#include "lib/store/memory_tier.h"
#include "lib/store/size_parse.h"
#include "lib/store/ssd_tier.h"
#include "lib/store/store_dir.h"
#include "tests/unit/store/store_test_util.h"

namespace cb::store {
namespace {

TEST(SizeParse, UnitsAndErrors) {
  EXPECT_EQ(parse_size("128GiB"), 128ull << 30);
  EXPECT_EQ(parse_size("10TiB"), 10ull << 40);
  EXPECT_EQ(parse_size("2PiB"), 2ull << 50);  // format_size prints PiB, so it reads back
  EXPECT_EQ(parse_size("1PB"), 1000000000000000ull);
  EXPECT_EQ(parse_size("512MiB"), 512ull << 20);
  EXPECT_EQ(parse_size("4096"), 4096u);
  EXPECT_EQ(parse_size("1.5KiB"), 1536u);
  EXPECT_EQ(parse_size("2 GB"), 2000000000u);
  EXPECT_EQ(parse_size("8k"), 8192u);
  EXPECT_THROW(parse_size(""), Error);
  EXPECT_THROW(parse_size("GiB"), Error);
  EXPECT_THROW(parse_size("12XB"), Error);
  EXPECT_THROW(parse_size("1.5"), Error);
  EXPECT_THROW(parse_size("-1GiB"), Error);
  EXPECT_THROW(parse_size("99999999999TiB"), Error);
  try {
    parse_size("12 parsecs", "--dram");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--dram"), std::string::npos);
  }
  EXPECT_EQ(format_size(1ull << 30), "1 GiB");
  EXPECT_EQ(format_size(1536), "1.5 KiB");
}

TEST(ChunkAllocator, ExactAccountingNeverExceedsCapacity) {
  ChunkAllocator a(10);
  std::vector<uint64_t> s;
  EXPECT_TRUE(a.allocate(6, &s));
  EXPECT_FALSE(a.allocate(5, &s));  // all-or-nothing
  EXPECT_EQ(s.size(), 6u);
  EXPECT_EQ(a.used(), 6u);
  EXPECT_TRUE(a.allocate(4, &s));
  EXPECT_EQ(a.free(), 0u);
  std::vector<uint64_t> sorted = s;
  std::sort(sorted.begin(), sorted.end());
  for (uint64_t i = 0; i < 10; ++i) EXPECT_EQ(sorted[i], i);
  a.release({s[0], s[1]});
  EXPECT_EQ(a.free(), 2u);
  a.release({s[0]});  // double free is refused and counted
  EXPECT_EQ(a.double_frees(), 1u);
  EXPECT_EQ(a.free(), 2u);
  std::vector<uint64_t> t;
  EXPECT_TRUE(a.allocate(2, &t));
  EXPECT_EQ(a.free(), 0u);
}

TEST(ChunkAllocator, ClaimForRecovery) {
  ChunkAllocator a(4);
  EXPECT_TRUE(a.claim(2));
  EXPECT_FALSE(a.claim(2));
  EXPECT_FALSE(a.claim(9));
  std::vector<uint64_t> s;
  EXPECT_TRUE(a.allocate(3, &s));
  for (uint64_t x : s) EXPECT_NE(x, 2u);
  EXPECT_FALSE(a.allocate(1, &s));
}

std::vector<char> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<char> v(n);
  for (char& c : v) c = static_cast<char>(rng());
  return v;
}

// Runs copy_checksum on a thread whose whole stack first holds what a stale streaming XXH3
// state for `seed` looks like (xxHash 0.8's layout, 64-byte aligned: the seed in word 1 and a
// null external-secret pointer in word 3 of every four words) with garbage where the seed's
// secret would be. The library skips deriving the secret of a state that already has the
// seed, so copy_checksum must initialize its state rather than take it from the stack as is
// (saves on the store's I/O threads failed verification when it did not). Frames the thread
// runs first may overwrite those words (more so under ASan); in the optimized build this test
// fails without the initialization.
uint64_t copy_checksum_on_a_stale_stack(void* dst, const void* src, size_t n, uint64_t seed) {
  constexpr size_t kStack = size_t{1} << 20;
  std::unique_ptr<uint64_t, decltype(&std::free)> stack(
      static_cast<uint64_t*>(std::aligned_alloc(4096, kStack)), &std::free);
  for (size_t i = 0; i < kStack / 8; ++i) {
    stack.get()[i] = i % 4 == 1 ? seed : i % 4 == 3 ? 0 : 0x9e3779b97f4a7c15u * (i + 1);
  }
  struct Job {
    void* dst;
    const void* src;
    size_t n;
    uint64_t seed, sum;
  } job{dst, src, n, seed, 0};
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstack(&attr, stack.get(), kStack);
  pthread_t t;
  const auto run = [](void* p) -> void* {
    auto* j = static_cast<Job*>(p);
    j->sum = copy_checksum(j->dst, j->src, j->n, j->seed);
    return nullptr;
  };
  const int rc = pthread_create(&t, &attr, run, &job);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    ADD_FAILURE() << "pthread_create: " << rc;
    return ~checksum(src, n, seed);
  }
  pthread_join(t, nullptr);
  return job.sum;
}

TEST(Checksum, CopyChecksumCopiesAndEqualsTheChecksumOfTheBytes) {
  // Around the 64 KiB pieces it hashes as it copies, and over several of them.
  for (size_t n : {size_t{0}, size_t{1}, size_t{4095}, size_t{65535}, size_t{65536}, size_t{65537},
                   size_t{3 * 65536 + 17}, size_t{(1 << 20) + 3}}) {
    for (uint64_t seed : {uint64_t{0}, uint64_t{0x9e3779b97f4a7c15}}) {
      const std::vector<char> src = random_bytes(n, static_cast<uint32_t>(n + seed));
      std::vector<char> dst(n + 64, '\x5a');
      const uint64_t sum = copy_checksum(dst.data(), src.data(), n, seed);
      EXPECT_EQ(sum, checksum(src.data(), n, seed)) << n;
      EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin())) << n;
      EXPECT_TRUE(std::all_of(dst.begin() + static_cast<std::ptrdiff_t>(n), dst.end(),
                              [](char c) { return c == '\x5a'; }))
          << "wrote past " << n;
    }
  }
  const std::vector<char> big = random_bytes(200000, 2);
  std::vector<char> out(big.size());
  for (uint64_t seed : {uint64_t{7}, uint64_t{0x1234567}}) {
    EXPECT_EQ(copy_checksum_on_a_stale_stack(out.data(), big.data(), big.size(), seed),
              checksum(big.data(), big.size(), seed))
        << "on a stack holding a stale state for seed " << seed;
  }
  const std::vector<char> a = random_bytes(70000, 1);
  std::vector<char> b = a;
  b[69999] ^= 1;  // a change in the last piece changes the sum
  EXPECT_NE(copy_checksum(out.data(), a.data(), a.size(), 3),
            copy_checksum(out.data(), b.data(), b.size(), 3));
}

// Every tier fills ChunkIo::sum with the checksum of the bytes it moved (what the store
// compares with the entry's), on writes and reads, at an offset in a memory slot, and through
// the SSD tier's bounce buffers (unaligned caller memory) as well as in place.
TEST(Checksum, TiersReportTheChecksumOfTheBytesTheyMove) {
  constexpr uint64_t kSlot = 64 << 10, kSeed = 77;
  const std::string dir = testing::fresh_dir("tier_sums");
  StoreDirInfo info;
  info.chunk_bytes = kSlot;
  info.ssd_bytes = 8 * kSlot;
  info.slots_per_file = 8;
  info.n_files = 1;
  MemoryTier dram(TierKind::Dram, 8 * kSlot, kSlot);
  SsdTier ssd(dir, info, make_pread_backend(), true, true);
  const std::vector<char> data = random_bytes(kSlot, 9);
  using Aligned = std::unique_ptr<char, decltype(&std::free)>;
  const auto aligned = [] {
    return Aligned(static_cast<char*>(std::aligned_alloc(4096, 2 * kSlot)), &std::free);
  };
  for (Tier* t : {static_cast<Tier*>(&dram), static_cast<Tier*>(&ssd)}) {
    for (size_t shift : {size_t{0}, size_t{1}}) {  // 1: unaligned buffers (SSD: bounce)
      SCOPED_TRACE(std::string(tier_name(t->kind())) + " shift " + std::to_string(shift));
      Aligned out = aligned(), back = aligned();
      char* from = out.get() + shift;
      char* to = back.get() + shift;
      std::copy(data.begin(), data.end(), from);
      // Aligned buffers of whole blocks move in place; unaligned ones, and a partial block,
      // through the SSD tier's bounce buffers.
      const uint32_t len = static_cast<uint32_t>(shift == 0 ? kSlot : kSlot - 1000);
      uint64_t wsum = 0, rsum = 0;
      ChunkIo w{3, from, len, 0};
      w.sum = &wsum;
      w.sum_seed = kSeed;
      ASSERT_TRUE(t->write(&w, 1));
      EXPECT_EQ(wsum, checksum(from, len, kSeed));
      ChunkIo r{3, to, len, 0};
      r.sum = &rsum;
      r.sum_seed = kSeed;
      ASSERT_TRUE(t->read(&r, 1));
      EXPECT_EQ(rsum, wsum);
      EXPECT_TRUE(std::equal(from, from + len, to));
    }
  }
  uint64_t osum = 0;  // a memory slot written at an offset: the sum covers the bytes moved
  ChunkIo at{5, const_cast<char*>(data.data()), 4000, 0, 512};
  at.sum = &osum;
  at.sum_seed = kSeed;
  ASSERT_TRUE(dram.write(&at, 1));
  EXPECT_EQ(osum, checksum(data.data(), 4000, kSeed));
  std::filesystem::remove_all(dir);
}

TEST(HostBuffer, AlignedZeroedAndNeverThrowsForLockLimits) {
  device::HostBuffer b(1 << 20, 4096);
  ASSERT_NE(b.data(), nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 4096, 0u);
  EXPECT_EQ(static_cast<unsigned char*>(b.data())[12345], 0);
  // 1 GiB usually exceeds RLIMIT_MEMLOCK in containers: must degrade, not fail.
  device::HostBuffer big(256ull << 20, 4096);
  ASSERT_NE(big.data(), nullptr);
  if (big.lock_failed()) {
    EXPECT_EQ(big.kind(), device::HostMemoryKind::Plain);
    EXPECT_FALSE(big.lock_error().empty());
  }
  device::HostBuffer moved(std::move(big));
  EXPECT_EQ(big.data(), nullptr);
  EXPECT_NE(moved.data(), nullptr);
  EXPECT_THROW(device::HostBuffer(64, 100), Error);
}

EntryMeta sample_meta(SessionId s, int64_t tokens) {
  EntryMeta m;
  m.session = s;
  m.generation = s + 1;
  m.fingerprint = testing::test_fp();
  m.shape = EntryShape{2, 256};
  m.tokens_per_chunk = 16;
  m.tokens = testing::tokens_for(s, testing::iota_positions(tokens));
  m.hash_tokens();
  m.created = 1.5;
  m.last_access = 2.5;
  m.ttl = 60;
  for (uint64_t i = 0; i < m.n_chunks(); ++i) {
    m.slots.push_back(100 * s + i);
    m.checksums.push_back(i * 7);
  }
  return m;
}

TEST(Entry, EncodeDecodeAndPrefixMatch) {
  EntryMeta m = sample_meta(3, 40);
  EXPECT_EQ(m.n_token_chunks(), 3u);
  EXPECT_EQ(m.tokens_in_chunk(2), 8u);
  EntryMeta d;
  ASSERT_TRUE(decode_entry(encode_entry(m), &d));
  EXPECT_EQ(d.tokens, m.tokens);
  EXPECT_EQ(d.slots, m.slots);
  EXPECT_EQ(d.token_hashes, m.token_hashes);
  std::string bad = encode_entry(m);
  bad.resize(bad.size() - 3);
  EXPECT_FALSE(decode_entry(bad, &d));
  // Prefix matching: whole agreeing chunks, and the last partial chunk when fully covered.
  std::vector<TokenId> h = m.tokens;
  EXPECT_EQ(m.matching_prefix(h), 40);
  h.push_back(5);  // extended history
  EXPECT_EQ(m.matching_prefix(h), 40);
  h.resize(35);  // truncated history covers two whole chunks
  EXPECT_EQ(m.matching_prefix(h), 32);
  h = m.tokens;
  h[20] ^= 1;  // edited in chunk 1
  EXPECT_EQ(m.matching_prefix(h), 16);
  h[3] ^= 1;
  EXPECT_EQ(m.matching_prefix(h), 0);
}

TEST(Journal, ReplayCommitsErasesAndTornTail) {
  const std::string dir = testing::fresh_dir("journal");
  const std::string p = dir + "/j.cbj";
  {
    Journal j(p);
    EXPECT_TRUE(j.commit(sample_meta(1, 20), true));
    EXPECT_TRUE(j.commit(sample_meta(2, 20), true));
    EXPECT_TRUE(j.erase(1, 10, true));
    EXPECT_TRUE(j.commit(sample_meta(4, 33), true));
  }
  ReplayResult r = Journal::replay(p);
  EXPECT_EQ(r.records, 4u);
  EXPECT_FALSE(r.started);  // opened for appending only: no start record
  EXPECT_EQ(r.entries.size(), 2u);
  EXPECT_TRUE(r.entries.count(2) && r.entries.count(4));
  EXPECT_EQ(r.discarded_records, 0u);
  // A torn tail: cut the last record in half.
  const auto size = std::filesystem::file_size(p);
  std::filesystem::resize_file(p, size - 10);
  r = Journal::replay(p);
  EXPECT_EQ(r.entries.size(), 1u);
  EXPECT_EQ(r.discarded_records, 1u);
  // A flipped byte inside the first record: replay resumes at the next intact one, and the
  // bytes skipped are counted apart from the torn tail.
  {
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(30);
    f.put('\x7f');
  }
  r = Journal::replay(p);
  EXPECT_EQ(r.records, 2u);  // commit 2, erase 1
  EXPECT_EQ(r.entries.size(), 1u);
  EXPECT_TRUE(r.entries.count(2));
  EXPECT_GT(r.corrupt_bytes, 20u);
  EXPECT_EQ(r.discarded_records, 2u);  // the corrupt record and the torn tail
  // The torn tail adds nothing to the corrupt bytes: without it they are the same.
  const std::string q = dir + "/copy.cbj";
  const auto valid = r.valid_bytes, torn = std::filesystem::file_size(p) - valid;
  std::filesystem::copy_file(p, q);
  std::filesystem::resize_file(q, valid);
  EXPECT_EQ(Journal::replay(q).corrupt_bytes, r.corrupt_bytes);
  // A torn tail followed by zeros (the size grew before the data landed) is torn too; a
  // damaged tail that is not the start of a record is not: its bytes count as corrupt.
  std::filesystem::copy_file(p, q, std::filesystem::copy_options::overwrite_existing);
  {
    std::ofstream f(q, std::ios::binary | std::ios::app);
    f << std::string(100, '\0');
  }
  EXPECT_EQ(Journal::replay(q).corrupt_bytes, r.corrupt_bytes);
  {
    std::fstream f(q, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(valid));
    f.put('X');  // the torn record's magic, damaged
  }
  EXPECT_EQ(Journal::replay(q).corrupt_bytes, r.corrupt_bytes + torn + 100);
  {
    std::ofstream f(q, std::ios::binary | std::ios::trunc);
    f << std::string(5000, 'x');  // a journal overwritten whole
  }
  const ReplayResult junk = Journal::replay(q);
  EXPECT_EQ(junk.records, 0u);
  EXPECT_EQ(junk.corrupt_bytes, 5000u);
  // Compaction rewrites only live entries.
  std::map<SessionId, EntryMeta> live{{7, sample_meta(7, 10)}};
  Journal::rewrite(p, live);
  r = Journal::replay(p);
  EXPECT_TRUE(r.started);    // a rewritten journal begins with its start record,
  EXPECT_EQ(r.records, 1u);  // which is not counted among the records
  EXPECT_EQ(r.discarded_records, 0u);
  EXPECT_EQ(r.entries.size(), 1u);
  EXPECT_EQ(r.entries.at(7).tokens, live.at(7).tokens);
  // Appends after it keep it; an empty file, a missing one, or one whose start record was cut
  // off is not started.
  {
    Journal j(p);
    EXPECT_TRUE(j.erase(7, 100, true));
  }
  r = Journal::replay(p);
  EXPECT_TRUE(r.started);
  EXPECT_TRUE(r.entries.empty());
  std::filesystem::resize_file(p, 0);
  EXPECT_FALSE(Journal::replay(p).started);
  EXPECT_FALSE(Journal::replay(dir + "/none.cbj").started);
  Journal::rewrite(p, live);
  {
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(24);  // inside the start record's payload
    f.put('#');
  }
  r = Journal::replay(p);
  EXPECT_FALSE(r.started);
  EXPECT_EQ(r.entries.size(), 1u);  // the commit after it is intact
  EXPECT_GT(r.corrupt_bytes, 0u);
  std::filesystem::remove_all(dir);
}

// A rewrite larger than its writeback pieces (8 MiB, written back as it goes): every record
// comes back whole, and the file is sealed.
TEST(Journal, ARewriteOfManyPiecesReadsBackWhole) {
  const std::string dir = testing::fresh_dir("journal_pieces");
  const std::string p = dir + "/journal.cbj";
  std::map<SessionId, EntryMeta> live;
  for (SessionId s = 1; s <= 1600; ++s) live[s] = sample_meta(s, 2048);  // ~17 KB records
  Journal::rewrite(p, live);
  EXPECT_GT(std::filesystem::file_size(p), 24u << 20);  // three pieces at least
  const ReplayResult r = Journal::replay(p);
  EXPECT_TRUE(r.started);
  EXPECT_TRUE(r.sealed);
  EXPECT_EQ(r.discarded_records, 0u);
  ASSERT_EQ(r.entries.size(), live.size());
  for (const auto& [s, m] : live) {
    const EntryMeta& got = r.entries.at(s);
    EXPECT_EQ(got.tokens, m.tokens) << s;
    EXPECT_EQ(got.slots, m.slots) << s;
    EXPECT_EQ(got.checksums, m.checksums) << s;
  }
  std::filesystem::remove_all(dir);
}

// A commit whose fdatasync fails is not a commit: its caller frees the entry's slots, so the
// record is cut off again (it must not bring the entry back at the next open), and the journal
// refuses appends until a compaction rewrites it (the page cache may have lost the unsynced
// records before it too). The failure names the file and the reason.
TEST(Journal, AFailedSyncCutsTheRecordOffAndBreaksTheJournalUntilCompacted) {
  const std::string dir = testing::fresh_dir("journal_sync");
  const std::string p = dir + "/j.cbj";
  int fail_syncs = 0;
  Journal j(p, [&fail_syncs](int fd) {
    if (fail_syncs > 0) {
      --fail_syncs;
      return -EIO;
    }
    return ::fdatasync(fd) == 0 ? 0 : -errno;
  });
  ASSERT_TRUE(j.commit(sample_meta(1, 20), true));
  EXPECT_FALSE(j.broken());
  EXPECT_EQ(j.last_error(), "");
  const auto size = std::filesystem::file_size(p);
  fail_syncs = 1;
  EXPECT_FALSE(j.commit(sample_meta(2, 20), true));
  EXPECT_EQ(std::filesystem::file_size(p), size);  // the record is gone again
  EXPECT_TRUE(j.broken());
  EXPECT_EQ(j.last_error(), p + ": cannot sync a record: " + std::strerror(EIO));
  EXPECT_FALSE(j.commit(sample_meta(3, 20), true));  // refused: nothing appended
  EXPECT_FALSE(j.erase(1, 50, false));
  EXPECT_EQ(std::filesystem::file_size(p), size);
  ReplayResult r = Journal::replay(p);
  EXPECT_EQ(r.entries.size(), 1u);
  EXPECT_TRUE(r.entries.count(1));
  EXPECT_EQ(r.discarded_records, 0u);
  // A compaction whose own sync fails keeps the journal broken, and says why.
  std::map<SessionId, EntryMeta> live{{1, sample_meta(1, 20)}, {3, sample_meta(3, 20)}};
  fail_syncs = 1;
  EXPECT_FALSE(j.compact(live));
  EXPECT_TRUE(j.broken());
  EXPECT_NE(j.last_error().find(p + ": cannot rewrite journal: " + std::strerror(EIO)),
            std::string::npos)
      << j.last_error();
  EXPECT_EQ(Journal::replay(p).entries.size(), 1u);  // the old journal stands
  ASSERT_TRUE(j.compact(live));
  EXPECT_FALSE(j.broken());
  EXPECT_TRUE(j.commit(sample_meta(4, 20), true));
  r = Journal::replay(p);
  EXPECT_TRUE(r.started);
  EXPECT_EQ(r.entries.size(), 3u);
  EXPECT_FALSE(r.entries.count(2));
  std::filesystem::remove_all(dir);
}

// A new store's journal grows beside its data files until compacted: on a file system with
// little left it compacts sooner, and with too little the store is refused up front (a replay
// on a tmpfs 48 KiB larger than its data files failed 21 of its saves for the journal's room).
TEST(StoreDir, TheJournalCompactsWithinTheRoomTheFileSystemHasLeft) {
  const uint64_t mib = uint64_t{1} << 20, conf = 64 * mib;
  EXPECT_EQ(cb::store::fit_journal_compaction("d", 1024 * mib, 8 * mib, conf), conf);
  EXPECT_EQ(cb::store::fit_journal_compaction("d", 100 * mib, 8 * mib, conf), 25 * mib);
  EXPECT_EQ(cb::store::fit_journal_compaction("d", cb::store::kMinJournalRoom, 8 * mib, conf),
            cb::store::kMinJournalRoom / 4);
  try {
    cb::store::fit_journal_compaction("d", 48 << 10, 8 * mib, conf);
    ADD_FAILURE() << "48 KiB of room accepted";
  } catch (const cb::Error& e) {
    EXPECT_NE(std::string(e.what()).find("d: the file system has 48 KiB left beside the 8 MiB"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("lower --ssd or free space"), std::string::npos);
  }
}

// The journal is read back after crashes and disk faults: whatever bytes are damaged, replay
// never fails, never invents an entry, and loses only the records the damage touched.
TEST(Journal, RandomDamageLosesOnlyTheRecordsItTouches) {
  const std::string dir = testing::fresh_dir("journal_fuzz");
  const std::string p = dir + "/j.cbj";
  std::map<SessionId, EntryMeta> written;
  {
    Journal j(p);
    for (SessionId s = 1; s <= 40; ++s) {
      written[s] = sample_meta(s, 10 + static_cast<int64_t>(s));
      ASSERT_TRUE(j.commit(written[s], false));
    }
  }
  std::string clean;
  {
    std::ifstream f(p, std::ios::binary);
    clean.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  std::mt19937_64 rng(11);
  for (int round = 0; round < 300; ++round) {
    std::string d = clean;
    const int flips = 1 + static_cast<int>(rng() % 6);
    for (int f = 0; f < flips; ++f) d[rng() % d.size()] ^= static_cast<char>(1 + rng() % 255);
    if (round % 3 == 0) d.resize(rng() % d.size());  // and a torn tail
    {
      std::ofstream f(p, std::ios::binary | std::ios::trunc);
      f << d;
    }
    ReplayResult r;
    ASSERT_NO_THROW(r = Journal::replay(p)) << "round " << round;
    EXPECT_LE(r.records, 40u);
    // Every flip touches at most one record: all the others not cut off are read back.
    if (round % 3 != 0) {
      EXPECT_GE(r.records, 40u - static_cast<uint64_t>(flips)) << "round " << round;
    }
    for (const auto& [id, m] : r.entries) {
      ASSERT_TRUE(written.count(id)) << "round " << round << ": invented session " << id;
      EXPECT_EQ(m.tokens, written[id].tokens) << "round " << round;
      EXPECT_EQ(m.slots, written[id].slots) << "round " << round;
    }
  }
  std::filesystem::remove_all(dir);
}

// Crafted damage: every 20 bytes a record header whose length claims the rest of the file,
// each with a wrong checksum. Checking each against its claimed length would hash about
// n^2/40 bytes (2 MB: 100 GB, minutes); replay bounds what resyncing hashes, so it ends at
// once and counts the bytes as damage.
TEST(Journal, HeadersClaimingTheRestOfTheFileDoNotMakeReplayQuadratic) {
  const std::string dir = testing::fresh_dir("journal_claims");
  const std::string p = dir + "/j.cbj";
  const size_t n = 2u << 20, header = 20;
  std::string d(n, '\0');
  const uint32_t magic = 0x314A4243, type = 1;
  for (size_t pos = 0; pos + header <= n; pos += header) {
    const auto len = static_cast<uint32_t>(n - pos - header);
    std::memcpy(&d[pos], &magic, 4);
    std::memcpy(&d[pos + 4], &type, 4);
    std::memcpy(&d[pos + 8], &len, 4);
  }
  {
    std::ofstream f(p, std::ios::binary | std::ios::trunc);
    f << d;
  }
  const auto t0 = std::chrono::steady_clock::now();
  const ReplayResult r = Journal::replay(p);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 10.0);  // linear: milliseconds; quadratic: minutes
  EXPECT_EQ(r.records, 0u);
  EXPECT_TRUE(r.entries.empty());
  EXPECT_EQ(r.valid_bytes, 0u);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cb::store
