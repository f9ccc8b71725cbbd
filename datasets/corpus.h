#pragma once
/// Text corpora for perplexity, turned into the one string a tokenizer sees, following
/// the convention each corpus is known by (so numbers compare with published ones):
///  - wikitext2-raw (wiki.test.raw): the file's text as is, byte for byte. The leading
///    " \n" line and the " \n" lines between paragraphs are kept; llama.cpp `perplexity -f
///    wiki.test.raw` tokenizes this with its last newline dropped, as the perplexity command's
///    llama.cpp convention does (lm-eval splits it into articles: wikitext_articles; GPTQ joins
///    the dataset's rows: gptq_wikitext_text).
///  - wikitext2 (wiki.test.tokens, with <unk>): the file's text as is.
///  - ptb (Mikolov ptb.test.txt): every line stripped of surrounding whitespace, then
///    " ".join(lines), as GPTQ's `ptb-new` (its --new-eval) does with the test split of Hugging
///    Face's ptb_text_only "sentence" rows (GPTQ's older `ptb` joins the validation split
///    with "\n\n").
///  - c4: JSON lines, plain or gzip (detected by its magic bytes). A row's text is its
///    "text" field or, without one, "prompt" + "response" concatenated with no separator
///    (such rows split one document mid-sentence; the prompt carries its own trailing
///    space). Rows are joined with " ", as GPTQ's `c4-new` ' '.join(valdata[:1100]['text'])
///    (which then keeps 256 windows: the gptq convention's default --chunks on c4).
///  - text (e.g. TinyStories): the file's text as is.
/// Every kind inflates a gzip file transparently; `sha256` is always of the file's bytes.
/// Text that is not UTF-8 (or holds a NUL byte) is refused, naming the first bad offset:
/// a binary file would otherwise be scored as text.
///
/// lm-evaluation-harness scores WikiText per article, not as one stream: wikitext_articles
/// splits a WikiText file the way its dataset (EleutherAI/wikitext_document_level) does and
/// wikitext_detokenize is its wikitext task's detokenizer (see both below).

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
  /// Why the file may not be of `kind` (empty: it looks like one): JSON lines given as plain
  /// text, PTB or WikiText (C4's format), or WikiText without a single article heading.
  std::string mismatch;
};

/// Loads `path` following `kind`'s convention (see the top of this header).
/// `max_rows` > 0 keeps only a C4 file's first `max_rows` rows (GPTQ's c4-new keeps 1,100).
Corpus load_corpus(CorpusKind kind, const std::string& path, int64_t max_rows = 0);

/// Same, with `kind` given by name (e.g. from the command line).
Corpus load_corpus(const std::string& kind, const std::string& path, int64_t max_rows = 0);

/// The PTB convention on already-read text: lines stripped, joined with " ".
std::string ptb_join_lines(std::string_view text, int64_t* lines = nullptr);

/// The C4 rows of JSON-lines text (already inflated); `path` names it in errors, which
/// carry the line number (invalid JSON, no "text" nor "prompt"/"response").
std::vector<std::string> parse_c4_rows(std::string_view text, const std::string& path);

/// Reads a C4 JSON-lines file (plain or gzip) into its rows' texts.
std::vector<std::string> load_c4_rows(const std::string& path);

/// The articles ("page" rows) of a WikiText file, raw or tokens version, exactly as the
/// Hugging Face dataset EleutherAI/wikitext_document_level builds them (its
/// `_generate_examples`), which lm-eval's `wikitext` task reads:
///  - the text is read with Python's universal newlines ("\r\n" and "\r" become "\n") and
///    split on "\n" (a final "\n" leaves a last empty line);
///  - a line is a top-level heading when, after replacing "= = =" by "===" and then "= =" by
///    "==" and stripping whitespace, it starts with "= " and ends with " =" (" = Title = ";
///    sub-headings " = = Sub = = " become "== Sub ==" and stay inside the article);
///  - each heading starts a new article: the lines gathered so far, joined with "\n", are an
///    article unless they are only whitespace (the file's leading " " line); the lines after
///    the last heading are the last article, always.
/// WikiText-2's test split (wiki.test.raw) has 62 articles.
std::vector<std::string> wikitext_articles(std::string_view text);

/// The text GPTQ's datautils.get_wikitext2 tokenizes for the test split:
/// "\n\n".join(testdata["text"]) over the rows of the Hugging Face `wikitext` dataset, whose
/// script yields one row per line of the file as Python's text-mode iteration reads it
/// (universal newlines, the "\n" kept), or "" for a line that is only whitespace
/// (str.strip()). Not the file as is: every line break becomes three, blank lines lose their
/// space. `rows` (if not null) gets the number of rows.
std::string gptq_wikitext_text(std::string_view file_text, int64_t* rows = nullptr);

/// lm-evaluation-harness's `wikitext_detokenizer` (lm_eval/tasks/wikitext/
/// preprocess_wikitext.py), re-implemented from its specification; in this order, each step
/// over the whole string, plain replacements left to right and non-overlapping:
///  1. "s '" -> "s'"; the regex /' [0-9]/ -> the literal text "/'[0-9]/" (as the harness has it);
///  2. " @-@ " -> "-", " @,@ " -> ",", " @.@ " -> ".";
///  3. " : " -> ": ", " ; " -> "; ", " . " -> ". ", " ! " -> "! ", " ? " -> "? ", " , " -> ", ";
///  4. for (), [], {}, "" and '' in turn: each opening character and the first closing one
///     after it lose the whitespace just inside them (Python's Unicode \s), scanning left to
///     right and resuming after each closing character (the regex \(\s*([^\)]*?)\s*\) etc.);
///  5. "= = = =" -> "====", "= = =" -> "===", "= =" -> "==", " U+00B0 " -> "U+00B0" (degree sign),
///     " \n" -> "\n", "\n " -> "\n", " N " -> " 1 ", " 's" -> "'s".
std::string wikitext_detokenize(std::string_view page);

/// Python's str.isspace() for one code point, which is also what re's \s matches in a str
/// pattern: ASCII \t\n\v\f\r, 0x1C-0x1F and space, U+0085, U+00A0, U+1680, U+2000-U+200A,
/// U+2028, U+2029, U+202F, U+205F, U+3000.
bool py_isspace(uint32_t c);

/// Decodes the UTF-8 code point at text[i] (i < text.size()) and advances i past it; an
/// invalid or truncated sequence (an overlong form, a surrogate, past U+10FFFF included)
/// decodes as U+FFFD and advances by one byte.
uint32_t next_code_point(std::string_view text, size_t& i);

/// Offset of the first byte of `text` that is not part of valid UTF-8 (or is a NUL byte,
/// which no text corpus holds), or npos when it is all valid text.
size_t first_invalid_utf8(std::string_view text);

/// Throws cb::Error naming `path` and the first byte that is not UTF-8 text (`inflated`: the
/// text is the file's gzip stream inflated), as every loader of text corpora does; `fix` (empty:
/// a corpus's) says what to do.
void require_utf8_text(std::string_view text, const std::string& path, bool inflated = false,
                       const std::string& fix = "");

/// `s` without leading and trailing whitespace as Python's str.strip() sees it (py_isspace).
std::string_view py_strip(std::string_view s);

}  // namespace cb::datasets
