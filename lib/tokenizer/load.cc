#include "lib/tokenizer/load.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <limits>

#include "lib/core/error.h"
#include "lib/core/regular_file.h"
#include "lib/formats/gguf.h"
#include "lib/tokenizer/bpe.h"
#include "lib/tokenizer/sentencepiece.h"
#include "lib/tokenizer/spm.h"

namespace cb::tokenizer {
namespace {

bool is_dir(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// Whether the file begins with GGUF's magic (an unreadable file is left to the GGUF reader,
/// which says why).
bool starts_like_gguf(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return true;
  char magic[4] = {};
  const size_t n = std::fread(magic, 1, sizeof magic, f);
  std::fclose(f);
  return n == sizeof magic && std::memcmp(magic, "GGUF", sizeof magic) == 0;
}

}  // namespace

std::unique_ptr<Tokenizer> tokenizer_from_gguf(const formats::GgufFile& f) {
  const auto model = f.get_string("tokenizer.ggml.model");
  if (!model) {
    throw make_error(f.path(), "no embedded vocabulary (metadata key 'tokenizer.ggml.model')",
                     "pass --tokenizer with a tokenizer.model or tokenizer.json");
  }
  if (*model == "llama") return SpmTokenizer::from_gguf(f);
  if (*model == "gpt2") return BpeTokenizer::from_gguf(f);
  throw make_error(f.path(), "unsupported tokenizer.ggml.model '" + *model + "'",
                   "supported: llama (SentencePiece) and gpt2 (byte-level BPE)");
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  if (path.rfind("preset:", 0) == 0) {
    throw make_error(path, "presets have random weights and no vocabulary",
                     "pass --tokenizer with a tokenizer.model, tokenizer.json or .gguf file");
  }
  if (is_dir(path)) {
    // Whatever is there under the name is opened, so that a FIFO or a directory is named as
    // what it is rather than passed over for the other file (or reported as missing).
    if (path_exists_checked(path + "/tokenizer.model"))
      return SentencePieceTokenizer::open(path + "/tokenizer.model");
    if (path_exists_checked(path + "/tokenizer.json"))
      return BpeTokenizer::from_tokenizer_json(path + "/tokenizer.json");
    throw make_error(path, "no tokenizer.model or tokenizer.json in this directory",
                     "copy the checkpoint's tokenizer files or pass --tokenizer FILE");
  }
  if (!path_exists_checked(path)) {
    throw make_error(path, "no such file or directory", "check the tokenizer or model path");
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    // Refused before starts_like_gguf reads it: reading a FIFO waits for a writer.
    throw make_error(path, "not a regular file (" + file_type_name(st.st_mode) + ")",
                     "pass a tokenizer.model (SentencePiece), a tokenizer.json or a .gguf file");
  }
  if (ends_with(path, ".json")) return BpeTokenizer::from_tokenizer_json(path);
  if (ends_with(path, ".model")) return SentencePieceTokenizer::open(path);
  if (!ends_with(path, ".gguf") && !starts_like_gguf(path)) {
    throw make_error(path,
                     "is not a tokenizer file: its name ends in neither .model nor .json, and it "
                     "is not a GGUF file",
                     "pass a tokenizer.model (SentencePiece), a tokenizer.json or a .gguf file");
  }
  auto f = formats::GgufFile::open(path);
  return tokenizer_from_gguf(*f);
}

int64_t gguf_token_id(const cb::formats::GgufFile& f, const char* key) {
  using cb::formats::GgufType;
  const cb::formats::GgufValue* v = f.find(key);
  if (v == nullptr) return -1;
  switch (v->type) {
    case GgufType::UINT8:
    case GgufType::UINT16:
    case GgufType::UINT32:
    case GgufType::UINT64:
      if (v->u == std::numeric_limits<uint32_t>::max() ||
          v->u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return -1;
      return static_cast<int64_t>(v->u);
    case GgufType::INT8:
    case GgufType::INT16:
    case GgufType::INT32:
    case GgufType::INT64: return v->i < 0 ? -1 : v->i;
    default:
      throw make_error(f.path(), std::string("metadata key ") + key + " has type " +
                                     cb::formats::gguf_type_name(v->type) +
                                     ", expected an integer token id");
  }
}

}  // namespace cb::tokenizer
