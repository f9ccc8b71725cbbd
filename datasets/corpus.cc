#include "datasets/corpus.h"

#include <cctype>
#include <cstdio>
#include <utility>

#include "datasets/json_lines.h"
#include "datasets/sha256.h"
#include "datasets/text_io.h"
#include "lib/core/error.h"

namespace cb::datasets {
namespace {

struct KindInfo {
  CorpusKind kind;
  const char* name;
  const char* convention;
};

constexpr KindInfo kKinds[] = {
    {CorpusKind::kWikiText2, "wikitext2", "wikitext-2 tokens file as is"},
    {CorpusKind::kWikiText2Raw, "wikitext2-raw",
     "wikitext-2 raw file as is (llama.cpp/lm-eval), leading \" \\n\" kept"},
    {CorpusKind::kPtb, "ptb", "lines stripped and joined with \" \" (GPTQ's ptb-new)"},
    {CorpusKind::kC4, "c4",
     "JSON-lines rows (\"text\", or \"prompt\"+\"response\") joined with \" \" (GPTQ's c4-new)"},
    {CorpusKind::kText, "text", "plain text file as is"},
};

const KindInfo& info(CorpusKind kind) {
  for (const KindInfo& k : kKinds) {
    if (k.kind == kind) return k;
  }
  return kKinds[4];
}

/// Python's s.replace(from, to): every non-overlapping occurrence, left to right.
std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  for (size_t hit = s.find(from); hit != std::string_view::npos; hit = s.find(from, pos)) {
    out.append(s.substr(pos, hit - pos));
    out.append(to);
    pos = hit + from.size();
  }
  out.append(s.substr(pos));
  return out;
}

/// re.sub(r"/' [0-9]/", "/'[0-9]/", s): the replacement is literal text, as in the harness.
std::string replace_quote_digit(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    if (i + 5 <= s.size() && s.compare(i, 3, "/' ") == 0 &&
        std::isdigit(static_cast<unsigned char>(s[i + 3])) != 0 && s[i + 4] == '/') {
      out += "/'[0-9]/";
      i += 5;
    } else {
      out.push_back(s[i++]);
    }
  }
  return out;
}

/// re.sub(open \s*([^close]*?)\s* close, open \1 close, s): each `open` with a `close` after
/// it is matched with the first such `close` (the lazy group cannot cross one), and the text
/// between them loses its leading and trailing whitespace; scanning resumes after `close`.
std::string tighten_pairs(std::string_view s, char open, char close) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) {
    const size_t a = s.find(open, pos);
    if (a == std::string_view::npos) break;
    const size_t b = s.find(close, a + 1);
    if (b == std::string_view::npos) break;  // no later `open` has a `close` after it either
    out.append(s.substr(pos, a - pos));
    out.push_back(open);
    out.append(py_strip(s.substr(a + 1, b - a - 1)));
    out.push_back(close);
    pos = b + 1;
  }
  out.append(s.substr(pos));
  return out;
}

}  // namespace

const char* corpus_kind_name(CorpusKind kind) {
  return info(kind).name;
}

CorpusKind parse_corpus_kind(const std::string& name) {
  std::string valid;
  for (const KindInfo& k : kKinds) {
    if (name == k.name) return k.kind;
    valid += valid.empty() ? "" : ", ";
    valid += k.name;
  }
  throw make_error("corpus kind", "unknown kind '" + name + "'", "use one of: " + valid);
}

std::string ptb_join_lines(std::string_view text, int64_t* lines) {
  std::string out;
  out.reserve(text.size());
  int64_t count = 0;
  for (const Line& l : split_lines(text)) {
    if (count++ > 0) out.push_back(' ');
    out.append(trim(l.text));
  }
  if (lines != nullptr) *lines = count;
  return out;
}

std::vector<std::string> parse_c4_rows(std::string_view text, const std::string& path) {
  std::vector<std::string> docs;
  for (JsonLineFields& row : read_json_line_fields(text, path, {"text", "prompt", "response"})) {
    auto& v = row.values;
    if (v[0]) {
      docs.push_back(std::move(*v[0]));
    } else if (v[1] && v[2]) {
      docs.push_back(std::move(*v[1]) + *v[2]);
    } else {
      throw make_error(where(path, row.line),
                       std::string("no \"text\" field") +
                           (v[1] || v[2] ? " and only one of \"prompt\"/\"response\"" : ""),
                       "C4 rows need a \"text\" string (or both \"prompt\" and \"response\")");
    }
  }
  if (docs.empty()) {
    throw make_error(path, "no JSON rows", "pass a C4 JSON-lines file with \"text\" fields");
  }
  return docs;
}

