// Machine facts: physical and available memory, a thread's CPU time, CPU steal.
#include "lib/core/sysinfo.h"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

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

TEST(Sysinfo, ThreadCpuTimeCountsComputingNotSleeping) {
  const double t0 = thread_cpu_seconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const double t1 = thread_cpu_seconds();
  EXPECT_LT(t1 - t0, 0.05) << "a sleeping thread uses no CPU";
  // Spin for 50 ms of CPU time: the wall clock takes at least as long.
  const auto w0 = std::chrono::steady_clock::now();
  volatile double x = 0;
  while (thread_cpu_seconds() - t1 < 0.05) x = x + 1;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
  EXPECT_GE(wall, 0.05 * 0.999);
  // Another thread's computing is not this one's.
  std::thread([] {
    const double s = thread_cpu_seconds();
    volatile double y = 0;
    while (thread_cpu_seconds() - s < 0.05) y = y + 1;
  }).join();
  EXPECT_LT(thread_cpu_seconds() - t1, 0.05 + 0.02);
}

TEST(Sysinfo, CpuTicksAdvanceAndStealIsAShareOfThem) {
  const CpuTicks a = cpu_ticks();
  if (!a.known) GTEST_SKIP() << "no /proc/stat";
  EXPECT_LE(a.steal, a.total);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // USER_HZ 100: 10 ticks a CPU
  const CpuTicks b = cpu_ticks();
  ASSERT_TRUE(b.known);
  EXPECT_GT(b.total, a.total);
  EXPECT_GE(b.steal, a.steal);
  const double share = steal_share(a, b);
  EXPECT_GE(share, 0.0);
  EXPECT_LE(share, 1.0);
}

TEST(Sysinfo, StealShareIsStolenTicksOverAllTicks) {
  const CpuTicks from{1000, 5000, true}, to{1030, 5200, true};
  EXPECT_DOUBLE_EQ(steal_share(from, to), 0.15);
  EXPECT_EQ(steal_share(to, to), -1.0);          // no tick passed
  EXPECT_EQ(steal_share(CpuTicks{}, to), -1.0);  // unknown
  EXPECT_EQ(steal_share(from, CpuTicks{1030, 5200}), -1.0);
  EXPECT_EQ(steal_share(from, CpuTicks{999, 5200, true}), -1.0);  // steal went back
}

}  // namespace
}  // namespace cb
