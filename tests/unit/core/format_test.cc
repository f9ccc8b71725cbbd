// Numbers in messages: format_g and count_of.
#include "lib/core/format.h"

#include <gtest/gtest.h>

namespace cb {
namespace {

TEST(Format, CountOfIsSingularOnlyForOne) {
  EXPECT_EQ(count_of(1, "session"), "1 session");
  EXPECT_EQ(count_of(0, "session"), "0 sessions");
  EXPECT_EQ(count_of(3, "turn"), "3 turns");
  EXPECT_EQ(count_of(-1, "turn"), "-1 turns");
  EXPECT_EQ(count_of(2, "pass"), "2 passes");
  EXPECT_EQ(count_of(1, "pass"), "1 pass");
  EXPECT_EQ(count_of(4, "batch"), "4 batches");
  EXPECT_EQ(count_of(5, "box"), "5 boxes");
  EXPECT_EQ(count_of(2, "flash"), "2 flashes");
}

TEST(Format, GeneralFormatKeepsTheDigitsAsked) {
  EXPECT_EQ(format_g(0.5), "0.5");
  EXPECT_EQ(format_g(2.6034e10, 4), "2.603e+10");
}

}  // namespace
}  // namespace cb
