#include "lib/tokenizer/bpe.h"

#include <algorithm>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>
#include <queue>
#include <tuple>
#include <utility>

#include "lib/core/error.h"
#include "lib/core/json_depth.h"
#include "lib/core/json_parse.h"
#include "lib/core/regular_file.h"
#include "lib/formats/gguf.h"
#include "lib/tokenizer/load.h"
#include "lib/tokenizer/unicode.h"

namespace cb::tokenizer {

namespace {

using nlohmann::json;

/// Deepest JSON nesting accepted in tokenizer.json (it needs 5 levels: pre_tokenizer
/// sequences); rendering a value for a message recurses once per level, so a file of
/// thousands of '[' would overflow the stack.
constexpr int kMaxJsonDepth = 64;

/// GGUF token types (llama.cpp's llama_token_type).
constexpr int32_t kGgufControl = 3;
constexpr int32_t kGgufUserDefined = 4;

std::string in_quotes(const std::string& s) {
  return "\"" + s + "\"";
}

/// Short rendering of a JSON value for error messages.
std::string brief(const json& j) {
  return clip_for_message(j.dump(), 160);
}

/// Splits a merge rule "a b"; false unless it is exactly two pieces around one space.
bool split_merge(const std::string& m, std::string* a, std::string* b) {
  const size_t sp = m.find(' ');
  if (sp == std::string::npos || m.find(' ', sp + 1) != std::string::npos) return false;
  *a = m.substr(0, sp);
  *b = m.substr(sp + 1);
  return true;
}

PreTokenizer pre_from_gguf(const std::string& pre, const std::string& where) {
  if (pre == "falcon") return PreTokenizer::kFalcon;
  if (pre == "default" || pre == "gpt2") return PreTokenizer::kGpt2;
  throw make_error(where, "tokenizer.ggml.pre " + in_quotes(pre) + " is not supported",
                   "supported: \"falcon\", \"gpt2\", \"default\"");
}

bool is_type(const json& j, const char* type) {
  return j.is_object() && j.contains("type") && j["type"] == type;
}

template <typename T>
T field_or(const json& obj, const char* key, T dflt) {
  if (!obj.contains(key) || obj[key].is_null()) return dflt;
  return obj[key].get<T>();
}

bool is_byte_level_plain(const json& j) {
  return is_type(j, "ByteLevel") && !field_or<bool>(j, "add_prefix_space", true) &&
         field_or<bool>(j, "use_regex", true);
}

bool is_falcon_sequence(const json& j) {
  if (!is_type(j, "Sequence") || !j.contains("pretokenizers")) return false;
  const json& p = j["pretokenizers"];
  if (!p.is_array() || p.size() != 4) return false;
  const json& split = p[3];
  return is_type(p[0], "Punctuation") &&
         field_or<std::string>(p[0], "behavior", "") == "Contiguous" && is_byte_level_plain(p[1]) &&
         is_type(p[2], "Digits") && !field_or<bool>(p[2], "individual_digits", false) &&
         is_type(split, "Split") && split.contains("pattern") && split["pattern"].is_object() &&
         split["pattern"].value("Regex", "") == "[0-9][0-9][0-9]" &&
         field_or<std::string>(split, "behavior", "") == "Isolated" &&
         !field_or<bool>(split, "invert", false);
}

PreTokenizer pre_from_json(const json& j, const std::string& where) {
  try {
    if (is_falcon_sequence(j)) return PreTokenizer::kFalcon;
    if (is_byte_level_plain(j)) return PreTokenizer::kGpt2;
  } catch (const json::exception&) {
    // a field of the wrong type: not a recognized pre-tokenizer
  }
  throw make_error(where, "pre_tokenizer " + brief(j) + " is not supported",
                   "expected ByteLevel (add_prefix_space false) or Falcon's Sequence "
                   "[Punctuation, ByteLevel, Digits, Split [0-9][0-9][0-9]]");
}

/// A token's content from tokenizer_config.json's bos_token/eos_token (string or
/// {"content": ...}); empty when absent.
std::string config_token(const json& cfg, const char* key) {
  if (!cfg.contains(key)) return "";
  const json& v = cfg[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) {
    return v["content"].get<std::string>();
  }
  return "";
}

/// Parsed tokenizer.json contents, before they are handed to the tokenizer.
struct JsonVocab {
  std::vector<std::string> pieces;
  std::vector<bool> special;
  std::vector<bool> added;
};

JsonVocab read_json_vocab(const json& model, const json& doc, const std::string& where) {
  if (!model.contains("vocab") || !model["vocab"].is_object()) {
    throw make_error(where, "model.vocab is missing or not an object {piece: id}",
                     kDamagedVocabFix);
  }
  const json& vocab = model["vocab"];
  std::vector<std::pair<int64_t, std::string>> entries;
  entries.reserve(vocab.size());
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it.value().is_number_integer()) {
      throw make_error(where,
                       "model.vocab[" + in_quotes(it.key()) + "] is " + brief(it.value()) +
                           ", not an integer id",
                       kDamagedVocabFix);
    }
    entries.emplace_back(it.value().get<int64_t>(), it.key());
  }
  std::vector<std::tuple<int64_t, std::string, bool>> added;
  if (doc.contains("added_tokens") && !doc["added_tokens"].is_null()) {
    const json& at = doc["added_tokens"];
    if (!at.is_array()) throw make_error(where, "added_tokens is not an array", kDamagedVocabFix);
    for (size_t i = 0; i < at.size(); ++i) {
      const json& t = at[i];
      const std::string f = "added_tokens[" + std::to_string(i) + "]";
      if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() ||
          !t.contains("content") || !t["content"].is_string() ||
          t["content"].get_ref<const std::string&>().empty()) {
        throw make_error(
            where,
            f + " " + brief(t) + " needs an integer \"id\" and a non-empty string \"content\"",
            kDamagedVocabFix);
      }
      // Matching that strips the spaces around a token, or only whole words, is not
      // implemented: such a file would tokenize differently, so it is refused.
      for (const char* flag : {"lstrip", "rstrip", "single_word"}) {
        if (t.contains(flag) && t[flag].is_boolean() && t[flag].get<bool>()) {
          throw make_error(where,
                           f + " " + brief(t) + " sets \"" + flag +
                               "\": true, which cachebench's tokenizer does not implement",
                           "use a tokenizer.json whose added tokens set it false, or the "
                           "model's GGUF vocabulary");
        }
      }
      const bool special =
          t.contains("special") && t["special"].is_boolean() && t["special"].get<bool>();
      added.emplace_back(t["id"].get<int64_t>(), t["content"].get<std::string>(), special);
    }
  }
  // Ids must be dense: every id is below the number of distinct ids.
  std::vector<int64_t> ids;
  for (const auto& e : entries) ids.push_back(e.first);
  for (const auto& a : added) ids.push_back(std::get<0>(a));
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  const int64_t n = static_cast<int64_t>(ids.size());
  const auto check_id = [&](int64_t id, const std::string& f) {
    if (id < 0 || id >= n) {
      throw make_error(
          where,
          f + " has id " + std::to_string(id) + ", out of range [0, " + std::to_string(n) + ")",
          "ids must be 0..N-1 for N distinct tokens");
    }
  };
  JsonVocab v;
  v.pieces.resize(static_cast<size_t>(n));
  v.special.assign(static_cast<size_t>(n), false);
  v.added.assign(static_cast<size_t>(n), false);
  std::vector<bool> seen(static_cast<size_t>(n), false);
  for (const auto& [id, p] : entries) {
    check_id(id, "model.vocab[" + in_quotes(p) + "]");
    const size_t k = static_cast<size_t>(id);
    if (seen[k]) {
      throw make_error(where,
                       "model.vocab: id " + std::to_string(id) + " names both " +
                           in_quotes(v.pieces[k]) + " and " + in_quotes(p),
                       kDamagedVocabFix);
    }
    seen[k] = true;
    v.pieces[k] = p;
  }
  for (size_t i = 0; i < added.size(); ++i) {
    const auto& [id, content, special] = added[i];
    const std::string f = "added_tokens[" + std::to_string(i) + "]";
    check_id(id, f);
    const size_t k = static_cast<size_t>(id);
    if (seen[k] && v.pieces[k] != content) {
      throw make_error(where,
                       f + " " + in_quotes(content) + " has id " + std::to_string(id) +
                           ", which model.vocab gives to " + in_quotes(v.pieces[k]),
                       kDamagedVocabFix);
    }
    seen[k] = true;
    v.pieces[k] = content;
    v.added[k] = true;
    v.special[k] = special;
  }
  return v;
}

