// Fuzz target: BpeTokenizer::from_tokenizer_json on a fuzzed Hugging Face tokenizer.json
// (model.vocab, added_tokens, merges, pre_tokenizer), then encoding and decoding text.
#include <cstdint>
#include <memory>
#include <string>

#include "fuzz/fuzz_util.h"
#include "fuzz/tokenizer_exercise.h"
#include "lib/core/error.h"
#include "lib/tokenizer/bpe.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static cb::fuzz::MemFile file("tokenizer.json");
  const std::string& path = file.write(data, size);
  std::unique_ptr<cb::tokenizer::BpeTokenizer> tok;
  try {
    tok = cb::tokenizer::BpeTokenizer::from_tokenizer_json(path);
  } catch (const cb::Error&) {
    return 0;
  }
  cb::fuzz::exercise_tokenizer(*tok);
  return 0;
}
