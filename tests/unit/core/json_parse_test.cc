#include "lib/core/json_parse.h"

#include <gtest/gtest.h>

#include <string>

#include "lib/core/error.h"

namespace {

// nlohmann keeps the last of two equal keys without a word; the check finds the first key an
// object holds twice, and says which object holds it.
TEST(JsonKeys, FindsAKeyHeldTwiceAndWhere) {
  cb::DuplicateJsonKey d;
  EXPECT_FALSE(cb::find_duplicate_json_key(R"({"a": 1, "b": {"a": 2}, "c": [{"a": 3}]})", 8, &d));
  ASSERT_TRUE(cb::find_duplicate_json_key(R"({"a": 1, "b": 2, "a": 3})", 1, &d));
  EXPECT_EQ(d.key, "a");
  EXPECT_EQ(d.in, "");
  ASSERT_TRUE(cb::find_duplicate_json_key(R"({"x": 0, "sources": {"k": "1", "k": "2"}})", 8, &d));
  EXPECT_EQ(d.key, "k");
  EXPECT_EQ(d.in, "sources");
  // An object inside an array has no key of its own.
  ASSERT_TRUE(cb::find_duplicate_json_key(R"({"l": [{"k": 1, "k": 2}]})", 8, &d));
  EXPECT_EQ(d.in, "");
}

// Only objects down to max_depth are checked (safetensors checks the header's top level); keys
// equal across different objects are no duplicate.
TEST(JsonKeys, ChecksOnlyDownToMaxDepth) {
  const char* nested = R"({"t": {"dtype": "F32", "dtype": "F16"}})";
  EXPECT_FALSE(cb::find_duplicate_json_key(nested, 1, nullptr));
  EXPECT_TRUE(cb::find_duplicate_json_key(nested, 2, nullptr));
  EXPECT_FALSE(cb::find_duplicate_json_key(R"({"a": {"k": 1}, "b": {"k": 1}})", 8, nullptr));
  EXPECT_FALSE(cb::find_duplicate_json_key("[1, 2]", 8, nullptr));
}

// nlohmann's parser ends its input at a NUL byte: text after one would go unread, so a text
// that holds one is refused, naming the file and the offset.
TEST(JsonNul, ANulByteIsRefusedWithItsOffset) {
  EXPECT_NO_THROW(cb::refuse_json_nul(R"({"a": "\u0000"})", "f.json", "fix"));  // escaped: text
  const std::string text("{\"a\": 1}\0{\"a\": 2}", 17);
  try {
    cb::refuse_json_nul(text, "f.json", "fix it");
    FAIL() << "no error";
  } catch (const cb::Error& e) {
    EXPECT_STREQ(e.what(), "f.json: holds a NUL byte at offset 8, not JSON text; fix it");
  }
}

}  // namespace