std::vector<std::string> load_c4_rows(const std::string& path) {
  return parse_c4_rows(maybe_gunzip(read_file_bytes(path), path), path);
}

namespace {

// Whether `text` looks like JSON lines: its first non-blank line is a {...} object.
bool looks_like_json_lines(std::string_view text) {
  const size_t b = text.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos || text[b] != '{') return false;
  const size_t e = text.find('\n', b);
  const std::string_view first = py_strip(text.substr(b, e == std::string_view::npos ? e : e - b));
  return first.size() >= 2 && first.back() == '}' && first.find("\":") != std::string_view::npos;
}

std::string corpus_mismatch(CorpusKind kind, std::string_view text) {
  if (kind == CorpusKind::kC4) return "";
  if (looks_like_json_lines(text)) {
    return "it looks like JSON lines (C4's format), so their syntax would be scored as text; "
           "--dataset c4 scores their \"text\" fields";
  }
  if (kind == CorpusKind::kWikiText2 || kind == CorpusKind::kWikiText2Raw) {
    // WikiText's articles open with a " = Title = " line.
    for (const std::string_view& a : {std::string_view("\n = "), std::string_view("\n= ")}) {
      if (text.find(a) != std::string_view::npos || text.substr(0, a.size() - 1) == a.substr(1)) {
        return "";
      }
    }
    return "it has no WikiText article heading (a \" = Title = \" line), so it is not "
           "WikiText-2; --dataset text scores any text";
  }
  return "";
}

}  // namespace

Corpus load_corpus(CorpusKind kind, const std::string& path, int64_t max_rows) {
  Corpus c;
  c.kind = kind;
  c.path = path;
  c.convention = info(kind).convention;
  std::string bytes = read_file_bytes(path);
  c.file_bytes = bytes.size();
  c.sha256 = sha256_hex(bytes);
  c.gzipped = is_gzip(bytes);
  std::string text = c.gzipped ? gunzip(bytes, path) : std::move(bytes);
  require_utf8_text(text, path, c.gzipped);
  switch (kind) {
    case CorpusKind::kPtb: c.text = ptb_join_lines(text, &c.documents); break;
    case CorpusKind::kC4: {
      std::vector<std::string> docs = parse_c4_rows(text, path);
      if (max_rows > 0 && docs.size() > static_cast<size_t>(max_rows)) {
        docs.resize(static_cast<size_t>(max_rows));
        c.convention += ", first " + std::to_string(max_rows) + " rows";
      }
      size_t total = docs.size();
      for (const std::string& d : docs) total += d.size();
      c.text.reserve(total);
      for (size_t i = 0; i < docs.size(); ++i) {
        if (i > 0) c.text.push_back(' ');
        c.text += docs[i];
      }
      c.documents = static_cast<int64_t>(docs.size());
      break;
    }
    case CorpusKind::kWikiText2:
    case CorpusKind::kWikiText2Raw:
    case CorpusKind::kText: c.text = std::move(text); break;
  }
  if (c.text.empty()) {
    throw make_error(path, "the corpus is empty", "pass a non-empty text file");
  }
  c.mismatch = corpus_mismatch(kind, c.text);
  return c;
}

Corpus load_corpus(const std::string& kind, const std::string& path, int64_t max_rows) {
  return load_corpus(parse_corpus_kind(kind), path, max_rows);
}

