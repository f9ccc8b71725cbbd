// Numbers and text in messages: format_g, count_of and printable.
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
  EXPECT_EQ(count_of(2, "entry"), "2 entries");
  EXPECT_EQ(count_of(1, "entry"), "1 entry");
  EXPECT_EQ(count_of(3, "key"), "3 keys");  // a vowel before the y
}

TEST(Format, GeneralFormatKeepsTheDigitsAsked) {
  EXPECT_EQ(format_g(0.5), "0.5");
  EXPECT_EQ(format_g(2.6034e10, 4), "2.603e+10");
}

TEST(Format, PrintableKeepsUtf8AndEscapesTheRest) {
  EXPECT_EQ(printable("blk.1.attn_q.weight"), "blk.1.attn_q.weight");
  EXPECT_EQ(printable("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"),
            "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");  // 2-, 3- and 4-byte forms
  EXPECT_EQ(printable("blk.\xFF\xFE.weight"), "blk.\\xFF\\xFE.weight");
  EXPECT_EQ(printable("a\nb\tc\x7F"), "a\\x0Ab\\x09c\\x7F");
  EXPECT_EQ(printable(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(printable("\xC3"), "\\xC3");                             // cut short
  EXPECT_EQ(printable("\xC0\xAF"), "\\xC0\\xAF");                    // overlong '/'
  EXPECT_EQ(printable("\xED\xA0\x80"), "\\xED\\xA0\\x80");           // a UTF-16 surrogate
  EXPECT_EQ(printable("\xF4\x90\x80\x80"), "\\xF4\\x90\\x80\\x80");  // past U+10FFFF
  EXPECT_EQ(printable("\xC3\xA9\x80"), "\xC3\xA9\\x80");             // a stray continuation byte
  EXPECT_EQ(printable("a\xC2\x9B"
                      "b"),
            "a\\xC2\\x9Bb");                     // the C1 control CSI, byte by byte
  EXPECT_EQ(printable("\xC2\xA0"), "\xC2\xA0");  // U+00A0, the first after the C1 controls, kept
}

}  // namespace
}  // namespace cb
