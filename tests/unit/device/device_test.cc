#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "lib/core/error.h"
#include "lib/device/arena.h"
#include "lib/device/cuda_error.h"

namespace cb::device {
namespace {

// Host memory standing in for device memory; counts its frees.
std::shared_ptr<void> host_memory(uint64_t bytes, int* freed = nullptr) {
  void* p = std::aligned_alloc(4096, bytes);
  return std::shared_ptr<void>(p, [freed](void* q) {
    std::free(q);
    if (freed) ++*freed;
  });
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const cb::Error& e) {
    return e.what();
  }
  return "";
}

TEST(Arena, AlignsRoundsAndCounts) {
  Arena a(host_memory(4096), 4096, "test", 256);
  EXPECT_EQ(a.budget(), 4096u);
  Arena::Block b1 = a.allocate(1, "one byte");
  Arena::Block b2 = a.allocate(300, "three hundred");
  Arena::Block b0 = a.allocate(0, "nothing");
  EXPECT_EQ(b1.offset(), 0u);
  EXPECT_EQ(b2.offset(), 256u);
  EXPECT_EQ(b0.offset(), 768u);  // a zero-byte block still gets its own granule
  EXPECT_EQ(b2.size(), 300u);
  EXPECT_EQ(static_cast<char*>(b2.data()) - static_cast<char*>(a.base()), 256);
  EXPECT_EQ(a.used(), 256u + 512u + 256u);
  EXPECT_EQ(a.blocks(), 3u);
  b2.reset();
  EXPECT_EQ(a.used(), 512u);
  EXPECT_EQ(a.peak(), 1024u);
  EXPECT_EQ(a.blocks(), 2u);
  // The freed range is reused first (first fit).
  Arena::Block b3 = a.allocate(512, "again");
  EXPECT_EQ(b3.offset(), 256u);
}

TEST(Arena, FullBudgetThenAClearError) {
  Arena a(host_memory(1 << 16), (1 << 16) + 100, "weights", 1024);  // the tail is unusable
  EXPECT_EQ(a.budget(), 1u << 16);
  std::vector<Arena::Block> all;
  for (int i = 0; i < 64; ++i) all.push_back(a.allocate(1000, "layer"));
  EXPECT_EQ(a.largest_free(), 0u);
  EXPECT_FALSE(a.try_allocate(1).has_value());
  const std::string e = error_of([&] { a.allocate(5000, "blk.7.ffn_up"); });
  EXPECT_NE(e.find("arena weights"), std::string::npos) << e;
  EXPECT_NE(e.find("5000 bytes for blk.7.ffn_up"), std::string::npos) << e;
  EXPECT_NE(e.find("65536 bytes of 65536 bytes in use"), std::string::npos) << e;
  EXPECT_NE(e.find("--gpu-memory"), std::string::npos) << e;
  EXPECT_FALSE(a.try_allocate(uint64_t{1} << 63).has_value());
  EXPECT_FALSE(a.try_allocate(~uint64_t{0}).has_value());  // no overflow in the rounding
}

TEST(Arena, FreedNeighboursMerge) {
  Arena a(host_memory(3 * 4096), 3 * 4096, "kv", 4096);
  Arena::Block x = a.allocate(4096, "x");
  Arena::Block y = a.allocate(4096, "y");
  Arena::Block z = a.allocate(4096, "z");
  x.reset();
  z.reset();
  EXPECT_EQ(a.largest_free(), 4096u);  // two separate free pages
  EXPECT_FALSE(a.try_allocate(8192).has_value());
  y.reset();
  EXPECT_EQ(a.largest_free(), 3u * 4096u);
  EXPECT_EQ(a.allocate(3 * 4096, "all").offset(), 0u);
}

TEST(Arena, BadConstruction) {
  EXPECT_NE(error_of([] { Arena(host_memory(4096), 4096, "a", 3); }).find("power of two"),
            std::string::npos);
  EXPECT_NE(error_of([] { Arena(nullptr, 4096, "a"); }).find("no memory"), std::string::npos);
  Arena empty(nullptr, 0, "empty");
  EXPECT_FALSE(empty.try_allocate(0).has_value());
}

TEST(Arena, BlocksKeepTheMemoryAlive) {
  int freed = 0;
  Arena::Block kept;
  {
    Arena a(host_memory(8192, &freed), 8192, "t");
    kept = a.allocate(100, "kept");
    std::memset(kept.data(), 7, 100);
  }
  EXPECT_EQ(freed, 0);
  EXPECT_EQ(static_cast<unsigned char*>(kept.data())[99], 7);
  Arena::Block moved = std::move(kept);
  EXPECT_FALSE(kept);
  EXPECT_TRUE(moved);
  moved.reset();
  EXPECT_EQ(freed, 1);
}

// Random allocations and frees: blocks never overlap (each is filled with its own tag and
// checked before it is freed), stay inside the budget, and `used` is their rounded sum.
TEST(Arena, RandomTrafficAgainstAModel) {
  const uint64_t budget = 1 << 20;
  const uint64_t align = 64;
  Arena a(host_memory(budget), budget, "random", align);
  std::mt19937 rng(5);
  std::map<int, Arena::Block> live;
  int next = 0;
  uint64_t used = 0;
  auto rounded = [&](uint64_t n) { return n == 0 ? align : (n + align - 1) / align * align; };
  for (int step = 0; step < 20000; ++step) {
    if (live.empty() || rng() % 3 != 0) {
      const uint64_t n = rng() % 2 == 0 ? rng() % 200 : rng() % 40000;
      std::optional<Arena::Block> b = a.try_allocate(n);
      if (!b) {
        EXPECT_LT(a.largest_free(), rounded(n));
        continue;
      }
      ASSERT_LE(b->offset() + n, budget);
      ASSERT_EQ(b->offset() % align, 0u);
      std::memset(b->data(), next & 0xff, n);
      used += rounded(n);
      live.emplace(next++, std::move(*b));
    } else {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      const auto* p = static_cast<const unsigned char*>(it->second.data());
      for (uint64_t i = 0; i < it->second.size(); ++i) {
        ASSERT_EQ(p[i], it->first & 0xff) << "block " << it->first << " was overwritten";
      }
      used -= rounded(it->second.size());
      live.erase(it);
    }
    ASSERT_EQ(a.used(), used);
  }
  live.clear();
  EXPECT_EQ(a.used(), 0u);
  EXPECT_EQ(a.largest_free(), budget);
}

TEST(Arena, ConcurrentUse) {
  Arena a(host_memory(1 << 20), 1 << 20, "threads", 256);
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&a, t] {
      std::vector<Arena::Block> mine;
      for (int i = 0; i < 2000; ++i) {
        if (auto b = a.try_allocate(static_cast<uint64_t>(100 + (i * 7 + t) % 900))) {
          mine.push_back(std::move(*b));
        }
        if (mine.size() > 8) mine.erase(mine.begin());
      }
    });
  }
  for (std::thread& t : ts) t.join();
  EXPECT_EQ(a.used(), 0u);
  EXPECT_EQ(a.blocks(), 0u);
  EXPECT_EQ(a.largest_free(), 1u << 20);
}

TEST(CudaError, NamesTheCallFileAndLine) {
  EXPECT_EQ(cuda_error_message("cudaMalloc(&p, n)", "/src/cachebench/lib/device/x.cc", 42,
                               "cudaErrorMemoryAllocation", "out of memory", "lower the budget"),
            "lib/device/x.cc:42: cudaMalloc(&p, n) failed: cudaErrorMemoryAllocation (out of "
            "memory); lower the budget");
  EXPECT_EQ(cuda_error_message("f()", "k.cu", 7, "cudaErrorInvalidValue", ""),
            "k.cu:7: f() failed: cudaErrorInvalidValue");
  EXPECT_EQ(cuda_error_message("f()", nullptr, 1, "E", "t"), "?:1: f() failed: E (t)");
}

}  // namespace
}  // namespace cb::device
