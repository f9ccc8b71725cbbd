// SpmTokenizer: SentencePiece BPE over a GGUF-embedded llama vocabulary.

#include "lib/tokenizer/spm.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "lib/core/error.h"
#include "lib/formats/gguf.h"
#include "tests/support/test_data.h"

namespace cb::tokenizer {
namespace {

constexpr int32_t kN = static_cast<int32_t>(SpmTokenType::kNormal);
constexpr int32_t kUnk = static_cast<int32_t>(SpmTokenType::kUnknown);
constexpr int32_t kCtl = static_cast<int32_t>(SpmTokenType::kControl);
constexpr int32_t kUser = static_cast<int32_t>(SpmTokenType::kUserDefined);
constexpr int32_t kUnused = static_cast<int32_t>(SpmTokenType::kUnused);
constexpr int32_t kByte = static_cast<int32_t>(SpmTokenType::kByte);

/// A tiny vocabulary built piece by piece: <unk>, <s>, </s>, optional 256 byte pieces,
/// then whatever the test adds.
struct Vocab {
  std::vector<std::string> pieces;
  std::vector<float> scores;
  std::vector<int32_t> types;

  explicit Vocab(bool with_bytes) {
    add("<unk>", 0, kUnk);
    add("<s>", 0, kCtl);
    add("</s>", 0, kCtl);
    if (with_bytes) {
      for (int b = 0; b < 256; ++b) {
        char buf[8];
        std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
        add(buf, 0, kByte);
      }
    }
  }
  int32_t add(const std::string& p, float score, int32_t type = kN) {
    pieces.push_back(p);
    scores.push_back(score);
    types.push_back(type);
    return static_cast<int32_t>(pieces.size() - 1);
  }
  int32_t id(const std::string& p) const {
    for (size_t i = 0; i < pieces.size(); ++i)
      if (pieces[i] == p) return static_cast<int32_t>(i);
    return -1;
  }
  SpmTokenizer make(bool space_prefix = false) const {
    SpmOptions o;
    o.bos_id = 1;
    o.eos_id = 2;
    o.unk_id = 0;
    o.add_space_prefix = space_prefix;
    return SpmTokenizer(pieces, scores, types, o, "tiny-vocab");
  }
};

std::string join(const std::vector<int32_t>& ids) {
  std::ostringstream os;
  for (size_t i = 0; i < ids.size(); ++i) os << (i ? " " : "") << ids[i];
  return os.str();
}

TEST(SpmTokenizer, MergesHighestScoreFirst) {
  Vocab v(false);
  const int32_t a = v.add("a", -10), b = v.add("b", -10), c = v.add("c", -10);
  const int32_t ab = v.add("ab", -2), bc = v.add("bc", -1);
  EXPECT_EQ(v.make().encode("abc", false), (std::vector<int32_t>{a, bc}));
  Vocab w(false);
  w.add("a", -10), w.add("b", -10), w.add("c", -10);
  const int32_t ab2 = w.add("ab", -1);
  w.add("bc", -2);
  EXPECT_EQ(w.make().encode("abc", false), (std::vector<int32_t>{ab2, w.id("c")}));
  (void)ab, (void)b, (void)c;
}

TEST(SpmTokenizer, MergesChainIntoLongerPieces) {
  Vocab v(false);
  v.add("a", -10), v.add("b", -10), v.add("c", -10), v.add("d", -10);
  v.add("ab", -1), v.add("cd", -2);
  const int32_t abcd = v.add("abcd", -3);
  EXPECT_EQ(v.make().encode("abcd", false), (std::vector<int32_t>{abcd}));
  // "bc" scores better than "ab" but "abcd" is reachable only through ab + cd.
  Vocab w(false);
  w.add("a", -10), w.add("b", -10), w.add("c", -10), w.add("d", -10);
  w.add("ab", -2), w.add("cd", -3), w.add("abcd", -4);
  const int32_t bc = w.add("bc", -1);
  EXPECT_EQ(w.make().encode("abcd", false), (std::vector<int32_t>{w.id("a"), bc, w.id("d")}));
}

TEST(SpmTokenizer, EqualScoresMergeLeftmost) {
  Vocab v(false);
  const int32_t a = v.add("a", -10);
  const int32_t aa = v.add("aa", -1);
  EXPECT_EQ(v.make().encode("aaa", false), (std::vector<int32_t>{aa, a}));
  EXPECT_EQ(v.make().encode("aaaaa", false), (std::vector<int32_t>{aa, aa, a}));
}

TEST(SpmTokenizer, SpacePrefixAndDecode) {
  Vocab v(false);
  const int32_t sp = v.add("\xE2\x96\x81", -10);
  const int32_t h = v.add("h", -10), i = v.add("i", -10);
  const int32_t hi = v.add("\xE2\x96\x81hi", -1);
  v.add("\xE2\x96\x81h", -2);
  const SpmTokenizer t = v.make(/*space_prefix=*/true);
  EXPECT_EQ(t.encode("hi", false), (std::vector<int32_t>{hi}));
  EXPECT_EQ(t.encode("hi hi", true), (std::vector<int32_t>{1, hi, hi}));
  EXPECT_EQ(t.encode(" ", false), (std::vector<int32_t>{sp, sp}));
  EXPECT_TRUE(t.encode("", false).empty());
  EXPECT_EQ(t.encode("", true), (std::vector<int32_t>{1}));
  EXPECT_EQ(t.decode({1, hi, hi, 2}), "hi hi");
  EXPECT_EQ(t.decode({sp, sp}), " ");
  EXPECT_EQ(t.decode({h, i}), "hi");
  const SpmTokenizer no_prefix = v.make(false);
  EXPECT_EQ(no_prefix.encode("hi", false), (std::vector<int32_t>{h, i}));
  EXPECT_EQ(no_prefix.decode({hi}), " hi");
}

TEST(SpmTokenizer, ByteFallbackForUnknownCharacters) {
  Vocab v(true);
  const int32_t a = v.add("a", -10);
  const SpmTokenizer t = v.make();
  EXPECT_TRUE(t.byte_fallback());
  // U+00E9 is C3 A9; byte pieces follow the 3 specials, so <0xXX> has id 3 + XX.
  EXPECT_EQ(t.encode("a\xC3\xA9"
                     "a",
                     false),
            (std::vector<int32_t>{a, 3 + 0xC3, 3 + 0xA9, a}));
  EXPECT_EQ(t.decode({a, 3 + 0xC3, 3 + 0xA9, a}),
            "a\xC3\xA9"
            "a");
  EXPECT_EQ(t.decode({3 + 0x0A}), "\n");
  // A malformed byte becomes U+FFFD (as in SentencePiece's normalizer), then bytes.
  EXPECT_EQ(t.encode("\xFF", false), (std::vector<int32_t>{3 + 0xEF, 3 + 0xBF, 3 + 0xBD}));
}

TEST(SpmTokenizer, UnknownWithoutBytePieces) {
  Vocab v(false);
  const int32_t a = v.add("a", -10);
  const SpmTokenizer t = v.make();
  EXPECT_FALSE(t.byte_fallback());
  EXPECT_EQ(t.encode("a\xC3\xA9z", false), (std::vector<int32_t>{a, 0, 0}));
  EXPECT_EQ(t.decode({a, 0}), "a \xE2\x81\x87 ");
}

TEST(SpmTokenizer, ControlPiecesAreNotMerged) {
  Vocab v(false);
  const int32_t a = v.add("a", -10), b = v.add("b", -10);
  v.add("ab", 0, kCtl);
  v.add("<", -10), v.add("s", -10), v.add(">", -10);
  const SpmTokenizer t = v.make();
  EXPECT_EQ(t.encode("ab", false), (std::vector<int32_t>{a, b}));
  EXPECT_EQ(t.encode("<s>", false).size(), 3u);  // "<s>" in text is plain text
  EXPECT_EQ(t.decode({1, a, 2, b}), "ab");
}

TEST(SpmTokenizer, UnusedPiecesAreSplitAgain) {
  // As SentencePiece's bpe_model: an unused piece takes part in the merge order but is
  // resegmented into the two symbols it was merged from.
  Vocab v(false);
  const int32_t a = v.add("a", -10), b = v.add("b", -10), c = v.add("c", -10);
  v.add("ab", 0, kUnused);
  v.add("bc", -1);
  EXPECT_EQ(v.make().encode("abc", false), (std::vector<int32_t>{a, b, c}));
}

TEST(SpmTokenizer, UserDefinedPiecesAreAtomic) {
  Vocab v(false);
  const int32_t x = v.add("x", -10), y = v.add("y", -10);
  const int32_t xy = v.add("xy", -1);
  const int32_t ud = v.add("<tag>", 0, kUser);
  v.add("<", -10), v.add(">", -10);
  const SpmTokenizer t = v.make();
  EXPECT_EQ(t.encode("x<tag>y", false), (std::vector<int32_t>{x, ud, y}));
  EXPECT_EQ(t.encode("xy<tag>", false), (std::vector<int32_t>{xy, ud}));
  EXPECT_EQ(t.decode({x, ud, y}), "x<tag>y");
}

TEST(SpmTokenizer, AccessorsAndIdChecks) {
  Vocab v(true);
  v.add("a", -10);
  const SpmTokenizer t = v.make();
  EXPECT_EQ(t.vocab_size(), v.pieces.size());
  EXPECT_EQ(t.bos_id(), 1);
  EXPECT_EQ(t.eos_id(), 2);
  EXPECT_EQ(t.piece(3 + 0x41), "<0x41>");
  EXPECT_EQ(t.type(1), SpmTokenType::kControl);
  EXPECT_EQ(t.kind(), "spm (gguf)");
  EXPECT_THROW(t.piece(-1), cb::Error);
  EXPECT_THROW(t.decode({static_cast<int32_t>(v.pieces.size())}), cb::Error);
}

void expect_error(const std::function<void()>& fn, const std::vector<std::string>& needles) {
  try {
    fn();
    ADD_FAILURE() << "no cb::Error thrown";
  } catch (const cb::Error& e) {
    for (const auto& n : needles)
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos)
          << "message '" << e.what() << "' lacks '" << n << "'";
  }
}

TEST(SpmTokenizer, MalformedVocabularyIsRejected) {
  Vocab v(false);
  v.add("a", -10);
  SpmOptions o;
  expect_error([&] { SpmTokenizer(v.pieces, {0.f}, v.types, o, "f.gguf"); },
               {"f.gguf", "tokenizer.ggml.scores"});
  expect_error([&] { SpmTokenizer(v.pieces, v.scores, {kN}, o, "f.gguf"); },
               {"f.gguf", "tokenizer.ggml.token_type"});
  auto bad_type = v.types;
  bad_type[3] = 9;
  expect_error([&] { SpmTokenizer(v.pieces, v.scores, bad_type, o, "f.gguf"); },
               {"f.gguf", "tokenizer.ggml.token_type[3]"});
  auto bad_byte = v.types;
  bad_byte[3] = kByte;
  expect_error([&] { SpmTokenizer(v.pieces, v.scores, bad_byte, o, "f.gguf"); },
               {"f.gguf", "<0xXX>"});
  SpmOptions bad_bos;
  bad_bos.bos_id = 99;
  expect_error([&] { SpmTokenizer(v.pieces, v.scores, v.types, bad_bos, "f.gguf"); },
               {"f.gguf", "tokenizer.ggml.bos_token_id"});
  expect_error([&] { SpmTokenizer({}, {}, {}, o, "f.gguf"); }, {"f.gguf", "empty"});
}

TEST(SpmTokenizer, NoUnknownAndNoBytesThrowsOnUnknownText) {
  std::vector<std::string> p = {"a"};
  SpmOptions o;
  o.add_space_prefix = false;
  const SpmTokenizer t(p, {0.f}, {kN}, o, "v");
  EXPECT_EQ(t.encode("aa", false), (std::vector<int32_t>{0, 0}));
  expect_error([&] { t.encode("ab", false); }, {"v", "'b'"});
}

// ---- GGUF --------------------------------------------------------------------------

/// Builds a minimal GGUF v3 file (no tensors) holding the given metadata.
class GgufBuilder {
 public:
  void str(const std::string& key, const std::string& v) {
    kv(key, 8);
    string(v);
    ++count_;
  }
  void boolean(const std::string& key, bool v) {
    kv(key, 7);
    pod(static_cast<uint8_t>(v ? 1 : 0));
    ++count_;
  }
  void u32(const std::string& key, uint32_t v) {
    kv(key, 4);
    pod(v);
    ++count_;
  }
  void strings(const std::string& key, const std::vector<std::string>& v) {
    kv(key, 9);
    pod(uint32_t{8});
    pod(uint64_t{v.size()});
    for (const auto& s : v) string(s);
    ++count_;
  }
  void f32s(const std::string& key, const std::vector<float>& v) {
    kv(key, 9);
    pod(uint32_t{6});
    pod(uint64_t{v.size()});
    for (float f : v) pod(f);
    ++count_;
  }
  void i32s(const std::string& key, const std::vector<int32_t>& v) {
    kv(key, 9);
    pod(uint32_t{5});
    pod(uint64_t{v.size()});
    for (int32_t x : v) pod(x);
    ++count_;
  }
  std::string bytes() const {
    std::string out = "GGUF";
    append(&out, uint32_t{3});
    append(&out, uint64_t{0});
    append(&out, count_);
    out += body_;
    out.resize((out.size() + 31) / 32 * 32, '\0');
    return out;
  }

