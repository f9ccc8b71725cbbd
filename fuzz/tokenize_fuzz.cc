// Fuzz target: untrusted text (trace messages, prompts, datasets) through the real
// tokenizers of the shared data: the GGUF SentencePiece vocabularies (stories260K,
// llama.cpp's llama-spm), llama.cpp's Falcon BPE vocabulary (Falcon pre-tokenizer) and
// the LLaMA-2 tokenizer.model. Needs CACHEBENCH_DATA (default ../shared).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/tokenizer_exercise.h"
#include "lib/core/error.h"
#include "lib/tokenizer/load.h"
#include "lib/tokenizer/tokenizer.h"

namespace {

std::vector<std::unique_ptr<cb::tokenizer::Tokenizer>>& tokenizers() {
  static std::vector<std::unique_ptr<cb::tokenizer::Tokenizer>> t;
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  const char* env = std::getenv("CACHEBENCH_DATA");
  const std::string dir = env != nullptr && *env != '\0' ? env : "../shared";
  for (const char* rel :
       {"models/stories260K/stories260K.gguf", "models/llamacpp-vocab/ggml-vocab-llama-spm.gguf",
        "models/llamacpp-vocab/ggml-vocab-falcon.gguf",
        "models/tokenizers/llama2-tokenizer.model"}) {
    try {
      tokenizers().push_back(cb::tokenizer::load_tokenizer(dir + "/" + rel));
    } catch (const cb::Error& e) {
      std::fprintf(stderr, "fuzz_tokenize: skipping %s\n", e.what());
    }
  }
  if (tokenizers().empty()) {
    std::fprintf(stderr, "fuzz_tokenize: no tokenizer found under %s (set CACHEBENCH_DATA)\n",
                 dir.c_str());
    std::exit(1);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const auto& tok : tokenizers()) cb::fuzz::exercise_text(*tok, text);
  return 0;
}
