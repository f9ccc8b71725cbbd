// Fuzz target: the text corpora for perplexity (load_corpus for every kind, plain or gzip:
// WikiText raw and tokens, PTB's joined lines, C4's JSON lines, plain text), then
// lm-eval's WikiText article split and detokenizer on the loaded text, and the UTF-8
// decoding they share.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "datasets/corpus.h"
#include "fuzz/fuzz_util.h"
#include "lib/core/error.h"

namespace {

using cb::datasets::CorpusKind;

// next_code_point must always advance, and land exactly on the end.
void walk_code_points(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const size_t before = i;
    const uint32_t c = cb::datasets::next_code_point(text, i);
    if (i <= before || i > text.size() || c > 0x10FFFF) std::abort();
    (void)cb::datasets::py_isspace(c);
  }
}

void articles(std::string_view text) {
  for (const std::string& a : cb::datasets::wikitext_articles(text)) {
    const std::string_view stripped = cb::datasets::py_strip(a);
    if (stripped.size() > a.size()) std::abort();
    (void)cb::datasets::wikitext_detokenize(a);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static cb::fuzz::MemFile file("corpus");
  const std::string& path = file.write(data, size);
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  for (CorpusKind kind : {CorpusKind::kWikiText2Raw, CorpusKind::kWikiText2, CorpusKind::kPtb,
                          CorpusKind::kC4, CorpusKind::kText}) {
    cb::fuzz::quietly([&] {
      const cb::datasets::Corpus c = cb::datasets::load_corpus(kind, path);
      if (c.file_bytes != size || c.sha256.size() != 64 || c.text.empty()) std::abort();
      const bool as_is = kind != CorpusKind::kPtb && kind != CorpusKind::kC4;
      if (as_is && !c.gzipped && c.text != input) std::abort();
      if (kind == CorpusKind::kWikiText2Raw) articles(c.text);
    });
  }
  int64_t lines = 0;
  const std::string joined = cb::datasets::ptb_join_lines(input, &lines);
  if (lines < 0 || joined.size() > input.size() + static_cast<size_t>(lines)) std::abort();
  walk_code_points(input);
  (void)cb::datasets::py_strip(input);
  articles(input);
  return 0;
}
