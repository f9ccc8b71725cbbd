// run_parts (kernels/cpu/parts.h): every part runs once, on its own thread but part 0, and an
// exception a part throws reaches the caller only after every part has finished.
#include "kernels/cpu/parts.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace cb::kernels::cpu {
namespace {

TEST(RunParts, EveryPartRunsOnceAndPartZeroOnTheCaller) {
  for (int64_t parts : {1, 2, 5}) {
    std::vector<std::atomic<int>> runs(static_cast<size_t>(parts));
    std::vector<std::thread::id> ids(static_cast<size_t>(parts));
    run_parts(parts, [&](int64_t p) {
      ++runs[static_cast<size_t>(p)];
      ids[static_cast<size_t>(p)] = std::this_thread::get_id();
    });
    for (int64_t p = 0; p < parts; ++p) EXPECT_EQ(1, runs[static_cast<size_t>(p)].load()) << p;
    EXPECT_EQ(std::this_thread::get_id(), ids[0]);
    EXPECT_EQ(static_cast<size_t>(parts), std::set<std::thread::id>(ids.begin(), ids.end()).size())
        << parts << " parts";
  }
}

TEST(RunParts, NoPartsRunsNothing) {
  int runs = 0;
  run_parts(0, [&](int64_t) { ++runs; });
  run_parts(-3, [&](int64_t) { ++runs; });
  EXPECT_EQ(0, runs);
}

TEST(RunParts, AnExceptionReachesTheCallerAfterEveryPartIsDone) {
  std::atomic<int> done{0};
  try {
    run_parts(4, [&](int64_t p) {
      if (p == 1 || p == 3) throw std::runtime_error("part " + std::to_string(p));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      ++done;
    });
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ("part 1", e.what());  // the first by part number
  }
  EXPECT_EQ(2, done.load());  // parts 0 and 2 finished before the throw reached the caller
}

}  // namespace
}  // namespace cb::kernels::cpu
