#include "lib/store/entry.h"

#include <algorithm>
#include <cstring>

#include "lib/store/checksum.h"

namespace cb::store {

uint32_t EntryMeta::tokens_in_chunk(uint64_t c) const {
  const uint64_t start = c * tokens_per_chunk;
  const uint64_t n = static_cast<uint64_t>(n_tokens());
  if (start >= n) return 0;
  return static_cast<uint32_t>(std::min<uint64_t>(tokens_per_chunk, n - start));
}

void EntryMeta::hash_tokens() {
  token_hashes.clear();
  for (uint64_t c = 0; c < n_token_chunks(); ++c) {
    token_hashes.push_back(
        checksum(tokens.data() + c * tokens_per_chunk, tokens_in_chunk(c) * sizeof(TokenId)));
  }
}

int64_t EntryMeta::matching_prefix(const std::vector<TokenId>& history) const {
  int64_t matched = 0;
  for (uint64_t c = 0; c < n_token_chunks(); ++c) {
    const uint64_t start = c * tokens_per_chunk;
    const uint32_t n = tokens_in_chunk(c);
    if (start + n > history.size()) break;
    if (checksum(history.data() + start, n * sizeof(TokenId)) != token_hashes[c]) break;
    if (std::memcmp(history.data() + start, tokens.data() + start, n * sizeof(TokenId)) != 0) break;
    matched += n;
  }
  return matched;
}

bool EntryMeta::valid(std::string* why) const {
  auto fail = [&](const char* w) {
    if (why) *why = w;
    return false;
  };
  if (shape.n_layers <= 0 || shape.token_bytes == 0) return fail("bad shape");
  if (tokens_per_chunk == 0) return fail("bad tokens_per_chunk");
  if (tokens.empty()) return fail("no tokens");
  if (slots.size() != n_chunks() || checksums.size() != n_chunks()) return fail("chunk count");
  if (token_hashes.size() != n_token_chunks()) return fail("token hash count");
  return true;
}

uint64_t chunk_seed(SessionId session) {
  return session * 0x9E3779B97F4A7C15ull + 0x5bd1e995;
}

namespace {

class Writer {
 public:
  template <typename T>
  void put(const T& v) {
    const size_t o = s_.size();
    s_.resize(o + sizeof(T));
    std::memcpy(&s_[o], &v, sizeof(T));
  }
  void put_str(const std::string& v) {
    put<uint32_t>(static_cast<uint32_t>(v.size()));
    s_ += v;
  }
  template <typename T>
  void put_vec(const std::vector<T>& v) {
    put<uint64_t>(v.size());
    const size_t o = s_.size();
    s_.resize(o + v.size() * sizeof(T));
    if (!v.empty()) std::memcpy(&s_[o], v.data(), v.size() * sizeof(T));
  }
  std::string take() { return std::move(s_); }

 private:
  std::string s_;
};

class Reader {
 public:
  explicit Reader(const std::string& s) : s_(s) {}
  template <typename T>
  bool get(T* v) {
    if (s_.size() - pos_ < sizeof(T)) return false;
    std::memcpy(v, s_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool get_str(std::string* v) {
    uint32_t n = 0;
    if (!get(&n) || s_.size() - pos_ < n) return false;
    v->assign(s_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  template <typename T>
  bool get_vec(std::vector<T>* v) {
    uint64_t n = 0;
    if (!get(&n) || n > (s_.size() - pos_) / sizeof(T)) return false;
    v->resize(n);
    if (n > 0) std::memcpy(v->data(), s_.data() + pos_, n * sizeof(T));
    pos_ += n * sizeof(T);
    return true;
  }
  bool done() const { return pos_ == s_.size(); }

 private:
  const std::string& s_;
  size_t pos_ = 0;
};

}  // namespace

std::string encode_entry(const EntryMeta& m) {
  Writer w;
  w.put(m.session);
  w.put(m.generation);
  w.put(m.fingerprint.hash);
  w.put_str(m.fingerprint.description);
  w.put(static_cast<uint8_t>(m.encoding));
  w.put(static_cast<int32_t>(m.shape.n_layers));
  w.put(m.shape.token_bytes);
  w.put(m.tokens_per_chunk);
  w.put(m.created);
  w.put(m.last_access);
  w.put(m.ttl);
  w.put_vec(m.tokens);
  w.put_vec(m.slots);
  w.put_vec(m.checksums);
  return w.take();
}

bool decode_entry(const std::string& bytes, EntryMeta* m) {
  Reader r(bytes);
  uint8_t enc = 0;
  int32_t layers = 0;
  bool ok = r.get(&m->session) && r.get(&m->generation) && r.get(&m->fingerprint.hash) &&
            r.get_str(&m->fingerprint.description) && r.get(&enc) && r.get(&layers) &&
            r.get(&m->shape.token_bytes) && r.get(&m->tokens_per_chunk) && r.get(&m->created) &&
            r.get(&m->last_access) && r.get(&m->ttl) && r.get_vec(&m->tokens) &&
            r.get_vec(&m->slots) && r.get_vec(&m->checksums) && r.done();
  if (!ok || enc > 1) return false;
  m->encoding = static_cast<KeyEncoding>(enc);
  m->shape.n_layers = layers;
  if (m->tokens_per_chunk == 0) return false;
  m->hash_tokens();
  return m->valid(nullptr);
}

}  // namespace cb::store
