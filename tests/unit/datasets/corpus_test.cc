#include "datasets/corpus.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

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

// A stream that inflates past the bound is an error naming the source, across concatenated
// members too; up to the bound it inflates.
TEST(Corpus, GzipOutputIsBounded) {
  const std::string block(3000, 'x');
  EXPECT_EQ(gunzip(gzip_stored(block), "mem", 3000), block);
  try {
    (void)gunzip(gzip_stored(block) + gzip_stored(block), "bomb.json.gz", 4096);
    FAIL() << "6,000 bytes inflated under a 4,096-byte bound";
  } catch (const cb::Error& e) {
    EXPECT_NE(std::string(e.what()).find("bomb.json.gz"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("inflates to more than 4096 bytes"), std::string::npos)
        << e.what();
  }
}

// A binary file (a model given as --file) is not text: refused at its first bad byte, for
// every kind and through gzip; U+FFFD written as text is valid.
TEST(Corpus, BinaryDataIsNotText) {
  std::string e = error_of(CorpusKind::kText, "model.gguf", std::string("GGUF\x03\0\0\0", 8));
  EXPECT_NE(e.find("not UTF-8 text: byte 0x00 at offset 5"), std::string::npos) << e;
  e = error_of(CorpusKind::kWikiText2Raw, "latin1.txt", "caf\xe9 au lait");
  EXPECT_NE(e.find("byte 0xE9 at offset 3"), std::string::npos) << e;
  e = error_of(CorpusKind::kPtb, "bin.txt.gz", gzip_stored("ok \xff"));
  EXPECT_NE(e.find("byte 0xFF at offset 3 of the inflated text"), std::string::npos) << e;
  EXPECT_EQ(first_invalid_utf8("a \xef\xbf\xbd \xf0\x9f\x99\x82"), std::string_view::npos);
  EXPECT_EQ(first_invalid_utf8("ab\xc0\xa0"), 2u);
  const std::string p = test::write_tmp("replacement.txt", "x \xef\xbf\xbd y");
  EXPECT_EQ(load_corpus(CorpusKind::kText, p).text, "x \xef\xbf\xbd y");
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

namespace cb::datasets {
namespace {

// lm-eval's wikitext_detokenizer on hand-written WikiText-style text; each expectation follows
// the harness's steps (see corpus.h).
TEST(WikiTextDetokenize, NumberSeparatorsAndPunctuation) {
  EXPECT_EQ(wikitext_detokenize("a guest @-@ starring role , 1 @,@ 000 and 3 @.@ 5 ."),
            "a guest-starring role, 1,000 and 3.5 .");  // a final " ." keeps its space
  EXPECT_EQ(wikitext_detokenize("x : y ; z . w ! v ? u , t"), "x: y; z. w! v? u, t");
  // Non-overlapping left to right, as str.replace: " . . " leaves the second " ."
  EXPECT_EQ(wikitext_detokenize("a . . b"), "a. . b");
}

TEST(WikiTextDetokenize, BracketsAndQuotes) {
  EXPECT_EQ(wikitext_detokenize("Du Fu ( Wade Giles : Tu Fu ) was"),
            "Du Fu (Wade Giles: Tu Fu) was");
  EXPECT_EQ(wikitext_detokenize("[ 1 ] { x } ( )"), "[1] {x} ()");
  EXPECT_EQ(wikitext_detokenize("as \" Craig \" in \" Teddy 's Story \""),
            "as \"Craig\" in \"Teddy's Story\"");
  // The lazy group stops at the first closing character; nesting is not understood.
  EXPECT_EQ(wikitext_detokenize("( a ( b ) c )"), "(a ( b) c )");
  // An opening character without a closing one after it is left alone.
  EXPECT_EQ(wikitext_detokenize("( a \" b"), "( a \" b");
  // Pairs span lines and Unicode whitespace (U+00A0, U+2003) is stripped inside them; then
  // " \n" -> "\n".
  EXPECT_EQ(wikitext_detokenize("(\xc2\xa0 a \nb \xe2\x80\x83)"), "(a\nb)");
  // Single quotes pair up across words (the harness's regex), after "s '" -> "s'".
  EXPECT_EQ(wikitext_detokenize("the players ' union ' s"), "the players'union' s");
  EXPECT_EQ(wikitext_detokenize("' a ' b ' c '"), "'a' b 'c'");
}

TEST(WikiTextDetokenize, HeadingsAndMiscellaneous) {
  EXPECT_EQ(wikitext_detokenize(" = Title = \n \n = = Career = = \n \n = = = Film = = = \n"),
            " = Title =\n\n== Career ==\n\n=== Film ===\n");
  EXPECT_EQ(wikitext_detokenize("= = = = Deep = = = ="), "==== Deep ====");
  EXPECT_EQ(wikitext_detokenize("45 \xc2\xb0 N and N of them"), "45\xc2\xb0N and 1 of them");
  EXPECT_EQ(wikitext_detokenize("in N cases"), "in 1 cases");
  EXPECT_EQ(wikitext_detokenize("it 's John 's"), "it's John's");
  // The harness's regex /' [0-9]/ has a literal replacement text.
  EXPECT_EQ(wikitext_detokenize("a/' 7/b"), "a/'[0-9]/b");
  EXPECT_EQ(wikitext_detokenize(""), "");
}

TEST(WikiTextArticles, SplitsAtTopLevelHeadings) {
  const std::string text =
      " \n = Alpha = \n \n Alpha text . \n \n = = Early life = = \n \n More . \n"
      " = Beta @-@ two = \n \n = = = Deep = = = \n Beta text . \n \n";
  const std::vector<std::string> a = wikitext_articles(text);
  ASSERT_EQ(a.size(), 2u);  // the leading " " line is whitespace only: no article
  EXPECT_EQ(a[0], " = Alpha = \n \n Alpha text . \n \n = = Early life = = \n \n More . ");
  EXPECT_EQ(a[1], " = Beta @-@ two = \n \n = = = Deep = = = \n Beta text . \n \n");
  // Text before the first heading is an article when it is not only whitespace; the last
  // article is kept even when empty; "\r\n" reads as "\n" (Python's universal newlines).
  const auto b = wikitext_articles("intro\r\n = A = \r\nx\n = B = ");
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0], "intro");
  EXPECT_EQ(b[1], " = A = \nx");
  EXPECT_EQ(b[2], " = B = ");
  EXPECT_EQ(wikitext_articles("no heading\n"), std::vector<std::string>{"no heading\n"});
  // Not headings: "=" without spaces, a sub-heading, an unclosed heading.
  EXPECT_EQ(wikitext_articles("a\n=A=\n = = S = = \n = open\nb").size(), 1u);
  // Re-joining the articles with "\n" gives the file back, minus a whitespace-only prefix.
  std::string joined;
  for (const auto& s : a) joined += (joined.empty() ? "" : "\n") + s;
  EXPECT_EQ(" \n" + joined, text);
}

TEST(GptqWikiText, RowsJoinedWithBlankLinesAndWhitespaceLinesEmptied) {
  int64_t rows = 0;
  // Rows " \n" -> "", " = A = \n", "x\n", "\t\n" -> "", "last" (no final newline).
  EXPECT_EQ(gptq_wikitext_text(" \n = A = \nx\r\n\t\nlast", &rows),
            "\n\n = A = \n\n\nx\n\n\n\n\nlast");
  EXPECT_EQ(rows, 5);
  // A final newline ends the last row; it does not start another.
  EXPECT_EQ(gptq_wikitext_text("a\nb\n", &rows), "a\n\n\nb\n");
  EXPECT_EQ(rows, 2);
  EXPECT_EQ(gptq_wikitext_text("", &rows), "");
  EXPECT_EQ(rows, 0);
  EXPECT_EQ(gptq_wikitext_text("\xc2\xa0\n", &rows), "");  // U+00A0 is whitespace to str.strip
}

TEST(GptqWikiText, RealWikiText2Raw) {
  CB_REQUIRE_DATA(p, "data/wikitext-2-raw/wiki.test.raw");
  const Corpus c = load_corpus(CorpusKind::kWikiText2Raw, p);
  int64_t rows = 0;
  const std::string t = gptq_wikitext_text(c.text, &rows);
  EXPECT_EQ(rows, 4358);  // the test split of Hugging Face's wikitext-2-raw-v1
  EXPECT_EQ(t.rfind("\n\n = Robert Boulter = \n\n\n\n\n Robert Boulter is", 0), 0u);
  // "\n\n".join of the rows, written out independently in Python.
  EXPECT_EQ(sha256_hex(t), "696cca6b65a171b0a358a4be6732cdfdf2dd6164a32e20fd70e3c13fc4dfae83");
}

TEST(WikiTextArticles, PyStripAndWhitespace) {
  EXPECT_EQ(py_strip(" \t a b \n"), "a b");
  EXPECT_EQ(py_strip("\xc2\xa0x\xe3\x80\x80"), "x");      // U+00A0, U+3000
  EXPECT_EQ(py_strip("\xe2\x80\x8bx"), "\xe2\x80\x8bx");  // U+200B is not whitespace
  EXPECT_EQ(py_strip(" \x1c "), "");
  EXPECT_TRUE(py_isspace(0x85));
  EXPECT_FALSE(py_isspace(0x200B));
}

// Invalid UTF-8 decodes as U+FFFD one byte at a time (found by fuzz_corpus: the lead byte F5
// decoded past U+10FFFF), so an overlong space is not whitespace.
TEST(WikiTextArticles, InvalidUtf8DecodesAsReplacementCharacters) {
  const auto decode = [](std::string_view s) {
    std::vector<uint32_t> out;
    for (size_t i = 0; i < s.size();) out.push_back(next_code_point(s, i));
    return out;
  };
  using V = std::vector<uint32_t>;
  EXPECT_EQ(decode("a\xc3\xa9\xe2\x82\xac\xf0\x9f\x99\x82"), (V{'a', 0xE9, 0x20AC, 0x1F642}));
  EXPECT_EQ(decode("\xf4\x8f\xbf\xbf"), (V{0x10FFFF}));
  EXPECT_EQ(decode("\xf5\xb6\xab\xab"), (V{0xFFFD, 0xFFFD, 0xFFFD, 0xFFFD}));  // past U+10FFFF
  EXPECT_EQ(decode("\xf4\x90\x80\x80"), (V{0xFFFD, 0xFFFD, 0xFFFD, 0xFFFD}));  // U+110000
  EXPECT_EQ(decode("\xc0\xa0"), (V{0xFFFD, 0xFFFD}));                          // overlong space
  EXPECT_EQ(decode("\xe0\x80\xa0"), (V{0xFFFD, 0xFFFD, 0xFFFD}));
  EXPECT_EQ(decode("\xf0\x80\x80\xa0"), (V{0xFFFD, 0xFFFD, 0xFFFD, 0xFFFD}));
  EXPECT_EQ(decode("\xed\xa0\x80"), (V{0xFFFD, 0xFFFD, 0xFFFD}));  // surrogate U+D800
  EXPECT_EQ(decode("\xe2\x82"), (V{0xFFFD, 0xFFFD}));              // truncated
  EXPECT_EQ(py_strip("\xc0\xa0x"), "\xc0\xa0x");
}

// The HF document-level test split of WikiText-2 has 62 documents. Words, bytes and the
// SHA-256 of the detokenized articles joined with "\x01" were computed by a Python
// implementation of the same split and of lm-eval's detokenizer (re.sub, str.replace).
TEST(WikiTextArticles, RealWikiText2Raw) {
  CB_REQUIRE_DATA(p, "data/wikitext-2-raw/wiki.test.raw");
  const Corpus c = load_corpus(CorpusKind::kWikiText2Raw, p);
  const std::vector<std::string> a = wikitext_articles(c.text);
  ASSERT_EQ(a.size(), 62u);
  EXPECT_EQ(a[0].rfind(" = Robert Boulter = \n", 0), 0u);
  EXPECT_EQ(a[1].rfind(" = Du Fu = \n", 0), 0u);
  size_t bytes = 0;
  std::string detok;
  for (size_t i = 0; i < a.size(); ++i) {
    bytes += a[i].size();
    detok += (i > 0 ? "\x01" : "") + wikitext_detokenize(a[i]);
  }
  EXPECT_EQ(bytes, 1290527u);  // the file less its leading " \n" line and 61 joining "\n"
  EXPECT_EQ(sha256_hex(detok), "2ec564fa885bc1c8824bda33b628eec3306d27533e823c746426a845753b8f31");
  EXPECT_EQ(wikitext_detokenize(a[0]).rfind(
                " = Robert Boulter =\n\nRobert Boulter is an English film, television and theatre "
                "actor. He had a guest-starring role",
                0),
            0u);
}

TEST(WikiTextArticles, RealWikiText2Tokens) {
  CB_REQUIRE_DATA(p, "data/wikitext-2/wiki.test.tokens");
  const Corpus c = load_corpus(CorpusKind::kWikiText2, p);
  const std::vector<std::string> a = wikitext_articles(c.text);
  ASSERT_EQ(a.size(), 62u);
  std::string detok;
  for (size_t i = 0; i < a.size(); ++i) detok += (i > 0 ? "\x01" : "") + wikitext_detokenize(a[i]);
  EXPECT_EQ(sha256_hex(detok), "bdfc3d8647695d0e569cc57e0582da029e5eea47944d79d474d7ea2823c72a52");
}

TEST(Corpus, AFileOfAnotherKindIsFlagged) {
  const std::string jsonl =
      test::write_tmp("rows.jsonl", "{\"text\": \"a b\"}\n{\"text\": \"c\"}\n");
  for (CorpusKind k : {CorpusKind::kText, CorpusKind::kPtb, CorpusKind::kWikiText2Raw}) {
    EXPECT_NE(load_corpus(k, jsonl).mismatch.find("--dataset c4"), std::string::npos);
  }
  EXPECT_EQ(load_corpus(CorpusKind::kC4, jsonl).mismatch, "");
  const std::string prose = test::write_tmp("prose.txt", "Once upon a time.\n{not json}\n");
  EXPECT_EQ(load_corpus(CorpusKind::kText, prose).mismatch, "");
  EXPECT_NE(load_corpus(CorpusKind::kWikiText2Raw, prose).mismatch.find("no WikiText article"),
            std::string::npos);
  const std::string wiki = test::write_tmp("wiki.txt", " \n = Title = \n \n Text . \n");
  EXPECT_EQ(load_corpus(CorpusKind::kWikiText2, wiki).mismatch, "");
  const std::string at_start = test::write_tmp("wiki0.txt", "= Title =\nText.\n");
  EXPECT_EQ(load_corpus(CorpusKind::kWikiText2Raw, at_start).mismatch, "");
}

TEST(Corpus, TheSharedFilesAreTheirOwnKind) {
  CB_REQUIRE_DATA(raw, "data/wikitext-2-raw/wiki.test.raw");
  CB_REQUIRE_DATA(tokens, "data/wikitext-2/wiki.test.tokens");
  CB_REQUIRE_DATA(c4, "data/c4/c4_realnewslike_prompt_response_200.jsonl");
  EXPECT_EQ(load_corpus(CorpusKind::kWikiText2Raw, raw).mismatch, "");
  EXPECT_EQ(load_corpus(CorpusKind::kWikiText2, tokens).mismatch, "");
  EXPECT_EQ(load_corpus(CorpusKind::kC4, c4).mismatch, "");
  EXPECT_NE(load_corpus(CorpusKind::kText, c4).mismatch, "");
}

}  // namespace
}  // namespace cb::datasets
