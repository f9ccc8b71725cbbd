// WriteMeter: the SSD write backlog and the rate over busy time that the demotion budget
// (StoreConfig::drop_slow_demotions) predicts a demotion's wait from.
#include "lib/store/write_meter.h"

#include <gtest/gtest.h>

namespace cb::store {
namespace {

using Clock = WriteMeter::Clock;

Clock::time_point at_ms(int ms) {
  return Clock::time_point{} + std::chrono::milliseconds(ms);
}

TEST(WriteMeter, NoRateUntilAWriteHasEnded) {
  WriteMeter m;
  EXPECT_EQ(m.rate(), 0);
  EXPECT_LT(m.drain_seconds(1000), 0);
  m.add_pending(1000);
  m.io_begin(at_ms(0));
  EXPECT_LT(m.drain_seconds(0), 0);  // under way, not timed yet
}

TEST(WriteMeter, OverlappingWritesCountTheirTimeOnce) {
  WriteMeter m;
  // Two writes of 1 MB over [0, 100) ms and [50, 150) ms: busy 150 ms, not 200.
  m.io_begin(at_ms(0));
  m.io_begin(at_ms(50));
  m.io_end(1000000, at_ms(100));
  m.io_end(1000000, at_ms(150));
  EXPECT_NEAR(m.rate(), 2e6 / 0.150, 1);
  // Idle time between writes does not count: [1000, 1100) ms, 1 MB more.
  m.io_begin(at_ms(1000));
  m.io_end(1000000, at_ms(1100));
  EXPECT_NEAR(m.rate(), 3e6 / 0.250, 1);
}

TEST(WriteMeter, ABusyDeviceHasARateBeforeItIdles) {
  WriteMeter m;
  m.io_begin(at_ms(0));
  m.io_begin(at_ms(10));
  m.io_end(500000, at_ms(100));  // the other write is still in flight
  EXPECT_NEAR(m.rate(), 500000 / 0.100, 1);
}

TEST(WriteMeter, DrainTimeIsThePendingBytesAndMoreOverTheRate) {
  WriteMeter m;
  m.io_begin(at_ms(0));
  m.io_end(1000000, at_ms(1000));  // 1 MB/s
  m.add_pending(3000000);
  EXPECT_NEAR(m.drain_seconds(0), 3.0, 1e-9);
  EXPECT_NEAR(m.drain_seconds(500000), 3.5, 1e-9);
  m.sub_pending(1000000);
  EXPECT_EQ(m.pending(), 2000000u);
  m.sub_pending(5000000);  // never below zero
  EXPECT_EQ(m.pending(), 0u);
}

TEST(WriteMeter, APendingWriteGivesBackWhatItDidNotWrite) {
  WriteMeter m;
  {
    PendingWrite w(&m, 4096);
    EXPECT_EQ(m.pending(), 4096u);
    w.done(1024);
    EXPECT_EQ(m.pending(), 3072u);
    w.done(8192);  // capped at what is left
    EXPECT_EQ(m.pending(), 0u);
  }
  EXPECT_EQ(m.pending(), 0u);
  {
    PendingWrite w(&m, 4096);
    w.done(1000);
  }  // failed part way: the rest is not backlog any more
  EXPECT_EQ(m.pending(), 0u);
  PendingWrite none(nullptr, 4096);  // no meter: a tier that is not the SSD
  none.done(10);
  EXPECT_EQ(m.pending(), 0u);
}

}  // namespace
}  // namespace cb::store
