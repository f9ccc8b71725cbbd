// Crash-test victim: saves SSD entries in a loop and reports each completed commit on
// stdout ("committed <id>") until it is killed. Usage: store_crash_writer DIR FIRST_ID
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "lib/store/attention_store.h"
#include "tests/unit/store/store_test_util.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: store_crash_writer DIR FIRST_ID\n");
    return 2;
  }
  try {
    cb::store::StoreConfig c;
    c.store_dir = argv[1];
    c.ssd_bytes = 64ull << 20;
    c.chunk_bytes = 16 << 10;
    c.io_threads = 2;
    c.journal_compact_bytes = 4 << 10;  // kills land during online compactions too
    cb::store::AttentionStore st(c);
    const cb::store::EntryShape shape{4, 256};
    for (uint64_t id = std::strtoull(argv[2], nullptr, 10);; ++id) {
      const auto pos = cb::store::testing::iota_positions(static_cast<int64_t>(40 + id % 150));
      if (cb::store::testing::save_entry(st, id, id, shape, pos)) {
        std::printf("committed %llu\n", static_cast<unsigned long long>(id));
        std::fflush(stdout);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "store_crash_writer: %s\n", e.what());
    return 1;
  }
}