std::string dir_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

}  // namespace

void BpeTokenizer::set_vocab(std::vector<std::string> pieces, std::vector<TokenKind> kinds,
                             const std::string& where) {
  if (pieces.empty()) throw make_error(where, "the vocabulary is empty", kDamagedVocabFix);
  pieces_ = std::move(pieces);
  kinds_ = std::move(kinds);
  piece_to_id_.reserve(pieces_.size());
  for (size_t i = 0; i < pieces_.size(); ++i) {
    piece_to_id_.emplace(pieces_[i], static_cast<int32_t>(i));
    if (kinds_[i] != TokenKind::kNormal && !pieces_[i].empty()) {
      added_by_byte_[static_cast<uint8_t>(pieces_[i][0])].push_back(static_cast<int32_t>(i));
    }
  }
  for (auto& ids : added_by_byte_) {
    std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
      return pieces_[static_cast<size_t>(a)].size() > pieces_[static_cast<size_t>(b)].size();
    });
  }
  for (int b = 0; b < 256; ++b) {
    std::string p;
    utf8_append(p, byte_to_codepoint(static_cast<uint8_t>(b)));
    byte_ids_[static_cast<size_t>(b)] = find_piece(p);
  }
}

void BpeTokenizer::add_merge(const std::string& a, const std::string& b, uint32_t rank,
                             const std::string& where) {
  const int32_t ia = find_piece(a);
  const int32_t ib = find_piece(b);
  const int32_t im = find_piece(a + b);
  const std::string* missing = ia < 0 ? &a : ib < 0 ? &b : nullptr;
  const std::string merged = a + b;
  if (missing == nullptr && im < 0) missing = &merged;
  if (missing != nullptr) {
    throw make_error(where,
                     "merge " + std::to_string(rank) + " " + in_quotes(a + " " + b) +
                         " names piece " + in_quotes(*missing) + ", which is not in the vocabulary",
                     kDamagedVocabFix);
  }
  // Like Hugging Face (a hash map built in rank order), a repeated pair keeps its last rank.
  merges_[pair_key(ia, ib)] = Merge{rank, im};
}

