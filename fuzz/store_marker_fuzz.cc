// Fuzz target: the store directory's marker file (cachebench_store.json), read back when
// a store is reopened (read_store_marker), followed by what opening the store does with an
// accepted geometry before any data file is touched: it sizes the SSD tier's slot
// allocator by n_slots(), and `store clear` visits n_files data file names.
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include "fuzz/fuzz_util.h"
#include "lib/core/error.h"
#include "lib/store/chunk_allocator.h"
#include "lib/store/store_dir.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = cb::fuzz::scratch_dir("store");
  {
    std::ofstream f(cb::store::marker_path(dir), std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  cb::store::StoreDirInfo info;
  try {
    info = cb::store::read_store_marker(dir);
  } catch (const cb::Error&) {
    return 0;
  }
  const cb::store::ChunkAllocator slots(info.n_slots());
  for (uint64_t i = 0; i < info.n_files; ++i) (void)cb::store::data_file_path(dir, i);
  if (slots.capacity() != info.n_slots()) std::abort();
  return 0;
}
