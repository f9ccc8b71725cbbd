#include "lib/tokenizer/bpe.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "lib/core/error.h"
#include "lib/formats/gguf.h"
#include "lib/tokenizer/pretokenize.h"
#include "lib/tokenizer/unicode.h"
#include "tests/support/test_data.h"

namespace cb::tokenizer {
namespace {

using nlohmann::json;

constexpr const char* kFalconVocab = "models/llamacpp-vocab/ggml-vocab-falcon.gguf";

// ---------------------------------------------------------------------------------------
// llama.cpp test vectors: .inp holds strings each followed by "\n__ggml_vocab_test__\n";
// .out holds one line of space-separated ids per string.

struct Vector {
  std::string text;
  std::vector<int32_t> ids;
};

std::vector<Vector> load_vectors(const std::string& gguf_path) {
  const std::string inp = cb::test::read_file(gguf_path + ".inp");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  for (size_t pos = 0; pos < inp.size();) {
    const size_t next = inp.find(sep, pos);
    if (next == std::string::npos) {
      texts.push_back(inp.substr(pos));
      break;
    }
    texts.push_back(inp.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::istringstream out(cb::test::read_file(gguf_path + ".out"));
  std::vector<Vector> v;
  std::string line;
  for (size_t i = 0; std::getline(out, line); ++i) {
    Vector x;
    x.text = i < texts.size() ? texts[i] : std::string();
    std::istringstream ls(line);
    for (int32_t id = 0; ls >> id;) x.ids.push_back(id);
    v.push_back(std::move(x));
  }
  EXPECT_EQ(v.size(), texts.size()) << ".inp and .out disagree on the number of strings";
  return v;
}

std::string show_ids(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += " " + std::to_string(id);
  return s;
}

std::string escaped(const std::string& s) {
  std::string o;
  for (unsigned char c : s) {
    if (c == '\n') {
      o += "\\n";
    } else if (c == '\t') {
      o += "\\t";
    } else {
      o.push_back(static_cast<char>(c));
    }
  }
  return "\"" + o + "\"";
}

/// Checks every vector: exact ids and decode round trip. Returns the number passing.
size_t check_vectors(const Tokenizer& t, const std::vector<Vector>& vectors) {
  size_t pass = 0;
  for (const Vector& v : vectors) {
    const std::vector<int32_t> got = t.encode(v.text, /*add_bos=*/false);
    const bool ids_ok = got == v.ids;
    EXPECT_TRUE(ids_ok) << "text " << escaped(v.text) << "\n  expected" << show_ids(v.ids)
                        << "\n  got     " << show_ids(got);
    const std::string back = t.decode(got);
    EXPECT_EQ(back, v.text) << "decode(encode(s)) != s";
    if (ids_ok && back == v.text) ++pass;
  }
  return pass;
}

std::vector<std::string> pieces_of(std::string_view text, PreTokenizer p) {
  const auto v = pretokenize(text, p);
  return std::vector<std::string>(v.begin(), v.end());
}

// ---------------------------------------------------------------------------------------
// Pre-tokenizer

using Pieces = std::vector<std::string>;

TEST(PretokenizeTest, Gpt2Regex) {
  const auto g = PreTokenizer::kGpt2;
  EXPECT_EQ(pieces_of("Hello world", g), (Pieces{"Hello", " world"}));
  EXPECT_EQ(pieces_of("I've they're it'll we'd 'RE", g),
            (Pieces{"I", "'ve", " they", "'re", " it", "'ll", " we", "'d", " '", "RE"}));
  EXPECT_EQ(pieces_of("   Hello", g), (Pieces{"  ", " Hello"}));
  EXPECT_EQ(pieces_of(" Hello   ", g), (Pieces{" Hello", "   "}));
  EXPECT_EQ(pieces_of("\tHello\n\nworld", g), (Pieces{"\t", "Hello", "\n", "\n", "world"}));
  EXPECT_EQ(pieces_of("a \n b", g), (Pieces{"a", " \n", " b"}));
  EXPECT_EQ(pieces_of("x1234567 !!?", g), (Pieces{"x", "1234567", " !!?"}));
  EXPECT_EQ(pieces_of("caf\xC3\xA9\xC2\xBD\xF0\x9F\xA6\x99!", g),
            (Pieces{"caf\xC3\xA9", "\xC2\xBD", "\xF0\x9F\xA6\x99!"}));
  EXPECT_EQ(pieces_of("a\xFF\xFE b", g), (Pieces{"a", "\xFF\xFE", " b"}));
  EXPECT_TRUE(pieces_of("", g).empty());
}

TEST(PretokenizeTest, FalconSequence) {
  const auto f = PreTokenizer::kFalcon;
  EXPECT_EQ(pieces_of("Hello, y'all! How", f),
            (Pieces{"Hello", ",", " y", "'", "all", "!", " How"}));
  EXPECT_EQ(pieces_of("I've", f), (Pieces{"I", "'", "ve"}));
  EXPECT_EQ(pieces_of("1234567", f), (Pieces{"123", "456", "7"}));
  EXPECT_EQ(pieces_of("a1234b", f), (Pieces{"a", "123", "4", "b"}));
  EXPECT_EQ(pieces_of(" 33333 x", f), (Pieces{" ", "333", "33", " x"}));
  EXPECT_EQ(pieces_of("3...3 ?!$+", f), (Pieces{"3", "...", "3", " ", "?!$+"}));
  EXPECT_EQ(pieces_of("\xC2\xBF\xE2\x80\x94hola", f), (Pieces{"\xC2\xBF\xE2\x80\x94", "hola"}));
  EXPECT_EQ(pieces_of(" this is \xF0\x9F\xA6\x99.cpp", f),
            (Pieces{" this", " is", " \xF0\x9F\xA6\x99", ".", "cpp"}));
  EXPECT_EQ(pieces_of("\n =", f), (Pieces{"\n ", "="}));
  EXPECT_EQ(pieces_of("  \n\n  x", f), (Pieces{"  \n\n ", " x"}));
}

TEST(PretokenizeTest, PiecesTileTheInput) {
  const std::string s =
      "  Mixed: 12,345.67 \xE2\x82\xAC \xF0\x9F\x98\x80\xF0\x9F\x98\x80 it's\t\t\n";
  for (PreTokenizer p : {PreTokenizer::kGpt2, PreTokenizer::kFalcon}) {
    std::string joined;
    for (std::string_view v : pretokenize(s, p)) {
      EXPECT_FALSE(v.empty());
      joined += v;
    }
    EXPECT_EQ(joined, s);
  }
}

// ---------------------------------------------------------------------------------------
// The Falcon vocabulary against llama.cpp's vectors (expected ids from Hugging Face)

TEST(BpeFalconTest, GgufVectorsMatchExactly) {
  CB_REQUIRE_DATA(path, kFalconVocab);
  const auto gguf = cb::formats::GgufFile::open(path);
  const auto t = BpeTokenizer::from_gguf(*gguf);
  EXPECT_EQ(t->vocab_size(), 65024u);
  EXPECT_EQ(t->merge_count(), 64784u);
  EXPECT_EQ(t->pre_tokenizer(), PreTokenizer::kFalcon);
  EXPECT_EQ(t->kind(), "bpe (gguf, falcon)");
  EXPECT_EQ(t->eos_id(), 11);
  EXPECT_FALSE(t->add_bos_default());
  EXPECT_EQ(t->piece(11), "<|endoftext|>");
  const auto vectors = load_vectors(path);
  ASSERT_EQ(vectors.size(), 46u);
  EXPECT_EQ(check_vectors(*t, vectors), vectors.size());
}

TEST(BpeFalconTest, SpecialTokensInTextAndDecode) {
  CB_REQUIRE_DATA(path, kFalconVocab);
  const auto t = BpeTokenizer::from_gguf(*cb::formats::GgufFile::open(path));
  const auto hello = t->encode("Hello", false);
  const auto world = t->encode("world", false);
  std::vector<int32_t> expect = hello;
  expect.push_back(11);
  expect.insert(expect.end(), world.begin(), world.end());
  EXPECT_EQ(t->encode("Hello<|endoftext|>world", false), expect);
  EXPECT_EQ(t->decode(expect), "Helloworld");
  EXPECT_EQ(t->encode("x", true).front(), t->bos_id());
  EXPECT_THROW(t->decode({70000}), cb::Error);
  EXPECT_THROW(t->piece(-1), cb::Error);
}

TEST(BpeFalconTest, InvalidUtf8AndLongInputsRoundTrip) {
  CB_REQUIRE_DATA(path, kFalconVocab);
  const auto t = BpeTokenizer::from_gguf(*cb::formats::GgufFile::open(path));
  const std::string bad = "ok \x80\xC3 caf\xC3\xA9 \xE2\x82";
  EXPECT_EQ(t->decode(t->encode(bad, false)), bad);
  // Falcon's vocabulary lacks a few bytes (0x0B, 0xFF, ...): Hugging Face drops them.
  EXPECT_EQ(t->decode(t->encode("a\x0B\xFF"
                                "b",
                                false)),
            "ab");
  const std::string long_word(100000, 'a');  // one 100 KB piece: must not be quadratic
  const auto ids = t->encode(long_word, false);
  EXPECT_LT(ids.size(), long_word.size() / 2);
  EXPECT_EQ(t->decode(ids), long_word);
}

// ---------------------------------------------------------------------------------------
// tokenizer.json built from the GGUF vocabulary

json falcon_pre_tokenizer() {
  return json::parse(R"({"type": "Sequence", "pretokenizers": [
    {"type": "Punctuation", "behavior": "Contiguous"},
    {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
    {"type": "Digits", "individual_digits": false},
    {"type": "Split", "pattern": {"Regex": "[0-9][0-9][0-9]"}, "behavior": "Isolated",
     "invert": false}]})");
}

json tokenizer_json_from_gguf(const cb::formats::GgufFile& f) {
  const auto tokens = f.get_string_array("tokenizer.ggml.tokens").value();
  const auto types = f.get_i32_array("tokenizer.ggml.token_type").value();
  const auto merges = f.get_string_array("tokenizer.ggml.merges").value();
  json vocab = json::object();
  json added = json::array();
  for (size_t i = 0; i < tokens.size(); ++i) {
    vocab[tokens[i]] = i;
    if (types[i] == 3) {
      added.push_back({{"id", i},
                       {"content", tokens[i]},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", false},
                       {"special", true}});
    }
  }
  // The first half as "a b" strings, the rest as [a, b] pairs (both forms exist).
  json jm = json::array();
  for (size_t r = 0; r < merges.size(); ++r) {
    const size_t sp = merges[r].find(' ');
    if (r < merges.size() / 2) {
      jm.push_back(merges[r]);
    } else {
      jm.push_back(json::array({merges[r].substr(0, sp), merges[r].substr(sp + 1)}));
    }
  }
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", added},
          {"normalizer", nullptr},
          {"pre_tokenizer", falcon_pre_tokenizer()},
          {"post_processor",
           {{"type", "ByteLevel"},
            {"add_prefix_space", true},
            {"trim_offsets", false},
            {"use_regex", true}}},
          {"decoder",
           {{"type", "ByteLevel"},
            {"add_prefix_space", true},
            {"trim_offsets", true},
            {"use_regex", true}}},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"continuing_subword_prefix", nullptr},
            {"end_of_word_suffix", nullptr},
            {"fuse_unk", false},
            {"vocab", vocab},
            {"merges", jm}}}};
}