int32_t BpeTokenizer::find_piece(const std::string& p) const {
  const auto it = piece_to_id_.find(p);
  return it == piece_to_id_.end() ? -1 : it->second;
}

std::unique_ptr<BpeTokenizer> BpeTokenizer::from_gguf(const cb::formats::GgufFile& f) {
  const std::string& where = f.path();
  const auto model = f.get_string("tokenizer.ggml.model");
  if (!model) throw make_error(where, "tokenizer.ggml.model is missing", kDamagedVocabFix);
  if (*model != "gpt2") {
    throw make_error(
        where, "tokenizer.ggml.model is " + in_quotes(*model) + ", not \"gpt2\" (byte-level BPE)");
  }
  auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  if (!tokens) throw make_error(where, "tokenizer.ggml.tokens is missing", kDamagedVocabFix);
  const size_t n = tokens->size();
  const auto types = f.get_i32_array("tokenizer.ggml.token_type");
  if (types && types->size() != n) {
    throw make_error(where,
                     "tokenizer.ggml.token_type has " + std::to_string(types->size()) +
                         " entries but tokenizer.ggml.tokens has " + std::to_string(n),
                     kDamagedVocabFix);
  }
  const auto merges = f.get_string_array("tokenizer.ggml.merges");
  if (!merges) throw make_error(where, "tokenizer.ggml.merges is missing", kDamagedVocabFix);

  std::unique_ptr<BpeTokenizer> t(new BpeTokenizer());
  // Falcon GGUFs converted before llama.cpp wrote tokenizer.ggml.pre (2023's) lack it; GPT-2's
  // pre-tokenizer would split digits and punctuation unlike Falcon's own (its test vectors
  // fail), so the architecture decides. llama.cpp falls back to GPT-2's with a warning.
  const auto pre = f.get_string("tokenizer.ggml.pre");
  const bool falcon = f.get_string("general.architecture").value_or("") == "falcon";
  t->pre_ = pre_from_gguf(pre.value_or(falcon ? "falcon" : "default"), where);
  std::vector<TokenKind> kinds(n, TokenKind::kNormal);
  for (size_t i = 0; types && i < n; ++i) {
    if ((*types)[i] == kGgufControl) kinds[i] = TokenKind::kSpecial;
    if ((*types)[i] == kGgufUserDefined) kinds[i] = TokenKind::kAdded;
  }
  t->set_vocab(std::move(*tokens), std::move(kinds), where);
  t->merges_.reserve(merges->size());
  std::string a;
  std::string b;
  for (size_t r = 0; r < merges->size(); ++r) {
    if (!split_merge((*merges)[r], &a, &b)) {
      throw make_error(where,
                       "tokenizer.ggml.merges[" + std::to_string(r) + "] " +
                           in_quotes((*merges)[r]) + " is not two pieces separated by one space",
                       kDamagedVocabFix);
    }
    t->add_merge(a, b, static_cast<uint32_t>(r), where + ": tokenizer.ggml.merges");
  }
  const auto special_id = [&](const char* key) -> int32_t {
    const int64_t v = gguf_token_id(f, key);  // -1: absent, or the "none" sentinel
    if (v >= static_cast<int64_t>(n)) {
      throw make_error(where,
                       std::string(key) + " = " + std::to_string(v) + " is out of range for " +
                           std::to_string(n) + " tokens",
                       kDamagedVocabFix);
    }
    return static_cast<int32_t>(v);
  };
  t->bos_id_ = special_id("tokenizer.ggml.bos_token_id");
  t->eos_id_ = special_id("tokenizer.ggml.eos_token_id");
  t->add_bos_ = f.get_bool("tokenizer.ggml.add_bos_token").value_or(false);
  t->kind_ = std::string("bpe (gguf, ") + pre_tokenizer_name(t->pre_) +
             (pre      ? ")"
              : falcon ? ": no tokenizer.ggml.pre, chosen by general.architecture)"
                       : ": no tokenizer.ggml.pre, the default)");
  return t;
}

