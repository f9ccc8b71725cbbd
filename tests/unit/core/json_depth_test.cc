#include "lib/core/json_depth.h"

#include <gtest/gtest.h>

#include <string>

namespace {

// Brackets inside strings, escaped quotes included, do not nest; closing brackets never take
// the depth below zero.
TEST(JsonDepth, CountsNestingOutsideStrings) {
  EXPECT_EQ(cb::json_nesting_depth("42"), 0u);
  EXPECT_EQ(cb::json_nesting_depth("[]"), 1u);
  EXPECT_EQ(cb::json_nesting_depth(R"({"a": [[1], {"b": []}], "c": 2})"), 4u);
  EXPECT_EQ(cb::json_nesting_depth(R"(["[[[{{{", "\"[[", "\\", [0]])"), 2u);
  EXPECT_EQ(cb::json_nesting_depth("]]]][]"), 1u);
  EXPECT_EQ(cb::json_nesting_depth(std::string(100000, '[')), 100000u);
}

}  // namespace
