// Machine facts: physical and available memory.
#include "lib/core/sysinfo.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

namespace cb {
namespace {

TEST(Sysinfo, AvailableMemoryIsSomeOfThePhysicalMemory) {
  const uint64_t phys = physical_memory_bytes();
  ASSERT_GT(phys, 0u);  // Linux says
  const uint64_t avail = available_memory_bytes();
  EXPECT_GT(avail, 0u);
  EXPECT_LE(avail, phys);
}

TEST(Sysinfo, AvailableMemoryIsWhatMeminfoSays) {
  std::ifstream in("/proc/meminfo");
  if (!in) GTEST_SKIP() << "no /proc/meminfo";
  uint64_t want = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("MemAvailable:", 0) == 0) want = std::stoull(line.substr(13)) * 1024;
  }
  if (want == 0) GTEST_SKIP() << "no MemAvailable line";
  // Read at another moment: within 1 GiB of each other on a machine that is not thrashing.
  const uint64_t got = available_memory_bytes();
  EXPECT_LT(got > want ? got - want : want - got, 1ull << 30);
}

}  // namespace
}  // namespace cb
