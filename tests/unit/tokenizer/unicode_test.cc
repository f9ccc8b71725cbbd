#include "lib/tokenizer/unicode.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace cb::tokenizer {
namespace {

TEST(UnicodeTest, SettledLengthHoldsBackWhatMayStillChange) {
  EXPECT_EQ(settled_length(""), 0u);
  EXPECT_EQ(settled_length("Hi \xF0\x9F\x98\x80"), 7u);  // a whole emoji is settled
  EXPECT_EQ(settled_length("Hi \xF0\x9F\x98"), 3u);      // raw bytes of an unfinished one
  EXPECT_EQ(settled_length("Hi \xF0"), 3u);
  EXPECT_EQ(settled_length("caf\xC3"), 3u);
  EXPECT_EQ(settled_length("caf\xC3\xA9"), 5u);
  // SentencePiece's U+FFFD for each byte of an unfinished character.
  EXPECT_EQ(settled_length("Hi \xEF\xBF\xBD\xEF\xBF\xBD"), 3u);
  EXPECT_EQ(settled_length("a\xEF\xBF\xBD b"), 6u);  // one inside the text stays
  EXPECT_EQ(settled_length("\x80\x80\x80\x80"),
            4u);  // stray continuation bytes: nothing to wait for
}

// The SentencePiece library decodes each byte of an unfinished character as U+FFFD, and the
// whole character once its last byte came: the stream prints it once, whole.
TEST(UnicodeTest, StreamIncrementPrintsAByteSpelledCharacterOnceWhole) {
  std::string shown, out;
  for (const char* text : {"Hi", "Hi \xEF\xBF\xBD", "Hi \xEF\xBF\xBD\xEF\xBF\xBD",
                           "Hi \xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD", "Hi \xF0\x9F\x98\x80",
                           "Hi \xF0\x9F\x98\x80 great"}) {
    out += stream_increment(text, &shown);
  }
  out += stream_increment("Hi \xF0\x9F\x98\x80 great", &shown, /*last=*/true);
  EXPECT_EQ(out, "Hi \xF0\x9F\x98\x80 great");
  EXPECT_EQ(shown, out);
  // A text that ends in U+FFFD for good is printed whole at the end.
  std::string s2;
  EXPECT_EQ(stream_increment("a\xEF\xBF\xBD", &s2), "a");
  EXPECT_EQ(stream_increment("a\xEF\xBF\xBD", &s2, true), "\xEF\xBF\xBD");
}

TEST(UnicodeTest, LetterClass) {
  for (uint32_t cp : {0x41u, 0x7Au, 0xE9u, 0x416u, 0x4E00u, 0x1780u, 0xAAu, 0x2C6u, 0x20000u}) {
    EXPECT_TRUE(is_letter(cp)) << std::hex << cp;
  }
  for (uint32_t cp : {0x30u, 0x20u, 0x5Fu, 0xD7u, 0x17B6u, 0x1F600u, 0x301u, 0x110041u}) {
    EXPECT_FALSE(is_letter(cp)) << std::hex << cp;
  }
}

TEST(UnicodeTest, NumberClass) {
  for (uint32_t cp : {0x30u, 0x39u, 0xBDu, 0xB2u, 0x663u, 0x216Bu, 0x3007u, 0x1D7CEu}) {
    EXPECT_TRUE(is_number(cp)) << std::hex << cp;
  }
  for (uint32_t cp : {0x41u, 0x2Eu, 0x4E00u, 0x1F600u})
    EXPECT_FALSE(is_number(cp)) << std::hex << cp;
}

TEST(UnicodeTest, PunctuationClass) {
  for (uint32_t cp : {0x21u, 0x2Cu, 0x5Fu, 0xBFu, 0xABu, 0x2014u, 0x3001u, 0xFF01u, 0x55Au}) {
    EXPECT_TRUE(is_punctuation(cp)) << std::hex << cp;
  }
  // Symbols (S*) are not P*, but the ASCII ones count for Rust's is_ascii_punctuation.
  for (uint32_t cp : {0x24u, 0x2Bu, 0x3Cu, 0x5Eu, 0x60u, 0x7Cu, 0x7Eu}) {
    EXPECT_FALSE(is_punctuation(cp)) << std::hex << cp;
    EXPECT_TRUE(is_ascii_punctuation(cp)) << std::hex << cp;
  }
  for (uint32_t cp : {0x41u, 0x30u, 0x20u, 0xBFu, 0x7Fu}) {
    EXPECT_FALSE(is_ascii_punctuation(cp)) << std::hex << cp;
  }
  EXPECT_FALSE(is_punctuation(0x20ACu));  // euro sign is Sc
}

TEST(UnicodeTest, TablesAreUnicode16) {
  EXPECT_TRUE(is_letter(0x13460));   // Egyptian Hieroglyphs Extended-A (Unicode 16.0)
  EXPECT_TRUE(is_number(0x1CCF0));   // outlined digit zero (Unicode 16.0)
  EXPECT_FALSE(is_letter(0x11B60));  // unassigned in 16.0 (Sharada Supplement, 17.0)
}

TEST(UnicodeTest, HfPunctuationIsUnicode8) {
  for (uint32_t cp : {0x21u, 0x24u, 0x7Eu, 0x2Cu, 0xBFu, 0x3001u, 0x166Du, 0x111C9u}) {
    EXPECT_TRUE(is_hf_punctuation(cp)) << std::hex << cp;
  }
  // P* since Unicode 9.0 and later: not punctuation for Hugging Face's Punctuation.
  for (uint32_t cp : {0x2E43u, 0x2E5Du, 0x1E95Eu, 0x41u, 0x20u, 0x20ACu}) {
    EXPECT_FALSE(is_hf_punctuation(cp)) << std::hex << cp;
  }
  EXPECT_TRUE(is_punctuation(0x2E43));
  EXPECT_FALSE(is_punctuation(0x166D));
}

TEST(UnicodeTest, WhitespaceIsUnicodeWhiteSpace) {
  for (uint32_t cp : {0x09u, 0x0Au, 0x0Bu, 0x0Cu, 0x0Du, 0x20u, 0x85u, 0xA0u, 0x1680u, 0x2000u,
                      0x200Au, 0x2028u, 0x2029u, 0x202Fu, 0x205Fu, 0x3000u}) {
    EXPECT_TRUE(is_whitespace(cp)) << std::hex << cp;
  }
  // Python's str.isspace accepts U+001C..U+001F; White_Space does not. ZWSP is Cf.
  for (uint32_t cp : {0x1Cu, 0x1Fu, 0x200Bu, 0xFEFFu, 0x41u, 0x110020u}) {
    EXPECT_FALSE(is_whitespace(cp)) << std::hex << cp;
  }
}

TEST(UnicodeTest, Utf8DecodesValidSequences) {
  const std::string s = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";  // a é € 😀
  const auto u = utf8_decode(s);
  ASSERT_EQ(u.size(), 4u);
  EXPECT_EQ(u[0].cp, 0x61u);
  EXPECT_EQ(u[1].cp, 0xE9u);
  EXPECT_EQ(u[2].cp, 0x20ACu);
  EXPECT_EQ(u[3].cp, 0x1F600u);
  EXPECT_EQ(u[3].offset, 6u);
  EXPECT_EQ(u[3].len, 4u);
  std::string back;
  for (const auto& x : u) utf8_append(back, x.cp);
  EXPECT_EQ(back, s);
}

TEST(UnicodeTest, Utf8InvalidBytesAreSingleUnits) {
  // stray continuation, 0xFF, truncated 3-byte, overlong NUL, surrogate, > U+10FFFF
  const std::string cases[] = {"\x80",     "\xFF",         "\xE2\x82",
                               "\xC0\x80", "\xED\xA0\x80", "\xF4\x90\x80\x80"};
  for (const std::string& s : cases) {
    const auto u = utf8_decode(s);
    ASSERT_EQ(u.size(), s.size()) << "bytes: " << s.size();
    std::string back;
    for (size_t i = 0; i < u.size(); ++i) {
      EXPECT_EQ(u[i].len, 1u);
      EXPECT_GE(u[i].cp, kInvalidCodepointBase);
      EXPECT_FALSE(is_letter(u[i].cp) || is_number(u[i].cp) || is_whitespace(u[i].cp) ||
                   is_punctuation(u[i].cp));
      utf8_append(back, u[i].cp);
    }
    EXPECT_EQ(back, s);
  }
  // A valid character right after an invalid byte is still decoded.
  const auto u = utf8_decode("\xE2\xC3\xA9");
  ASSERT_EQ(u.size(), 2u);
  EXPECT_EQ(u[1].cp, 0xE9u);
}

TEST(UnicodeTest, Gpt2ByteMapIsBijective) {
  EXPECT_EQ(byte_to_codepoint(' '), 0x120u);   // Ġ
  EXPECT_EQ(byte_to_codepoint('\n'), 0x10Au);  // Ċ
  EXPECT_EQ(byte_to_codepoint('a'), static_cast<uint32_t>('a'));
  EXPECT_EQ(byte_to_codepoint(0xAD), 0x143u);
  std::set<uint32_t> seen;
  for (int b = 0; b < 256; ++b) {
    const uint32_t cp = byte_to_codepoint(static_cast<uint8_t>(b));
    EXPECT_TRUE(seen.insert(cp).second);
    EXPECT_EQ(codepoint_to_byte(cp), b);
  }
  EXPECT_EQ(codepoint_to_byte(0x20), -1);
  EXPECT_EQ(codepoint_to_byte(0x144), -1);
  EXPECT_EQ(codepoint_to_byte(0x4E00), -1);
}

}  // namespace
}  // namespace cb::tokenizer