std::unique_ptr<BpeTokenizer> BpeTokenizer::from_tokenizer_json(const std::string& path) {
  // Not std::ifstream, which opens a FIFO and waits for a writer.
  const std::string text = read_regular_file(path, "pass a tokenizer.json file");
  refuse_json_nul(text, path, kDamagedVocabFix);
  // Deep nesting is refused before parsing, in one pass (see lib/core/json_depth.h).
  if (json_nesting_depth(text) > static_cast<size_t>(kMaxJsonDepth)) {
    throw make_error(
        path,
        "not valid JSON: it nests more than " + std::to_string(kMaxJsonDepth) + " levels deep",
        kDamagedVocabFix);
  }
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    throw make_error(path, std::string("not valid JSON: ") + e.what(), kDamagedVocabFix);
  }
  if (!doc.is_object())
    throw make_error(path, "the top level is not a JSON object", kDamagedVocabFix);
  if (!doc.contains("model") || !doc["model"].is_object()) {
    throw make_error(path, "model is missing or not an object", kDamagedVocabFix);
  }
  const json& model = doc["model"];
  if (model.contains("type") && model["type"] != "BPE") {
    throw make_error(path, "model.type is " + brief(model["type"]) + ", not \"BPE\"");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && !model[key].is_null() && model[key] != "") {
      throw make_error(path,
                       std::string("model.") + key + " " + brief(model[key]) +
                           " is not supported by byte-level BPE",
                       kDamagedVocabFix);
    }
  }
  if (doc.contains("normalizer") && !doc["normalizer"].is_null()) {
    throw make_error(path, "normalizer " + brief(doc["normalizer"]) + " is not supported",
                     "byte-level BPE models here use no normalizer");
  }
  if (!doc.contains("pre_tokenizer"))
    throw make_error(path, "pre_tokenizer is missing", kDamagedVocabFix);
  if (!model.contains("merges") || !model["merges"].is_array()) {
    throw make_error(path, "model.merges is missing or not an array", kDamagedVocabFix);
  }

  std::unique_ptr<BpeTokenizer> t(new BpeTokenizer());
  t->pre_ = pre_from_json(doc["pre_tokenizer"], path);
  JsonVocab v = read_json_vocab(model, doc, path);
  std::vector<TokenKind> kinds(v.pieces.size(), TokenKind::kNormal);
  for (size_t i = 0; i < kinds.size(); ++i) {
    if (v.added[i]) kinds[i] = v.special[i] ? TokenKind::kSpecial : TokenKind::kAdded;
  }
  t->set_vocab(std::move(v.pieces), std::move(kinds), path);
  if (model.contains("ignore_merges") && model["ignore_merges"].is_boolean()) {
    t->ignore_merges_ = model["ignore_merges"].get<bool>();
  }
  const json& merges = model["merges"];
  t->merges_.reserve(merges.size());
  std::string a;
  std::string b;
  for (size_t r = 0; r < merges.size(); ++r) {
    const json& m = merges[r];
    bool ok = false;
    if (m.is_string()) {
      ok = split_merge(m.get<std::string>(), &a, &b);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      a = m[0].get<std::string>();
      b = m[1].get<std::string>();
      ok = true;
    }
    if (!ok) {
      throw make_error(path,
                       "model.merges[" + std::to_string(r) + "] " + brief(m) +
                           " is neither \"a b\" nor [\"a\", \"b\"]",
                       kDamagedVocabFix);
    }
    t->add_merge(a, b, static_cast<uint32_t>(r), path + ": model.merges");
  }

  t->eos_id_ = t->find_piece("<|endoftext|>");
  const std::string cfg_path = dir_of(path) + "/tokenizer_config.json";
  if (path_exists_checked(cfg_path)) {
    const json cfg = json::parse(read_regular_file(cfg_path, "remove it or make it a file"),
                                 nullptr, /*allow_exceptions=*/false);
    if (cfg.is_object()) {
      const std::string bos = config_token(cfg, "bos_token");
      const std::string eos = config_token(cfg, "eos_token");
      if (!bos.empty()) t->bos_id_ = t->find_piece(bos);
      if (!eos.empty()) t->eos_id_ = t->find_piece(eos);
      if (cfg.contains("add_bos_token") && cfg["add_bos_token"].is_boolean()) {
        t->add_bos_ = cfg["add_bos_token"].get<bool>() && t->bos_id_ >= 0;
      }
    }
  }
  t->kind_ = std::string("bpe (tokenizer.json, ") + pre_tokenizer_name(t->pre_) + ")";
  return t;
}