TEST(BpeJsonTest, FalconTokenizerJsonMatchesVectors) {
  CB_REQUIRE_DATA(path, kFalconVocab);
  const auto gguf = cb::formats::GgufFile::open(path);
  const std::string json_path =
      cb::test::write_tmp("bpe_falcon_tokenizer.json", tokenizer_json_from_gguf(*gguf).dump());
  const auto t = BpeTokenizer::from_tokenizer_json(json_path);
  EXPECT_EQ(t->vocab_size(), 65024u);
  EXPECT_EQ(t->merge_count(), 64784u);
  EXPECT_EQ(t->pre_tokenizer(), PreTokenizer::kFalcon);
  EXPECT_EQ(t->kind(), "bpe (tokenizer.json, falcon)");
  EXPECT_EQ(t->eos_id(), 11);
  const auto vectors = load_vectors(path);
  EXPECT_EQ(check_vectors(*t, vectors), vectors.size());
}

/// A small valid tokenizer.json: the 256 byte pieces, "ab", and merge "a b".
json tiny_json() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) {
    std::string p;
    const uint32_t cp = byte_to_codepoint(static_cast<uint8_t>(b));
    utf8_append(p, cp);
    vocab[p] = b;
  }
  vocab["ab"] = 256;
  return {{"added_tokens", json::array()},
          {"normalizer", nullptr},
          {"pre_tokenizer",
           {{"type", "ByteLevel"},
            {"add_prefix_space", false},
            {"trim_offsets", true},
            {"use_regex", true}}},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array({"a b"})}}}};
}

