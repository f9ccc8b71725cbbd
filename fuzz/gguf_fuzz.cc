// Fuzz target: GgufFile::open (header, metadata of every type, tensor infos, data
// bounds), then what the CLI does with an opened file: every typed getter on every key,
// rendering values, reading and converting small tensors, and the embedded tokenizer
// (SentencePiece or byte-level BPE vocabulary) encoding and decoding text.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "fuzz/tokenizer_exercise.h"
#include "lib/core/error.h"
#include "lib/formats/gguf.h"
#include "lib/formats/tensor_ref.h"
#include "lib/tokenizer/load.h"

namespace {

using cb::fuzz::quietly;

void exercise_metadata(const cb::formats::GgufFile& f) {
  for (const auto& kv : f.metadata()) {
    const std::string& key = kv.first;  // named, not a structured binding: lambdas capture it
    (void)kv.second.to_string();
    (void)kv.second.to_string(2);
    quietly([&] { (void)f.get_u64(key); });
    quietly([&] { (void)f.get_i64(key); });
    quietly([&] { (void)f.get_f64(key); });
    quietly([&] { (void)f.get_bool(key); });
    quietly([&] { (void)f.get_string(key); });
    quietly([&] { (void)f.get_string_array(key); });
    quietly([&] { (void)f.get_f32_array(key); });
    quietly([&] { (void)f.get_i32_array(key); });
  }
}

void exercise_tensors(const cb::formats::GgufFile& f) {
  for (const cb::formats::TensorRef& t : f.tensors()) {
    if (f.find_tensor(t.name) != &t) std::abort();
    cb::fuzz::touch(t.data, t.nbytes);
    (void)cb::formats::shape_str(t.shape);
    const int64_t n = t.numel();
    if (n > 0 && n <= (1 << 16)) {
      std::vector<float> out(static_cast<size_t>(n));
      quietly([&] { cb::formats::to_f32(t, out.data()); });
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static cb::fuzz::MemFile file("gguf");
  const std::string& path = file.write(data, size);
  const auto f = cb::fuzz::or_null([&] { return cb::formats::GgufFile::open(path); });
  if (!f) return 0;
  exercise_metadata(*f);
  exercise_tensors(*f);
  quietly([&] { cb::fuzz::exercise_tokenizer(*cb::tokenizer::tokenizer_from_gguf(*f)); });
  return 0;
}