 private:
  template <typename T>
  static void append(std::string* s, T v) {
    char buf[sizeof(T)];
    std::memcpy(buf, &v, sizeof(T));
    s->append(buf, sizeof(T));
  }
  template <typename T>
  void pod(T v) {
    append(&body_, v);
  }
  void string(const std::string& s) {
    pod(uint64_t{s.size()});
    body_ += s;
  }
  void kv(const std::string& key, uint32_t type) {
    string(key);
    pod(type);
  }
  std::string body_;
  uint64_t count_ = 0;
};

GgufBuilder tiny_gguf(bool scores = true, bool model_llama = true, uint32_t bos = 1) {
  GgufBuilder g;
  g.str("tokenizer.ggml.model", model_llama ? "llama" : "gpt2");
  g.strings("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "a", "b", "ab"});
  if (scores) g.f32s("tokenizer.ggml.scores", {0, 0, 0, -5, -5, -1});
  g.i32s("tokenizer.ggml.token_type", {kUnk, kCtl, kCtl, kN, kN, kN});
  g.u32("tokenizer.ggml.bos_token_id", bos);
  g.u32("tokenizer.ggml.eos_token_id", 2);
  g.u32("tokenizer.ggml.unknown_token_id", 0);
  g.u32("tokenizer.ggml.padding_token_id", 0xFFFFFFFFu);
  g.boolean("tokenizer.ggml.add_bos_token", false);
  g.boolean("tokenizer.ggml.add_space_prefix", false);
  return g;
}

TEST(SpmTokenizer, FromHandMadeGguf) {
  const std::string path = cb::test::write_tmp("spm_tiny.gguf", tiny_gguf().bytes());
  const auto f = cb::formats::GgufFile::open(path);
  const auto t = SpmTokenizer::from_gguf(*f);
  EXPECT_EQ(t->encode("ab", true), (std::vector<int32_t>{1, 5}));
  EXPECT_FALSE(t->add_bos_default());
  EXPECT_FALSE(t->add_space_prefix());
  EXPECT_EQ(t->unk_id(), 0);
  EXPECT_EQ(t->decode({1, 5, 3, 2}), "aba");
}

TEST(SpmTokenizer, MalformedGgufVocabularyIsRejected) {
  const auto check = [](const std::string& name, const GgufBuilder& g,
                        const std::vector<std::string>& needles) {
    const std::string path = cb::test::write_tmp(name, g.bytes());
    const auto f = cb::formats::GgufFile::open(path);
    std::vector<std::string> all = needles;
    all.push_back(path);
    expect_error([&] { SpmTokenizer::from_gguf(*f); }, all);
  };
  check("spm_noscores.gguf", tiny_gguf(false), {"tokenizer.ggml.scores"});
  check("spm_gpt2.gguf", tiny_gguf(true, false), {"tokenizer.ggml.model"});
  // A vocabulary that contradicts itself says what to do, too.
  check("spm_badbos.gguf", tiny_gguf(true, true, 6),
        {"tokenizer.ggml.bos_token_id", kDamagedVocabFix});
  GgufBuilder short_scores;
  short_scores.str("tokenizer.ggml.model", "llama");
  short_scores.strings("tokenizer.ggml.tokens", {"a", "b"});
  short_scores.f32s("tokenizer.ggml.scores", {0});
  short_scores.i32s("tokenizer.ggml.token_type", {kN, kN});
  check("spm_short.gguf", short_scores, {"tokenizer.ggml.scores", kDamagedVocabFix});
  GgufBuilder no_tokens;
  no_tokens.str("tokenizer.ggml.model", "llama");
  check("spm_notokens.gguf", no_tokens, {"tokenizer.ggml.tokens"});
}

// ---- the real LLaMA vocabulary ---------------------------------------------------------

/// llama.cpp's test-tokenizer-0 vectors: inputs separated by "\n__ggml_vocab_test__\n",
/// expected ids (no BOS) one line per input.
void read_vectors(const std::string& inp, const std::string& outp, std::vector<std::string>* texts,
                  std::vector<std::vector<int32_t>>* ids) {
  const std::string text = cb::test::read_file(inp);
  const std::string sep = "\n__ggml_vocab_test__\n";
  for (size_t pos = 0; pos < text.size();) {
    const size_t next = text.find(sep, pos);
    if (next == std::string::npos) break;
    texts->push_back(text.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::istringstream out(cb::test::read_file(outp));
  for (std::string line; std::getline(out, line);) {
    std::istringstream ls(line);
    std::vector<int32_t> v;
    for (int32_t x; ls >> x;) v.push_back(x);
    ids->push_back(v);
  }
}

TEST(SpmTokenizer, LlamaCppTestVectors) {
  CB_REQUIRE_DATA(gguf, "models/llamacpp-vocab/ggml-vocab-llama-spm.gguf");
  std::vector<std::string> texts;
  std::vector<std::vector<int32_t>> expected;
  read_vectors(gguf + ".inp", gguf + ".out", &texts, &expected);
  ASSERT_EQ(texts.size(), expected.size());
  ASSERT_GT(texts.size(), 40u);
  const auto f = cb::formats::GgufFile::open(gguf);
  const auto t = SpmTokenizer::from_gguf(*f);
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

TEST(SpmTokenizer, LlamaKnownValues) {
  CB_REQUIRE_DATA(gguf, "models/llamacpp-vocab/ggml-vocab-llama-spm.gguf");
  const auto f = cb::formats::GgufFile::open(gguf);
  const auto t = SpmTokenizer::from_gguf(*f);
  EXPECT_EQ(t->vocab_size(), 32000u);
  EXPECT_EQ(t->bos_id(), 1);
  EXPECT_EQ(t->eos_id(), 2);
  EXPECT_EQ(t->unk_id(), 0);
  EXPECT_TRUE(t->add_bos_default());
  EXPECT_EQ(t->encode("Hello world", false), (std::vector<int32_t>{15043, 3186}));
  EXPECT_EQ(t->encode("Hello world", true), (std::vector<int32_t>{1, 15043, 3186}));
  EXPECT_EQ(t->decode({1, 15043, 3186, 2}), "Hello world");
  EXPECT_EQ(t->piece(15043), "\xE2\x96\x81Hello");
}

TEST(SpmTokenizer, Stories260K) {
  CB_REQUIRE_DATA(gguf, "models/stories260K/stories260K.gguf");
  const auto f = cb::formats::GgufFile::open(gguf);
  const auto t = SpmTokenizer::from_gguf(*f);
  EXPECT_EQ(t->vocab_size(), 512u);
  const std::string s = "Once upon a time, there was a little girl named Lily.";
  const auto ids = t->encode(s, true);
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(ids[0], t->bos_id());
  EXPECT_LT(ids.size(), s.size());
  EXPECT_EQ(t->decode(ids), s);
  EXPECT_EQ(t->decode(t->encode("Once upon a time", false)), "Once upon a time");
  const std::string odd = "Zebra \xE2\x82\xAC 42\n\tquux";  // bytes fall back
  EXPECT_EQ(t->decode(t->encode(odd, true)), odd);
}

}  // namespace
}  // namespace cb::tokenizer
