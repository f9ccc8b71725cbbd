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
  const auto tok =
      cb::fuzz::or_null([&] { return cb::tokenizer::BpeTokenizer::from_tokenizer_json(path); });
  if (tok) cb::fuzz::exercise_tokenizer(*tok);
  return 0;
}
