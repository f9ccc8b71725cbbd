// Fuzz target: SentencePieceTokenizer::open on a fuzzed tokenizer.model (a serialized
// SentencePiece ModelProto, parsed by the SentencePiece library), then encoding and
// decoding through cachebench's wrapper. The library itself is not instrumented, so this
// mostly checks what the wrapper assumes about a model the library accepted.
#include <cstdint>
#include <memory>
#include <string>

#include "fuzz/fuzz_util.h"
#include "fuzz/tokenizer_exercise.h"
#include "lib/core/error.h"
#include "lib/tokenizer/sentencepiece.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static cb::fuzz::MemFile file("tokenizer.model");
  const std::string& path = file.write(data, size);
  const auto tok =
      cb::fuzz::or_null([&] { return cb::tokenizer::SentencePieceTokenizer::open(path); });
  if (tok) cb::fuzz::exercise_tokenizer(*tok);
  return 0;
}