std::vector<std::string> wikitext_articles(std::string_view text) {
  // Universal newlines, as Python's text-mode read.
  const std::string norm = replace_all(replace_all(text, "\r\n", "\n"), "\r", "\n");
  std::vector<std::string> articles;
  std::string page;   // "\n".join(lines gathered so far)
  bool empty = true;  // no line gathered yet
  size_t start = 0;
  while (true) {  // norm.split("\n"): n + 1 lines for n newlines
    const size_t nl = norm.find('\n', start);
    const std::string_view line = std::string_view(norm).substr(
        start, nl == std::string::npos ? std::string::npos : nl - start);
    const std::string r = replace_all(replace_all(line, "= = =", "==="), "= =", "==");
    const std::string_view rline = py_strip(r);
    const bool heading =
        rline.size() >= 2 && rline.substr(0, 2) == "= " && rline.substr(rline.size() - 2) == " =";
    if (heading) {
      if (!py_strip(page).empty()) articles.push_back(std::move(page));
      page.clear();
      empty = true;
    }
    if (!empty) page.push_back('\n');
    page.append(line);
    empty = false;
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  articles.push_back(std::move(page));
  return articles;
}

std::string gptq_wikitext_text(std::string_view file_text, int64_t* rows) {
  const std::string norm = replace_all(replace_all(file_text, "\r\n", "\n"), "\r", "\n");
  std::string out;
  out.reserve(norm.size() + norm.size() / 16);
  int64_t n = 0;
  for (size_t start = 0; start < norm.size();) {  // Python's lines: each keeps its "\n"
    const size_t nl = norm.find('\n', start);
    const size_t end = nl == std::string::npos ? norm.size() : nl + 1;
    const std::string_view line = std::string_view(norm).substr(start, end - start);
    if (n > 0) out += "\n\n";
    if (!py_strip(line).empty()) out.append(line);
    ++n;
    start = end;
  }
  if (rows != nullptr) *rows = n;
  return out;
}

std::string wikitext_detokenize(std::string_view page) {
  // 1. contractions
  std::string s = replace_all(page, "s '", "s'");
  s = replace_quote_digit(s);
  // 2. number separators, 3. punctuation
  static constexpr std::pair<const char*, const char*> kSpacing[] = {
      {" @-@ ", "-"}, {" @,@ ", ","}, {" @.@ ", "."}, {" : ", ": "}, {" ; ", "; "},
      {" . ", ". "},  {" ! ", "! "},  {" ? ", "? "},  {" , ", ", "}};
  for (const auto& [from, to] : kSpacing) s = replace_all(s, from, to);
  // 4. brackets and quotes
  static constexpr std::pair<char, char> kPairs[] = {
      {'(', ')'}, {'[', ']'}, {'{', '}'}, {'"', '"'}, {'\'', '\''}};
  for (const auto& [open, close] : kPairs) s = tighten_pairs(s, open, close);
  // 5. miscellaneous
  static constexpr std::pair<const char*, const char*> kMisc[] = {
      {"= = = =", "===="}, {"= = =", "==="}, {"= =", "=="},  {" \xc2\xb0 ", "\xc2\xb0"},
      {" \n", "\n"},       {"\n ", "\n"},    {" N ", " 1 "}, {" 's", "'s"}};
  for (const auto& [from, to] : kMisc) s = replace_all(s, from, to);
  return s;
}

bool py_isspace(uint32_t c) {
  if (c < 0x80) return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20);
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

void require_utf8_text(std::string_view text, const std::string& path, bool inflated,
                       const std::string& fix) {
  const size_t bad = first_invalid_utf8(text);
  if (bad == std::string_view::npos) return;
  char byte[8];
  std::snprintf(byte, sizeof byte, "0x%02X", static_cast<unsigned char>(text[bad]));
  throw make_error(path,
                   std::string("not UTF-8 text: byte ") + byte + " at offset " +
                       std::to_string(bad) + (inflated ? " of the inflated text" : ""),
                   fix.empty() ? "pass a text corpus (a model file or other binary data cannot "
                                 "be scored)"
                               : fix);
}

size_t first_invalid_utf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const size_t at = i;
    const auto b = static_cast<unsigned char>(text[i]);
    if (b == 0) return at;  // text holds no NUL; a binary file does
    if (next_code_point(text, i) == 0xFFFD && i == at + 1) {
      // U+FFFD itself is 3 bytes long: a one-byte advance was an invalid sequence.
      return at;
    }
  }
  return std::string_view::npos;
}

uint32_t next_code_point(std::string_view text, size_t& i) {
  const auto b0 = static_cast<unsigned char>(text[i]);
  const int len = b0 < 0x80           ? 1
                  : (b0 >> 5) == 0x6  ? 2
                  : (b0 >> 4) == 0xE  ? 3
                  : (b0 >> 3) == 0x1E ? 4
                                      : 0;
  if (len == 0 || i + static_cast<size_t>(len) > text.size()) {
    ++i;
    return b0 < 0x80 ? b0 : 0xFFFD;
  }
  uint32_t c = len == 1 ? b0 : b0 & (0x7Fu >> len);
  for (int k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(text[i + static_cast<size_t>(k)]);
    if ((b >> 6) != 0x2) {
      ++i;
      return 0xFFFD;
    }
    c = (c << 6) | (b & 0x3Fu);
  }
  // Overlong forms (C0 A0 is not a space), UTF-16 surrogates and values past U+10FFFF are
  // invalid UTF-8 too, as Python's decoder says.
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (c < kMin[len] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) {
    ++i;
    return 0xFFFD;
  }
  i += static_cast<size_t>(len);
  return c;
}

std::string_view py_strip(std::string_view s) {
  size_t begin = s.size(), end = 0;
  for (size_t i = 0; i < s.size();) {
    const size_t at = i;
    if (!py_isspace(next_code_point(s, i))) {
      if (begin == s.size()) begin = at;
      end = i;
    }
  }
  return begin < end ? s.substr(begin, end - begin) : std::string_view();
}

}  // namespace cb::datasets
