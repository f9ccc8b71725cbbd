// Fuzz target: Hugging Face config.json (config_from_hf: architectures, every dimension's
// type and range, Falcon's variants, Mistral's sliding window).
#include <cstdint>
#include <cstdlib>
#include <string>

#include "fuzz/fuzz_util.h"
#include "lib/core/error.h"
#include "lib/model/hf_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static cb::fuzz::MemFile file("config.json");
  const std::string& path = file.write(data, size);
  try {
    const cb::model::ModelConfig c = cb::model::config_from_hf(path);
    if (c.n_layers <= 0 || c.head_dim <= 0 || c.vocab_size <= 0) std::abort();
  } catch (const cb::Error&) {
  }
  return 0;
}
