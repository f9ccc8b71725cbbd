#include "datasets/corpus.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <sstream>
#include <string>

#include "datasets/sha256.h"
#include "datasets/text_io.h"
#include "lib/core/error.h"
#include "tests/support/test_data.h"

namespace cb::datasets {
namespace {

uint32_t crc32(const std::string& s) {
  uint32_t c = 0xFFFFFFFFu;
  for (const unsigned char b : s) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

void put32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

// A gzip member holding `data` in one stored (uncompressed) deflate block.
std::string gzip_stored(const std::string& data) {
  std::string g("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff", 10);
  g.push_back('\x01');  // final stored block
  const uint16_t len = static_cast<uint16_t>(data.size());
  g.push_back(static_cast<char>(len & 0xFF));
  g.push_back(static_cast<char>(len >> 8));
  g.push_back(static_cast<char>(~len & 0xFF));
  g.push_back(static_cast<char>((~len >> 8) & 0xFF));
  g += data;
  put32(g, crc32(data));
  put32(g, static_cast<uint32_t>(data.size()));
  return g;
}

size_t word_count(const std::string& s) {
  std::istringstream in(s);
  size_t n = 0;
  for (std::string w; in >> w;) ++n;
  return n;
}

std::string error_of(CorpusKind kind, const std::string& name, const std::string& bytes) {
  const std::string p = test::write_tmp(name, bytes);
  try {
    load_corpus(kind, p);
  } catch (const cb::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(p), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    return m;
  }
  ADD_FAILURE() << "no error for " << name;
  return "";
}

TEST(Corpus, KindNames) {
  for (const char* n : {"wikitext2", "wikitext2-raw", "ptb", "c4", "text"}) {
    EXPECT_STREQ(corpus_kind_name(parse_corpus_kind(n)), n);
  }
  try {
    parse_corpus_kind("wiki");
    FAIL();
  } catch (const cb::Error& e) {
    EXPECT_NE(std::string(e.what()).find("wikitext2-raw"), std::string::npos);
  }
}

TEST(Corpus, PtbJoin) {
  int64_t lines = 0;
  EXPECT_EQ(ptb_join_lines(" a b \n c \r\n\n d", &lines), "a b c  d");
  EXPECT_EQ(lines, 4);
}

TEST(Corpus, C4Rows) {
  const auto rows = parse_c4_rows(
      "{\"text\": \"doc one\", \"url\": \"u\"}\n\n{\"prompt\": \"The cat \", \"response\": "
      "\"sat.\"}\n",
      "c4.jsonl");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0], "doc one");
  EXPECT_EQ(rows[1], "The cat sat.");
}

TEST(Corpus, GzipIsDetectedAndHashIsOfFileBytes) {
  const std::string plain = "{\"text\": \"hello\"}\n{\"text\": \"world\"}\n";
  const std::string gz = gzip_stored(plain);
  ASSERT_EQ(gunzip(gz, "mem"), plain);
  const std::string p = test::write_tmp("c4_small.jsonl.gz", gz);
  const Corpus c = load_corpus("c4", p);
  EXPECT_TRUE(c.gzipped);
  EXPECT_EQ(c.text, "hello world");
  EXPECT_EQ(c.documents, 2);
  EXPECT_EQ(c.file_bytes, gz.size());
  EXPECT_EQ(c.sha256, sha256_hex(gz));
  // Concatenated members read as one stream, as gzip -d does.
  EXPECT_EQ(gunzip(gz + gzip_stored("{\"text\": \"!\"}\n"), "mem"), plain + "{\"text\": \"!\"}\n");
}

TEST(Corpus, TruncatedGzip) {
  const std::string gz = gzip_stored("{\"text\": \"hello\"}\n");
  std::string e = error_of(CorpusKind::kC4, "trunc.jsonl.gz", gz.substr(0, gz.size() - 6));
  EXPECT_NE(e.find("truncated gzip"), std::string::npos) << e;
  e = error_of(CorpusKind::kText, "magic_only.gz", "\x1f\x8b");
  EXPECT_NE(e.find("gzip"), std::string::npos) << e;
  std::string bad = gz;
  bad[bad.size() - 5] = static_cast<char>(bad[bad.size() - 5] ^ 0x55);  // CRC
  e = error_of(CorpusKind::kC4, "badcrc.jsonl.gz", bad);
  EXPECT_NE(e.find("corrupt gzip"), std::string::npos) << e;
}

TEST(Corpus, InvalidJsonLineHasLineNumber) {
  const std::string e =
      error_of(CorpusKind::kC4, "bad.jsonl", "{\"text\": \"ok\"}\n\n{\"text\": \"unterminated}\n");
  EXPECT_NE(e.find("bad.jsonl:3:"), std::string::npos) << e;
  EXPECT_NE(e.find("invalid JSON"), std::string::npos) << e;
  EXPECT_EQ(e.find("json.exception"), std::string::npos) << e;
}

TEST(Corpus, MissingTextField) {
  std::string e =
      error_of(CorpusKind::kC4, "notext.jsonl", "{\"text\": \"ok\"}\n{\"body\": \"x\"}\n");
  EXPECT_NE(e.find("notext.jsonl:2:"), std::string::npos) << e;
  EXPECT_NE(e.find("\"text\""), std::string::npos) << e;
  e = error_of(CorpusKind::kC4, "halfpair.jsonl", "{\"prompt\": \"x\"}\n");
  EXPECT_NE(e.find(":1:"), std::string::npos) << e;
  EXPECT_NE(e.find("prompt"), std::string::npos) << e;
  e = error_of(CorpusKind::kC4, "nonstring.jsonl", "{\"text\": 5}\n");
  EXPECT_NE(e.find("field \"text\" is number"), std::string::npos) << e;
  e = error_of(CorpusKind::kC4, "array.jsonl", "[1, 2]\n");
  EXPECT_NE(e.find("expected a JSON object"), std::string::npos) << e;
  e = error_of(CorpusKind::kText, "empty.txt", "");
  EXPECT_NE(e.find("empty"), std::string::npos) << e;
}

TEST(Corpus, MissingFile) {
  try {
    load_corpus(CorpusKind::kText, "/nonexistent/corpus.txt");
    FAIL();
  } catch (const cb::Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/corpus.txt"), std::string::npos);
  }
}

TEST(Corpus, RealWikiText2Raw) {
  CB_REQUIRE_DATA(p, "data/wikitext-2-raw/wiki.test.raw");
  const Corpus c = load_corpus(CorpusKind::kWikiText2Raw, p);
  EXPECT_EQ(c.text, test::read_file(p));
  EXPECT_EQ(c.text.size(), 1290590u);
  EXPECT_EQ(c.sha256, "173c87a53759e0201f33e0ccf978e510c2042d7f2cb78229d9a50d79b9e7dd08");
  EXPECT_EQ(c.text.rfind(" \n = Robert Boulter = \n \n", 0), 0u);
  EXPECT_EQ(split_lines(c.text).size(), 4358u);
  EXPECT_EQ(word_count(c.text), 241211u);
  EXPECT_FALSE(c.gzipped);
}

TEST(Corpus, RealWikiText2Tokens) {
  CB_REQUIRE_DATA(p, "data/wikitext-2/wiki.test.tokens");
  const Corpus c = load_corpus("wikitext2", p);
  EXPECT_EQ(c.text.size(), 1256449u);
  EXPECT_EQ(c.sha256, "d790b833ef8cf03a90db7bf1271b7520b83c45ce07ba3c1a9699df81e239eca0");
  EXPECT_NE(c.text.find("<unk>"), std::string::npos);
  // MANIFEST's 245,569 tokens count words plus one <eos> per line.
  EXPECT_EQ(word_count(c.text) + split_lines(c.text).size(), 245569u);
}

TEST(Corpus, RealPtb) {
  CB_REQUIRE_DATA(p, "data/ptb/ptb.test.txt");
  const Corpus c = load_corpus("ptb", p);
  EXPECT_EQ(c.sha256, "dd65dff31e70846b2a6030a87482edcd5d199130cdcfa1f3dccbb033728deee0");
  EXPECT_EQ(c.documents, 3761);
  EXPECT_EQ(word_count(c.text) + static_cast<size_t>(c.documents), 82430u);  // with <eos>
  EXPECT_EQ(c.text.size(), 442422u);
  EXPECT_EQ(sha256_hex(c.text), "900cfc61a7a63afcd086c5e1cce90554764eae65cb2ca9f5d4cac47be5f0f394");
  EXPECT_EQ(c.text.rfind("no it was n't black monday but while", 0), 0u);
}

TEST(Corpus, RealC4PromptResponse) {
  CB_REQUIRE_DATA(p, "data/c4/c4_realnewslike_prompt_response_200.jsonl");
  const Corpus c = load_corpus(CorpusKind::kC4, p);
  EXPECT_EQ(c.documents, 200);
  EXPECT_EQ(c.sha256, "115d5c85898cd2ebc418d7b02a40b9c1d188496692472423d0e553f55de63a99");
  // Python: " ".join(r["prompt"] + r["response"] for r in rows).
  EXPECT_EQ(c.text.size(), 111239u);
  EXPECT_EQ(sha256_hex(c.text), "d6d90fd0d3a3dbe974353325e7964a2347f2c2761b10e7fe013f0015fc943002");
  EXPECT_EQ(load_c4_rows(p).size(), 200u);
}

TEST(Corpus, RealTinyStories) {
  CB_REQUIRE_DATA(p, "data/tinystories/tinystories_val_part1.txt");
  const Corpus c = load_corpus("text", p);
  EXPECT_EQ(c.text.size(), 402223u);
  EXPECT_EQ(c.sha256, "4c1897a3651d638e78668ce4ace915111aed80531f8708666a808cf8ed12601b");
  EXPECT_EQ(c.text.rfind("Spot. Spot saw the shiny car", 0), 0u);
}

}  // namespace
}  // namespace cb::datasets
