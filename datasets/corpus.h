#pragma once
/// Text corpora for perplexity, turned into the one string a tokenizer sees, following
/// the convention each corpus is known by (so numbers compare with published ones):
///  - wikitext2-raw (wiki.test.raw): the file's text as is, byte for byte. The leading
///    " \n" line and the " \n" lines between paragraphs are kept; this is what
///    llama.cpp `perplexity -f wiki.test.raw` and lm-eval's raw document text tokenize.
///  - wikitext2 (wiki.test.tokens, with <unk>): the file's text as is.
///  - ptb (Mikolov ptb.test.txt): every line stripped of surrounding whitespace, then
///    " ".join(lines), as GPTQ does with Hugging Face's ptb_text_only "sentence" rows.
///  - c4: JSON lines, plain or gzip (detected by its magic bytes). A row's text is its
///    "text" field or, without one, "prompt" + "response" concatenated with no separator
///    (such rows split one document mid-sentence; the prompt carries its own trailing
///    space). Rows are joined with " ", as GPTQ's ' '.join(valdata['text']).
///  - text (e.g. TinyStories): the file's text as is.
/// Every kind inflates a gzip file transparently; `sha256` is always of the file's bytes.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cb::datasets {

/// The corpus conventions load_corpus knows.
enum class CorpusKind { kWikiText2, kWikiText2Raw, kPtb, kC4, kText };

/// "wikitext2", "wikitext2-raw", "ptb", "c4" or "text".
const char* corpus_kind_name(CorpusKind kind);

/// Inverse of corpus_kind_name; throws cb::Error listing the valid names.
CorpusKind parse_corpus_kind(const std::string& name);

/// A loaded corpus and what a result record needs to identify it.
struct Corpus {
  CorpusKind kind = CorpusKind::kText;
  std::string path;
  std::string text;         ///< what to tokenize
  std::string sha256;       ///< lowercase hex SHA-256 of the file's bytes (before gunzip)
  uint64_t file_bytes = 0;  ///< size of the file as stored
  bool gzipped = false;     ///< whether the file was gzip
  int64_t documents = 0;    ///< lines (ptb) or rows (c4); 0 for kinds kept as one text
  std::string convention;   ///< one line describing how `text` was built
};

/// Loads `path` following `kind`'s convention (see the top of this header).
Corpus load_corpus(CorpusKind kind, const std::string& path);

/// Same, with `kind` given by name (e.g. from the command line).
Corpus load_corpus(const std::string& kind, const std::string& path);

/// The PTB convention on already-read text: lines stripped, joined with " ".
std::string ptb_join_lines(std::string_view text, int64_t* lines = nullptr);

/// The C4 rows of JSON-lines text (already inflated); `path` names it in errors, which
/// carry the line number (invalid JSON, no "text" nor "prompt"/"response").
std::vector<std::string> parse_c4_rows(std::string_view text, const std::string& path);

/// Reads a C4 JSON-lines file (plain or gzip) into its rows' texts.
std::vector<std::string> load_c4_rows(const std::string& path);

}  // namespace cb::datasets
