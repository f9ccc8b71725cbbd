#pragma once
/// Finds and opens the tokenizer of a model: the vocabulary embedded in a GGUF file,
/// or tokenizer.model / tokenizer.json in a Hugging Face directory, or an explicit file.

#include <cstdint>
#include <memory>
#include <string>

#include "lib/tokenizer/tokenizer.h"

namespace cb::formats {
class GgufFile;
}

namespace cb::tokenizer {

/// `path` is a .gguf file (tokenizer.ggml.model llama or gpt2), a directory holding
/// tokenizer.model (preferred) or tokenizer.json, or one of those files directly.
/// Throws cb::Error naming the path and what is missing.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);
/// The vocabulary embedded in an already opened GGUF file.
std::unique_ptr<Tokenizer> tokenizer_from_gguf(const formats::GgufFile& f);
/// A special-token id from GGUF metadata (`tokenizer.ggml.bos_token_id`, ...): -1 when absent
/// or stored as the "none" sentinel (UINT32_MAX / UINT64_MAX / negative); throws cb::Error
/// naming the file and key when it is not an integer. The caller checks it against the
/// vocabulary.
int64_t gguf_token_id(const formats::GgufFile& f, const char* key);

}  // namespace cb::tokenizer