int32_t BpeTokenizer::match_added(std::string_view text, size_t pos, size_t* len) const {
  for (int32_t id : added_by_byte_[static_cast<uint8_t>(text[pos])]) {
    const std::string& p = pieces_[static_cast<size_t>(id)];
    if (text.compare(pos, p.size(), p) == 0) {
      *len = p.size();
      return id;
    }
  }
  return -1;
}

void BpeTokenizer::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
  if (ignore_merges_) {
    std::string mapped;
    for (char c : piece) utf8_append(mapped, byte_to_codepoint(static_cast<uint8_t>(c)));
    const int32_t id = find_piece(mapped);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
    bool alive;
  };
  std::vector<Symbol> sym;
  sym.reserve(piece.size());
  for (char c : piece) {
    // A byte without a vocabulary piece is dropped, as Hugging Face does without unk.
    const int32_t id = byte_ids_[static_cast<uint8_t>(c)];
    if (id < 0) continue;
    const auto k = static_cast<int32_t>(sym.size());
    sym.push_back(Symbol{id, k - 1, k + 1, true});
  }
  if (sym.empty()) return;
  sym.back().next = -1;

  struct Candidate {
    uint32_t rank;
    int32_t pos;
    int32_t id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  const auto push = [&](int32_t pos) {
    const int32_t next = sym[static_cast<size_t>(pos)].next;
    if (next < 0) return;
    const auto it =
        merges_.find(pair_key(sym[static_cast<size_t>(pos)].id, sym[static_cast<size_t>(next)].id));
    if (it != merges_.end()) queue.push(Candidate{it->second.rank, pos, it->second.id});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i) push(i);

  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& cur = sym[static_cast<size_t>(top.pos)];
    if (!cur.alive || cur.next < 0) continue;
    Symbol& right = sym[static_cast<size_t>(cur.next)];
    // Stale when either side changed since the candidate was queued.
    const auto it = merges_.find(pair_key(cur.id, right.id));
    if (it == merges_.end() || it->second.id != top.id) continue;
    cur.id = top.id;
    right.alive = false;
    cur.next = right.next;
    if (cur.next >= 0) sym[static_cast<size_t>(cur.next)].prev = top.pos;
    if (cur.prev >= 0) push(cur.prev);
    push(top.pos);
  }
  for (const Symbol& s : sym) {
    if (s.alive) out.push_back(s.id);
  }
}

