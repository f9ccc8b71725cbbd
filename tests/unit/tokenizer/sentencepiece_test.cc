// SentencePieceTokenizer (the SentencePiece library on tokenizer.model), and its agreement
// with SpmTokenizer on the same LLaMA vocabulary embedded in GGUF.

#include "lib/tokenizer/sentencepiece.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "lib/core/error.h"
#include "lib/formats/gguf.h"
#include "lib/tokenizer/spm.h"
#include "tests/support/test_data.h"

namespace cb::tokenizer {
namespace {

constexpr const char* kModel = "models/tokenizers/llama2-tokenizer.model";
constexpr const char* kGguf = "models/llamacpp-vocab/ggml-vocab-llama-spm.gguf";

std::string join(const std::vector<int32_t>& ids) {
  std::ostringstream os;
  for (size_t i = 0; i < ids.size(); ++i) os << (i ? " " : "") << ids[i];
  return os.str();
}

TEST(SentencePieceTokenizer, OpenFailureNamesTheFile) {
  const std::string missing = cb::test::tmp_dir() + "/no_such_tokenizer.model";
  try {
    SentencePieceTokenizer::open(missing);
    ADD_FAILURE() << "no cb::Error";
  } catch (const cb::Error& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
  const std::string garbage =
      cb::test::write_tmp("garbage.model", "this is not a protobuf\xff\xff");
  try {
    SentencePieceTokenizer::open(garbage);
    ADD_FAILURE() << "no cb::Error";
  } catch (const cb::Error& e) {
    EXPECT_NE(std::string(e.what()).find(garbage), std::string::npos) << e.what();
  }
}

// An empty or cut-short file is named as such, not in the library's words (its source lines).
TEST(SentencePieceTokenizer, EmptyOrTruncatedFileSaysSo) {
  const std::string empty = cb::test::write_tmp("empty.model", "");
  try {
    SentencePieceTokenizer::open(empty);
    ADD_FAILURE() << "no cb::Error";
  } catch (const cb::Error& e) {
    EXPECT_NE(std::string(e.what()).find(empty + ": is empty (0 bytes)"), std::string::npos)
        << e.what();
  }
  CB_REQUIRE_DATA(full, kModel);
  const std::string cut =
      cb::test::write_tmp("cut.model", cb::test::read_file(full).substr(0, 1000));
  try {
    SentencePieceTokenizer::open(cut);
    ADD_FAILURE() << "no cb::Error";
  } catch (const cb::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(cut + ": is not a SentencePiece model: its 1000 bytes do not parse"),
              std::string::npos)
        << m;
    EXPECT_EQ(m.find(".cc("), std::string::npos) << m;  // no source line of the library
  }
}

// A SentencePiece ModelProto in protobuf's wire format: pieces (field 1) of {piece = 1,
// type = 3}; no trainer_spec, so the model type is the default, unigram.
std::string pb_varint(uint64_t v) {
  std::string s;
  do {
    const auto b = static_cast<uint8_t>(v & 0x7F);
    v >>= 7;
    s.push_back(static_cast<char>(v != 0 ? b | 0x80 : b));
  } while (v != 0);
  return s;
}
std::string pb_piece(const std::string& text, int type) {
  const std::string body = pb_varint((1 << 3) | 2) + pb_varint(text.size()) + text +
                           pb_varint(3 << 3) + pb_varint(static_cast<uint64_t>(type));
  return pb_varint((1 << 3) | 2) + pb_varint(body.size()) + body;
}

// Found by fuzzing (fuzz/sentencepiece_fuzz.cc): the library's Load does not fail with a
// status for every malformed model; for a unigram piece starting with a NUL byte its bundled
// trie builder (darts-clone) throws, and the exception left open() as it was.
TEST(SentencePieceTokenizer, LibraryExceptionsOnLoadNameTheFile) {
  const std::string p = cb::test::write_tmp(
      "nul_piece.model", pb_piece("<unk>", 2) + pb_piece(std::string("\0a", 2), 1));
  try {
    SentencePieceTokenizer::open(p);
    ADD_FAILURE() << "no cb::Error";
  } catch (const cb::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(p + ": cannot load SentencePiece model: "), std::string::npos) << m;
    EXPECT_NE(m.find("zero-length key"), std::string::npos) << m;
  }
  // The same pieces without the NUL load.
  const std::string ok =
      cb::test::write_tmp("tiny_unigram.model", pb_piece("<unk>", 2) + pb_piece("a", 1));
  EXPECT_EQ(SentencePieceTokenizer::open(ok)->vocab_size(), 2u);
}

TEST(SentencePieceTokenizer, LlamaKnownValues) {
  CB_REQUIRE_DATA(model, kModel);
  const auto t = SentencePieceTokenizer::open(model);
  EXPECT_EQ(t->kind(), "sentencepiece (tokenizer.model)");
  EXPECT_EQ(t->vocab_size(), 32000u);
  EXPECT_EQ(t->bos_id(), 1);
  EXPECT_EQ(t->eos_id(), 2);
  EXPECT_TRUE(t->add_bos_default());
  EXPECT_EQ(t->encode("Hello world", false), (std::vector<int32_t>{15043, 3186}));
  EXPECT_EQ(t->encode("Hello world", true), (std::vector<int32_t>{1, 15043, 3186}));
  EXPECT_EQ(t->decode({1, 15043, 3186, 2}), "Hello world");
  EXPECT_EQ(t->piece(15043), "\xE2\x96\x81Hello");
  EXPECT_EQ(t->piece(13), "<0x0A>");
  EXPECT_THROW(t->piece(32000), cb::Error);
  EXPECT_THROW(t->decode({-1}), cb::Error);
  EXPECT_TRUE(t->encode("", false).empty());
}

TEST(SentencePieceTokenizer, LlamaCppTestVectors) {
  CB_REQUIRE_DATA(model, kModel);
  CB_REQUIRE_DATA(gguf, kGguf);
  const std::string text = cb::test::read_file(gguf + ".inp");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (size_t pos = 0; pos < text.size();) {
    const size_t next = text.find(sep, pos);
    if (next == std::string::npos) break;
    texts.push_back(text.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::vector<std::vector<int32_t>> expected;
  std::istringstream out(cb::test::read_file(gguf + ".out"));
  for (std::string line; std::getline(out, line);) {
    std::istringstream ls(line);
    std::vector<int32_t> v;
    for (int32_t x; ls >> x;) v.push_back(x);
    expected.push_back(v);
  }
  ASSERT_EQ(texts.size(), expected.size());
  const auto t = SentencePieceTokenizer::open(model);
  size_t ok = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const auto got = t->encode(texts[i], false);
    if (got == expected[i]) {
      ++ok;
    } else {
      ADD_FAILURE() << "string " << i << " '" << texts[i] << "'\n  expected " << join(expected[i])
                    << "\n  got      " << join(got);
    }
  }
  EXPECT_EQ(ok, texts.size());
}

/// The first `n` non-empty lines of `path`.
std::vector<std::string> lines(const std::string& path, size_t n) {
  std::istringstream in(cb::test::read_file(path));
  std::vector<std::string> out;
  for (std::string line; out.size() < n && std::getline(in, line);) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

/// Both tokenizers on the same LLaMA vocabulary, for the cross-checks below.
class SentencePieceVsSpm : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string model = cb::test::data_path(kModel);
    const std::string gguf = cb::test::data_path(kGguf);
    if (!cb::test::file_exists(model) || !cb::test::file_exists(gguf)) {
      GTEST_SKIP() << "shared data not found: " << model << " / " << gguf;
    }
    sp_ = SentencePieceTokenizer::open(model);
    gguf_ = cb::formats::GgufFile::open(gguf);
    spm_ = SpmTokenizer::from_gguf(*gguf_);
  }

  /// Encodes each string with both; counts agreement and round trips, reporting failures.
  void compare(const std::vector<std::string>& texts, bool check_round_trip) {
    size_t same = 0, rt_sp = 0, rt_spm = 0;
    for (const std::string& s : texts) {
      const auto a = sp_->encode(s, true);
      const auto b = spm_->encode(s, true);
      if (a == b) {
        ++same;
      } else {
        ADD_FAILURE() << "'" << s << "'\n  sentencepiece " << join(a) << "\n  spm           "
                      << join(b);
      }
      if (!check_round_trip) continue;
      const std::string da = sp_->decode(a), db = spm_->decode(b);
      rt_sp += da == s;
      rt_spm += db == s;
      EXPECT_EQ(da, s) << "sentencepiece round trip";
      EXPECT_EQ(db, s) << "spm round trip";
    }
    EXPECT_EQ(same, texts.size());
    if (check_round_trip) {
      EXPECT_EQ(rt_sp, texts.size());
      EXPECT_EQ(rt_spm, texts.size());
    }
  }

  std::unique_ptr<SentencePieceTokenizer> sp_;
  std::unique_ptr<cb::formats::GgufFile> gguf_;
  std::unique_ptr<SpmTokenizer> spm_;
};

TEST_F(SentencePieceVsSpm, TinyStoriesLines) {
  CB_REQUIRE_DATA(path, "data/tinystories/tinystories_val_part1.txt");
  const auto texts = lines(path, 2000);
  ASSERT_GT(texts.size(), 100u);
  compare(texts, true);
}

TEST_F(SentencePieceVsSpm, WikitextLines) {
  CB_REQUIRE_DATA(path, "data/wikitext-2-raw/wiki.test.raw");
  const auto texts = lines(path, 2000);
  ASSERT_GT(texts.size(), 100u);
  compare(texts, true);
}

TEST_F(SentencePieceVsSpm, WholeDocumentsAndEdgeCases) {
  const std::vector<std::string> texts = {
      "",
      " ",
      "  ",
      "\n",
      "\n\n",
      "\t",
      "a",
      " a",
      "a ",
      "Hello world",
      " Hello  world ",
      "3333333",
      "\xF0\x9F\xA6\x99 llama emoji",
      "\xE1\x84\x80\xE1\x85\xA1 \xEC\x95\x88\xEB\x85\x95",
      "<s> and </s> and <unk> as text",
      "\xC3\xA9t\xC3\xA9",
      cb::test::read_file(cb::test::data_path("data/tinystories/tinystories_val_part1.txt"))
          .substr(0, 20000)};
  compare(texts, true);
  // A literal U+2581 decodes as a space in both: same ids, no round trip.
  compare({"\xE2\x96\x81 literal lower block",
           "a\xE2\x96\x81\xE2\x96\x81"
           "b"},
          false);
}

TEST_F(SentencePieceVsSpm, RandomBytesIncludingMalformedUtf8) {
  std::mt19937 rng(1234);
  const std::string alphabet[] = {
      "a",    "b",    " ",    "\n",           "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80",
      "\xFF", "\xC3", "\x80", "\xED\xA0\x80", "\xC0\xAF", "\x00"};
  std::vector<std::string> texts;
  for (int i = 0; i < 500; ++i) {
    std::string s;
    const int len = static_cast<int>(rng() % 12);
    for (int j = 0; j < len; ++j) s += alphabet[rng() % (sizeof(alphabet) / sizeof(alphabet[0]))];
    texts.push_back(s);
  }
  compare(texts, /*check_round_trip=*/false);
}

}  // namespace
}  // namespace cb::tokenizer
