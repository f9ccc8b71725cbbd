// cb::Error: messages kept whole for what().
#include "lib/core/error.h"

#include <gtest/gtest.h>

#include <string>

namespace cb {
namespace {

TEST(Error, ANulByteInTheMessageIsEscapedNotTheEndOfIt) {
  // A tensor name read from a damaged file, quoted in the middle of a message.
  const std::string name("blk.2\0ffn_down", 14);
  const Error e = make_error("m.gguf", "tensor '" + name + "' has 3 dims", "re-convert it");
  EXPECT_EQ(std::string(e.what()), "m.gguf: tensor 'blk.2\\x00ffn_down' has 3 dims; re-convert it");
  const UsageError u(std::string("a\0\0b", 4));
  EXPECT_EQ(std::string(u.what()), "a\\x00\\x00b");
}

TEST(Error, AMessageWithoutNulIsKeptAsItIs) {
  const std::string m = "x.json: field \"a\\x00\" is not a number";  // an escape, not a NUL
  EXPECT_EQ(std::string(Error(m).what()), m);
}

}  // namespace
}  // namespace cb
