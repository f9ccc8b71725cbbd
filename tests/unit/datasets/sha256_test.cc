#include "datasets/sha256.h"

#include <gtest/gtest.h>

#include <string>

#include "lib/core/error.h"
#include "tests/support/test_data.h"

namespace cb::datasets {
namespace {

// FIPS 180-4 / NIST CSHA examples.
TEST(Sha256, FipsVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjk"
                       "lmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

TEST(Sha256, MillionAInOddChunks) {
  Sha256 h;
  const std::string chunk(997, 'a');
  size_t left = 1000000;
  while (left > 0) {
    const size_t n = std::min(left, chunk.size());
    h.update(chunk.data(), n);
    left -= n;
  }
  EXPECT_EQ(to_hex(h.digest()), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, PaddingBoundaries) {
  // Lengths around the 55/56/64-byte padding edges agree between one-shot and bytewise.
  for (size_t len : {55u, 56u, 57u, 63u, 64u, 65u, 119u, 120u, 128u}) {
    const std::string s(len, 'x');
    Sha256 h;
    for (char c : s) h.update(&c, 1);
    EXPECT_EQ(to_hex(h.digest()), sha256_hex(s)) << len;
  }
  EXPECT_EQ(sha256_hex(std::string(64, 'a')),
            "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
}

TEST(Sha256, FileMatchesManifest) {
  CB_REQUIRE_DATA(p, "data/wikitext-2-raw/wiki.test.raw");
  EXPECT_EQ(sha256_file_hex(p), "173c87a53759e0201f33e0ccf978e510c2042d7f2cb78229d9a50d79b9e7dd08");
}

TEST(Sha256, MissingFileNamesIt) {
  try {
    sha256_file_hex("/nonexistent/x.txt");
    FAIL();
  } catch (const cb::Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/x.txt"), std::string::npos);
  }
}

}  // namespace
}  // namespace cb::datasets