void BpeTokenizer::encode_plain(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  for (std::string_view p : pretokenize(text, pre_)) encode_piece(p, out);
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text, bool add_bos) const {
  std::vector<int32_t> out;
  if (add_bos && bos_id_ >= 0) out.push_back(bos_id_);
  size_t start = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t len = 0;
    const int32_t id =
        added_by_byte_[static_cast<uint8_t>(text[pos])].empty() ? -1 : match_added(text, pos, &len);
    if (id < 0) {
      ++pos;
      continue;
    }
    encode_plain(text.substr(start, pos - start), out);
    out.push_back(id);
    pos += len;
    start = pos;
  }
  encode_plain(text.substr(start), out);
  return out;
}

std::string BpeTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= pieces_.size()) {
      throw make_error("BpeTokenizer::decode", "id " + std::to_string(id) +
                                                   " is out of range for " +
                                                   std::to_string(pieces_.size()) + " tokens");
    }
    const std::string& p = pieces_[static_cast<size_t>(id)];
    switch (kinds_[static_cast<size_t>(id)]) {
      case TokenKind::kSpecial: break;
      case TokenKind::kAdded: out += p; break;
      case TokenKind::kNormal:
        for (size_t pos = 0; pos < p.size();) {
          size_t len = 0;
          const uint32_t cp = utf8_next(p, pos, &len);
          const int b = codepoint_to_byte(cp);
          if (b >= 0) {
            out.push_back(static_cast<char>(b));
          } else {
            out.append(p, pos, len);
          }
          pos += len;
        }
        break;
    }
  }
  return out;
}

std::string BpeTokenizer::piece(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= pieces_.size()) {
    throw make_error("BpeTokenizer::piece", "id " + std::to_string(id) + " is out of range for " +
                                                std::to_string(pieces_.size()) + " tokens");
  }
  return pieces_[static_cast<size_t>(id)];
}

}  // namespace cb::tokenizer