/// Loads `j` (or raw `text` when non-empty) and returns the cb::Error message.
std::string json_error(const json& j, const std::string& text = "") {
  const std::string p =
      cb::test::write_tmp("bpe_bad_tokenizer.json", text.empty() ? j.dump() : text);
  try {
    BpeTokenizer::from_tokenizer_json(p);
  } catch (const cb::Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no cb::Error for " << (text.empty() ? j.dump().substr(0, 200) : text);
  return "";
}

// A pre_tokenizer (or any value) nested thousands of levels deep overflowed the stack when
// the error message rendered it (nlohmann's dump recurses per level); such nesting is
// refused while parsing.
TEST(BpeJsonTest, DeepNestingIsRefused) {
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  const std::string head = R"({"model": {"type": "BPE", "vocab": {}, "merges": []}, )";
  const std::string e = json_error({}, head + R"("pre_tokenizer": )" + deep + "}");
  EXPECT_NE(e.find("bpe_bad_tokenizer.json: not valid JSON: it nests more than 64 levels deep"),
            std::string::npos)
      << e;
}

TEST(BpeJsonTest, TinyGpt2Model) {
  const std::string p = cb::test::write_tmp("bpe_tiny_tokenizer.json", tiny_json().dump());
  const auto t = BpeTokenizer::from_tokenizer_json(p);
  EXPECT_EQ(t->pre_tokenizer(), PreTokenizer::kGpt2);
  EXPECT_EQ(t->encode("abc ab", false), (std::vector<int32_t>{256, 'c', 32, 256}));
  EXPECT_EQ(t->decode(t->encode("abc ab", false)), "abc ab");
  EXPECT_EQ(t->eos_id(), -1);
}

// The tokenizer_config.json beside it was read with std::ifstream, which waits for a writer
// on a FIFO.
TEST(BpeJsonTest, ATokenizerConfigThatIsAFifoIsNamedNotWaitedOn) {
  const std::string dir = cb::test::tmp_dir() + "/bpe_cfg_fifo";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string p = cb::test::write_tmp("bpe_cfg_fifo/tokenizer.json", tiny_json().dump());
  ASSERT_EQ(::mkfifo((dir + "/tokenizer_config.json").c_str(), 0644), 0);
  ::alarm(60);  // a blocked open ends as SIGALRM, which fails the test
  try {
    BpeTokenizer::from_tokenizer_json(p);
    ADD_FAILURE() << "no cb::Error";
  } catch (const cb::Error& e) {
    EXPECT_NE(
        std::string(e.what()).find(dir + "/tokenizer_config.json: not a regular file (a FIFO)"),
        std::string::npos)
        << e.what();
  }
  ::alarm(0);
}

TEST(BpeJsonTest, MalformedJsonIsRejected) {
  const std::string file = "bpe_bad_tokenizer.json";
  EXPECT_NE(json_error({}, "{\"model\": ").find(file), std::string::npos);

  json j = tiny_json();
  j["model"].erase("vocab");
  EXPECT_NE(json_error(j).find("model.vocab"), std::string::npos);

  j = tiny_json();
  j["model"]["vocab"]["ab"] = "x";
  EXPECT_NE(json_error(j).find("model.vocab[\"ab\"]"), std::string::npos);
  EXPECT_NE(json_error(j).find(kDamagedVocabFix), std::string::npos);  // what to do

  j = tiny_json();
  j["model"]["vocab"]["ab"] = 900;
  EXPECT_NE(json_error(j).find("out of range"), std::string::npos);

  j = tiny_json();
  j["model"]["merges"].push_back("a zz");
  EXPECT_NE(json_error(j).find("\"zz\""), std::string::npos);

  j = tiny_json();
  j["model"]["merges"].push_back(json::array({"b", "c"}));  // "bc" is not in the vocab
  EXPECT_NE(json_error(j).find("model.merges"), std::string::npos);

  j = tiny_json();
  j["model"]["merges"].push_back(42);
  EXPECT_NE(json_error(j).find("model.merges[1]"), std::string::npos);

  j = tiny_json();
  j["model"]["type"] = "WordPiece";
  EXPECT_NE(json_error(j).find("model.type"), std::string::npos);

  j = tiny_json();
  j["pre_tokenizer"] = {{"type", "Whitespace"}};
  EXPECT_NE(json_error(j).find("Whitespace"), std::string::npos);

  j = tiny_json();
  j["added_tokens"] = json::array({{{"id", 3}, {"content", "<x>"}, {"special", true}}});
  EXPECT_NE(json_error(j).find("added_tokens[0]"), std::string::npos);

  // Added tokens that strip the spaces around them, or match whole words only, would
  // tokenize differently here (they used to be taken as plain added tokens).
  for (const char* flag : {"lstrip", "rstrip", "single_word"}) {
    j = tiny_json();
    j["added_tokens"] =
        json::array({{{"id", 257}, {"content", "<x>"}, {"special", true}, {flag, true}}});
    const std::string e = json_error(j);
    EXPECT_NE(e.find(std::string("added_tokens[0]")), std::string::npos) << e;
    EXPECT_NE(e.find(std::string("\"") + flag + "\": true"), std::string::npos) << e;
    j["added_tokens"][0][flag] = false;
    EXPECT_NO_THROW(BpeTokenizer::from_tokenizer_json(
        cb::test::write_tmp("bpe_flag_false_tokenizer.json", j.dump())))
        << flag;
  }

  j = tiny_json();
  j["normalizer"] = {{"type", "NFC"}};
  EXPECT_NE(json_error(j).find("normalizer"), std::string::npos);

  EXPECT_THROW(BpeTokenizer::from_tokenizer_json(cb::test::tmp_dir() + "/no_such.json"), cb::Error);
}

// ---------------------------------------------------------------------------------------
// Malformed GGUF vocabularies (written by a minimal GGUF v3 writer)

class GgufWriter {
 public:
  void str(const std::string& key, const std::string& v) {
    this->key(key, 8);
    string(v);
  }
  void u32(const std::string& key, uint32_t v) {
    this->key(key, 4);
    raw(v);
  }
  void strings(const std::string& key, const std::vector<std::string>& v) {
    this->key(key, 9);
    raw(uint32_t{8});
    raw(static_cast<uint64_t>(v.size()));
    for (const auto& s : v) string(s);
  }
  std::string bytes() const {
    std::string out = "GGUF";
    append(out, uint32_t{3});
    append(out, uint64_t{0});
    append(out, count_);
    out += body_;
    out.resize((out.size() + 31) / 32 * 32, '\0');
    return out;
  }

 private:
  template <typename T>
  static void append(std::string& s, T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    s.append(b, sizeof(T));
  }
  template <typename T>
  void raw(T v) {
    append(body_, v);
  }
  void string(const std::string& s) {
    raw(static_cast<uint64_t>(s.size()));
    body_ += s;
  }
  void key(const std::string& k, uint32_t type) {
    ++count_;
    string(k);
    raw(type);
  }
  std::string body_;
  uint64_t count_ = 0;
};

std::vector<std::string> byte_pieces() {
  std::vector<std::string> v;
  for (int b = 0; b < 256; ++b) {
    std::string p;
    utf8_append(p, byte_to_codepoint(static_cast<uint8_t>(b)));
    v.push_back(p);
  }
  v.push_back("ab");
  return v;
}

GgufWriter tiny_gguf(const std::string& model, const std::string& pre,
                     const std::vector<std::string>& merges) {
  GgufWriter w;
  w.str("tokenizer.ggml.model", model);
  if (!pre.empty()) w.str("tokenizer.ggml.pre", pre);
  w.strings("tokenizer.ggml.tokens", byte_pieces());
  w.strings("tokenizer.ggml.merges", merges);
  return w;
}

std::string gguf_error(const GgufWriter& w) {
  const std::string p = cb::test::write_tmp("bpe_bad_vocab.gguf", w.bytes());
  try {
    BpeTokenizer::from_gguf(*cb::formats::GgufFile::open(p));
  } catch (const cb::Error& e) {
    EXPECT_NE(std::string(e.what()).find("bpe_bad_vocab.gguf"), std::string::npos) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no cb::Error";
  return "";
}

TEST(BpeGgufTest, TinyVocabLoads) {
  const std::string p =
      cb::test::write_tmp("bpe_tiny_vocab.gguf", tiny_gguf("gpt2", "", {"a b"}).bytes());
  const auto t = BpeTokenizer::from_gguf(*cb::formats::GgufFile::open(p));
  EXPECT_EQ(t->pre_tokenizer(), PreTokenizer::kGpt2);
  EXPECT_NE(t->kind().find("no tokenizer.ggml.pre, the default"), std::string::npos) << t->kind();
  EXPECT_EQ(t->bos_id(), -1);
  EXPECT_EQ(t->encode("xab", false), (std::vector<int32_t>{'x', 256}));
}

// A Falcon GGUF converted before llama.cpp wrote tokenizer.ggml.pre gets Falcon's
// pre-tokenizer from general.architecture, not GPT-2's (which splits digits otherwise).
TEST(BpeGgufTest, AFalconVocabWithoutPreGetsFalconsPreTokenizer) {
  GgufWriter w = tiny_gguf("gpt2", "", {"a b"});
  w.str("general.architecture", "falcon");
  const std::string p = cb::test::write_tmp("bpe_falcon_nopre.gguf", w.bytes());
  const auto t = BpeTokenizer::from_gguf(*cb::formats::GgufFile::open(p));
  EXPECT_EQ(t->pre_tokenizer(), PreTokenizer::kFalcon);
  EXPECT_NE(t->kind().find("general.architecture"), std::string::npos) << t->kind();
}

// The "none" sentinel (UINT32_MAX) for a special token is no token, as in the SPM loader.
TEST(BpeGgufTest, TheNoneSentinelIsNoToken) {
  GgufWriter w = tiny_gguf("gpt2", "falcon", {"a b"});
  w.u32("tokenizer.ggml.bos_token_id", 0xFFFFFFFFu);
  w.u32("tokenizer.ggml.eos_token_id", 256);
  const std::string p = cb::test::write_tmp("bpe_none_bos.gguf", w.bytes());
  const auto t = BpeTokenizer::from_gguf(*cb::formats::GgufFile::open(p));
  EXPECT_EQ(t->bos_id(), -1);
  EXPECT_EQ(t->eos_id(), 256);
}

TEST(BpeGgufTest, MalformedVocabIsRejected) {
  EXPECT_NE(gguf_error(tiny_gguf("gpt2", "qwen2", {"a b"})).find("\"qwen2\""), std::string::npos);
  EXPECT_NE(gguf_error(tiny_gguf("llama", "", {"a b"})).find("tokenizer.ggml.model"),
            std::string::npos);
  EXPECT_NE(gguf_error(tiny_gguf("gpt2", "", {"a zz"})).find("\"zz\""), std::string::npos);
  EXPECT_NE(gguf_error(tiny_gguf("gpt2", "", {"ab"})).find("tokenizer.ggml.merges[0]"),
            std::string::npos);
  GgufWriter w = tiny_gguf("gpt2", "falcon", {"a b"});
  w.u32("tokenizer.ggml.eos_token_id", 257);
  EXPECT_NE(gguf_error(w).find("tokenizer.ggml.eos_token_id"), std::string::npos);
  EXPECT_NE(gguf_error(w).find(kDamagedVocabFix), std::string::npos);  // what to do
  GgufWriter no_merges;
  no_merges.str("tokenizer.ggml.model", "gpt2");
  no_merges.strings("tokenizer.ggml.tokens", byte_pieces());
  EXPECT_NE(gguf_error(no_merges).find("tokenizer.ggml.merges"), std::string::npos);
}

}  // namespace
}  // namespace cb::tokenizer
