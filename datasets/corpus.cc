#include "datasets/corpus.h"

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
    {CorpusKind::kPtb, "ptb", "lines stripped and joined with \" \" (GPTQ)"},
    {CorpusKind::kC4, "c4",
     "JSON-lines rows (\"text\", or \"prompt\"+\"response\") joined with \" \" (GPTQ)"},
    {CorpusKind::kText, "text", "plain text file as is"},
};

const KindInfo& info(CorpusKind kind) {
  for (const KindInfo& k : kKinds) {
    if (k.kind == kind) return k;
  }
  return kKinds[4];
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

Corpus load_corpus(CorpusKind kind, const std::string& path) {
  Corpus c;
  c.kind = kind;
  c.path = path;
  c.convention = info(kind).convention;
  std::string bytes = read_file_bytes(path);
  c.file_bytes = bytes.size();
  c.sha256 = sha256_hex(bytes);
  c.gzipped = is_gzip(bytes);
  std::string text = c.gzipped ? gunzip(bytes, path) : std::move(bytes);
  switch (kind) {
    case CorpusKind::kPtb: c.text = ptb_join_lines(text, &c.documents); break;
    case CorpusKind::kC4: {
      const std::vector<std::string> docs = parse_c4_rows(text, path);
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
  return c;
}

Corpus load_corpus(const std::string& kind, const std::string& path) {
  return load_corpus(parse_corpus_kind(kind), path);
}

}  // namespace cb::datasets
